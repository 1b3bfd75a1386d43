"""PD disaggregation (``--disaggregation-mode prefill|decode``): SGLang's mode rules, the prefill
leg's bootstrap server and a modelled KV transfer between the legs.

Read in the SGLang 0.5.15.post1 wheel (file:line below; 0.5.17 says the same words where noted):
- The mode rules run in ServerArgs.__post_init__ (server_args.py:2685 -> arg_groups/
  pd_disaggregation_hook.py): ``mooncake_tcp`` becomes mooncake (:20-27); a decode leg without
  --disaggregation-decode-enable-radix-cache gets the chunk cache and a warning (:54-56), with it
  the radix cache and EXPERIMENTAL warnings (:47-53); a prefill leg refuses ``fake`` (:73-75,
  checks.py) and turns CUDA graphs off (:77; 0.5.17 turns only the decode graph off, server_args.py
  _apply_cuda_graph_disaggregation_roles). With mooncake and no --disaggregation-ib-device,
  server_args.py:5617 warns that Mooncake falls back to auto discovery.
- The prefill leg's tokenizer manager starts ``CommonKVBootstrapServer`` at --host:
  --disaggregation-bootstrap-port before the model loads (managers/disagg_service.py:14-44,
  entrypoints/engine.py:873; disaggregation/common/conn.py:1219-1492): GET /health answers "OK",
  GET /route?prefill_dp_rank=-1&... the prefill's parallel info once every rank has registered
  (503 before), 400 without the four parameters.
- A request carries bootstrap_host/bootstrap_port/bootstrap_room (entrypoints/openai/protocol.py
  :763-766, io_struct.py:242-247); without a room a PD leg aborts it with 400 (managers/
  scheduler.py:2111-2127); a missing port is the leg's own --disaggregation-bootstrap-port
  (scheduler.py:2064-2066). The host FAKE_BOOTSTRAP_HOST "2.2.2.2" (disaggregation/utils.py:33)
  takes the fake sender/receiver: no transfer at all (the warm-up uses it).
- Decode: fetch the prefill's parallel info from /route (timeout 5 s), once a second, 15 times at
  most (disaggregation/decode.py:326-328, 695-734; common/conn.py:236-279); then the KV arrives or
  SGLANG_DISAGGREGATION_WAITING_TIMEOUT (EnvInt 300, environ.py:327) runs out (common/conn.py:
  1147-1170). A heartbeat GETs /health of every known prefill every max(HEARTBEAT_INTERVAL, 2) s and
  after max(HEARTBEAT_MAX_FAILURE, 1) failures fails that prefill's rooms (common/conn.py:668-765).
- Prefill: a request waits for its decode's KV indices for SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT
  (EnvInt 300, environ.py:324; common/conn.py:902-919), is prefilled, sends its KV, and answers once
  the transfer is done: its one token, finish_reason length 0 (disaggregation/prefill.py:631, 771).
- Failures end the request with HTTP 500 and the scheduler's message (disaggregation/utils.py:813,
  decode.py:672, 1693, prefill.py:778, 863), the reason being KVTransferError's text (common/conn.py
  :52-66); mooncake's own reasons are in disaggregation/mooncake/conn.py:1360-1367, 1607-1611.

Modelled: the transfer itself (Mooncake's RDMA and its ZMQ side channel are not there). The prefill
leg keeps each room's "KV" (the prompt's length) for its decode leg, which fetches it
over HTTP from the prefill's bootstrap server on a simulator-only route, GET /sim/kv/<room> (a long
poll; DELETE is the decode's abort notice); a room is dropped once fetched, failed or timed out. One
decode client (parallel-info cache, heartbeat) serves all of an engine's DP ranks, where SGLang has
one per rank. SGLang's own pacing (the 1 s retry interval, the heartbeat interval) runs at
INFERA_SIM_TIME_SCALE like the cold start; the two timeouts are honoured as set, in seconds.
"""

import collections
import dataclasses
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from .httpjson import JsonHandler, Server

