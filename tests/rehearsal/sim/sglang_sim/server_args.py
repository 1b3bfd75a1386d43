"""SGLang's ``ServerArgs`` without torch: the flags the DeepSeek-V4-Pro mixed and PD recipes
and Infera's worker wrapper use, spelled, aliased, typed and defaulted as in SGLang 0.5.15
(python/sglang/srt/server_args.py, the release Infera's engine_metrics was verified on).

Only these flags exist, so any other one fails argparse's way: exit 2 with
``error: unrecognized arguments: ...``. Abbreviations stay on, as in SGLang, whose
parsers (its own ``sglang serve`` one and the one Infera builds) keep argparse's
defaults: ``--dp 8`` is ``--dp-size 8`` by prefix (SGLang has no ``--dp`` alias, and
``--dp-size`` is its only flag starting ``--dp``), ``--tp 8`` is ``--tp-size 8``.

Validation SGLang does on the resolved arguments (dp-attention, ep-size, memory
fraction) happens when the engine starts (``checks.py``), not here, so that Infera's
wrapper parses exactly what the real module would let through.
"""

import argparse
import dataclasses
import logging
from typing import List, Optional

ATTENTION_BACKEND_CHOICES = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "dsv4", "compressed",
    "cutlass_mla", "fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
    "tokenspeed_mla", "trtllm_mha", "dual_chunk_flash_attn", "aiter", "wave", "intel_amx",
    "ascend", "intel_xpu",
)
KV_CACHE_DTYPE_CHOICES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
MOE_A2A_BACKEND_CHOICES = (
    "none", "deepep", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer", "megamoe",
)
DISAGGREGATION_MODE_CHOICES = ("null", "prefill", "decode")
DISAGG_TRANSFER_BACKEND_CHOICES = ("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp")
HICACHE_STORAGE_BACKEND_CHOICES = (
    "file", "mooncake", "hf3fs", "nixl", "aibrix", "dynamic", "eic", "simm", "mori",
)

# SGLang's deprecation warnings come from this module, in bold yellow.
_deprecation_logger = logging.getLogger("sglang.srt.arg_groups.argparse_actions")


def _warn_deprecated(option_string, new_flag):
    _deprecation_logger.warning(
        "\033[1;33m'%s' is deprecated and will be removed in a future release. "
        "Use '%s' instead.\033[0m", option_string, new_flag)


