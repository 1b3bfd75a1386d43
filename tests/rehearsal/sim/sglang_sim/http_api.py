"""The engine's HTTP API: SGLang's health, metrics, info and generation endpoints."""

import time
import uuid
from http import HTTPStatus
from urllib.parse import urlsplit

from . import metrics
from .disaggregation import TransferFailed, missing_room
from .httpjson import BadRequest, JsonHandler
from .native_format import NativeBuilder, parse_generate
from .openai_format import ResponseBuilder, parse_request
from .request import InvalidRequest
from .tokens import Plan

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

    def _builder(self, kind, request, plan, finish_length=None):
        app = self.server.app
        if kind == "native":
            return NativeBuilder(request, plan, app.planner.text, app.planner.eos_id, finish_length)
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
        mode = app.args.disaggregation_mode
        engine = app.engine
        requested = self._requested_rank()
        if mode == "prefill" and requested is None and request.bootstrap_room is not None \
                and len(engine.ranks) > 1:
            # follow_bootstrap_room (managers/data_parallel_controller.py:627-634)
            requested = request.bootstrap_room % len(engine.ranks)
        rank = engine.pick_rank(requested)
        if mode != "null" and request.bootstrap_room is None \
                and app.args.disaggregation_transfer_backend != "fake":
            # managers/scheduler.py:2111-2127
            message = missing_room(uuid.uuid4().hex)
            app.log.scheduler(message, rank)
            self.send_abort(kind, request, TransferFailed(HTTPStatus.BAD_REQUEST, message))
            return
        plan = app.planner.plan(request.prompt, request.max_tokens, request.ignore_eos)
        if mode == "prefill":
            self._prefill(kind, request, plan, rank)
            return
        builder = self._builder(kind, request, plan)
        if mode == "decode":
            try:
                app.pd.fetch(request, rank, app.tp_rank(rank), engine)
            except TransferFailed as failure:
                self.send_abort(kind, request, failure)
                return
        with engine.admitted(rank, request.prompt_tokens,
                             request.prompt_tokens + len(plan.ids)):
            if settings.fault == "slow_responses":
                time.sleep(settings.fault_delay)
            if mode == "null":
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

    def _prefill(self, kind, request, plan, rank):
        """A prefill leg: its answer is the first token, once the KV has gone to the decode."""
        app = self.server.app
        first = Plan(plan.ids[:1], "length")
        builder = self._builder(kind, request, first, finish_length=0)
        if app.settings.fault == "slow_responses":
            time.sleep(app.settings.fault_delay)
        try:
            app.pd.serve(request, rank, app.tp_rank(rank), app.engine,
                         request.prompt_tokens + len(first.ids))
        except TransferFailed as failure:
            self.send_abort(kind, request, failure)
            return
        app.engine.count_generated(len(first.ids))
        if request.stream:
            self.start_chunked()
            for payload in builder.stream_events([first.ids]):
                self.write_event(payload)
            self.end_chunked()
            return
        self.send_json(200, builder.full())

    def send_abort(self, kind, request, failure):
        """An aborted request as SGLang answers it (FINISH_ABORT with a status): non-streamed, the
        error body (managers/tokenizer_manager.py:1402-1443 raises; entrypoints/openai/
        serving_base.py:209-225 shapes it, via serving_chat.py:1272-1273 for a 400 and
        serving_base.py:110-113 for a 500; native /generate: http_server.py:1961-1964 for a 400,
        :456-510 for a 500); streamed, HTTP 200 and one error event before [DONE]
        (serving_chat.py:1105-1114 and serving_completions.py:328-336; /generate: the output with
        its finish_reason, http_server.py:796-820)."""
        status, message = failure.status, failure.message
        if request.stream:
            self.start_chunked()
            if kind == "native":
                self.write_event({"text": "", "output_ids": [], "meta_info": {
                    "id": uuid.uuid4().hex,
                    "finish_reason": {"type": "abort", "message": message,
                                      "status_code": status.value, "err_type": None},
                    "prompt_tokens": request.prompt_tokens, "completion_tokens": 0,
                    "cached_tokens": 0}})
            else:
                self.write_event({"error": {"object": "error", "message": message,
                                            "type": status.name, "param": None,
                                            "code": status.value}})
            self.write_event("[DONE]")
            self.end_chunked()
        elif status == HTTPStatus.BAD_REQUEST:
            body = ({"error": {"message": message}} if kind == "native" else
                    {"object": "error", "message": message, "type": "BadRequestError",
                     "param": None, "code": 400})
            self.send_json(400, body)
        else:
            # HTTPException(status_code=HTTPStatus.X): its type is str() of the status, "500"
            # on Python 3.11 (the wheel's cp311).
            self.send_json(status.value, {"object": "error", "message": message,
                                          "type": str(status.value), "param": None,
                                          "code": status.value})


def _pieces(engine, ids):
    """The generated ids in the slices the engine's timing releases them."""
    position = 0
    for ready in engine.decode(len(ids)):
        yield ids[position:position + ready]
        position += ready
