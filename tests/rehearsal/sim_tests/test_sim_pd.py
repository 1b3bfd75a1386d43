"""PD disaggregation: the user's PD page (a prefill leg and a decode leg, each under Infera's real
worker wrapper, on two loopback "hosts") behind the real Infera router (python backend), and the
simulated engine's prefill and decode modes on their own.

The legs' commands are the page's own (docs/reference/sglang-1p1d-dsv4-pro-mi355x.md, section
4), with test hosts and ports. Every expected line or error is SGLang 0.5.15.post1's, read in
its wheel (the file:line each assertion's comment names).
"""

import re
import signal
import sys
import threading
import urllib.error

import pytest

from sim_harness import (PD_HOSTS, READY_LINE, REPO, Proc, free_port, http_json, http_text, inflight,
                         pd_engine_args, pd_page_commands, pd_wrapper_args, python_module, simulator_env,
                         sse_events, streamed_text, wait_until)

sys.path.insert(0, str(REPO / "tests" / "rehearsal" / "sglang_lines"))
import linecatalog  # noqa: E402

STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]"
# sglang/srt/model_executor/model_runner.py:2703-2707
PREFILL_GRAPH_DISABLED = ("Disable prefill CUDA graph because cuda_graph_config resolved "
                          "prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled "
                          "or auto-disable rules).")
# sglang/srt/disaggregation/mooncake/conn.py:1610
PREFILL_DEAD = "Failed to get kvcache from prefill instance, it might be dead"
SWA_REFUSAL = ("--disaggregation-decode-enable-radix-cache is incompatible with sliding window "
               "attention (SWA) models")  # sglang/srt/mem_cache/kv_cache_builder.py:187-190


class Leg:
    def __init__(self, process, leg, port, bootstrap_port):
        self.process = process
        self.host = PD_HOSTS[leg]
        self.port = port
        self.bootstrap_port = bootstrap_port
        self.url = f"http://{self.host}:{port}"

    def post(self, path, body, timeout=30):
        return http_json("POST", self.url + path, body, timeout)


def unreal(text, version="0.5.15.post1"):
    """The records of an engine log that no line of that SGLang release accounts for."""
    return linecatalog.catalog(version).unmatched(text)


def start_leg(leg, model_dir, etcd, dev_root, log_dir, env=None, extra=(), drop=()):
    """``leg`` of the page under Infera's wrapper; the bootstrap port is the prefill's."""
    port, bootstrap_port = free_port(), free_port()
    command_env, argv = pd_wrapper_args(leg, model_dir, etcd, port, bootstrap_port, extra, drop)
    process = Proc(python_module("infera.engine.sglang", argv),
                   {**simulator_env(dev_root, log_dir / f"jit-{leg}"), **command_env, **(env or {})},
                   log_dir, f"wrapper-{leg}")
    return Leg(process, leg, port, bootstrap_port)


def start_pair(model_dir, etcd, dev_root, log_dir, prefill_env=None, extra=()):
    """The page's two legs; the decode leg gets the prefill's bootstrap port (it is not on the
    page's decode command: the router tells the decode leg, request by request)."""
    prefill = start_leg("prefill", model_dir, etcd, dev_root, log_dir, prefill_env, extra)
    decode = start_leg("decode", model_dir, etcd, dev_root, log_dir, extra=extra)
    return prefill, decode


def workers_of(router, model):
    return {entry["disagg_mode"]: entry for entry in router.workers() if entry["model_name"] == model}


def wait_for_pair(router, model, legs):
    def registered():
        return set(workers_of(router, model)) == {"prefill", "decode"}

    wait_until(registered, 60, "the router never listed both legs\n"
               + "\n".join(leg.process.describe() for leg in legs))
    # The router lists a leg once the wrapper's put is in etcd; the wrapper logs it after.
    for leg in legs:
        leg.process.wait_for(f"registered with etcd as worker {leg.host}:{leg.port}", timeout=30)


