"""The worker's HTTP API: health, model list, server info and OpenAI completions."""

import time
from urllib.parse import urlsplit

from infera._sim.httpjson import BadRequest, JsonHandler

from .generation import count_prompt_tokens, plan_completion
from .openai_format import InvalidRequest, ResponseBuilder, parse_request, usage

COMPLETION_PATHS = {"/v1/completions": "completion", "/v1/chat/completions": "chat"}


class WorkerHandler(JsonHandler):
    """``self.server.app`` is the ``WorkerApp`` in __main__."""

    def do_GET(self):
        app = self.server.app
        path = urlsplit(self.path).path
        if path in ("/health", "/health_generate"):
            if app.ready.is_set():
                self.send_json(200, {"status": "ok", "simulated": True})
            else:
                self.send_json(503, {"status": "starting", "simulated": True})
        elif path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{
                "id": app.model_id, "object": "model", "created": app.created,
                "owned_by": "sglang", "root": app.model_id,
            }]})
        elif path == "/get_model_info":
            self.send_json(200, {"model_path": app.args.model_path,
                                 "tokenizer_path": app.args.model_path,
                                 "is_generation": True, "simulated": True})
        elif path == "/get_server_info":
            self.send_json(200, app.server_info())
        else:
            self.reject_unknown_path(path)

    def do_POST(self):
        path = urlsplit(self.path).path
        kind = COMPLETION_PATHS.get(path)
        if kind is None:
            self.reject_unknown_path(path)
            return
        try:
            request = parse_request(self.read_json(), kind, count_prompt_tokens)
        except (BadRequest, InvalidRequest) as error:
            self.send_error_json(400, str(error), "invalid_request_error")
            return
        try:
            self._complete(kind, request)
        except (BrokenPipeError, ConnectionResetError):
            # The client went away; its slot is already released by Engine.admitted.
            self.close_connection = True

    def _complete(self, kind, request):
        app = self.server.app
        settings = app.settings
        if settings.fault == "fail_responses":
            self.send_error_json(500, "Internal server error: the scheduler failed to "
                                 "process the request (simulated fault)", "internal_error")
            return
        tokens, finish_reason = plan_completion(request["prompt"], request["max_tokens"],
                                                request["ignore_eos"])
        builder = ResponseBuilder(kind, app.model_id)
        usage_body = usage(request["prompt_tokens"], len(tokens))
        engine = app.engine
        with engine.admitted():
            if settings.fault == "slow_responses":
                time.sleep(settings.fault_delay)
            engine.prefill(request["prompt_tokens"])
            if request["stream"]:
                self.start_chunked()
                position = 0
                for ready in engine.decode(len(tokens)):
                    text = "".join(tokens[position:position + ready])
                    self.write_event(builder.chunk(text, first=position == 0))
                    position += ready
                self.write_event(builder.final_chunk(finish_reason, usage_body))
                if request["include_usage"]:
                    self.write_event(builder.usage_chunk(usage_body))
                self.write_event("[DONE]")
                self.end_chunked()
                return
            for _ready in engine.decode(len(tokens)):
                pass
        self.send_json(200, builder.full("".join(tokens), finish_reason, usage_body))
