"""Facts of the tuned DeepSeek-V4-Pro recipe that the simulated worker checks for."""

# The fused-compress lever: every variable, with exactly this value.
FUSED_COMPRESS_ENV = {
    "SGLANG_USE_AITER": "1",
    "AITER_BF16_FP8_MOE_BOUND": "0",
    "SGLANG_OPT_FP8_WO_A_GEMM": "0",
    "SGLANG_OPT_DEEPGEMM_HC_PRENORM": "0",
    "SGLANG_OPT_USE_AITER_INDEXER": "1",
    "SGLANG_OPT_USE_TOPK_V2": "0",
    "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH": "1",
    "SGLANG_OPT_USE_FUSED_PAGED_COMPRESS": "1",
    "SGLANG_HACK_FLASHMLA_BACKEND": "unified_kv_triton",
    "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "false",
    "SGLANG_ROCM_USE_MULTI_STREAM": "false",
    "SGLANG_OPT_USE_FUSED_COMPRESS": "true",
    "SGLANG_OPT_USE_FUSED_COMPRESS_TRITON": "true",
    "SGLANG_EAGER_INPUT_NO_COPY": "true",
    "SGLANG_USE_ROCM700A": "0",
    "SGLANG_OPT_USE_JIT_INDEXER_METADATA": "false",
    "SGLANG_OPT_USE_TILELANG_INDEXER": "false",
    "SGLANG_OPT_USE_TILELANG_MHC_PRE": "false",
    "SGLANG_OPT_USE_TILELANG_MHC_POST": "false",
}

TUNED_ATTENTION_BACKEND = "dsv4"
GATHERV_ENV = ("SGLANG_DP_USE_GATHERV", "1")

# SGLang's default capture list on a GPU with more than 160 GB (MI355X has 288 GB),
# before --cuda-graph-max-bs cuts it.
DEFAULT_CAPTURE_BATCH_SIZES = sorted(
    {1, 2, 4, 8} | set(range(16, 257, 8)) | set(range(256, 513, 16))
)


def fused_compress_missing(environ):
    """Names of fused-compress variables that are unset or set to another value."""
    return [name for name, value in FUSED_COMPRESS_ENV.items() if environ.get(name) != value]


def gatherv_enabled(environ):
    name, value = GATHERV_ENV
    return environ.get(name) == value


def capture_batch_sizes(explicit, max_bs):
    """The batch sizes SGLang captures a graph for, as its cuda-graph runner picks them."""
    if explicit:
        return sorted(set(explicit))
    sizes = list(DEFAULT_CAPTURE_BATCH_SIZES)
    if max_bs:
        sizes = [size for size in sizes if size <= max_bs]
        # SGLang extends the list in steps of 16 when the cap is above the default list.
        sizes += list(range(max(sizes), max_bs + 1, 16))
    return sorted(set(sizes))


def describe_levers(attention_backend, environ, dp_attention):
    """The levers as the throughput model sees them, and the log line that reports them."""
    # SGLang treats "compressed" as a deprecated alias of dsv4.
    attention_ok = attention_backend in (TUNED_ATTENTION_BACKEND, "compressed")
    missing = fused_compress_missing(environ)
    gatherv_ok = gatherv_enabled(environ)
    variant = "dp" if dp_attention else "nodp"
    fused = "ok" if not missing else f"MISSING ({', '.join(missing)})"
    line = (
        f"[simulated] throughput model: variant={variant}, levers: "
        f"attention_backend={'ok' if attention_ok else 'MISSING'}, fused_compress={fused}"
    )
    if dp_attention:
        line += f", dp_gatherv={'ok' if gatherv_ok else 'MISSING (SGLANG_DP_USE_GATHERV=1)'}"
    return {
        "variant": variant,
        "attention_ok": attention_ok,
        "fused_compress_ok": not missing,
        "gatherv_ok": gatherv_ok,
    }, line