@pytest.fixture(scope="module")
def pair(etcd, router, model_dir, dev_root, tmp_path_factory):
    # /metrics needs --enable-metrics: Infera appends it from v0.2.10 on; v0.1.1 passes it on as given.
    prefill, decode = start_pair(model_dir, etcd, dev_root, tmp_path_factory.mktemp("pd"),
                                 extra=["--enable-metrics"])
    try:
        wait_for_pair(router, str(model_dir), (prefill, decode))
        yield prefill, decode
    finally:
        prefill.process.kill()
        decode.process.kill()


def chat(model, content, **extra):
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


# ----------------------------------------------------------------------------- the page's legs

@pytest.mark.parametrize("leg", ["prefill", "decode"])
def test_page_legs_parse_through_infera_and_the_engine(leg):
    """Every flag of the page's legs exists (Infera's wrapper and the engine parse them with
    SGLang's ServerArgs); the wrapper consumes --no-enable-kv-events, so no radix-cache flag."""
    from infera.engine.sglang.args import parse_sglang_args
    from sglang.srt.server_args import prepare_server_args

    _env, argv = pd_wrapper_args(leg, "/models/DeepSeek-V4-Pro", "127.0.0.1:9", 30000, 8998)
    parsed = parse_sglang_args(argv)
    engine = prepare_server_args(parsed.sglang_argv)
    for server_args in (parsed.server_args, engine):
        assert server_args.disaggregation_mode == leg
        assert (server_args.disaggregation_transfer_backend, server_args.max_prefill_tokens,
                server_args.chunked_prefill_size, server_args.context_length) == (
                    "mooncake", 163840, 163840, 9472)
        assert server_args.mem_fraction_static == (0.85 if leg == "prefill" else 0.90)
        assert server_args.disaggregation_ib_device is None
    assert "--disaggregation-decode-enable-radix-cache" not in parsed.sglang_argv
    assert pd_page_commands()[leg][0]["SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"] == "1800"


def test_flag_defaults_are_sglang_s():
    """server_args.py:663 (--max-prefill-tokens, 16384) and :2288 (--disaggregation-ib-device)."""
    from sglang.srt.server_args import prepare_server_args

    args = prepare_server_args(["--model-path", "/m"])
    assert (args.max_prefill_tokens, args.disaggregation_ib_device) == (16384, None)
    args = prepare_server_args(["--model-path", "/m", "--disaggregation-ib-device", "ionic_0,ionic_1"])
    assert args.disaggregation_ib_device == "ionic_0,ionic_1"


def test_the_wrapper_appends_the_decode_radix_cache_with_kv_events_on():
    """What the page's --no-enable-kv-events avoids (infera/engine/sglang/args.py:257-263)."""
    from infera.engine.sglang.args import parse_sglang_args

    _env, argv = pd_wrapper_args("decode", "/m", "127.0.0.1:9", 30000, 8998,
                                 drop={"--no-enable-kv-events"})
    assert parse_sglang_args(argv).sglang_argv[-1] == "--disaggregation-decode-enable-radix-cache"


# ----------------------------------------------------------------------------- through the router

def test_the_router_lists_both_legs(pair, router, model_dir):
    prefill, decode = pair
    workers = workers_of(router, str(model_dir))
    assert (workers["prefill"]["url"], workers["decode"]["url"]) == (prefill.url, decode.url)
    # The prefill advertises its bootstrap server, the decode nothing (infera/engine/sglang/worker.py).
    assert workers["prefill"]["disagg_meta"] == {
        "protocol": "sglang-bootstrap",
        "params": {"bootstrap_addr": f"{prefill.host}:{prefill.bootstrap_port}"}}
    assert workers["decode"]["disagg_meta"]["params"] == {}


