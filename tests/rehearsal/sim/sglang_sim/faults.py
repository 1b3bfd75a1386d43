"""The messages a failing SGLang-on-ROCm worker prints, for INFERA_SIM_FAULT.

Each function prints what the real stack prints at that point and then ends the process
with the exit status the real one ends with; log-watchers are meant to match these lines.
"""

import os
import random

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."


def _die(status):
    # os._exit: the serving threads die with the process, at once, as they do when the
    # real scheduler dies; nothing is cleaned up.
    os._exit(status)


def crash_weight_load(log, shard):
    log.scheduler(
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", '
        "line 2716, in run_scheduler_process\n"
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, "
        "pp_rank, dp_rank)\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/weight_utils.py", '
        "line 482, in safetensors_weights_iterator\n"
        "    with safe_open(st_file, framework=\"pt\") as f:\n"
        "safetensors_rust.SafetensorError: Error while deserializing header: "
        f"MetadataIncompleteBuffer (model-{shard:05d}-of-00064.safetensors)"
    )
    log.main(SIGQUIT_LINE)
    _die(1)


def oom_graph_capture(log, batch_size):
    log.scheduler(
        "Capture cuda graph failed: out of memory\n"
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. "
        f"GPU 0 has a total capacity of 287.98 GiB of which 1.21 GiB is free. "
        f"(while capturing bs={batch_size})\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
        "3. disable torch compile by not using --enable-torch-compile\n"
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)"
    )
    log.main(SIGQUIT_LINE)
    _die(1)


def memory_access_fault(log):
    agent = random.getrandbits(40)
    address = random.getrandbits(44) & ~0xFFF
    log.raw(
        f"Memory access fault by GPU node-2 (Agent handle: {agent:#x}) on address "
        f"{address:#x}. Reason: Page not present or supervisor privilege."
    )
    # The HSA runtime aborts the process: SIGABRT, shell status 134.
    _die(134)


def exit_after_ready(log):
    log.main(SIGQUIT_LINE)
    _die(1)