# sglang/srt/disaggregation/utils.py:33
FAKE_BOOTSTRAP_HOST = "2.2.2.2"
# sglang/srt/environ.py:324-327
DEFAULT_BOOTSTRAP_TIMEOUT = 300
DEFAULT_WAITING_TIMEOUT = 300
DEFAULT_HEARTBEAT_INTERVAL = 5.0
DEFAULT_HEARTBEAT_MAX_FAILURE = 2
# sglang/srt/disaggregation/decode.py:326-328
ENSURE_RETRIES = 15
ENSURE_RETRY_INTERVAL = 1.0
# common/conn.py:239 (requests.get(url, timeout=5)) and :683-686 (timeout=(2, 3))
ROUTE_TIMEOUT = 5
HEARTBEAT_TIMEOUT = 3
# The shortest pause of that pacing, whatever the time scale (simulator only).
MIN_PACING = 0.01
# The longest one long poll of /sim/kv waits before the decode looks again (simulator only).
KV_POLL_SLICE = 2.0
# A room only a decode asked for, no longer polled, is dropped after this long (simulator only).
STALE_ROOM_SECONDS = 60.0
MODELLED_BACKENDS = ("mooncake", "mooncake_tcp", "fake")
SIM_KV_PATH = "/sim/kv/"
ROUTE_QUERY = ("prefill_dp_rank", "prefill_cp_rank", "target_tp_rank", "target_pp_rank")


class TransferFailed(Exception):
    """A PD request SGLang aborts: its status and the scheduler's message (prepare_abort)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def env_int(environ, name, default):
    """SGLang's EnvInt (environ.py:124-129, EnvField.get :48-66): int(value), else the default."""
    try:
        return int(environ[name])
    except (KeyError, ValueError):
        return default


def env_float(environ, name, default):
    try:
        return float(environ[name])
    except (KeyError, ValueError):
        return default


# ----------------------------------------------------------------------------- the mode rules

def apply_mode_rules(args, log, sglang_version):
    """pd_disaggregation_hook.handle_pd_disaggregation and the IB-device check, on the resolved
    arguments, with their log lines (the launcher's; logging is configured by then,
    server_args.py:7154). The refusals among these rules are checks.check_disaggregation's."""
    if args.disaggregation_transfer_backend == "mooncake_tcp":
        # pd_disaggregation_hook.py:20-27
        args.disaggregation_transfer_backend = "mooncake"
        args.disaggregation_ib_device = None
        log.main("disaggregation transfer backend 'mooncake_tcp' -> mooncake with MC_FORCE_TCP=1 "
                 "(TCP transport, no RDMA)")
    if args.disaggregation_mode == "decode":
        if args.disaggregation_decode_enable_radix_cache:
            # pd_disaggregation_hook.py:47-53
            if args.enable_dp_attention:
                log.main("EXPERIMENTAL: Decode radix cache with DP attention. Requires prefix-aware "
                         "DP rank routing for optimal cache hits.")
            args.disable_radix_cache = False
            log.main("EXPERIMENTAL: Radix cache is enabled for decode server")
        else:
            # pd_disaggregation_hook.py:54-56
            args.disable_radix_cache = True
            log.main("KV cache is forced as chunk cache for decode server")
    elif args.disaggregation_mode == "prefill" and sglang_version == "0.5.15.post1":
        # pd_disaggregation_hook.py:77 (0.5.17 leaves the flag and disables only the decode graph)
        args.disable_cuda_graph = True
    if args.disaggregation_mode != "null" and args.disaggregation_transfer_backend == "mooncake":
        if args.disaggregation_ib_device is None:
            # server_args.py:5574-5580 -> _validate_ib_devices :5615-5619
            log.main("No IB devices specified for Mooncake backend, falling back to auto discovery.")
        else:
            log.main(f"[simulated] --disaggregation-ib-device {args.disaggregation_ib_device} "
                     "accepted unchecked (no /sys/class/infiniband here)")


def captures_decode_graphs(args):
    """A prefill leg captures no decode CUDA graph in either release (see apply_mode_rules)."""
    return not args.disable_cuda_graph and args.disaggregation_mode != "prefill"


# ----------------------------------------------------------------------------- messages

def kv_transfer_error(room, reason):
    """KVTransferError.__str__ (disaggregation/common/conn.py:64-65)."""
    return f"KVTransferError(bootstrap_room={room}): {reason}"


def _failure(head, prefix, tp_rank, rid, room, reason):
    # f"{head} rank={tp_rank} {<prefix>.rid=} {<prefix>.bootstrap_room=}" + f" with exception {e}"
    return (f"{head} rank={tp_rank} {prefix}.rid={rid!r} {prefix}.bootstrap_room={room!r}"
            f" with exception {kv_transfer_error(room, reason)}")


