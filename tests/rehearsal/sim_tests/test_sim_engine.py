"""The simulated engine alone, started the way Infera's wrapper spawns it: refusals,
cold start, SGLang's endpoints and the DP-attention variant."""

import json
import re
import socket
import threading
import types

import pytest

from sim_harness import (READY_LINE, captures, engine_args, free_port, http_json, http_text,
                         sse_events, streamed_text, wait_until)


def start(launch, env, model_dir, variant="nodp", extra=(), drop=()):
    port = free_port()
    argv = [arg for arg in engine_args(variant, model_dir, port, extra) if arg not in drop]
    engine = launch("sglang.launch_server", argv, env)
    return engine, f"http://127.0.0.1:{port}"


def refused(launch, env, model_dir, extra=(), drop=()):
    engine, _url = start(launch, env, model_dir, extra=extra, drop=drop)
    assert engine.wait_exit() == 1
    assert "Load weight begin" not in engine.stderr
    return engine.stderr


@pytest.mark.parametrize("extra, message", [
    (["--dp-size", "4", "--enable-dp-attention"],
     "AssertionError: DeepSeek-V4 with --enable-dp-attention needs --dp-size equal to "
     "--tp-size (got --dp-size 4, --tp-size 8)"),
    (["--enable-dp-attention"], "--enable-dp-attention needs --dp-size > 1"),
    (["--ep-size", "3"], "--ep-size 3 must divide --tp-size 8"),
    (["--mem-fraction-static", "1.2"], "--mem-fraction-static must be between 0 and 1"),
    (["--dp-size", "2"],
     "--tp-size 8 --dp-size 2 (without DP-attention) needs 16 GPUs but HIP_VISIBLE_DEVICES "
     "lists 8"),
    (["--kv-events-config", "{not json"], "json.decoder.JSONDecodeError"),
])
def test_engine_refuses_what_sglang_refuses(launch, sim_env, model_dir, extra, message):
    assert message in refused(launch, sim_env, model_dir, extra)


def test_engine_names_missing_render_node(launch, sim_env, model_dir, tmp_path):
    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    (dev / "kfd").touch()
    for gpu in (0, 1, 2, 4, 5, 6, 7):
        (dev / "dri" / f"renderD{128 + gpu}").touch()
    stderr = refused(launch, {**sim_env, "INFERA_SIM_DEV_ROOT": str(dev)}, model_dir)
    assert f"GPU 3 has no render node {dev}/dri/renderD131" in stderr


def test_engine_needs_kfd_and_enough_visible_gpus(launch, sim_env, model_dir, tmp_path):
    assert "No HIP GPUs are available" in refused(
        launch, {**sim_env, "INFERA_SIM_DEV_ROOT": str(tmp_path)}, model_dir)
    assert "--tp-size 8 needs 8 GPUs but HIP_VISIBLE_DEVICES lists 4" in refused(
        launch, {**sim_env, "HIP_VISIBLE_DEVICES": "0,1,2,3"}, model_dir)


def test_engine_needs_a_model_dir(launch, sim_env, model_dir, tmp_path):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    assert f"OSError: Can't load the configuration of '{empty}'" in refused(
        launch, sim_env, empty)
    custom = tmp_path / "custom-model"
    custom.mkdir()
    (custom / "config.json").write_text(json.dumps({"auto_map": {"AutoConfig": "x.Config"}}))
    assert "Please pass --trust-remote-code" in refused(
        launch, sim_env, custom, ["--tokenizer-path", model_dir], drop={"--trust-remote-code"})
    assert f"OSError: Can't load tokenizer for '{empty}'" in refused(
        launch, sim_env, model_dir, ["--tokenizer-path", empty])


