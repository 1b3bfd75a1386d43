"""A tiny HTTP server on 127.0.0.1 standing in for the engine's /health, shared by the unit tests."""

import http.server
import threading


class HealthServer:
    """Serves /health with `status` (changeable while running) and counts the requests."""

    def __init__(self, status=200):
        self.status = status
        self.hits = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                owner.hits += 1
                code = owner.status if self.path == '/health' else 404
                self.send_response(code)
                self.send_header('Content-Length', '0')
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d/health' % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
