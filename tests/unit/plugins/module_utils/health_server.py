"""A tiny HTTP server on 127.0.0.1 standing in for the engine's /health and the Infera router's
/v1/workers (in the shape infera.server answers it), shared by the unit tests."""

import http.server
import json
import threading


class HealthServer:
    """Serves /health with `status` and /v1/workers listing `workers` (both changeable while running).

    With `statuses`, /health answers those in turn first, one per request, then `status`.
    """

    def __init__(self, status=200, workers=(), statuses=()):
        self.status = status
        self.statuses = list(statuses)
        self.workers = list(workers)
        self.hits = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                owner.hits += 1
                body = b''
                if self.path == '/health':
                    code = owner.statuses.pop(0) if owner.statuses else owner.status
                elif self.path == '/v1/workers':
                    code = 200
                    body = json.dumps({'workers': [
                        {'worker_id': worker_id, 'url': 'http://' + worker_id, 'engine': 'sglang'}
                        for worker_id in owner.workers]}).encode()
                else:
                    code = 404
                self.send_response(code)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d/health' % self.server.server_address[1]
        self.workers_url = 'http://127.0.0.1:%d/v1/workers' % self.server.server_address[1]
        # Polled for shutdown every 0.05 s instead of 0.5 s: each test that serves health ends that much sooner.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