COUNTERS = re.compile(r'^sglang:(generation_tokens|num_requests)_total\{model_name="[^"]*",'
                      r'engine_type="(\w+)"\} (\S+)$', re.MULTILINE)


def counters(leg):
    """{(counter, engine_type): value} of a leg's /metrics."""
    return {(name, engine_type): float(value)
            for name, engine_type, value in COUNTERS.findall(http_text(leg.url + "/metrics"))}


def test_a_chat_completion_through_the_pair(pair, router, model_dir):
    """The page's verify request, and its streamed form: the router posts the same body plus
    bootstrap_host/port/room to both legs and relays the decode's answer."""
    prefill, decode = pair
    before = {leg: counters(leg) for leg in pair}
    status, body = router.post("/v1/chat/completions",
                               chat(str(model_dir), "1+1=?", max_tokens=32, temperature=0))
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "1 + 1 = 2."
    assert body["usage"]["completion_tokens"] == 10
    _type, events, _arrivals = sse_events(router.url + "/v1/chat/completions",
                                          chat(str(model_dir), "1+1=?", stream=True))
    assert events[-1] == "[DONE]" and streamed_text(events) == "1 + 1 = 2."
    # Each leg served both: the prefill one token each, the decode all ten (metrics engine_type).
    served = {leg: {key: value - before[leg][key] for key, value in counters(leg).items()}
              for leg in pair}
    assert served[prefill] == {("generation_tokens", "prefill"): 2, ("num_requests", "prefill"): 2}
    assert served[decode] == {("generation_tokens", "decode"): 20, ("num_requests", "decode"): 2}
    assert "failed for request" not in prefill.process.stderr + decode.process.stderr


def test_server_info_reports_the_mode(pair):
    for leg, mode in zip(pair, ("prefill", "decode")):
        info = http_json("GET", leg.url + "/server_info")[1]
        assert (info["disaggregation_mode"], info["disaggregation_transfer_backend"]) == (mode, "mooncake")
        assert info["max_prefill_tokens"] == 163840


def test_the_prefill_leg_serves_a_bootstrap_server(pair):
    """common/conn.py:1264-1411: /health, and /route with the prefill's parallel info."""
    prefill, _decode = pair
    base = f"http://{prefill.host}:{prefill.bootstrap_port}"
    assert http_text(base + "/health") == "OK"
    with pytest.raises(urllib.error.HTTPError) as refused:
        http_text(base + "/route")
    assert (refused.value.code, refused.value.read()) == (400, b"Missing inputs for bootstrap server.")
    info = http_json("GET", base + "/route?prefill_dp_rank=-1&prefill_cp_rank=-1"
                                   "&target_tp_rank=-1&target_pp_rank=-1")[1]
    assert (info["attn_tp_size"], info["dp_size"], info["page_size"], info["kv_cache_dtype"],
            info["follow_bootstrap_room"]) == (1, 8, 256, "fp8_e4m3", True)


def test_cold_starts_of_the_legs(pair):
    prefill, decode = pair
    log = prefill.process.stderr
    # common/conn.py:1471-1473, before the model loads; the prefill captures no CUDA graph.
    assert log.index(f"] CommonKVBootstrapServer started successfully on {prefill.host}:"
                     f"{prefill.bootstrap_port}\n") < log.index("Load weight begin.")
    assert PREFILL_GRAPH_DISABLED in log
    assert "Capture target decode CUDA graph" not in log and "Capturing batches" not in log
    # The warm-up takes the fake transfer, then the ready line (entrypoints/http_server.py:2101-2169).
    milestones = ["Start of pd disaggregation warmup ...",
                  "Disaggregation warmup request completed with status 200, resp: [",
                  "End of disaggregation warmup", READY_LINE]
    for text in (log, decode.process.stderr):
        positions = [text.index(milestone) for milestone in milestones]
        assert positions == sorted(positions)
    # pd_disaggregation_hook.py:55-56, logged by the launcher before it logs its arguments.
    log = decode.process.stderr
    assert re.search(rf"^{STAMP} KV cache is forced as chunk cache for decode server$", log, re.MULTILINE)
    assert log.index("KV cache is forced as chunk cache") < log.index("server_args=ServerArgs(")
    assert "Capture target decode CUDA graph end." in log and "EXPERIMENTAL" not in log


