"""The cold start of a DeepSeek-V4-Pro worker: distributed init, weight load, KV pool,
CUDA-graph capture, with SGLang's log lines and the injected faults.

Every line is the one the SGLang release in INFERA_SIM_SGLANG_VERSION writes (read in its
wheel; tests/rehearsal/sglang_lines holds each release's templates and a test holds these
lines to them): sglang/srt/model_executor/model_runner.py (distributed init, weights, graph
capture; 0.5.17 moved them to srt/distributed/bootstrap.py and
model_runner_components/cuda_graph_setup.py), sglang/srt/mem_cache/deepseek_v4_memory_pool.py
(the DeepSeek-V4 KV pool) or memory_pool.py (any other model's), and the two tqdm bars.

Durations are those of a fast real start (INFERA_SIM_TIME_SCALE=1.0: about 25 s of
weights and 2-4 s per captured batch size) times the time scale. Memory figures are
modelled for a 288 GB MI355X.
"""

import os
import time

from . import bars, faults
from .checks import StartupError
from .disaggregation import captures_decode_graphs
from .recipe import capture_batch_sizes

GPU_MEMORY_GB = 288.0
AVAILABLE_AT_START_GB = 286.95
WEIGHTS_PER_GPU_GB = 96.3
CHECKPOINT_SHARDS = 64
WEIGHT_LOAD_SECONDS = 25.0
JIT_FILE_BYTES = 300 * 1024
# The decode graph runner SGLang picks on ROCm without a --cuda-graph-backend-decode
# (sglang/srt/model_executor/cuda_graph_config.py: full, breakable, tc_piecewise, disabled).
DECODE_GRAPH_BACKEND = "full"
PREFILL_GRAPH_DISABLED = (
    "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
    "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).")