def decode_transfer_failed(tp_rank, rid, room, reason):
    return _failure("Decode transfer failed for request", "decode_req.req", tp_rank, rid, room,
                    reason)  # disaggregation/decode.py:1693-1701


def decode_handshake_failed(tp_rank, rid, room, reason):
    return _failure("Decode handshake failed for request", "decode_req.req", tp_rank, rid, room,
                    reason)  # disaggregation/decode.py:672-678


def prefill_transfer_failed(tp_rank, rid, room, reason):
    return _failure("Prefill transfer failed for request", "req", tp_rank, rid, room,
                    reason)  # disaggregation/prefill.py:778-784


def prefill_bootstrap_failed(tp_rank, rid, room, reason):
    return _failure("Prefill bootstrap failed for request", "req", tp_rank, rid, room,
                    reason)  # disaggregation/prefill.py:862-870


def missing_room(rid):
    """managers/scheduler.py:2115-2118 (an abort with 400)."""
    return f"Invalid request: Disaggregated request received without bootstrap room id. req.rid={rid!r}"


# The reasons (disaggregation/mooncake/conn.py and common/conn.py).
PREFILL_DEAD = "Failed to get kvcache from prefill instance, it might be dead"  # mooncake/conn.py:1610
ABORTED = "Aborted by AbortReq."  # common/conn.py:1183
FROM_ANOTHER_RANK = "Failed due to an unknown reason from another rank"  # mooncake/conn.py:1788
BOOTSTRAP_TIMEOUT_WARNING = (  # common/conn.py:907-911, logged once
    "Some requests timed out when bootstrapping, which means prefill instances fail to receive the KV "
    "indices from the decode instance of this request. If a greater mean TTFT is acceptable, you can "
    "'export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600' (10 minutes) to relax the timeout condition. ")
WAITING_TIMEOUT_WARNING = (  # common/conn.py:1152-1155, logged once
    "Some requests fail to receive KV Cache transfer done signal after bootstrapping. If a greater "
    "mean TTFT is acceptable, you can 'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600' (10 minutes) "
    "to relax the timeout condition. ")


def timed_out(room, elapsed, poll_state):
    """common/conn.py:914-916 and :1158-1160."""
    return f"Request {room} timed out after {elapsed:.1f}s in KVPoll.{poll_state}"


class _Once:
    """logger.warning_once: each text once per process."""

    def __init__(self):
        self._said = set()
        self._lock = threading.Lock()

    def __call__(self, write, text):
        with self._lock:
            if text in self._said:
                return
            self._said.add(text)
        write(text)


warning_once = _Once()


def is_fake(request, args):
    """_is_fake_transfer (disaggregation/utils.py:104-108)."""
    return request.bootstrap_host == FAKE_BOOTSTRAP_HOST or (
        request.bootstrap_host is None and args.disaggregation_transfer_backend == "fake")


# ----------------------------------------------------------------------------- the prefill leg

@dataclasses.dataclass
class Room:
    """One bootstrap room on the prefill leg (the KV manager's request_status, modelled)."""
    prefill: bool = False  # the prefill leg holds the request
    attached: bool = False  # the decode sent its KV indices (KVPoll.WaitingForInput)
    session: str = ""  # the decode's address, as Mooncake names its session
    kv: dict = None  # the prefilled KV, once it is there to send
    decode_failure: str = None  # the reason the decode is told (the transfer failed)
    outcome: str = None  # "success" | "send_failed" | "aborted"
    last_poll: float = 0.0