def test_cold_start_grows_the_jit_dir_and_becomes_healthy(launch, sim_env, model_dir,
                                                          tmp_path):
    engine, url = start(launch, sim_env, model_dir)
    engine.wait_for(READY_LINE)
    log = engine.stderr
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Load weight end\. elapsed=[\d.]+ s, "
                     r"type=DeepseekV4ForCausalLM, avail mem=[\d.]+ GB, mem usage=[\d.]+ GB\.$", log,
                     re.MULTILINE)
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] " + re.escape(READY_LINE) + "$",
                     log, re.MULTILINE)
    assert "'--cuda-graph-max-bs' is deprecated" in log
    sizes = [bs for bs, _done, _total in captures(log)]
    jit_files = list((tmp_path / "jit").iterdir())
    assert len(jit_files) == len(sizes) == 19
    assert sum(path.stat().st_size for path in jit_files) > len(sizes) * 100_000
    assert http_json("GET", url + "/health") == (200, None)


def test_explicit_capture_list_disabled_graph_and_missing_levers(launch, sim_env, model_dir,
                                                                 tmp_path):
    env = {**sim_env, "SGLANG_USE_AITER": "0"}
    del env["SGLANG_OPT_USE_TOPK_V2"]
    engine, _url = start(launch, env, model_dir,
                         extra=["--attention-backend", "triton", "--cuda-graph-bs", "4", "1", "2"])
    engine.wait_for(READY_LINE)
    assert ("levers: attention_backend=MISSING, fused_compress=MISSING "
            "(SGLANG_USE_AITER, SGLANG_OPT_USE_TOPK_V2)") in engine.stderr
    assert [bs for bs, _done, _total in captures(engine.stderr)] == [4, 2, 1]
    engine, _url = start(launch, {**sim_env, "INFERA_SIM_JIT_DIR": str(tmp_path / "nojit")},
                         model_dir, extra=["--disable-cuda-graph"])
    engine.wait_for(READY_LINE)
    assert "Load weight end." in engine.stderr and "CUDA graph begin" not in engine.stderr
    assert not (tmp_path / "nojit").exists()


def test_health_is_503_until_ready():
    """SGLang's /health: an empty 503 from the bind until the warm-up is done, then 200, then 503 while it drains."""
    from sglang_sim.http_api import EngineHandler
    from sglang_sim.httpjson import Server

    server = Server(("127.0.0.1", 0), EngineHandler)
    logged = []
    server.app = types.SimpleNamespace(ready=threading.Event(), draining=threading.Event(),
                                       log=types.SimpleNamespace(main=logged.append))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/health"
    try:
        assert http_json("GET", url) == (503, None)
        server.app.ready.set()
        assert http_json("GET", url) == (200, None)
        # Draining after a SIGTERM: 503 again, and SGLang says why (http_server.py health_generate).
        server.app.draining.set()
        assert http_json("GET", url) == (503, None)
        assert logged == ["Health check request received during shutdown. Returning 503."]
    finally:
        server.shutdown()
        server.server_close()


def test_busy_port_fails_the_start(launch, sim_env, model_dir):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        engine = launch("sglang.launch_server",
                        engine_args("nodp", model_dir, port, ["--disable-cuda-graph"]), sim_env)
        # uvicorn logs the bind error and exits 3 (uvicorn/server.py STARTUP_FAILURE).
        assert engine.wait_exit() == 3
    assert "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', %d): address already in use" % port \
        in engine.stderr and READY_LINE not in engine.stderr


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory, dev_root, model_dir):
    """One nodp engine with metrics, as the wrapper starts it."""
    from sim_harness import Proc, python_module, simulator_env

    log_dir = tmp_path_factory.mktemp("engine")
    port = free_port()
    engine = Proc(python_module("sglang.launch_server", engine_args("nodp", model_dir, port)),
                  simulator_env(dev_root, log_dir / "jit"), log_dir, "engine")
    try:
        engine.wait_for(READY_LINE)
        yield f"http://127.0.0.1:{port}"
    finally:
        engine.kill()


