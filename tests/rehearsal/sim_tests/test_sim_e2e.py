"""The walkthrough end to end with the real parts: etcd, Infera's router
(``python -m infera.server``) and Infera's worker wrapper (``python -m
infera.engine.sglang``, nodp flags) over the simulated engine.

One nodp worker serves the module until the SIGTERM test stops it; the dp variant's
test, after it, has the router to itself. Tests run in file order.
"""

import re
import threading
import time

import pytest

from sim_harness import (READY_LINE, Proc, captures, child_pids, free_port, http_json, http_text, infera_drains,
                         inflight, no_drain_args, process_gone, python_module, simulator_env, sse_events,
                         streamed_text, wait_until, wrapper_args)


class Worker:
    def __init__(self, process, port):
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.worker_id = f"127.0.0.1:{port}"

    def engine_pids(self):
        return child_pids(self.process.pid)

    def inflight(self):
        return inflight(http_text(self.url + "/metrics"))


@pytest.fixture(scope="module")
def worker(etcd, router, model_dir, dev_root, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("worker")
    port = free_port()
    # /metrics needs --enable-metrics: Infera appends it from v0.2.10 on; v0.1.1 passes it on to SGLang as given.
    command_env, argv = wrapper_args("nodp", model_dir, etcd, port, ["--enable-metrics"])
    process = Proc(python_module("infera.engine.sglang", argv),
                   {**simulator_env(dev_root, log_dir / "jit"), **command_env},
                   log_dir, "wrapper")
    try:
        router.wait_for_workers(1, timeout=60)
        # The router lists the worker as soon as the wrapper's put reaches etcd; the wrapper logs the registration
        # after the put returns (infera/common/registration.py), a moment later on a loaded machine.
        process.wait_for(f"registered with etcd as worker 127.0.0.1:{port}", timeout=30)
        yield Worker(process, port)
    finally:
        process.kill()


def chat(model_dir, content, **extra):
    return {"model": str(model_dir), "messages": [{"role": "user", "content": content}],
            **extra}


def test_engine_log_shows_cold_start_then_ready(worker):
    log = worker.process.stderr
    milestones = [
        "[simulated] throughput model: variant=nodp, levers: attention_backend=ok, "
        "fused_compress=ok",
        "Load weight begin. avail mem=",
        "Load weight end. elapsed=",
        "Initialize DeepSeekV4TokenToKVPool with max_num_reqs=",
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1, 2, 4, 8, 16,",
        "Capture target decode CUDA graph end. elapsed=",
        READY_LINE,
        f"registered with etcd as worker {worker.worker_id}",
    ]
    positions = [log.index(milestone) for milestone in milestones]
    assert positions == sorted(positions)
    sizes = [1, 2, 4, 8] + list(range(16, 129, 8))
    # SGLang captures the largest batch size first; the walkthrough caps it at 128.
    assert captures(log) == [(bs, done, len(sizes))
                             for done, bs in enumerate(reversed(sizes), start=1)]
    assert "Load weight end. elapsed=" in log and ", type=DeepseekV4ForCausalLM, avail mem=" in log
    assert "Setting KV cache dtype to fp8_e4m3 for DeepseekV4ForCausalLM." in log


def test_router_lists_the_worker(worker, router):
    workers = router.workers()
    assert [(entry["worker_id"], entry["url"]) for entry in workers] == [
        (worker.worker_id, worker.url)]
    assert workers[0]["engine"] == "sglang" and workers[0]["kv_block_size"] == 256
    assert router.get("/health") == (200, {"status": "ok", "active_workers": 1})


def test_chat_through_router_answers(worker, router, model_dir):
    """The walkthrough's verify request, and its streamed form."""
    status, body = router.post("/v1/chat/completions",
                               chat(model_dir, "1+1=?", max_tokens=32, temperature=0))
    assert status == 200, body
    assert "2" in body["choices"][0]["message"]["content"]
    assert body["usage"]["completion_tokens"] > 0
    _type, events, _arrivals = sse_events(router.url + "/v1/chat/completions",
                                          chat(model_dir, "1+1=?", stream=True))
    assert events[-1] == "[DONE]" and "2" in streamed_text(events)


def test_bench_stream_retokenizes_to_reported_count(worker, router, model_dir, tokenizer):
    """What sglang.bench_serving --backend sglang-oai sends; it re-encodes the text."""
    _type, events, _arrivals = sse_events(router.url + "/v1/completions", {
        "model": str(model_dir), "prompt": "the model serves tokens " * 50,
        "temperature": 0.0, "best_of": 1, "max_tokens": 300, "stream": True,
        "ignore_eos": True})
    reported = events[-2]["usage"]["completion_tokens"]
    retokenized = len(tokenizer.encode(streamed_text(events), add_special_tokens=False).ids)
    assert reported == 300
    assert abs(retokenized - reported) <= 0.1 * reported


def test_metrics_count_the_request_in_flight(worker, model_dir):
    assert worker.inflight() == 0
    finished = threading.Event()

    def long_request():
        http_json("POST", worker.url + "/v1/completions",
                  {"model": str(model_dir), "prompt": "hi", "max_tokens": 500,
                   "ignore_eos": True}, timeout=60)
        finished.set()

    threading.Thread(target=long_request, daemon=True).start()
    wait_until(lambda: worker.inflight() > 0 or finished.is_set(), 5,
               "the engine's /metrics never counted the request in flight")
    assert not finished.is_set()  # 500 tokens alone take ~6 s at the simulator's rate, many polls
    assert finished.wait(60)
    assert worker.inflight() == 0


def test_sigterm_deregisters_then_drains_or_cuts_as_the_installed_infera_does(worker, router, model_dir):
    """Last: SIGTERM to the wrapper revokes its lease first. Infera v0.2.10 and later then let the request in flight
    finish (their drain reads the engine's /metrics) before they stop the engine; v0.1.1 (the default stack's)
    SIGTERMs the engine's process group at once, and the request is cut, which is why the collection drains a
    v0.1.1 worker itself (roles/sglang_worker/tasks/drain.yml)."""
    engines = worker.engine_pids()
    assert len(engines) == 1
    results = []

    def request():
        try:
            results.append(sse_events(worker.url + "/v1/completions",
                                      {"model": str(model_dir), "prompt": "hi", "max_tokens": 800, "stream": True,
                                       "ignore_eos": True}))
        except Exception as error:  # noqa: BLE001 -- a cut stream: what v0.1.1 does to it
            results.append(error)

    thread = threading.Thread(target=request)
    thread.start()
    wait_until(lambda: worker.inflight() > 0, 5, "the request never reached the engine")
    signalled = time.monotonic()
    worker.process.terminate()
    router.wait_for_workers(0, timeout=5)
    thread.join(60)
    worker.process.wait_exit(45)
    wait_until(lambda: process_gone(engines[0]), 10, "the engine outlived the wrapper")
    log = worker.process.stderr
    assert re.search(rf"deregistered worker {worker.worker_id} \(lease \d+ revoked\)", log)
    if infera_drains():
        _type, events, arrivals = results[0]
        # ~9 s at the simulator's rate: Infera revokes the lease (an etcd write) before its drain's first look, and
        # the drain logs "engine idle" only if that look saw the request in flight (infera/engine/drain.py).
        assert events[-2]["usage"]["completion_tokens"] == 800
        assert arrivals[-1] > signalled
        assert "drain: engine idle for" in log
        assert log.index("deregistered worker") < log.index("drain: engine idle for")
    else:
        # The schedulers die of the group's SIGTERM: SGLang's watchdog names the crash, the stream ends short.
        outcome = results[0]
        done = (not isinstance(outcome, Exception)
                and any((event.get("usage") or {}).get("completion_tokens") == 800
                        for event in outcome[1] if isinstance(event, dict)))
        assert not done, "the request in flight finished: this Infera drains after all"
        assert "drain: engine idle" not in log
    assert router.get("/health") == (200, {"status": "ok", "active_workers": 0})


def test_walkthrough_dp_variant_serves_through_router(etcd, router, model_dir, dev_root,
                                                      tmp_path):
    """After the nodp worker is gone: the dp command as written (`--dp 8`, SGLang's
    --dp-size by prefix) registers one endpoint fronting 8 DP ranks and serves."""
    command_env, argv = wrapper_args("dp", model_dir, etcd, free_port(), no_drain_args())
    wrapper = Proc(python_module("infera.engine.sglang", argv),
                   {**simulator_env(dev_root, tmp_path / "jit"), **command_env},
                   tmp_path, "wrapper-dp")
    try:
        router.wait_for_workers(1, timeout=60)
        assert router.workers()[0]["dp_size"] == 8
        assert "dp_gatherv=ok" in wrapper.stderr and " DP0 TP0 EP0] " in wrapper.stderr
        status, body = router.post("/v1/chat/completions",
                                   chat(model_dir, "1+1=?", max_tokens=32, temperature=0))
        assert status == 200 and "2" in body["choices"][0]["message"]["content"]
        wrapper.terminate()
        router.wait_for_workers(0, timeout=10)
        wrapper.wait_exit(30)
    finally:
        wrapper.kill()
