"""Tiny local HTTP servers for the unit tests: one threaded base (LocalServer), and HealthServer standing
in for the engine's /health and the Infera router's /v1/workers (in the shape infera.server answers it)."""

import http.server
import json
import socketserver
import threading


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 64


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    request_queue_size = 64


class LocalServer:
    """A threaded HTTP server answering each GET with `self.answer(path)` -> (status, body bytes), each POST with
    `self.answer_post(path, body)`.

    On 127.0.0.1 at a free port (`address`, host:port) or, given `unix_socket`, on that socket (a fake
    Docker engine). Every requested path is kept in `paths`. Use it as a context manager.
    """

    content_type = 'application/json'

    def __init__(self, unix_socket=None):
        self.paths = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self, status, body):
                self.send_response(status)
                self.send_header('Content-Type', owner.content_type)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802 (http.server's name)
                owner.paths.append(self.path)
                self._reply(*owner.answer(self.path))

            def do_POST(self):  # noqa: N802
                owner.paths.append(self.path)
                self._reply(*owner.answer_post(self.path, self.rfile.read(int(self.headers['Content-Length'] or 0))))

            def log_message(self, *args):
                pass

        # A listen backlog of 64, not socketserver's 5: the accuracy smoke opens 20 connections at once, and on a
        # loaded machine the accept loop fell behind, the SYNs over 5 were dropped and retried after 1 s and 3 s,
        # and two requests outlived their timeout (CI: 19 of 21 POSTs arrived). Real routers listen with more.
        if unix_socket:
            self.server = _UnixServer(unix_socket, Handler)
            self.address = unix_socket
        else:
            self.server = _Server(('127.0.0.1', 0), Handler)
            self.address = '127.0.0.1:%d' % self.server.server_address[1]
        # Polled for shutdown every 0.05 s instead of 0.5 s: each test with a server ends that much sooner.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)

    def answer(self, path):
        raise NotImplementedError

    def answer_post(self, path, body):
        """POST `body` (bytes) to path -> (status, body bytes); a server that takes no POST answers 405."""
        return 405, b''

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class HealthServer(LocalServer):
    """Serves /health with `status` and /v1/workers listing `workers` (both changeable while running).

    With `statuses`, /health answers those in turn first, one per request, then `status`. With `answer_when` (a
    threading.Event), /health answers only once it is set.
    """

    def __init__(self, status=200, workers=(), statuses=(), answer_when=None):
        super().__init__()
        self.status = status
        self.statuses = list(statuses)
        self.answer_when = answer_when
        self.workers = list(workers)
        self.url = 'http://%s/health' % self.address
        self.workers_url = 'http://%s/v1/workers' % self.address

    @property
    def hits(self):
        return len(self.paths)

    def answer(self, path):
        if path == '/health':
            if self.answer_when is not None:
                self.answer_when.wait()
            return (self.statuses.pop(0) if self.statuses else self.status), b''
        if path == '/v1/workers':
            return 200, json.dumps({'workers': [
                {'worker_id': worker_id, 'url': 'http://' + worker_id, 'engine': 'sglang'}
                for worker_id in self.workers]}).encode()
        return 404, b''
