"""INFERA_SIM_FAULT: each fault prints the real stack's message and ends as it would."""

import re
import time

from sim_harness import READY_LINE, http_json

SIGQUIT = "Received sigquit from a child process. It usually means the child failed."


def test_crash_during_weight_load(start_worker):
    worker, _url = start_worker(env={"INFERA_SIM_FAULT": "crash_weight_load"})
    assert worker.wait_exit() == 1
    log = worker.stdout
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "safetensors_rust.SafetensorError" in log
    assert SIGQUIT in log
    assert "Load weight end" not in log


def test_oom_during_graph_capture(start_worker):
    worker, _url = start_worker(env={"INFERA_SIM_FAULT": "oom_graph_capture"})
    assert worker.wait_exit() == 1
    log = worker.stdout
    assert "Capture cuda graph failed: out of memory" in log
    assert "torch.OutOfMemoryError: HIP out of memory. Tried to allocate" in log
    assert "Capturing batches" in log and "Capture cuda graph end" not in log


def test_memory_access_fault_aborts(start_worker):
    worker, _url = start_worker(env={"INFERA_SIM_FAULT": "memory_access_fault"})
    assert worker.wait_exit() == 134
    assert re.search(r"Memory access fault by GPU node-2 \(Agent handle: 0x[0-9a-f]+\) on "
                     r"address 0x[0-9a-f]+\. Reason: Page not present or supervisor "
                     r"privilege\.", worker.stdout)
    assert READY_LINE not in worker.stdout


def jit_size(directory):
    return sum(path.stat().st_size for path in directory.iterdir())


def test_hang_stops_all_progress(start_worker, tmp_path):
    worker, _url = start_worker(env={"INFERA_SIM_FAULT": "hang"})
    worker.wait_for("Capturing batches")
    time.sleep(1.5)  # far longer than the rest of the capture would take
    log, size = worker.stdout, jit_size(tmp_path / "jit")
    time.sleep(1.0)
    assert worker.process.poll() is None
    assert worker.stdout == log and jit_size(tmp_path / "jit") == size
    assert "Capture cuda graph end" not in log
    assert worker.terminate() == 0


def test_slow_responses_delay_first_token(start_worker, model_dir):
    worker, url = start_worker(env={"INFERA_SIM_FAULT": "slow_responses",
                                    "INFERA_SIM_FAULT_DELAY": "1.0"})
    worker.wait_for(READY_LINE)
    started = time.monotonic()
    status, body = http_json("POST", url + "/v1/completions",
                             {"model": str(model_dir), "prompt": "hi", "max_tokens": 2})
    assert status == 200 and body["usage"]["completion_tokens"] == 2
    assert time.monotonic() - started >= 1.0


def test_fail_responses_give_500_and_router_502(router, start_worker, model_dir):
    worker, url = start_worker(env={"INFERA_SIM_FAULT": "fail_responses"})
    worker.wait_for(READY_LINE)
    request = {"model": str(model_dir), "prompt": "hi", "max_tokens": 2}
    status, body = http_json("POST", url + "/v1/completions", request)
    assert status == 500 and body["error"]["type"] == "internal_error"
    router.wait_for_workers(1)
    status, body = router.post("/v1/completions", request)
    assert status == 502
    assert body["error"]["type"] == "bad_gateway" and "HTTP 500" in body["error"]["message"]