def test_a_failed_transfer_reaches_the_client_as_sglang_reports_it(etcd, router, model_dir, dev_root,
                                                                   tmp_path):
    """INFERA_SIM_FAULT=kv_transfer on a prefill leg: its next two Mooncake transfers fail. The
    decode answers 500 with the scheduler's message (decode.py:1693, mooncake/conn.py:1610), which
    the router relays as it is, non-streamed (infera/router/disagg.py) and streamed; the third
    request is served."""
    model = "dsv4-pd-faulty"
    prefill, decode = start_pair(model_dir, etcd, dev_root, tmp_path,
                                 {"INFERA_SIM_FAULT": "kv_transfer", "INFERA_SIM_FAULT_COUNT": "2"},
                                 extra=["--served-model-name", model])
    try:
        wait_for_pair(router, model, (prefill, decode))
        status, body = router.post("/v1/chat/completions", chat(model, "1+1=?"))
        assert status == 500, body
        assert body["object"] == "error" and (body["type"], body["code"]) == ("500", 500)
        assert re.fullmatch(r"Decode transfer failed for request rank=\d decode_req\.req\.rid='[0-9a-f]{32}' "
                            r"decode_req\.req\.bootstrap_room=(\d+) with exception "
                            r"KVTransferError\(bootstrap_room=\1\): " + re.escape(PREFILL_DEAD),
                            body["message"]), body["message"]
        _type, events, _arrivals = sse_events(router.url + "/v1/chat/completions",
                                              chat(model, "1+1=?", stream=True))
        assert events[-1] == "[DONE]" and len(events) == 2
        error = events[0]["error"]
        assert (error["type"], error["code"]) == ("INTERNAL_SERVER_ERROR", 500)
        assert error["message"].endswith(PREFILL_DEAD)
        status, body = router.post("/v1/chat/completions", chat(model, "1+1=?"))
        assert status == 200 and body["choices"][0]["message"]["content"] == "1 + 1 = 2."
        log = prefill.process.stderr
        # mooncake/conn.py:1360-1367, then prefill.py:778-790
        assert len(re.findall(rf"\] Session {re.escape(decode.host)}:\d+ failed\.$", log, re.MULTILINE)) == 2
        assert re.search(r"\] Prefill transfer failed for request rank=\d req\.rid='[0-9a-f]{32}' "
                         r"req\.bootstrap_room=(\d+) with exception KVTransferError\(bootstrap_room=\1\): "
                         rf"Failed to send kv chunk of \1 to {re.escape(decode.host)}:\d+$", log, re.MULTILINE)
        failures = [line for line in log.splitlines() + decode.process.stderr.splitlines()
                    if "] Session " in line or "failed for request" in line]
        assert len(failures) == 6 and not unreal("\n".join(failures))
        # The router only logs the prefill's 500 (infera/router/disagg.py).
        wait_until(lambda: "returned 500 (decode may fail)" in router.process.stderr, 10,
                   "the router never logged the prefill's 500\n" + router.process.describe())
    finally:
        prefill.process.kill()
        decode.process.kill()


