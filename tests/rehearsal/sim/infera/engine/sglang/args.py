"""Command line of ``python -m infera.engine.sglang``.

The flags are the walkthrough's (both variants) plus the real SGLang aliases and extras a
user may add. Abbreviations are refused: the simulator knows fewer flags than SGLang, so
a prefix it would accept might be ambiguous, and so rejected, on the real command.
"""

import argparse

# SGLang's --attention-backend choices; "compressed" is its deprecated alias of dsv4.
ATTENTION_BACKENDS = (
    "triton", "torch_native", "flex_attention", "dsa", "nsa", "dsv4", "compressed",
    "cutlass_mla", "fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
    "trtllm_mha", "dual_chunk_flash_attn", "aiter", "wave", "intel_amx", "ascend",
    "intel_xpu",
)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m infera.engine.sglang",
        description="Infera's SGLang worker (simulated: no GPU, modelled throughput).",
        allow_abbrev=False,
    )
    model = parser.add_argument_group("model")
    model.add_argument("--model-path", required=True)
    model.add_argument("--served-model-name")
    model.add_argument("--trust-remote-code", action="store_true")
    model.add_argument("--context-length", type=int)
    model.add_argument("--kv-cache-dtype", choices=("auto", "fp8_e4m3", "fp8_e5m2", "bf16"),
                       default="fp8_e4m3", help="Infera's default is fp8_e4m3")
    model.add_argument("--random-seed", type=int)

    serving = parser.add_argument_group("serving and discovery")
    serving.add_argument("--host", default="127.0.0.1")
    serving.add_argument("--port", type=int, default=30000)
    serving.add_argument("--advertise-host",
                         help="address the router reaches this worker at (default: --host)")
    serving.add_argument("--etcd-endpoint")
    # The defaults are the production plane, which the walkthrough's three dev flags
    # override; the simulator only has the dev plane.
    serving.add_argument("--discovery-backend", choices=("etcd", "kubernetes"),
                         default="kubernetes")
    serving.add_argument("--request-transport", choices=("http", "nats"), default="nats")
    serving.add_argument("--kv-event-transport", choices=("zmq", "nats"), default="nats")
    serving.add_argument("--kv-events", choices=("on", "off"), default="on")
    serving.add_argument("--log-level", default="info")
    serving.add_argument("--watchdog-timeout", type=float, default=300.0)

    parallel = parser.add_argument_group("parallelism")
    parallel.add_argument("--tp-size", "--tensor-parallel-size", "--tp", dest="tp_size",
                          type=int, default=1)
    parallel.add_argument("--dp", "--dp-size", "--data-parallel-size", dest="dp",
                          type=int, default=1)
    parallel.add_argument("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size",
                          type=int, default=1)
    parallel.add_argument("--enable-dp-attention", action="store_true")

    runtime = parser.add_argument_group("memory, scheduling and kernels")
    runtime.add_argument("--attention-backend", choices=ATTENTION_BACKENDS)
    runtime.add_argument("--disable-radix-cache", action="store_true")
    runtime.add_argument("--page-size", type=int, default=1)
    runtime.add_argument("--swa-full-tokens-ratio", type=float, default=0.8)
    runtime.add_argument("--disable-shared-experts-fusion", action="store_true")
    runtime.add_argument("--mem-fraction-static", type=float)
    runtime.add_argument("--chunked-prefill-size", type=int)
    runtime.add_argument("--max-running-requests", type=int)
    runtime.add_argument("--enable-prefill-delayer", action="store_true")
    runtime.add_argument("--prefill-delayer-max-delay-ms", type=int)
    runtime.add_argument("--cuda-graph-max-bs", type=int)
    runtime.add_argument("--cuda-graph-bs", type=int, nargs="+")
    runtime.add_argument("--disable-cuda-graph", action="store_true")
    return parser


def parse_args(argv=None):
    return build_parser().parse_args(argv)
