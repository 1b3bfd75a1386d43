"""HTTP plumbing of the engine's API: JSON and text bodies, OpenAI-style errors and
server-sent events over chunked transfer encoding (HTTP/1.1, keep-alive)."""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # A benchmark opens hundreds of connections at once; the default backlog of 5
    # would make the kernel drop SYNs and add whole seconds to TTFT.
    request_queue_size = 1024


class BadRequest(Exception):
    """The request body is not the JSON object the endpoint needs."""


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        # A sweep sends thousands of requests; access logs would drown the lines that
        # log-watchers look for.
        pass

    def _read_body(self):
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def reject_unknown_path(self, path):
        # The body must still be consumed, or it would be read as the next request.
        self._read_body()
        self.send_error_json(404, f"no route for {self.command} {path}", "not_found")

    def read_json(self):
        try:
            body = json.loads(self._read_body() or b"null")
        except ValueError as error:
            raise BadRequest(f"request body is not valid JSON: {error}") from error
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        return body

    def send_json(self, status, payload):
        self.send_text(status, json.dumps(payload), "application/json")

    def send_text(self, status, text, content_type):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def send_error_json(self, status, message, error_type):
        self.send_json(status, {"error": {"message": message, "type": error_type}})

    def start_chunked(self, content_type="text/event-stream"):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data):
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def write_event(self, payload):
        """One SSE event; ``payload`` is a dict or the literal "[DONE]"."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self.write_chunk(f"data: {text}\n\n".encode())
