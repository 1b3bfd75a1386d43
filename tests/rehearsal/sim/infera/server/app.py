"""The router's HTTP API: health, worker and model lists, and the OpenAI proxy."""

import http.client
import json
import logging
from urllib.parse import urlsplit

from infera._sim.httpjson import BadRequest, JsonHandler

from .routing import ModelNotServed, NoWorkers

PROXIED_PATHS = ("/v1/completions", "/v1/chat/completions")
# Long enough for a slow first token and a 1k-token answer at a low per-user rate.
WORKER_TIMEOUT_SECONDS = 600

log = logging.getLogger("infera.server")


class RouterHandler(JsonHandler):
    """``self.server.discovery`` and ``self.server.router`` are set in __main__."""

    def do_GET(self):
        discovery = self.server.discovery
        path = urlsplit(self.path).path
        if path == "/health":
            self.send_json(200, discovery.health())
        elif path == "/v1/workers":
            workers = [{key: worker[key] for key in
                        ("id", "url", "model", "variant", "registered_at", "simulated")}
                       for worker in discovery.workers()]
            self.send_json(200, {"workers": workers, "total": len(workers)})
        elif path == "/v1/models":
            models = sorted({worker["model"] for worker in discovery.workers()})
            self.send_json(200, {"object": "list", "data": [
                {"id": model, "object": "model", "owned_by": "infera"} for model in models]})
        else:
            self.reject_unknown_path(path)

    def do_POST(self):
        path = urlsplit(self.path).path
        if path not in PROXIED_PATHS:
            self.reject_unknown_path(path)
            return
        try:
            body = self.read_json()
        except BadRequest as error:
            self.send_error_json(400, str(error), "invalid_request_error")
            return
        model = body.get("model")
        if not isinstance(model, str):
            self.send_error_json(400, "model is required", "invalid_request_error")
            return
        router = self.server.router
        try:
            worker = router.pick(model)
        except NoWorkers:
            self.send_error_json(503, "no workers available", "service_unavailable")
            return
        except ModelNotServed:
            self.send_error_json(404, f"model '{model}' is not served by any worker",
                                 "model_not_found")
            return
        router.started(worker)
        try:
            self._proxy(worker, path, json.dumps(body).encode())
        finally:
            router.finished(worker)

    def _proxy(self, worker, path, body):
        target = urlsplit(worker["url"])
        connection = http.client.HTTPConnection(target.hostname, target.port,
                                                timeout=WORKER_TIMEOUT_SECONDS)
        try:
            try:
                connection.request("POST", path, body, {"Content-Type": "application/json"})
                response = connection.getresponse()
            except OSError as error:
                self._worker_failed(worker, f"unreachable: {error}")
                return
            if response.status != 200:
                detail = response.read().decode(errors="replace")[:500]
                self._worker_failed(worker, f"answered HTTP {response.status}: {detail}")
                return
            content_type = response.getheader("Content-Type", "application/json")
            if content_type.startswith("text/event-stream"):
                self._relay_stream(worker, response, content_type)
            else:
                self._relay_body(response.read(), content_type)
        except (BrokenPipeError, ConnectionResetError):
            # The client left; closing the worker connection stops its generation.
            self.close_connection = True
        finally:
            connection.close()

    def _relay_stream(self, worker, response, content_type):
        self.start_chunked(content_type)
        try:
            while data := response.read1(65536):
                self.write_chunk(data)
        except (http.client.HTTPException, TimeoutError) as error:
            log.warning("stream from %s broke off: %s", worker["url"], error)
            self.close_connection = True
            return
        self.end_chunked()

    def _relay_body(self, body, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _worker_failed(self, worker, detail):
        message = f"worker {worker['url']} {detail}"
        log.warning("%s", message)
        self.send_error_json(502, message, "bad_gateway")
