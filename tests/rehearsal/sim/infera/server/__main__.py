"""``python -m infera.server``: the Infera router, discovering workers through etcd."""

import argparse
import logging
import os
import signal
import sys
import threading

from infera._sim.etcd import EtcdClient
from infera._sim.httpjson import Server

from .app import RouterHandler
from .discovery import Discovery
from .routing import Router

log = logging.getLogger("infera.server")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m infera.server",
        description="Infera router (simulated): etcd discovery, OpenAI-compatible proxy.",
        allow_abbrev=False,
    )
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--etcd-endpoint", help="http://host:port or host:port")
    parser.add_argument("--router-tokenizer-path", required=True)
    parser.add_argument("--router-policy", choices=("round-robin", "random", "kv"),
                        default="round-robin")
    # The defaults are the production plane, which the walkthrough's three dev flags
    # override; the simulator only has the dev plane.
    parser.add_argument("--discovery-backend", choices=("etcd", "kubernetes"),
                        default="kubernetes")
    parser.add_argument("--request-transport", choices=("http", "nats"), default="nats")
    parser.add_argument("--kv-event-transport", choices=("zmq", "nats"), default="nats")
    return parser


def production_plane_refusal(args):
    """Why these flags need the production plane, or None on the dev plane."""
    if args.discovery_backend == "kubernetes":
        return ("discovery backend 'kubernetes' needs the production plane; "
                "pass --discovery-backend etcd --etcd-endpoint HOST:PORT")
    if args.request_transport == "nats":
        return ("request transport 'nats' needs the production plane (NATS); "
                "pass --request-transport http")
    if args.kv_event_transport == "nats":
        return ("KV-event transport 'nats' needs the production plane (NATS); "
                "pass --kv-event-transport zmq")
    return None


def tokenizer_refusal(path):
    if os.path.isfile(os.path.join(path, "tokenizer.json")):
        return None
    return (f"OSError: Can't load tokenizer for '{path}'. Make sure '{path}' is the correct "
            f"path to a directory containing a tokenizer.json file")


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.discovery_backend == "etcd" and not args.etcd_endpoint:
        parser.error("--etcd-endpoint is required with --discovery-backend etcd")
    refusal = production_plane_refusal(args) or tokenizer_refusal(args.router_tokenizer_path)
    if refusal:
        print(f"infera.server: error: {refusal}", file=sys.stderr)
        return 1

    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop_event = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stop_event.set())

    discovery = Discovery(EtcdClient(args.etcd_endpoint), args.request_transport,
                          args.kv_event_transport)
    try:
        server = Server((args.host, args.port), RouterHandler)
    except OSError as error:
        log.error("cannot listen on %s:%d: %s", args.host, args.port, error)
        return 1
    server.discovery = discovery
    server.router = Router(discovery, args.router_policy)
    threading.Thread(target=discovery.run, args=(stop_event,), name="discovery",
                     daemon=True).start()
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    log.info("[simulated] Infera router listening on http://%s:%d (discovery=etcd %s, "
             "policy=%s, request-transport=%s, kv-event-transport=%s)", args.host, args.port,
             discovery.client.endpoint, args.router_policy, args.request_transport,
             args.kv_event_transport)
    stop_event.wait()
    log.info("shutting down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