def test_decode_radix_cache_on_the_swa_model_kills_the_decode_leg(launch, etcd, model_dir, sim_env,
                                                                  tmp_path):
    """Without --no-enable-kv-events Infera appends --disaggregation-decode-enable-radix-cache; the
    decode leg loads, captures its graphs, then its scheduler dies building the cache
    (scheduler.py:430 -> kv_cache_builder.py:187, scheduler.py:4345) and never registers."""
    port = free_port()
    command_env, argv = pd_wrapper_args("decode", model_dir, etcd, port, free_port(),
                                        drop={"--no-enable-kv-events"})
    wrapper = launch("infera.engine.sglang", argv, {**sim_env, **command_env})
    # The wrapper tears down its own process group when the engine dies before ready.
    assert wrapper.wait_exit(60) == -signal.SIGTERM
    log = wrapper.stderr
    assert "--disaggregation-decode-enable-radix-cache" in log.split("spawning sglang subprocess", 1)[1]
    milestones = [
        # pd_disaggregation_hook.py:48-53
        "EXPERIMENTAL: Decode radix cache with DP attention. Requires prefix-aware DP rank routing "
        "for optimal cache hits.",
        "EXPERIMENTAL: Radix cache is enabled for decode server",
        "Capture target decode CUDA graph end.",
        "] Scheduler hit an exception: Traceback (most recent call last):",
        "ValueError: " + SWA_REFUSAL,
        "Received sigquit from a child process. It usually means the child failed.",
        "sglang subprocess exited with code -9 before reporting ready",
    ]
    positions = [log.index(milestone) for milestone in milestones]
    assert positions == sorted(positions)
    assert READY_LINE not in log and "registered with etcd" not in log


# ----------------------------------------------------------------------------- the engines alone

@pytest.mark.parametrize("leg, extra, refusal", [
    ("prefill", ["--disaggregation-transfer-backend", "fake"],
     "AssertionError: Prefill server does not support 'fake' as the transfer backend"),
    ("decode", ["--disaggregation-transfer-backend", "fake", "--disaggregation-decode-enable-radix-cache"],
     "ValueError: --disaggregation-decode-enable-radix-cache is incompatible with "
     "--disaggregation-transfer-backend fake"),
])
def test_sglang_s_own_pd_refusals(launch, sim_env, model_dir, leg, extra, refusal):
    """pd_disaggregation_hook.py:36-40 and :72-75, in ServerArgs.__post_init__: a traceback, exit 1."""
    engine = launch("sglang.launch_server",
                    pd_engine_args(leg, model_dir, free_port(), free_port(), extra), sim_env)
    assert engine.wait_exit() == 1
    assert engine.stderr.rstrip().endswith(refusal) and "Traceback (most recent call last):" in engine.stderr
    assert "Load weight begin" not in engine.stderr