# A hybrid sliding-window-attention model for SGLang (configs/model_config.py:1833-1854
# is_hybrid_swa_model; its SWA pool is the swa_size above).
SLIDING_WINDOW_MODEL = "DeepseekV4ForCausalLM"
# The capture line's token field: renamed in 0.5.17 (cuda_graph_setup.py capture_decode_graph).
CAPTURE_TOKENS_FIELD = {"0.5.15.post1": "num_tokens_per_bs", "0.5.17": "num_tokens_per_req"}


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

    def _wait_uninterrupted(self, seconds):
        """A wait the launcher makes whatever signal arrives (a dying engine does not stop)."""
        time.sleep(seconds * self.settings.time_scale)

    def run(self):
        """Return the KV-pool summary once the worker could serve; raise Stopped."""
        self.log.scheduler("Init torch distributed begin.")
        self._sleep(1.5)
        self.log.scheduler(f"Init torch distributed ends. elapsed={1.5 * self.settings.time_scale:.2f} s, "
                           f"mem usage={0.52:.2f} GB")
        self._load_weights()
        pool = self._allocate_kv_pool()
        # ModelRunner.init_cuda_graphs: the prefill graph first. On ROCm its default backend,
        # tc_piecewise, is always turned off ("non-CUDA hardware", server_args.py:3286-3288), and
        # the runner says so (model_executor/model_runner.py:2702-2707; 0.5.17:
        # model_runner_components/cuda_graph_setup.py:201-206). Then the decode graph, which a
        # prefill leg does not capture (disaggregation.apply_mode_rules).
        self.log.scheduler(PREFILL_GRAPH_DISABLED)
        if captures_decode_graphs(self.args):
            self._capture_graphs()
        if (self.args.disaggregation_mode == "decode"
                and self.args.disaggregation_decode_enable_radix_cache
                and self.model.architecture == SLIDING_WINDOW_MODEL):
            # The scheduler builds its cache after the model worker (graphs included), and a decode
            # radix cache cannot serve a hybrid SWA model (mem_cache/kv_cache_builder.py:182-190).
            faults.decode_radix_cache_on_swa(self.log)
        return pool

    def _load_weights(self):
        self.log.scheduler(f"Load weight begin. avail mem={self.available_gb:.2f} GB")
        started = time.monotonic()
        desc = "Loading safetensors checkpoint shards"
        self.log.progress(bars.completed_bar(desc, 0, CHECKPOINT_SHARDS, 0.0))
        progress_steps = 8
        for step in range(1, progress_steps + 1):
            self._sleep(WEIGHT_LOAD_SECONDS / progress_steps)
            done = CHECKPOINT_SHARDS * step // progress_steps
            if self.settings.fault == "crash_weight_load" and step == 3:
                # The bar's line is left open: the traceback follows on it, as in a real log.
                faults.crash_weight_load(self.log)
            self.log.progress(bars.completed_bar(desc, done, CHECKPOINT_SHARDS,
                                                 time.monotonic() - started),
                              end=step == progress_steps)
        self.available_gb -= WEIGHTS_PER_GPU_GB
        self.log.scheduler(
            f"Load weight end. elapsed={time.monotonic() - started:.2f} s, "
            f"type={self.model.architecture}, {self._quantization()}"
            f"avail mem={self.available_gb:.2f} GB, mem usage={WEIGHTS_PER_GPU_GB:.2f} GB."
        )

    def _quantization(self):
        """ModelConfig.get_quantization_config_log_str, with its ", " after it, or nothing."""
        quant = self.model.config.get("quantization_config") or {}
        if not quant:
            return ""
        text = f"quant={quant.get('quant_method', 'quantized')}"
        for field in ("bits", "quant_algo", "fmt"):
            if field in quant:
                text += f", {field}={quant[field]}"
        return text + ", "

    def _allocate_kv_pool(self):
        fraction = self.args.mem_fraction_static
        if fraction is None:
            # SGLang's default on a GPU above 160 GB: reserve 32 GB (+4 GB for DP-attention).
            reserved = 32 + (4 if self.args.enable_dp_attention else 0)
            fraction = round((GPU_MEMORY_GB - reserved) / GPU_MEMORY_GB, 3)
        kv_gb = fraction * GPU_MEMORY_GB - WEIGHTS_PER_GPU_GB
        if kv_gb <= 0:
            # sglang/srt/model_executor/pool_configurator.py (raised in the scheduler)
            message = "Not enough memory. Please try to increase --mem-fraction-static."
            if self.args.mem_fraction_static is not None:
                message += f" Current value: mem_fraction_static={self.args.mem_fraction_static}"
            raise StartupError("RuntimeError", message, real=True)
        kv_dtype = self.model.kv_cache_dtype
        bytes_per_token = 40_000 if kv_dtype.startswith("fp8") else 80_000
        tokens = int(kv_gb * 1e9 / bytes_per_token)
        self._sleep(1.0)
        self.available_gb -= kv_gb
        if self.model.architecture == "DeepseekV4ForCausalLM":
            self._log_deepseek_v4_pool(tokens)
        else:
            torch_dtype = "torch.float8_e4m3fn" if kv_dtype.startswith("fp8") else "torch.bfloat16"
            self.log.scheduler(
                f"KV Cache is allocated. dtype: {torch_dtype}, #tokens: {tokens}, "
                f"KV size: {kv_gb:.2f} GB"
            )
        self.log.scheduler(f"Memory pool end. avail mem={self.available_gb:.2f} GB")
        return {"max_total_num_tokens": tokens, "mem_fraction_static": fraction}

    def _log_deepseek_v4_pool(self, tokens):
        """DeepSeekV4TokenToKVPool's line: the SWA ring and the 1/4 and 1/128 compressed pools."""
        max_num_reqs = self.args.max_running_requests or 4096
        swa_size = int(tokens * (self.args.swa_full_tokens_ratio or 0.8))
        c4_size = tokens // 4
        c128_size = tokens // 128
        c4_logical_size = c128_size * 32
        self.log.scheduler(
            "Initialize DeepSeekV4TokenToKVPool with "
            f"max_num_reqs={max_num_reqs} swa_size={swa_size} c4_size={c4_size} "
            f"c4_logical_size={c4_logical_size} c128_size={c128_size} "
            f"c4_state_pool_size={max_num_reqs} c128_state_pool_size={max_num_reqs}"
        )

    def _capture_graphs(self):
        sizes = capture_batch_sizes(self.args.cuda_graph_bs_decode,
                                    self.args.cuda_graph_max_bs_decode)
        os.makedirs(self.settings.jit_dir, exist_ok=True)
        field = CAPTURE_TOKENS_FIELD[self.settings.sglang_version]
        self.log.scheduler(
            f"Capture target decode CUDA graph begin. backend={DECODE_GRAPH_BACKEND}, "
            f"{field}=1, bs={sizes}, avail mem={self.available_gb:.2f} GB"
        )
        started = time.monotonic()
        before_gb = self.available_gb
        total = len(sizes)
        # Only TP rank 0 draws the bar: created empty, then described before each capture.
        self.log.progress(bars.default_bar("", 0, total, 0.0))
        # SGLang captures the largest batch size first.
        for done, batch_size in enumerate(reversed(sizes), start=1):
            desc = f"Capturing batches (bs={batch_size} avail_mem={self.available_gb:.2f} GB)"
            self.log.progress(bars.default_bar(desc, done - 1, total, time.monotonic() - started))
            self._inject_capture_fault(done, total, batch_size)
            self._sleep(2.0 + 2.0 * batch_size / max(sizes))
            self._write_jit_module(batch_size)
            self.available_gb -= 0.02 + batch_size * 0.0004
            self.log.progress(bars.default_bar(desc, done, total, time.monotonic() - started),
                              end=done == total)
        self.log.scheduler(
            f"Capture target decode CUDA graph end. elapsed={time.monotonic() - started:.2f} s, "
            f"mem usage={before_gb - self.available_gb:.2f} GB, "
            f"avail mem={self.available_gb:.2f} GB."
        )

    def _inject_capture_fault(self, done, total, batch_size):
        fault = self.settings.fault
        if fault == "memory_access_fault" and done == max(1, total // 3):
            faults.memory_access_fault(self.log, self._wait_uninterrupted)
        if fault == "gpu_hang" and done == max(1, total // 2):
            faults.gpu_hang(self.log, self._wait_uninterrupted)
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
