"""INFERA_SIM_FAULT: each fault prints the real stack's lines and ends as the README says.

The start-up faults run under Infera's real wrapper, which must give up before it
registers; the serving faults run on the engine alone, as the wrapper spawns it.
"""

import re
import signal
import time

import pytest

from sim_harness import READY_LINE, engine_args, free_port, http_json, no_drain_args, wrapper_args

SIGQUIT = "Received sigquit from a child process. It usually means the child failed."
# The launcher's kill_process_tree ends with SIGKILL to itself (sglang/srt/utils/common.py): the wrapper sees -9.
KILLED_ITSELF = "kill_process_tree called: parent_pid="
STARTUP_FAULTS = {
    "crash_weight_load": (-9, [
        "Scheduler hit an exception: Traceback (most recent call last):",
        "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
        SIGQUIT, KILLED_ITSELF,
    ]),
    "oom_graph_capture": (-9, [
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate",
        "During handling of the above exception, another exception occurred:",
        "Exception: Capture cuda graph failed: HIP out of memory.",
        "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
        SIGQUIT, KILLED_ITSELF,
    ]),
    # A HIP abort kills the scheduler (-6); the launcher finds it dead and exits 1.
    "memory_access_fault": (1, [
        "Memory access fault by GPU node-2 (Agent handle: 0x",
        "Reason: Page not present or supervisor privilege.",
        "Fatal Python error: Aborted",
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -6).",
    ]),
    "gpu_hang": (1, [
        "HW Exception by GPU node-2 (Agent handle: 0x",
        ") reason :GPU Hang",
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -6).",
    ]),
}


def start_wrapper(launch, sim_env, model_dir, etcd, fault, extra=()):
    command_env, argv = wrapper_args("nodp", model_dir, etcd, free_port(),
                                     [*no_drain_args(), *extra])
    env = {**sim_env, **command_env, "INFERA_SIM_FAULT": fault}
    return launch("infera.engine.sglang", argv, env)


def start_engine(launch, sim_env, model_dir, fault, **env):
    port = free_port()
    engine = launch("sglang.launch_server", engine_args("nodp", model_dir, port),
                    {**sim_env, "INFERA_SIM_FAULT": fault, **env})
    return engine, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("fault", list(STARTUP_FAULTS))
def test_startup_fault_stops_wrapper_before_registering(launch, sim_env, model_dir, etcd,
                                                        router, fault):
    status, lines = STARTUP_FAULTS[fault]
    wrapper = start_wrapper(launch, sim_env, model_dir, etcd, fault)
    # The wrapper tears down its own process group: it dies of its own SIGTERM.
    assert wrapper.wait_exit(30) == -signal.SIGTERM
    log = wrapper.stderr
    for line in lines:
        assert line in log, wrapper.describe()
    assert f"sglang subprocess exited with code {status} before reporting ready" in log
    assert READY_LINE not in log and "registered with etcd" not in log
    assert router.workers() == []


def test_engine_dying_after_ready_is_deregistered(launch, sim_env, model_dir, etcd, router):
    # The engine dies 8 s after its ready line: time for Infera's wrapper to register it first, also
    # when other tests load the machine (at 1 s, a slow registration raced the death and lost).
    wrapper = start_wrapper(launch, {**sim_env, "INFERA_SIM_FAULT_AFTER": "8"}, model_dir,
                            etcd, "exit_after_ready", ["--kv-events", "off"])
    router.wait_for_workers(1, timeout=60)
    router.wait_for_workers(0, timeout=30)
    assert wrapper.wait_exit(30) == 0
    log = wrapper.stderr
    assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in log
    assert "Subprocess scheduler_0 (pid=" in log and "crashed with exit code -9. Triggering SIGQUIT" in log
    assert "engine subprocess exited (code=-9); deregistering worker and shutting down" in log
    assert re.search(r"deregistered worker 127\.0\.0\.1:\d+ \(lease \d+ revoked\)", log)


def jit_size(directory):
    return sum(path.stat().st_size for path in directory.iterdir())


def test_hang_stops_all_progress(launch, sim_env, model_dir, tmp_path):
    engine, url = start_engine(launch, sim_env, model_dir, "hang")
    engine.wait_for("Capturing batches")
    # The simulator hangs before capture total // 2 (its JIT file is written before its bar's refresh), so that
    # refresh is the last: wait for it; a fixed sleep raced the captures still to come on a loaded machine.
    total = captures_total(engine.stderr)
    engine.wait_for(f"| {total // 2 - 1}/{total} [")
    log, size = engine.stderr, jit_size(tmp_path / "jit")
    time.sleep(1.0)
    assert engine.process.poll() is None
    assert engine.stderr == log and jit_size(tmp_path / "jit") == size
    assert "CUDA graph end" not in log
    # SGLang has no SIGTERM handler while it starts: the launcher dies of the signal, without a line.
    engine.terminate()
    assert engine.wait_exit() == -signal.SIGTERM
    assert engine.stderr == log


def captures_total(log):
    return int(re.search(r"Capturing batches \(bs=\d+ avail_mem=\S+ GB\):\s+\d+%\|[^|]*\| \d+/(\d+)", log).group(1))


def test_slow_responses_delay_the_first_token(launch, sim_env, model_dir):
    engine, url = start_engine(launch, sim_env, model_dir, "slow_responses",
                               INFERA_SIM_FAULT_DELAY="1.0")
    engine.wait_for(READY_LINE)
    started = time.monotonic()
    status, body = http_json("POST", url + "/v1/completions",
                             {"model": str(model_dir), "prompt": "hi", "max_tokens": 2})
    assert status == 200 and body["usage"]["completion_tokens"] == 2
    assert time.monotonic() - started >= 1.0


def test_fail_responses_answer_500(launch, sim_env, model_dir):
    engine, url = start_engine(launch, sim_env, model_dir, "fail_responses")
    engine.wait_for(READY_LINE)
    for path, body in (("/v1/completions", {"prompt": "hi"}), ("/generate", {"text": "hi"})):
        status, answer = http_json("POST", url + path, {"model": str(model_dir), **body})
        assert status == 500 and answer["error"]["type"] == "internal_error"
    assert http_json("GET", url + "/health")[0] == 200


def test_unknown_fault_is_refused(launch, sim_env, model_dir):
    engine, _url = start_engine(launch, sim_env, model_dir, "meteor_strike")
    assert engine.wait_exit() == 1
    assert "INFERA_SIM_FAULT='meteor_strike' is not a known fault" in engine.stderr


def test_sigterm_during_cold_start_ends_the_engine_by_the_signal(launch, sim_env, model_dir):
    engine, _url = start_engine(launch, {**sim_env, "INFERA_SIM_TIME_SCALE": "1"},
                                model_dir, "")
    engine.wait_for("Load weight begin")
    engine.terminate()
    assert engine.wait_exit() == -signal.SIGTERM