class Rooms:
    """The rooms of a prefill leg, shared by its API and its bootstrap server."""

    def __init__(self):
        self._rooms = {}
        self._changed = threading.Condition()

    def open(self, room):
        """The prefill leg takes the request of ``room``."""
        with self._changed:
            entry = self._rooms.setdefault(room, Room())
            entry.prefill = True
            return entry

    def attach(self, room, session):
        """A decode asks for the KV of ``room`` (first ask: its KV indices arrive)."""
        with self._changed:
            now = time.monotonic()
            for key in [key for key, entry in self._rooms.items()
                        if not entry.prefill and now - entry.last_poll > STALE_ROOM_SECONDS]:
                del self._rooms[key]
            entry = self._rooms.setdefault(room, Room())
            if not entry.attached:
                entry.attached, entry.session = True, session
            entry.last_poll = now
            self._changed.notify_all()
            return entry

    def wait(self, predicate, timeout):
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def update(self, entry, **fields):
        with self._changed:
            for name, value in fields.items():
                if getattr(entry, name) is None or name == "kv":
                    setattr(entry, name, value)
            self._changed.notify_all()

    def wait_outcome(self, entry):
        """Until the decode has taken the KV (or gave up); a decode that stops asking is gone,
        and the transfer to it fails."""
        while not self.wait(lambda: entry.outcome, KV_POLL_SLICE):
            if time.monotonic() - entry.last_poll > 3 * KV_POLL_SLICE:
                self.update(entry, outcome="send_failed")

    def abort(self, room):
        """The decode gave up on ``room`` (its ABORT notice, mooncake/conn.py:1471-1484)."""
        with self._changed:
            entry = self._rooms.get(room)
            if entry is None:
                return
            if entry.outcome is None:
                entry.outcome = "aborted"
            if not entry.prefill:
                del self._rooms[room]
            self._changed.notify_all()

    def close(self, room, entry):
        with self._changed:
            if self._rooms.get(room) is entry:
                del self._rooms[room]
            self._changed.notify_all()


class FaultBudget:
    """INFERA_SIM_FAULT=kv_transfer: the next INFERA_SIM_FAULT_COUNT transfers fail."""

    def __init__(self, settings):
        self._left = settings.fault_count if settings.fault == "kv_transfer" else 0
        self._lock = threading.Lock()

    def take(self):
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return True


class PrefillLeg:
    """A prefill engine's side of the transfer: its bootstrap server and its rooms."""

    def __init__(self, args, settings, log, environ, parallel_info):
        self.args = args
        self.log = log
        self.rooms = Rooms()
        self.faults = FaultBudget(settings)
        self.bootstrap_timeout = env_int(environ, "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT",
                                         DEFAULT_BOOTSTRAP_TIMEOUT)
        self.parallel_info = parallel_info
        self.registered = threading.Event()
        self.server = None

    def start_bootstrap_server(self):
        """CommonKVBootstrapServer._run_server (common/conn.py:1446-1479): a failed bind is
        logged and the engine goes on without it."""
        host, port = self.args.host, self.args.disaggregation_bootstrap_port
        try:
            self.server = Server((host, port), BootstrapHandler)
        except OSError as error:
            self.log.main(f"Server error: [Errno {error.errno}] error while attempting to bind on "
                          f"address {(host, port)!r}: {(error.strerror or '').lower()}")
            self.log.main("[simulated] the bootstrap server is not running (SGLang logs the "
                          "traceback too)")
            return
        self.server.leg = self
        threading.Thread(target=self.server.serve_forever, name="bootstrap", daemon=True).start()
        self.log.main(f"CommonKVBootstrapServer started successfully on {host}:{port}")

    def route_info(self):
        """PrefillServerInfo (common/conn.py:68-85) once every rank has registered."""
        return self.parallel_info

    def serve(self, request, rank, tp_rank, engine, kv_tokens):
        """Bootstrap, prefill, send the KV; return once the decode has it, else raise."""
        room = request.bootstrap_room
        if is_fake(request, self.args):
            with engine.admitted(rank, request.prompt_tokens, kv_tokens):
                engine.prefill(request.prompt_tokens)
            return
        rid = uuid.uuid4().hex
        started = time.monotonic()
        entry = self.rooms.open(room)
        try:
            with engine.pending(rank):
                attached = self.rooms.wait(lambda: entry.attached or entry.outcome, self.bootstrap_timeout)
            if not attached:
                # MooncakeKVSender.poll -> _check_bootstrap_timeout; prefill.py handle_bootstrap_failure
                warning_once(lambda text: self.log.scheduler(text, rank), BOOTSTRAP_TIMEOUT_WARNING)
                message = prefill_bootstrap_failed(
                    tp_rank, rid, room, timed_out(room, time.monotonic() - started, "Bootstrapping"))
                self.log.scheduler(message, rank)
                raise TransferFailed(HTTPStatus.INTERNAL_SERVER_ERROR, message)
            with engine.admitted(rank, request.prompt_tokens, kv_tokens):
                engine.prefill(request.prompt_tokens)
                if self.faults.take():
                    self._send_failed(entry, rank, tp_rank, rid, room)
                self.rooms.update(entry, kv={"bootstrap_room": room,
                                             "prompt_tokens": request.prompt_tokens,
                                             "simulated": True})
                self.rooms.wait_outcome(entry)
            if entry.outcome == "send_failed":
                self._send_failed(entry, rank, tp_rank, rid, room)
            if entry.outcome == "aborted":
                # The decode's ABORT marks the room failed without a reason: the error comes
                # "from another rank" and is logged at debug level only (prefill.py:779-789).
                raise TransferFailed(HTTPStatus.INTERNAL_SERVER_ERROR,
                                     prefill_transfer_failed(tp_rank, rid, room, FROM_ANOTHER_RANK))
        finally:
            self.rooms.close(room, entry)

    def _send_failed(self, entry, rank, tp_rank, rid, room):
        """Mooncake's transfer of a chunk fails (mooncake/conn.py:1354-1374): the session is
        marked failed, the room too, and the decode is told (it sees PREFILL_DEAD)."""
        self.rooms.update(entry, decode_failure=PREFILL_DEAD, outcome="send_failed")
        self.log.scheduler(f"Session {entry.session} failed.", rank)
        message = prefill_transfer_failed(tp_rank, rid, room,
                                          f"Failed to send kv chunk of {room} to {entry.session}")
        self.log.scheduler(message, rank)
        raise TransferFailed(HTTPStatus.INTERNAL_SERVER_ERROR, message)


