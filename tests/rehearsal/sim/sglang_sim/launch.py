"""``python -m sglang.launch_server``, simulated: check, cold-start, serve until SIGTERM.

What Infera's worker wrapper spawns (with ``--enable-metrics`` and ``--kv-events-config``
appended) and polls ``/health`` of. It does not register anywhere: the wrapper does.
"""

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time

from . import disaggregation, faults
from .checks import StartupError, check_startup, gpu_count, visible_gpus
from .coldstart import ColdStart, Stopped
from .generation import Engine
from .http_api import EngineHandler
from .httpjson import Server
from .load_file import LoadPublisher
from .log import Log
from .metrics import MetricsLayout
from .native_format import NativeBuilder
from .recipe import describe_levers
from .request import GenerationRequest
from .server_args import prepare_server_args
from .settings import SettingsError, load_settings
from .tokens import Plan, TokenPlanner, load_tokenizer

READY_LINE = "The server is fired up and ready to roll!"
DEEPSEEK_V4 = "DeepseekV4ForCausalLM"
STATS_INTERVAL_SECONDS = 10.0
WARMUP_SECONDS = 2.0
# The PD warm-up request (entrypoints/http_server.py:2101-2127): per DP rank, these ids, 8 new
# tokens ignoring EOS, the fake bootstrap host.
PD_WARMUP_INPUT_IDS = [10, 11, 12, 13]
PD_WARMUP_NEW_TOKENS = 8


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

    def __init__(self, args, settings, planner, levers, model, pool, pd=None):
        self.args = args
        # disaggregation.PrefillLeg or DecodeLeg on a PD leg, else None
        self.pd = pd
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
        self.draining = threading.Event()
        self.log = None

    def tp_rank(self, dp_rank):
        """The TP rank of DP rank ``dp_rank``'s scheduler (0 without DP-attention)."""
        if not self.args.enable_dp_attention:
            return 0
        return dp_rank * self.args.tp_size // self.args.dp_size

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
            "version": f"{self.settings.sglang_version} (simulated)",
            "simulated": True,
        })
        return info


def log_decode_stats(engine, log, stop_event, prefill=False):
    """SGLang's periodic decode line (a prefill leg's prefill line), so a log shows the engine is busy."""
    while not stop_event.wait(STATS_INTERVAL_SECONDS):
        if engine.in_flight and prefill:
            log.scheduler(f"[simulated] Prefill batch. #running-req: {engine.running}, "
                          f"#queue-req: {engine.queued}")
        elif engine.in_flight:
            log.scheduler(
                f"[simulated] Decode batch. #running-req: {engine.running}, "
                f"#queue-req: {engine.queued}, "
                f"gen throughput (token/s): {engine.total_rate():.2f}"
            )


def log_startup(args, log, lever_line, sglang_version):
    log.main("[simulated] sglang.launch_server simulator: no GPU is used, every figure "
             "below is modelled")
    # ServerArgs.__post_init__'s PD rules log before the launcher logs the arguments.
    disaggregation.apply_mode_rules(args, log, sglang_version)
    log.main(f"server_args={args!r}")
    if args.attention_backend == "compressed":
        log.main("--attention_backend=compressed is deprecated; use 'dsv4' instead.")
    if args.kv_events_config:
        log.main("[simulated] --kv-events-config accepted; no KV events are published "
                 "(the simulator has no radix cache)")
    if args.disaggregation_mode != "null":
        log.main(f"[simulated] PD {args.disaggregation_mode} leg: no Mooncake transfer engine; the "
                 "KV of a request is fetched by the decode leg over HTTP from the prefill leg's "
                 "bootstrap server (GET /sim/kv/<room>)")
    log.main(lever_line)


