"""How a failing SGLang-on-ROCm worker ends, for INFERA_SIM_FAULT, as the released code does it.

Read in the SGLang wheels (0.5.15.post1 and 0.5.17 alike):
- A scheduler that raises logs ``Scheduler hit an exception: <traceback>``
  (sglang/srt/managers/scheduler.py run_scheduler_process) and sends SIGQUIT to its parent.
- The launcher's handler logs ``Received sigquit from a child process. It usually means the
  child failed.`` and calls ``kill_process_tree(os.getpid())`` (sglang/srt/entrypoints/engine.py),
  which logs ``kill_process_tree called: ...`` (sglang/srt/utils/common.py), SIGKILLs every
  child and then itself: whoever spawned the launcher sees it killed by signal 9 (-9, or 137
  in a shell), not an exit status.
- A graph capture that fails re-raises as ``Capture cuda graph failed: <error>`` with SGLang's
  advice (sglang/srt/model_executor/runner/decode_cuda_graph_runner.py), so the traceback
  shows PyTorch's out-of-memory error first, then the re-raise.
- A GPU fault is the HIP runtime's: ROCr prints its line and calls abort() in the scheduler
  (ROCm rocr-runtime runtime.cpp VMFaultHandler / HwExceptionHandler); faulthandler (enabled
  in every scheduler) writes ``Fatal Python error: Aborted`` and the stack. During the launch
  the launcher finds the scheduler dead (exit code -6), kills the rest of its tree and exits 1
  with ``RuntimeError: Rank 0 scheduler died during initialization ...``
  (sglang/srt/entrypoints/engine.py _scheduler_died_error).
- A scheduler that dies while serving is seen by the launcher's subprocess watchdog
  (sglang/srt/utils/watchdog.py), which SIGQUITs the launcher; its running-phase handler
  (sglang/srt/managers/tokenizer_manager.py) logs and kills the tree, itself last (-9).
- A Mooncake transfer that fails (INFERA_SIM_FAULT=kv_transfer on a prefill leg, the next
  INFERA_SIM_FAULT_COUNT transfers) is the prefill's "Session ... failed." and a 500 on both legs;
  disaggregation.py (PrefillLeg._send_failed) has its texts.
Modelled: the plain-TP path (a launcher parent). With DP-attention SGLang's parent is its data
parallel controller and the launcher ends with exit 1 instead (engine.py
_wait_for_scheduler_ready); the simulator takes the TP path for both variants.
"""

import os
import random
import signal
import threading

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
SCHEDULER = "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py"
ENGINE = "/sgl-workspace/sglang/python/sglang/srt/entrypoints/engine.py"
LAUNCH_SERVER = "/sgl-workspace/sglang/python/sglang/launch_server.py"
RUNNER = "/sgl-workspace/sglang/python/sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"
ADVICE = (
    # sglang/srt/model_executor/runner_backend_utils/__init__.py CUDA_GRAPH_CAPTURE_FAILED_MSG
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)
# Only one ending ends the process; the serving threads must not write after it.
ENDING = threading.Lock()


def kill_process_tree(log):
    """sglang/srt/utils/common.py kill_process_tree(os.getpid()): its line, then SIGKILL to
    the launcher itself (its scheduler child follows its parent, as PR_SET_PDEATHSIG makes it)."""
    pid = os.getpid()
    log.main(f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}")
    os.kill(pid, signal.SIGKILL)


def kill_tree(log):
    """The launcher's SIGQUIT handler: the sigquit line, then kill_process_tree on itself."""
    log.main(SIGQUIT_LINE)
    kill_process_tree(log)


def scheduler_exception(log, traceback_text):
    ENDING.acquire()
    log.scheduler("Scheduler hit an exception: " + traceback_text)
    kill_tree(log)


def frame(path, line, function, code):
    return f'  File "{path}", line {line}, in {function}\n    {code}\n'


def crash_weight_load(log):
    scheduler_exception(log, (
        "Traceback (most recent call last):\n"
        + frame(SCHEDULER, 4312, "run_scheduler_process",
                "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, "
                "pp_rank, dp_rank)")
        + frame("/sgl-workspace/sglang/python/sglang/srt/model_loader/weight_utils.py", 971,
                "safetensors_weights_iterator", 'with safe_open(st_file, framework="pt") as f:')
        + "safetensors_rust.SafetensorError: Error while deserializing header: "
        "MetadataIncompleteBuffer\n"
    ))


