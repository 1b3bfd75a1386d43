"""``python -m infera.engine.sglang``: check, cold-start, register, serve, deregister."""

import json
import os
import signal
import socket
import sys
import threading
import time
from datetime import datetime, timezone

from infera._sim.etcd import EtcdClient, EtcdError
from infera._sim.httpjson import Server
from infera._sim.recipe import describe_levers
from infera._sim.registry import worker_key

from . import faults
from .args import parse_args
from .checks import StartupError, check_startup
from .coldstart import ColdStart, Stopped
from .generation import Engine
from .http_api import WorkerHandler
from .log import Log
from .registration import Registration
from .settings import SettingsError, load_settings

READY_LINE = "The server is fired up and ready to roll!"
STATS_INTERVAL_SECONDS = 10.0


class WorkerApp:
    """What the HTTP handlers need to know about this worker."""

    def __init__(self, args, settings, engine, levers, pool):
        self.args = args
        self.settings = settings
        self.engine = engine
        self.levers = levers
        self.pool = pool
        self.model_id = args.served_model_name or args.model_path
        self.created = int(time.time())
        self.ready = threading.Event()

    def server_info(self):
        info = dict(vars(self.args))
        info.update(self.pool)
        info.update({
            "served_model_name": self.model_id,
            "variant": self.levers["variant"],
            "levers": self.levers,
            "internal_states": [{"avg_spec_accept_length": None,
                                 "running_requests": self.engine.running,
                                 "queued_requests": self.engine.queued()}],
            "version": "infera-sglang-simulator",
            "simulated": True,
        })
        return info


def advertised_host(args):
    if args.advertise_host:
        return args.advertise_host
    if args.host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return args.host


def registration_value(app, host):
    args = app.args
    return json.dumps({
        "host": host,
        "port": args.port,
        "model": args.model_path,
        "served_model_name": app.model_id,
        "variant": app.levers["variant"],
        "tp": args.tp_size,
        "dp": args.dp,
        "ep": args.ep_size,
        "request_transport": args.request_transport,
        "kv_event_transport": args.kv_event_transport,
        "kv_events": args.kv_events,
        "registered_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "simulated": True,
        "pid": os.getpid(),
    })


def log_decode_stats(engine, log, stop_event):
    """SGLang's periodic decode line, so a log shows the worker is busy."""
    while not stop_event.wait(STATS_INTERVAL_SECONDS):
        if engine.in_flight:
            log.scheduler(
                f"[simulated] Decode batch. #running-req: {engine.running}, "
                f"#queue-req: {engine.queued()}, "
                f"gen throughput (token/s): {engine.total_rate():.2f}"
            )


def log_startup(args, log, lever_line):
    log.main("[simulated] infera.engine.sglang simulator: no GPU is used, every figure "
             "below is modelled")
    log.main(f"server_args=ServerArgs({', '.join(f'{k}={v!r}' for k, v in vars(args).items())})")
    if args.attention_backend == "compressed":
        log.main("WARNING: --attention-backend compressed is deprecated; use dsv4")
    log.main(lever_line)


def serve(app, log, stop_event):
    """Bind the API, register, announce readiness; return the registration."""
    args, settings = app.args, app.settings
    server = Server((args.host, args.port), WorkerHandler)
    server.app = app
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    log.main(f"INFO:     Started server process [{os.getpid()}]")
    log.main(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    host = advertised_host(args)
    registration = Registration(EtcdClient(args.etcd_endpoint),
                                worker_key(app.model_id, host, args.port),
                                registration_value(app, host), settings.lease_ttl, log)
    registration.register()
    registration.start_keepalive()
    threading.Thread(target=log_decode_stats, args=(app.engine, log, stop_event),
                     daemon=True).start()
    app.ready.set()
    log.main(READY_LINE)
    return registration


def main(argv=None):
    args = parse_args(argv)
    try:
        settings = load_settings(os.environ)
        config = check_startup(args, os.environ, settings.dev_root)
    except (StartupError, SettingsError) as error:
        print(error if isinstance(error, StartupError) else f"ValueError: {error}",
              file=sys.stderr)
        return 1

    stop_event = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stop_event.set())

    log = Log(dp_attention=args.enable_dp_attention)
    levers, lever_line = describe_levers(args.attention_backend, os.environ,
                                         args.enable_dp_attention)
    log_startup(args, log, lever_line)
    architecture = (config.get("architectures") or ["DeepseekV4ForCausalLM"])[0]
    try:
        pool = ColdStart(args, settings, log, stop_event, architecture).run()
        engine = Engine(args.tp_size, levers, args.max_running_requests)
        app = WorkerApp(args, settings, engine, levers, pool)
        registration = serve(app, log, stop_event)
    except Stopped:
        log.main("Received a termination signal during start-up; exiting")
        return 0
    except StartupError as error:
        log.scheduler(str(error))
        log.main(faults.SIGQUIT_LINE)
        return 1
    except EtcdError as error:
        log.main(f"ERROR: cannot register in etcd ({args.etcd_endpoint}): {error}")
        return 1
    except OSError as error:
        log.main(f"ERROR: {error}")
        return 1

    if settings.fault == "exit_after_ready":
        if not stop_event.wait(settings.fault_after):
            faults.exit_after_ready(log)
    stop_event.wait()
    log.main("Received a termination signal; shutting down")
    registration.deregister()
    return 0


if __name__ == "__main__":
    sys.exit(main())