def test_info_endpoints(engine_url, model_dir):
    models = http_json("GET", engine_url + "/v1/models")[1]
    assert [entry["id"] for entry in models["data"]] == [str(model_dir)]
    info = http_json("GET", engine_url + "/get_model_info")[1]
    assert info["architectures"] == ["DeepseekV4ForCausalLM"] and info["is_generation"]
    server = http_json("GET", engine_url + "/get_server_info")[1]
    assert (server["tp_size"], server["page_size"], server["kv_cache_dtype"]) == (
        8, 256, "fp8_e4m3")
    assert server["enable_metrics"] and server["simulated"]
    assert http_json("GET", engine_url + "/nope")[0] == 404


def test_native_generate(engine_url):
    status, body = http_json("POST", engine_url + "/generate", {
        "text": "1+1=?", "sampling_params": {"max_new_tokens": 32, "temperature": 0}})
    assert status == 200 and "2" in body["text"]
    assert body["meta_info"]["finish_reason"]["type"] == "stop"
    assert body["meta_info"]["completion_tokens"] == len(body["output_ids"])
    _type, events, _arrivals = sse_events(engine_url + "/generate", {
        "input_ids": [1, 2, 3], "stream": True,
        "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}})
    assert events[-1] == "[DONE]"
    texts = [event["text"] for event in events[:-1]]
    assert all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:]))
    assert events[-2]["meta_info"]["finish_reason"] == {"type": "length", "length": 20}
    assert [event["meta_info"]["finish_reason"] for event in events[:-2]] == [None] * (
        len(events) - 2)


def test_openai_streams_end_with_usage(engine_url, model_dir):
    _type, events, _arrivals = sse_events(engine_url + "/v1/chat/completions", {
        "model": str(model_dir), "messages": [{"role": "user", "content": "1+1=?"}],
        "stream": True, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]" and streamed_text(events[:-1]) == "1 + 1 = 2."
    assert events[-3]["choices"][0]["finish_reason"] == "stop"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] > 0
    status, body = http_json("POST", engine_url + "/v1/completions", {"prompt": 5})
    assert status == 400 and body["error"]["type"] == "invalid_request_error"


def test_metrics_without_enable_metrics_is_404(launch, sim_env, model_dir):
    port = free_port()
    argv = [arg for arg in engine_args("nodp", model_dir, port, ["--disable-cuda-graph"])
            if arg != "--enable-metrics"]
    engine = launch("sglang.launch_server", argv, sim_env)
    engine.wait_for(READY_LINE)
    assert http_json("GET", f"http://127.0.0.1:{port}/metrics")[0] == 404


def test_dp_variant_reports_every_rank(launch, sim_env, model_dir):
    engine, url = start(launch, {**sim_env, "SGLANG_DP_USE_GATHERV": "1"}, model_dir, "dp",
                        ["--cuda-graph-max-bs", "16"])
    engine.wait_for(READY_LINE)
    assert ("variant=dp, levers: attention_backend=ok, fused_compress=ok, dp_gatherv=ok"
            in engine.stderr)
    assert " DP0 TP0 EP0] Load weight end." in engine.stderr
    finished = threading.Event()
    threading.Thread(target=lambda: (http_json(
        "POST", url + "/v1/completions",
        {"prompt": "hi", "max_tokens": 500, "ignore_eos": True},
        headers={"X-Data-Parallel-Rank": "3"}, timeout=60), finished.set()), daemon=True).start()
    running = re.compile(r'^sglang:num_running_reqs\{.*tp_rank="(\d)".*dp_rank="(\d)"\} (\S+)$',
                         re.MULTILINE)

    def busy_ranks():
        return [(tp, dp) for tp, dp, value in running.findall(http_text(url + "/metrics"))
                if float(value) > 0]

    wait_until(lambda: busy_ranks() == [("3", "3")] or finished.is_set(), 5,
               "rank 3 never reported the request")
    assert not finished.is_set()  # 500 tokens take ~7 s at the simulator's dp rate
    assert len(running.findall(http_text(url + "/metrics"))) == 8
    assert finished.wait(30)
