"""The engine's HTTP API: SGLang's health, metrics, info and generation endpoints."""

import time
from urllib.parse import urlsplit

from . import metrics
from .httpjson import BadRequest, JsonHandler
from .native_format import NativeBuilder, parse_generate
from .openai_format import ResponseBuilder, parse_request
from .request import InvalidRequest

GENERATION_PATHS = {"/v1/completions": "completion", "/v1/chat/completions": "chat",
                    "/generate": "native"}
# Infera's router names the DP rank of a DP-attention worker in this header.
DP_RANK_HEADER = "X-Data-Parallel-Rank"


class EngineHandler(JsonHandler):
    """``self.server.app`` is the ``EngineApp`` in launch.py."""

    def do_GET(self):
        app = self.server.app
        path = urlsplit(self.path).path
        if path in ("/health", "/health_generate"):
            # SGLang answers with an empty body: 503 while starting, 200 once up, 503 again while it
            # drains after a SIGTERM (sglang/srt/entrypoints/http_server.py health_generate).
            if app.draining.is_set():
                app.log.main("Health check request received during shutdown. Returning 503.")
                self.send_empty(503)
            else:
                self.send_empty(200 if app.ready.is_set() else 503)
        elif path == "/metrics" and app.args.enable_metrics:
            self.send_text(200, self._metrics(app), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{
                "id": app.model_id, "object": "model", "created": app.created,
                "owned_by": "sglang", "root": app.model_id,
            }]})
        elif path in ("/get_model_info", "/model_info"):
            self.send_json(200, app.model_info())
        elif path in ("/get_server_info", "/server_info"):
            self.send_json(200, app.server_info())
        else:
            self.reject_unknown_path(path)

    @staticmethod
    def _metrics(app):
        ranks, totals = app.engine.snapshot()
        return metrics.render(app.metrics_layout, ranks, totals, app.engine.total_rate())

    def do_POST(self):
        path = urlsplit(self.path).path
        kind = GENERATION_PATHS.get(path)
        if kind is None:
            self.reject_unknown_path(path)
            return
        app = self.server.app
        try:
            body = self.read_json()
            request = (parse_generate(body, app.planner) if kind == "native"
                       else parse_request(body, kind, app.planner))
        except (BadRequest, InvalidRequest) as error:
            self.send_error_json(400, str(error), "invalid_request_error")
            return
        try:
            self._generate(kind, request)
        except (BrokenPipeError, ConnectionResetError):
            # The client went away; its slot is already released by Engine.admitted.
            self.close_connection = True

    def _builder(self, kind, request, plan):
        app = self.server.app
        if kind == "native":
            return NativeBuilder(request, plan, app.planner.text, app.planner.eos_id)
        return ResponseBuilder(kind, app.model_id, request, plan, app.planner.text)

    def _requested_rank(self):
        try:
            return int(self.headers.get(DP_RANK_HEADER, ""))
        except ValueError:
            return None

    def _generate(self, kind, request):
        app = self.server.app
        settings = app.settings
        if settings.fault == "fail_responses":
            self.send_error_json(500, "Internal server error: the scheduler failed to "
                                 "process the request (simulated fault)", "internal_error")
            return
        plan = app.planner.plan(request.prompt, request.max_tokens, request.ignore_eos)
        builder = self._builder(kind, request, plan)
        engine = app.engine
        rank = engine.pick_rank(self._requested_rank())
        with engine.admitted(rank, request.prompt_tokens,
                             request.prompt_tokens + len(plan.ids)):
            if settings.fault == "slow_responses":
                time.sleep(settings.fault_delay)
            engine.prefill(request.prompt_tokens)
            if request.stream:
                self.start_chunked()
                for payload in builder.stream_events(_pieces(engine, plan.ids)):
                    self.write_event(payload)
                self.end_chunked()
                return
            for _ready in engine.decode(len(plan.ids)):
                pass
        self.send_json(200, builder.full())


def _pieces(engine, ids):
    """The generated ids in the slices the engine's timing releases them."""
    position = 0
    for ready in engine.decode(len(ids)):
        yield ids[position:position + ready]
        position += ready
