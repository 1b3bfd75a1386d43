"""The cold start of a DeepSeek-V4-Pro worker: distributed init, weight load, KV pool,
CUDA-graph capture, with SGLang's log lines and the injected faults.

Durations are those of a fast real start (INFERA_SIM_TIME_SCALE=1.0: about 25 s of
weights and 2-4 s per captured batch size) times the time scale. Memory figures are
modelled for a 288 GB MI355X.
"""

import os
import time

from . import faults
from .checks import StartupError
from .recipe import capture_batch_sizes

GPU_MEMORY_GB = 288.0
AVAILABLE_AT_START_GB = 286.95
WEIGHTS_PER_GPU_GB = 96.3
CHECKPOINT_SHARDS = 64
WEIGHT_LOAD_SECONDS = 25.0
JIT_FILE_BYTES = 300 * 1024


class Stopped(Exception):
    """SIGTERM or SIGINT arrived during the cold start."""


class ColdStart:
    def __init__(self, args, settings, log, stop_event, model):
        self.args = args
        self.settings = settings
        self.log = log
        self.stop_event = stop_event
        self.model = model
        self.available_gb = AVAILABLE_AT_START_GB

    def _sleep(self, seconds):
        if self.stop_event.wait(seconds * self.settings.time_scale):
            raise Stopped()

    def run(self):
        """Return the KV-pool summary once the worker could serve; raise Stopped."""
        self.log.scheduler("Init torch distributed begin.")
        self._sleep(1.5)
        self.log.scheduler(f"Init torch distributed ends. mem usage={0.52:.2f} GB")
        self._load_weights()
        pool = self._allocate_kv_pool()
        if not self.args.disable_cuda_graph:
            self._capture_graphs()
        return pool

    def _load_weights(self):
        self.log.scheduler(f"Load weight begin. avail mem={self.available_gb:.2f} GB")
        started = time.monotonic()
        progress_steps = 8
        for step in range(1, progress_steps + 1):
            self._sleep(WEIGHT_LOAD_SECONDS / progress_steps)
            done = CHECKPOINT_SHARDS * step // progress_steps
            if self.settings.fault == "crash_weight_load" and step == 3:
                faults.crash_weight_load(self.log, done + 1)
            self.log.raw(
                f"Loading safetensors checkpoint shards: {100 * done // CHECKPOINT_SHARDS:3d}% "
                f"Completed | {done}/{CHECKPOINT_SHARDS}"
            )
        self.available_gb -= WEIGHTS_PER_GPU_GB
        self.log.scheduler(
            f"Load weight end. type={self.model.architecture}, dtype=torch.bfloat16, "
            f"avail mem={self.available_gb:.2f} GB, mem usage={WEIGHTS_PER_GPU_GB:.2f} GB. "
            f"elapsed={time.monotonic() - started:.2f} s"
        )

    def _allocate_kv_pool(self):
        fraction = self.args.mem_fraction_static
        if fraction is None:
            # SGLang's default on a GPU above 160 GB: reserve 32 GB (+4 GB for DP-attention).
            reserved = 32 + (4 if self.args.enable_dp_attention else 0)
            fraction = round((GPU_MEMORY_GB - reserved) / GPU_MEMORY_GB, 3)
        kv_gb = fraction * GPU_MEMORY_GB - WEIGHTS_PER_GPU_GB
        if kv_gb <= 0:
            raise StartupError(
                "RuntimeError",
                "Not enough memory. Please try to increase --mem-fraction-static.",
            )
        kv_dtype = self.model.kv_cache_dtype
        bytes_per_token = 40_000 if kv_dtype.startswith("fp8") else 80_000
        tokens = int(kv_gb * 1e9 / bytes_per_token)
        self._sleep(1.0)
        self.available_gb -= kv_gb
        self.log.scheduler(
            f"KV Cache is allocated. #tokens: {tokens}, KV size: {kv_gb:.2f} GB, "
            f"dtype: {kv_dtype}"
        )
        self.log.scheduler(f"Memory pool end. avail mem={self.available_gb:.2f} GB")
        return {"max_total_num_tokens": tokens, "mem_fraction_static": fraction}

    def _capture_graphs(self):
        sizes = capture_batch_sizes(self.args.cuda_graph_bs_decode,
                                    self.args.cuda_graph_max_bs_decode)
        os.makedirs(self.settings.jit_dir, exist_ok=True)
        self.log.scheduler(
            "Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={self.available_gb:.2f} GB"
        )
        started = time.monotonic()
        before_gb = self.available_gb
        total = len(sizes)
        # SGLang captures the largest batch size first.
        for done, batch_size in enumerate(reversed(sizes), start=1):
            self._inject_capture_fault(done, total, batch_size)
            self._sleep(2.0 + 2.0 * batch_size / max(sizes))
            self._write_jit_module(batch_size)
            self.available_gb -= 0.02 + batch_size * 0.0004
            self.log.raw(
                f"Capturing batches (bs={batch_size} avail_mem={self.available_gb:.2f}GB): "
                f"{done}/{total}"
            )
        self.log.scheduler(
            f"Capture cuda graph end. Time elapsed: {time.monotonic() - started:.2f} s. "
            f"mem usage={before_gb - self.available_gb:.2f} GB. "
            f"avail mem={self.available_gb:.2f} GB."
        )

    def _inject_capture_fault(self, done, total, batch_size):
        fault = self.settings.fault
        if fault == "memory_access_fault" and done == max(1, total // 3):
            faults.memory_access_fault(self.log)
        if fault == "oom_graph_capture" and done == max(1, total // 2):
            faults.oom_graph_capture(self.log, batch_size)
        if fault == "hang" and done == max(1, total // 2):
            # No line, no JIT file: only the absence of progress shows.
            self.stop_event.wait()
            raise Stopped()

    def _write_jit_module(self, batch_size):
        """One compiled module per batch size; a warm cache (same file) does not grow."""
        name = f"module_dsv4_graph_tp{self.args.tp_size}_bs{batch_size}.so"
        path = os.path.join(self.settings.jit_dir, name)
        if not os.path.exists(path):
            with open(path + ".tmp", "wb") as module:
                module.write(os.urandom(JIT_FILE_BYTES))
            os.replace(path + ".tmp", path)