class DeprecatedAliasStoreAction(argparse.Action):
    """An old spelling that still stores into the new flag's field, with a warning."""

    def __init__(self, option_strings, dest, new_flag=None, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        _warn_deprecated(option_string, self.new_flag)
        setattr(namespace, self.dest, values)


class DeprecatedStoreTrueAction(argparse.Action):
    """A deprecated switch that still takes effect, with a warning."""

    def __init__(self, option_strings, dest, new_flag=None, default=False, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=0, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        _warn_deprecated(option_string, self.new_flag)
        setattr(namespace, self.dest, True)


@dataclasses.dataclass
class ServerArgs:
    # Model and tokenizer
    model_path: str
    tokenizer_path: Optional[str] = None
    trust_remote_code: bool = False
    context_length: Optional[int] = None
    kv_cache_dtype: str = "auto"
    random_seed: Optional[int] = None
    # HTTP server, logging and metrics
    host: str = "127.0.0.1"
    port: int = 30000
    served_model_name: Optional[str] = None
    log_level: str = "info"
    enable_metrics: bool = False
    kv_events_config: Optional[str] = None
    watchdog_timeout: float = 300
    # Parallelism
    tp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    enable_dp_attention: bool = False
    nnodes: int = 1
    node_rank: int = 0
    # Memory and scheduling
    mem_fraction_static: Optional[float] = None
    max_running_requests: Optional[int] = None
    chunked_prefill_size: Optional[int] = None
    # server_args.py:663 (SGLang parses it with human_readable_int, "16k" too; here a plain int)
    max_prefill_tokens: int = 16384
    page_size: Optional[int] = None
    swa_full_tokens_ratio: float = 0.8
    disable_radix_cache: bool = False
    enable_prefill_delayer: bool = False
    prefill_delayer_max_delay_ms: Optional[float] = None
    # Kernels
    attention_backend: Optional[str] = None
    disable_shared_experts_fusion: bool = False
    moe_a2a_backend: str = "none"
    # CUDA graphs
    cuda_graph_max_bs_decode: Optional[int] = None
    cuda_graph_bs_decode: Optional[List[int]] = None
    disable_cuda_graph: bool = False
    # Speculative decoding
    speculative_algorithm: Optional[str] = None
    # PD disaggregation ("null" is SGLang's mixed mode)
    disaggregation_mode: str = "null"
    disaggregation_transfer_backend: str = "mooncake"
    disaggregation_bootstrap_port: int = 8998
    disaggregation_ib_device: Optional[str] = None
    disaggregation_decode_enable_radix_cache: bool = False
    # Hierarchical cache (read by Infera's hicache_validate)
    enable_hierarchical_cache: bool = False
    hicache_ratio: float = 2.0
    hicache_size: int = 0
    hicache_storage_backend: Optional[str] = None
    hicache_storage_backend_extra_config: Optional[str] = None

    def __post_init__(self):
        # As SGLang resolves them: both name the model when not given.
        if self.tokenizer_path is None:
            self.tokenizer_path = self.model_path
        if self.served_model_name is None:
            self.served_model_name = self.model_path

    @staticmethod
    def add_cli_args(parser):
        for names, options in _FLAGS:
            parser.add_argument(*names, **options)

    @classmethod
    def from_cli_args(cls, args):
        return cls(**{field.name: getattr(args, field.name)
                      for field in dataclasses.fields(cls)})


def _value(flag_type, field, **extra):
    return {"type": flag_type, "default": getattr(ServerArgs, field, None), **extra}


def _switch():
    return {"action": "store_true"}


_FLAGS = (
    (("--model-path", "--model"), {"type": str, "required": True}),
    (("--tokenizer-path",), _value(str, "tokenizer_path")),
    (("--trust-remote-code",), _switch()),
    (("--context-length",), _value(int, "context_length")),
    (("--kv-cache-dtype",), _value(str, "kv_cache_dtype", choices=KV_CACHE_DTYPE_CHOICES)),
    (("--random-seed",), _value(int, "random_seed")),
    (("--host",), _value(str, "host")),
    (("--port",), _value(int, "port")),
    (("--served-model-name",), _value(str, "served_model_name")),
    (("--log-level",), _value(str, "log_level")),
    (("--enable-metrics",), _switch()),
    (("--kv-events-config",), _value(str, "kv_events_config")),
    (("--watchdog-timeout",), _value(float, "watchdog_timeout")),
    (("--tp-size", "--tensor-parallel-size"), _value(int, "tp_size")),
    (("--dp-size", "--data-parallel-size"), _value(int, "dp_size")),
    (("--ep-size", "--expert-parallel-size", "--ep"), _value(int, "ep_size")),
    (("--enable-dp-attention",), _switch()),
    (("--nnodes",), _value(int, "nnodes")),
    (("--node-rank",), _value(int, "node_rank")),
    (("--mem-fraction-static",), _value(float, "mem_fraction_static")),
    (("--max-running-requests",), _value(int, "max_running_requests")),
    (("--chunked-prefill-size",), _value(int, "chunked_prefill_size")),
    (("--max-prefill-tokens",), _value(int, "max_prefill_tokens")),
    (("--page-size",), _value(int, "page_size")),
    (("--swa-full-tokens-ratio",), _value(float, "swa_full_tokens_ratio")),
    (("--disable-radix-cache",), _switch()),
    (("--enable-prefill-delayer",), _switch()),
    (("--prefill-delayer-max-delay-ms",), _value(float, "prefill_delayer_max_delay_ms")),
    (("--attention-backend",),
     _value(str, "attention_backend", choices=ATTENTION_BACKEND_CHOICES)),
    (("--disable-shared-experts-fusion",), _switch()),
    (("--moe-a2a-backend",), _value(str, "moe_a2a_backend", choices=MOE_A2A_BACKEND_CHOICES)),
    (("--cuda-graph-max-bs-decode",), _value(int, "cuda_graph_max_bs_decode")),
    (("--cuda-graph-bs-decode",), _value(int, "cuda_graph_bs_decode", nargs="+")),
    (("--cuda-graph-max-bs",),
     {"type": int, "action": DeprecatedAliasStoreAction, "dest": "cuda_graph_max_bs_decode",
      "new_flag": "--cuda-graph-max-bs-decode"}),
    (("--cuda-graph-bs",),
     {"type": int, "nargs": "+", "action": DeprecatedAliasStoreAction,
      "dest": "cuda_graph_bs_decode", "new_flag": "--cuda-graph-bs-decode"}),
    (("--disable-cuda-graph",),
     {"action": DeprecatedStoreTrueAction,
      "new_flag": "--cuda-graph-backend-{decode,prefill}=disabled"}),
    (("--speculative-algorithm",), _value(str, "speculative_algorithm")),
    (("--disaggregation-mode",),
     _value(str, "disaggregation_mode", choices=DISAGGREGATION_MODE_CHOICES)),
    (("--disaggregation-transfer-backend",),
     _value(str, "disaggregation_transfer_backend", choices=DISAGG_TRANSFER_BACKEND_CHOICES)),
    (("--disaggregation-bootstrap-port",), _value(int, "disaggregation_bootstrap_port")),
    (("--disaggregation-ib-device",), _value(str, "disaggregation_ib_device")),
    (("--disaggregation-decode-enable-radix-cache",), _switch()),
    (("--enable-hierarchical-cache",), _switch()),
    (("--hicache-ratio",), _value(float, "hicache_ratio")),
    (("--hicache-size",), _value(int, "hicache_size")),
    (("--hicache-storage-backend",),
     _value(str, "hicache_storage_backend", choices=HICACHE_STORAGE_BACKEND_CHOICES)),
    (("--hicache-storage-backend-extra-config",),
     _value(str, "hicache_storage_backend_extra_config")),
)


def prepare_server_args(argv):
    """Parse a ``sglang serve`` / ``launch_server`` command line as SGLang does."""
    # SGLang's parser (sglang/srt/server_args.py prepare_server_args: prog "sglang serve").
    # argparse prints the usage of every flag before its error; the simulator knows only some
    # of SGLang's flags, so its usage line says so instead of passing for SGLang's.
    parser = argparse.ArgumentParser(
        prog="sglang serve",
        usage="[simulated] sglang serve [the simulator's subset of SGLang's flags]")
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(argv))