class BootstrapHandler(JsonHandler):
    """The prefill's bootstrap server (common/conn.py:1264-1268) plus the simulator's KV route.
    ``self.server.leg`` is the PrefillLeg."""

    def do_GET(self):
        leg = self.server.leg
        url = urlsplit(self.path)
        if url.path == "/health":
            self.send_text(200, "OK", "text/plain; charset=utf-8")
        elif url.path == "/route":
            self._route(leg, parse_qs(url.query))
        elif url.path.startswith(SIM_KV_PATH):
            self._kv(leg, url.path[len(SIM_KV_PATH):], parse_qs(url.query))
        else:
            self.send_text(404, "404: Not Found", "text/plain; charset=utf-8")

    def do_PUT(self):
        self._read_body()
        if urlsplit(self.path).path == "/route":
            # The prefill's ranks register with PUT /route; the simulator registers them itself.
            self.send_json(501, {"error": "[simulated] the prefill's ranks register internally"})
        else:
            self.send_text(405, "Method not allowed", "application/json")

    def do_DELETE(self):
        url = urlsplit(self.path)
        if url.path.startswith(SIM_KV_PATH):
            room = _room(url.path[len(SIM_KV_PATH):])
            if room is not None:
                self.server.leg.rooms.abort(room)
            self.send_empty(204)
        else:
            self.send_text(405, "Method not allowed", "application/json")

    def _route(self, leg, query):
        """_handle_route_get (common/conn.py:1351-1411)."""
        values = [(query.get(name) or [""])[0] for name in ROUTE_QUERY]
        if not all(values):
            self.send_text(400, "Missing inputs for bootstrap server.", "text/plain; charset=utf-8")
            return
        if not leg.registered.is_set():
            self.send_text(503, "Prefill server not fully registered yet (0 workers registered).",
                           "text/plain; charset=utf-8")
            return
        if all(value == "-1" for value in values):
            self.send_json(200, leg.route_info())
            return
        # A rank's ZMQ address: Mooncake's side channel, which the simulator does not model.
        self.send_json(501, {"error": "[simulated] no per-rank KV endpoints: the transfer is "
                                      "modelled over GET /sim/kv/<room>"})

    def _kv(self, leg, tail, query):
        """Simulator only: the decode's long poll for the KV of a room."""
        room = _room(tail)
        try:
            wait = max(0.0, min(float((query.get("wait") or ["0"])[0]), KV_POLL_SLICE))
        except ValueError:
            wait = 0.0
        if room is None:
            self.send_json(400, {"error": f"[simulated] bad room {tail!r}"})
            return
        # Mooncake names a session by the decode's IP and its engine's port: here the decode's
        # --host (its own IP when it binds a wildcard) and the port of this connection.
        host = (query.get("decode_host") or [""])[0] or self.client_address[0]
        entry = leg.rooms.attach(room, f"{host}:{self.client_address[1]}")
        leg.rooms.wait(lambda: entry.kv is not None or entry.decode_failure or entry.outcome, wait)
        if entry.decode_failure:
            self.send_json(409, {"reason": entry.decode_failure, "simulated": True})
        elif entry.kv is None:
            self.send_json(202, {"pending": True, "simulated": True})
        else:
            try:
                self.send_json(200, entry.kv)
                self.wfile.flush()
            except OSError:
                leg.rooms.update(entry, outcome="send_failed")
                raise
            leg.rooms.update(entry, outcome="success")