def serve(app, log, stop_event):
    """Bind SGLang's HTTP API, warm up, then announce readiness as its launcher does.

    /health answers 503 from the bind until the warm-up request has come back.
    """
    args = app.args
    server = Server((args.host, args.port), EngineHandler)
    server.app = app
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    log.uvicorn("INFO", f"Started server process [{os.getpid()}]")
    log.uvicorn("INFO", "Waiting for application startup.")
    log.uvicorn("INFO", "Application startup complete.")
    log.uvicorn("INFO", f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    mode = args.disaggregation_mode
    if mode != "null":
        log.main("Start of pd disaggregation warmup ...")
    if stop_event.wait(WARMUP_SECONDS * app.settings.time_scale):
        raise Stopped()
    if mode != "null":
        log_pd_warmup(app, log)
    threading.Thread(target=log_decode_stats, args=(app.engine, log, stop_event, mode == "prefill"),
                     daemon=True).start()
    # For the SIMULATED amd-smi's power model (load_file.py): until the process ends, through a drain.
    gpus = gpu_count(args)
    LoadPublisher(app.engine, visible_gpus(os.environ, gpus)[:gpus], app.settings.load_dir).start(
        threading.Event(), log)
    app.ready.set()
    log.main(READY_LINE)


def log_pd_warmup(app, log):
    """The end of SGLang's PD warm-up (entrypoints/http_server.py:2101-2133; 0.5.17 sends one
    request per DP rank and logs a count instead, http_server.py:2290-2306). Its requests take the
    fake transfer (bootstrap host 2.2.2.2): a prefill leg answers one token, a decode leg eight."""
    args = app.args
    if app.settings.sglang_version == "0.5.15.post1":
        prompt = app.planner.decode(PD_WARMUP_INPUT_IDS)
        request = GenerationRequest(prompt=prompt, prompt_tokens=len(PD_WARMUP_INPUT_IDS),
                                    max_tokens=PD_WARMUP_NEW_TOKENS, ignore_eos=True, stream=False)
        plan = app.planner.plan(prompt, PD_WARMUP_NEW_TOKENS, True)
        finish_length = None
        if args.disaggregation_mode == "prefill":
            plan, finish_length = Plan(plan.ids[:1], "length"), 0
        resp = [NativeBuilder(request, plan, app.planner.text, app.planner.eos_id,
                              finish_length).full() for _rank in range(args.dp_size)]
        log.main(f"Disaggregation warmup request completed with status 200, resp: {resp}")
    else:
        log.main(f"Disaggregation warmup requests completed for all {args.dp_size} DP ranks")
    log.main("End of disaggregation warmup")


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
    log_startup(args, log, lever_line, settings.sglang_version)
    model = model_facts(config, args, log)
    pd = None
    if args.disaggregation_mode == "prefill":
        pd = disaggregation.PrefillLeg(args, settings, log, os.environ,
                                       disaggregation.parallel_info(args, model.kv_cache_dtype))
        # The tokenizer manager starts it while the schedulers load (entrypoints/engine.py:873).
        pd.start_bootstrap_server()
    elif args.disaggregation_mode == "decode":
        pd = disaggregation.DecodeLeg(args, settings, log, os.environ)
    pool = ColdStart(args, settings, log, stop_event, model).run()
    if args.disaggregation_mode == "prefill":
        # Every prefill rank registers with the bootstrap server once its KV manager is up.
        pd.registered.set()
    app = EngineApp(args, settings, planner, levers, model, pool, pd)
    serve(app, log, stop_event)
    return app


def refuse(error):
    """A refusal in the launcher, exit 1: SGLang's own is Python's traceback of the uncaught
    exception; the simulator's stand-ins say they are."""
    if error.real:
        text = ("Traceback (most recent call last):\n"
                + faults.frame(faults.LAUNCH_SERVER, 67, "<module>",
                               "server_args = prepare_server_args(sys.argv[1:])")
                + f"{error}\n")
    else:
        text = f"[simulated] {error}\n"
    sys.stderr.write(text)
    sys.stderr.flush()
    return 1


def die_of_sigterm():
    """During the launch SGLang has no SIGTERM handler: the launcher dies of the signal (-15)
    and its schedulers follow (PR_SET_PDEATHSIG), without a line."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    return 1


class Scheduler:
    """The scheduler process SGLang's launcher starts (here a child that only waits): in the
    launcher's process group, so a SIGTERM to the group kills it at once (schedulers have no
    handler), and gone with its parent (kill_itself_when_parent_died, PR_SET_PDEATHSIG).
    Once the engine serves, the launcher's subprocess watchdog (sglang/srt/utils/watchdog.py)
    treats its death as a crash: SIGQUIT to itself, and the running-phase handler kills the
    tree, itself last (-9)."""

    CHILD = "import os, time\nparent = os.getppid()\nwhile os.getppid() == parent:\n    time.sleep(0.2)\n"

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-c", self.CHILD], stdin=subprocess.DEVNULL)
        self.stopping = threading.Event()

    def watch(self, log):
        """The subprocess watchdog, started once the engine serves."""
        def run():
            code = self.process.wait()
            if self.stopping.is_set():
                return
            faults.ENDING.acquire()
            log.main(f"Subprocess scheduler_0 (pid={self.process.pid}) crashed with exit code {code}. "
                     "Triggering SIGQUIT for cleanup...")
            log.main("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
            faults.kill_process_tree(log)
        threading.Thread(target=run, name="subprocess-watchdog", daemon=True).start()

    def stop(self):
        """ShutdownReq: the scheduler exits; the watchdog was stopped first."""
        self.stopping.set()
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()


def shut_down(app, log, scheduler, serving_since):
    """SIGTERM to the launcher while serving (sglang/srt/managers/tokenizer_manager.py): the
    handler logs and sets gracefully_exit; sigterm_watchdog, which looks every 5 s from the
    start of serving, then drains: while requests remain it logs them and looks again 5 s
    later (new requests are still accepted; /health answers 503), then stops the subprocess
    watchdog, shuts the scheduler down and kills the tree, itself last (-9). When Infera sends
    the SIGTERM to the whole process group instead, the scheduler dies of it at once and the
    watchdog's crash path ends the engine first (Scheduler.watch): requests in flight are cut."""
    log.main("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
    app.draining.set()
    time.sleep(5.0 - (time.monotonic() - serving_since) % 5.0)
    while True:
        remaining = app.engine.in_flight
        rids = [f"{index:032x}" for index in range(remaining)]
        log.main(f"Gracefully exiting... Remaining number of requests {remaining}. "
                 f"Remaining requests remaining_rids={rids}.")
        if remaining == 0:
            break
        time.sleep(5.0)
    scheduler.stop()
    faults.ENDING.acquire()
    faults.kill_process_tree(log)


def main(argv):
    args = prepare_server_args(argv)
    try:
        settings, config, planner = prepare(args)
    except SettingsError as error:
        print(f"[simulated] ValueError: {error}", file=sys.stderr)
        return 1
    except StartupError as error:
        return refuse(error)

    stop_event = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stop_event.set())

    log = Log(dp_attention=args.enable_dp_attention, tp_size=args.tp_size, ep_size=args.ep_size,
              dp_size=args.dp_size)
    scheduler = Scheduler()
    try:
        app = start(args, settings, config, planner, log, stop_event)
    except Stopped:
        return die_of_sigterm()
    except StartupError as error:
        # Raised in the scheduler (the KV pool does not fit): its traceback, then the kill.
        if not error.real:
            log.raw(f"[simulated] {error}")
            faults.kill_tree(log)
        faults.scheduler_exception(log, "Traceback (most recent call last):\n"
                                   + faults.frame(faults.SCHEDULER, 4312, "run_scheduler_process",
                                                  "scheduler = Scheduler(server_args, port_args, "
                                                  "gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)")
                                   + f"{error}\n")
    except OSError as error:
        # uvicorn cannot bind (uvicorn/server.py Server.startup logs the error, exits 3); the
        # launcher's finally kills its children (sglang/launch_server.py).
        log.uvicorn("ERROR", f"[Errno {error.errno}] error while attempting to bind on address "
                             f"{(args.host, args.port)!r}: {(error.strerror or '').lower()}")
        pid = os.getpid()
        log.main(f"kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}")
        return 3

    app.log = log
    serving_since = time.monotonic()
    scheduler.watch(log)
    if settings.fault == "exit_after_ready" and not stop_event.wait(settings.fault_after):
        # A scheduler dies while serving (the OOM killer, a crash): the watchdog's path.
        scheduler.process.kill()
    stop_event.wait()
    shut_down(app, log, scheduler, serving_since)
    return 0
