"""``python -m sglang.launch_server``, simulated: check, cold-start, serve until SIGTERM.

What Infera's worker wrapper spawns (with ``--enable-metrics`` and ``--kv-events-config``
appended) and polls ``/health`` of. It does not register anywhere: the wrapper does.
"""

import dataclasses
import os
import signal
import sys
import threading
import time

from . import faults
from .checks import StartupError, check_startup, gpu_count
from .coldstart import ColdStart, Stopped
from .generation import Engine
from .http_api import EngineHandler
from .httpjson import Server
from .log import Log
from .metrics import MetricsLayout
from .recipe import describe_levers
from .server_args import prepare_server_args
from .settings import SettingsError, load_settings
from .tokens import TokenPlanner, load_tokenizer

READY_LINE = "The server is fired up and ready to roll!"
DEEPSEEK_V4 = "DeepseekV4ForCausalLM"
STATS_INTERVAL_SECONDS = 10.0
WARMUP_SECONDS = 2.0
SIMULATED_VERSION = "0.5.15 (simulated)"


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    config: dict
    architecture: str
    kv_cache_dtype: str


def model_facts(config, args, log):
    """The architecture and the KV-cache dtype SGLang resolves for this model."""
    architecture = (config.get("architectures") or [DEEPSEEK_V4])[0]
    kv_cache_dtype = args.kv_cache_dtype
    # SGLang's DeepSeek-V4 hook resolves "auto" to fp8; other models keep their bf16.
    if kv_cache_dtype == "auto" and architecture == DEEPSEEK_V4:
        kv_cache_dtype = "fp8_e4m3"
        log.main(f"Setting KV cache dtype to {kv_cache_dtype} for {architecture}.")
    elif kv_cache_dtype == "auto":
        kv_cache_dtype = "bfloat16"
    return ModelFacts(config, architecture, kv_cache_dtype)


class EngineApp:
    """What the HTTP handlers need to know about this engine."""

    def __init__(self, args, settings, planner, levers, model, pool):
        self.args = args
        self.settings = settings
        self.planner = planner
        self.levers = levers
        self.model = model
        self.pool = pool
        dp_ranks = args.dp_size if args.enable_dp_attention else 1
        self.engine = Engine(gpu_count(args), levers, args.max_running_requests, dp_ranks)
        self.metrics_layout = MetricsLayout.from_args(args, pool["max_total_num_tokens"])
        self.model_id = args.served_model_name
        self.created = int(time.time())
        self.ready = threading.Event()

    def model_info(self):
        return {
            "model_path": self.args.model_path,
            "tokenizer_path": self.args.tokenizer_path,
            "is_generation": True,
            "weight_version": "default",
            "model_type": self.model.config.get("model_type"),
            "architectures": self.model.config.get("architectures"),
            "simulated": True,
        }

    def server_info(self):
        info = dataclasses.asdict(self.args)
        info.update(self.pool)
        info.update({
            "kv_cache_dtype": self.model.kv_cache_dtype,
            "variant": self.levers["variant"],
            "levers": self.levers,
            "internal_states": [{"avg_spec_accept_length": None,
                                 "running_requests": self.engine.running,
                                 "queued_requests": self.engine.queued}],
            "version": SIMULATED_VERSION,
            "simulated": True,
        })
        return info


def log_decode_stats(engine, log, stop_event):
    """SGLang's periodic decode line, so a log shows the engine is busy."""
    while not stop_event.wait(STATS_INTERVAL_SECONDS):
        if engine.in_flight:
            log.scheduler(
                f"[simulated] Decode batch. #running-req: {engine.running}, "
                f"#queue-req: {engine.queued}, "
                f"gen throughput (token/s): {engine.total_rate():.2f}"
            )


def log_startup(args, log, lever_line):
    log.main("[simulated] sglang.launch_server simulator: no GPU is used, every figure "
             "below is modelled")
    log.main(f"server_args={args!r}")
    if args.attention_backend == "compressed":
        log.main("--attention_backend=compressed is deprecated; use 'dsv4' instead.")
    if args.kv_events_config:
        log.main("[simulated] --kv-events-config accepted; no KV events are published "
                 "(the simulator has no radix cache)")
    log.main(lever_line)


def serve(app, log, stop_event):
    """Bind SGLang's HTTP API, warm up, then announce readiness as its launcher does.

    /health answers 503 from the bind until the warm-up request has come back.
    """
    args = app.args
    server = Server((args.host, args.port), EngineHandler)
    server.app = app
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    log.main(f"INFO:     Started server process [{os.getpid()}]")
    log.main("INFO:     Waiting for application startup.")
    log.main("INFO:     Application startup complete.")
    log.main(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    if stop_event.wait(WARMUP_SECONDS * app.settings.time_scale):
        raise Stopped()
    threading.Thread(target=log_decode_stats, args=(app.engine, log, stop_event),
                     daemon=True).start()
    app.ready.set()
    log.main(READY_LINE)


def prepare(args):
    """Settings, model config and tokenizer; refusals exit 1 with the error on stderr."""
    settings = load_settings(os.environ)
    config = check_startup(args, os.environ, settings.dev_root)
    planner = TokenPlanner(load_tokenizer(args.tokenizer_path), wrong_answers=settings.fault == "wrong_answers")
    return settings, config, planner


def start(args, settings, config, planner, log, stop_event):
    """Cold-start and serve; return the app once ready."""
    levers, lever_line = describe_levers(args.attention_backend, os.environ,
                                         args.enable_dp_attention)
    log_startup(args, log, lever_line)
    model = model_facts(config, args, log)
    pool = ColdStart(args, settings, log, stop_event, model).run()
    app = EngineApp(args, settings, planner, levers, model, pool)
    serve(app, log, stop_event)
    return app


def main(argv):
    args = prepare_server_args(argv)
    try:
        settings, config, planner = prepare(args)
    except SettingsError as error:
        print(f"ValueError: {error}", file=sys.stderr)
        return 1
    except StartupError as error:
        print(error, file=sys.stderr)
        return 1

    stop_event = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stop_event.set())

    log = Log(dp_attention=args.enable_dp_attention)
    try:
        start(args, settings, config, planner, log, stop_event)
    except Stopped:
        log.main("Received a termination signal during start-up; exiting")
        return 0
    except StartupError as error:
        log.scheduler(str(error))
        log.main(faults.SIGQUIT_LINE)
        return 1
    except OSError as error:
        log.main(f"ERROR: {error}")
        return 1

    if settings.fault == "exit_after_ready" and not stop_event.wait(settings.fault_after):
        faults.exit_after_ready(log)
    stop_event.wait()
    log.main("INFO:     Shutting down")
    log.main(f"INFO:     Finished server process [{os.getpid()}]")
    return 0