def _room(text):
    try:
        return int(text)
    except ValueError:
        return None


# ----------------------------------------------------------------------------- the decode leg

class DecodeLeg:
    """A decode engine's side: the prefill parallel-info cache, the heartbeat and the fetch."""

    def __init__(self, args, settings, log, environ):
        self.args = args
        self.log = log
        self.time_scale = settings.time_scale
        self.waiting_timeout = env_int(environ, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT",
                                       DEFAULT_WAITING_TIMEOUT)
        # common/conn.py:193-202
        self.heartbeat_interval = max(env_float(environ, "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL",
                                                DEFAULT_HEARTBEAT_INTERVAL), 2.0)
        self.max_failures = max(env_int(environ, "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE",
                                        DEFAULT_HEARTBEAT_MAX_FAILURE), 1)
        self._lock = threading.Lock()
        self._known = set()  # prefill_info_table's keys
        self._failures = {}  # heartbeat_failures
        self._rooms = collections.defaultdict(dict)  # addr_to_rooms_tracker: {addr: {room: reason}}
        self._heartbeat = None
        # Never through a proxy: the legs talk on the data plane.
        self._http = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def fetch(self, request, rank, tp_rank, engine):
        """Wait for the KV of the request's room; raise TransferFailed as SGLang aborts it."""
        if is_fake(request, self.args):
            return
        room = request.bootstrap_room
        port = request.bootstrap_port or self.args.disaggregation_bootstrap_port
        addr = f"{request.bootstrap_host}:{port}"
        rid = uuid.uuid4().hex
        with self._lock:
            self._rooms[addr][room] = None
        try:
            with engine.pending(rank):
                if not self._ensure(addr, rank):
                    message = decode_handshake_failed(tp_rank, rid, room, ABORTED)
                    self.log.scheduler(message, rank)
                    raise TransferFailed(HTTPStatus.INTERNAL_SERVER_ERROR, message)
                reason = self._wait_for_kv(addr, room, rank)
            if reason is not None:
                message = decode_transfer_failed(tp_rank, rid, room, reason)
                self.log.scheduler(message, rank)
                raise TransferFailed(HTTPStatus.INTERNAL_SERVER_ERROR, message)
        finally:
            with self._lock:
                rooms = self._rooms.get(addr)
                if rooms is not None:
                    rooms.pop(room, None)

    def _ensure(self, addr, rank):
        """_ensure_prefill_info + try_ensure_parallel_info: True once the info is cached."""
        for attempt in range(1, ENSURE_RETRIES + 1):
            with self._lock:
                if addr in self._known:
                    return True
            url = (f"http://{addr}/route?prefill_dp_rank=-1&prefill_cp_rank=-1"
                   f"&target_tp_rank=-1&target_pp_rank=-1")
            try:
                with self._http.open(url, timeout=ROUTE_TIMEOUT) as response:
                    json.loads(response.read())
                with self._lock:
                    self._known.add(addr)
                self._start_heartbeat()
                return True
            except urllib.error.HTTPError as error:
                self.log.scheduler(f"Failed to get prefill server info: {error.code}, "
                                   f"{error.read().decode(errors='replace')}", rank)
            except (OSError, ValueError) as error:
                self.log.scheduler("Error fetching prefill server info from bootstrap: "
                                   + _requests_error(addr, url, error), rank)
            if attempt < ENSURE_RETRIES:
                time.sleep(max(ENSURE_RETRY_INTERVAL * self.time_scale, MIN_PACING))
        self.log.scheduler(f"Could not fetch prefill parallel info from {addr} after "
                           f"{ENSURE_RETRIES} attempts", rank)  # decode.py:724-727
        return False

    def _wait_for_kv(self, addr, room, rank):
        """The transfer, modelled: long polls of the prefill's /sim/kv/<room>. Returns None once
        the KV is here, else the failure reason."""
        started = time.monotonic()
        url = f"http://{addr}{SIM_KV_PATH}{room}"
        own = "" if self.args.host in ("0.0.0.0", "::") else self.args.host
        while True:
            with self._lock:
                lost = self._rooms.get(addr, {}).get(room)
            if lost is not None:
                return lost
            remaining = self.waiting_timeout - (time.monotonic() - started)
            if remaining <= 0:
                warning_once(lambda text: self.log.scheduler(text, rank), WAITING_TIMEOUT_WARNING)
                self._abort(url)
                return timed_out(room, time.monotonic() - started, "WaitingForInput")
            wait = min(remaining, KV_POLL_SLICE)
            try:
                with self._http.open(f"{url}?wait={wait:.3f}&decode_host={own}",
                                     timeout=wait + ROUTE_TIMEOUT) as response:
                    status, body = response.status, json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as error:
                status, body = error.code, {}
            except (OSError, ValueError):
                # Like the ZMQ side channel, nothing says the prefill is gone but the heartbeat.
                time.sleep(min(remaining, 0.05))
                continue
            if status == 200:
                return None
            if status == 409:
                return body.get("reason") or PREFILL_DEAD

    def _abort(self, url):
        """_send_abort_notification: the prefill marks the room failed."""
        try:
            self._http.open(urllib.request.Request(url, method="DELETE"), timeout=ROUTE_TIMEOUT).close()
        except (OSError, ValueError):
            pass

    def _start_heartbeat(self):
        with self._lock:
            if self._heartbeat is not None:
                return
            self._heartbeat = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._heartbeat.start()

    def _beat(self):
        """heartbeat_checker (common/conn.py:670-714)."""
        while True:
            time.sleep(max(self.heartbeat_interval * self.time_scale, MIN_PACING))
            with self._lock:
                addresses = sorted(self._known)
            for addr in addresses:
                try:
                    with self._http.open(f"http://{addr}/health", timeout=HEARTBEAT_TIMEOUT) as response:
                        healthy = response.status == 200
                except (OSError, ValueError):
                    healthy = False
                if healthy:
                    self._failures[addr] = 0
                    continue
                self.log.scheduler(f"Attempting to reconnect to {addr}...")
                self._failures[addr] = self._failures.get(addr, 0) + 1
                if self._failures[addr] >= self.max_failures:
                    self._node_failure(addr)

    def _node_failure(self, addr):
        """_handle_node_failure (common/conn.py:720-765)."""
        reason = f"Lost connection with prefill instance (bootstrap_addr: {addr})"
        with self._lock:
            self._known.discard(addr)
            rooms = self._rooms.pop(addr, {})
            for room in rooms:
                rooms[room] = reason
            # The requests still waiting read their reason from the tracker they hold.
            self._rooms[addr] = rooms
        self.log.scheduler(f"{reason}, {len(rooms)} requests affected")