def oom_graph_capture(log, batch_size):
    del batch_size  # the bar already says which batch size was being captured
    oom = ("HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "287.98 GiB of which 1.21 GiB is free. Of the allocated memory 270.11 GiB is "
           "allocated by PyTorch, with 3.02 GiB allocated in private pools (e.g., HIP Graphs), "
           "and 1.10 GiB is reserved by PyTorch but unallocated. If reserved but unallocated "
           "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
           "avoid fragmentation.  See documentation for Memory Management  "
           "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    scheduler_exception(log, (
        "Traceback (most recent call last):\n"
        + frame(RUNNER, 363, "__init__", "self.capture()")
        + frame(RUNNER, 745, "_capture_one_stream", "graph, output_buffers = self.capture_one_batch_size(bs)")
        + f"torch.OutOfMemoryError: {oom}\n"
        "\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        + frame(SCHEDULER, 4312, "run_scheduler_process",
                "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, "
                "pp_rank, dp_rank)")
        + frame(RUNNER, 365, "__init__", "raise Exception(")
        + f"Exception: Capture cuda graph failed: {oom}\n{ADVICE}"
    ))


def decode_radix_cache_on_swa(log):
    """A decode leg with --disaggregation-decode-enable-radix-cache on a hybrid-SWA model (what
    Infera's wrapper appends to a mooncake decode worker unless --no-enable-kv-events): the
    scheduler's cache build raises once the model is loaded and its graphs captured
    (managers/scheduler.py:430 -> mem_cache/kv_cache_builder.py:182-190), then SGLang's usual end."""
    builder = "/sgl-workspace/sglang/python/sglang/srt/mem_cache/kv_cache_builder.py"
    scheduler_exception(log, (
        "Traceback (most recent call last):\n"
        + frame(SCHEDULER, 4325, "run_scheduler_process", "scheduler = Scheduler(")
        + frame(SCHEDULER, 430, "__init__", "result = kv_cache_builder.build_kv_cache(")
        + frame(builder, 187, "build_kv_cache", "raise ValueError(")
        + "ValueError: --disaggregation-decode-enable-radix-cache is incompatible with sliding "
        "window attention (SWA) models\n"
    ))


def _hip_abort(log, line, wait):
    """ROCr's line and abort() in the scheduler, during the launch: the launcher finds its
    scheduler dead at its next look (every 5 s, engine.py _wait_for_scheduler_ready), kills
    the rest of its tree and exits 1 with the RuntimeError's traceback."""
    ENDING.acquire()
    log.raw(line)
    log.raw("Fatal Python error: Aborted")
    log.raw("")
    log.raw(f"Current thread {random.getrandbits(47):#018x} (most recent call first):")
    log.raw(f'  File "{RUNNER}", line 745 in _capture_one_stream')
    log.raw(f'  File "{SCHEDULER}", line 4312 in run_scheduler_process')
    wait(5.0)
    pid = os.getpid()
    log.main(f"kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}")
    log.raw(
        "Traceback (most recent call last):\n"
        + frame(LAUNCH_SERVER, 70, "<module>", "run_server(server_args)")
        + frame(ENGINE, 1376, "_wait_for_scheduler_ready", "raise _scheduler_died_error(rank, proc)")
        + "RuntimeError: Rank 0 scheduler died during initialization (exit code: -6). If exit code "
        "is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."
    )
    os._exit(1)


def memory_access_fault(log, wait):
    agent = random.getrandbits(40)
    address = random.getrandbits(44) & ~0xFFF
    _hip_abort(log, f"Memory access fault by GPU node-2 (Agent handle: {agent:#x}) on address "
                    f"{address:#x}. Reason: Page not present or supervisor privilege.", wait)


def gpu_hang(log, wait):
    _hip_abort(log, f"HW Exception by GPU node-2 (Agent handle: {random.getrandbits(40):#x}) "
                    "reason :GPU Hang", wait)