@pytest.mark.parametrize("version", ["0.5.15.post1", "0.5.17"])
def test_pd_failures_without_a_transfer(launch, sim_env, model_dir, version):
    """A decode leg and its prefill leg alone: a request without a room (scheduler.py:2111-2127),
    a room the prefill never gets (the waiting timeout, common/conn.py:1147-1170, here 1 s), a
    prefill leg at a port nothing listens on (15 attempts, decode.py:695-734), a prefill request
    whose decode never comes (the bootstrap timeout, common/conn.py:902-919, here 1 s), and a
    prefill leg that dies while its decode waits (the heartbeat, common/conn.py:668-765). Every line
    the legs write is one of the release's."""
    sim_env = {**sim_env, "INFERA_SIM_SGLANG_VERSION": version}
    port, decode_port, bootstrap_port = free_port(), free_port(), free_port()
    prefill = launch("sglang.launch_server", pd_engine_args("prefill", model_dir, port, bootstrap_port),
                     {**sim_env, "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "1"})
    decode = launch("sglang.launch_server",
                    pd_engine_args("decode", model_dir, decode_port, bootstrap_port, ["--cuda-graph-max-bs", "8"]),
                    {**sim_env, "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "1"})
    prefill.wait_for(READY_LINE)
    decode.wait_for(READY_LINE)
    decode_url = f"http://{PD_HOSTS['decode']}:{decode_port}/v1/chat/completions"
    prefill_url = f"http://{PD_HOSTS['prefill']}:{port}/v1/chat/completions"
    body = chat(str(model_dir), "1+1=?", bootstrap_host=PD_HOSTS["prefill"], bootstrap_port=bootstrap_port)

    status, answer = http_json("POST", decode_url, body)
    assert (status, answer["type"], answer["code"]) == (400, "BadRequestError", 400)
    assert re.fullmatch(r"Invalid request: Disaggregated request received without bootstrap room id\. "
                        r"req\.rid='[0-9a-f]{32}'", answer["message"])

    status, answer = http_json("POST", decode_url, {**body, "bootstrap_room": 41})
    assert status == 500 and re.search(
        r"with exception KVTransferError\(bootstrap_room=41\): Request 41 timed out after \d+\.\ds in "
        r"KVPoll\.WaitingForInput$", answer["message"])
    assert ("] Some requests fail to receive KV Cache transfer done signal after bootstrapping. If a "
            "greater mean TTFT is acceptable, you can 'export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=600' "
            "(10 minutes) to relax the timeout condition. \n") in decode.stderr

    gone = free_port()
    status, answer = http_json("POST", decode_url, {**body, "bootstrap_port": gone, "bootstrap_room": 42})
    assert status == 500 and re.fullmatch(
        r"Decode handshake failed for request rank=\d decode_req\.req\.rid='[0-9a-f]{32}' "
        r"decode_req\.req\.bootstrap_room=42 with exception KVTransferError\(bootstrap_room=42\): "
        r"Aborted by AbortReq\.", answer["message"])
    refused = (f"Error fetching prefill server info from bootstrap: HTTPConnectionPool(host='{PD_HOSTS['prefill']}', "
               f"port={gone}): Max retries exceeded with url: /route?prefill_dp_rank=-1&prefill_cp_rank=-1"
               f"&target_tp_rank=-1&target_pp_rank=-1 (Caused by NewConnectionError(\"HTTPConnection("
               f"host='{PD_HOSTS['prefill']}', port={gone}): Failed to establish a new connection: [Errno 111] "
               f"Connection refused\"))")
    assert decode.stderr.count(refused) == 15
    assert f"] Could not fetch prefill parallel info from {PD_HOSTS['prefill']}:{gone} after 15 attempts\n" \
        in decode.stderr

    status, answer = http_json("POST", prefill_url, {**body, "bootstrap_room": 43})
    assert status == 500 and re.fullmatch(
        r"Prefill bootstrap failed for request rank=3 req\.rid='[0-9a-f]{32}' req\.bootstrap_room=43 with "
        r"exception KVTransferError\(bootstrap_room=43\): Request 43 timed out after \d+\.\ds in "
        r"KVPoll\.Bootstrapping", answer["message"])
    assert "] Some requests timed out when bootstrapping, which means prefill instances" in prefill.stderr

    waiting = []
    thread = threading.Thread(target=lambda: waiting.append(
        sse_events(decode_url, {**body, "bootstrap_room": 44, "stream": True})))
    thread.start()
    # Once the decode holds the request (queued for its KV, on /metrics), the prefill leg dies.
    wait_until(lambda: inflight(http_text(f"http://{PD_HOSTS['decode']}:{decode_port}/metrics")) > 0,
               10, "the decode leg never took the request")
    prefill.kill()
    thread.join(30)
    _type, events, _arrivals = waiting[0]
    assert events[-1] == "[DONE]" and events[0]["error"]["code"] == 500
    assert events[0]["error"]["message"].endswith(
        f"KVTransferError(bootstrap_room=44): Lost connection with prefill instance (bootstrap_addr: "
        f"{PD_HOSTS['prefill']}:{bootstrap_port})")
    assert (f"] Lost connection with prefill instance (bootstrap_addr: {PD_HOSTS['prefill']}:{bootstrap_port}),"
            " 1 requests affected\n") in decode.stderr
    assert not unreal(prefill.stderr, version) and not unreal(decode.stderr, version)