def _requests_error(addr, url, error):
    """str() of the requests.ConnectionError SGLang logs (requests 2.34.2 over urllib3 2.8.0, the
    versions beside sglang 0.5.15.post1), or the plain error when it is not a refused connection."""
    reason = getattr(error, "reason", error)
    if isinstance(reason, ConnectionRefusedError) or getattr(reason, "errno", None) == 111:
        host, port = addr.rsplit(":", 1)
        path = url.split(addr, 1)[1]
        return (f"HTTPConnectionPool(host='{host}', port={port}): Max retries exceeded with url: {path} "
                f"(Caused by NewConnectionError(\"HTTPConnection(host='{host}', port={port}): Failed to "
                f"establish a new connection: [Errno 111] Connection refused\"))")
    return str(reason)


def parallel_info(args, kv_cache_dtype):
    """What the prefill's ranks register (common/conn.py:405-421, :1300-1326) and GET /route
    returns: PrefillServerInfo with the rank mapping left null."""
    attn_tp = args.tp_size // args.dp_size if args.enable_dp_attention else args.tp_size
    return {"attn_tp_size": attn_tp, "attn_cp_size": 1, "dp_size": args.dp_size, "pp_size": 1,
            "page_size": args.page_size or 1, "kv_cache_dtype": kv_cache_dtype,
            # load_balance_method "auto" is follow_bootstrap_room on a prefill (server_args.py:2866-2882)
            "follow_bootstrap_room": True,
            "target_tp_rank": None, "target_tp_ranks": None, "target_cp_ranks": None,
            "target_pp_ranks": None, "required_dst_info_num": None,
            "required_prefill_response_num": None}
