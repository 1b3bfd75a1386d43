"""What SGLang refuses before loading anything: flag combinations, the model directory
and the GPU device nodes.

Each refusal is a ``StartupError`` whose ``kind`` is the exception class the real stack
raises, so the message reads like the last line of its traceback; only those marked ``real``
are SGLang's own words (tests/rehearsal/sim_tests/test_sglang_lines.py holds them to it).
"""

import json
import os


class StartupError(Exception):
    """``real``: SGLang raises this very message (read in its wheel); the others stand in for
    a failure the real stack meets in other words or later (in HIP, in transformers, in a
    kernel) and are printed as the simulator's own, ``[simulated] Kind: message``."""

    def __init__(self, kind, message, real=False):
        super().__init__(message)
        self.kind = kind
        self.real = real

    def __str__(self):
        return f"{self.kind}: {self.args[0]}" if self.args[0] else self.kind


def check_startup(args, environ, dev_root):
    """Refuse what the real stack refuses; return the model's config.json."""
    check_disaggregation(args)
    check_parallelism(args)
    check_memory(args)
    check_kv_events_config(args.kv_events_config)
    config = check_model_dir(args)
    check_devices(args, environ, dev_root)
    return config


def gpu_count(args):
    """DP-attention splits one TP group; plain data parallelism replicates it."""
    return args.tp_size if args.enable_dp_attention else args.tp_size * args.dp_size


def check_parallelism(args):
    tp, dp, ep = args.tp_size, args.dp_size, args.ep_size
    if tp < 1 or dp < 1 or ep < 1:
        raise StartupError("AssertionError",
                           "--tp-size, --dp-size and --ep-size must be >= 1")
    if args.enable_dp_attention:
        if dp <= 1:
            raise StartupError(
                "AssertionError",
                f"--enable-dp-attention needs --dp-size > 1 (got --dp-size {dp})",
            )
        if dp != tp:
            raise StartupError(
                "AssertionError",
                f"DeepSeek-V4 with --enable-dp-attention needs --dp-size equal to "
                f"--tp-size (got --dp-size {dp}, --tp-size {tp})",
            )
    if tp % ep != 0:
        raise StartupError("AssertionError",
                           f"--ep-size {ep} must divide --tp-size {tp}")


def check_disaggregation(args):
    """The refusals of SGLang's PD rules (arg_groups/pd_disaggregation_hook.py, in
    ServerArgs.__post_init__, so before anything loads); disaggregation.apply_mode_rules has the
    rest of them."""
    mode = args.disaggregation_mode
    backend = args.disaggregation_transfer_backend
    if backend == "mooncake_tcp":
        backend = "mooncake"  # pd_disaggregation_hook.py:20-27, before the checks below
    if mode == "decode" and args.disaggregation_decode_enable_radix_cache:
        if backend == "fake":  # pd_disaggregation_hook.py:36-40
            raise StartupError("ValueError", "--disaggregation-decode-enable-radix-cache is "
                               "incompatible with --disaggregation-transfer-backend fake", real=True)
        if args.speculative_algorithm is not None:  # pd_disaggregation_hook.py:41-46
            raise StartupError("ValueError", "--disaggregation-decode-enable-radix-cache is "
                               "incompatible with speculative decoding (--speculative-algorithm "
                               f"{args.speculative_algorithm})", real=True)
    if mode == "prefill" and backend == "fake":  # pd_disaggregation_hook.py:72-75
        raise StartupError("AssertionError",
                           "Prefill server does not support 'fake' as the transfer backend", real=True)
    if mode != "null" and backend not in ("mooncake", "fake"):
        raise StartupError("NotImplementedError",
                           f"--disaggregation-transfer-backend {backend}: the simulator models the "
                           "KV transfer of mooncake (and fake, on a decode leg) only")


def check_memory(args):
    if args.mem_fraction_static is not None and not 0 < args.mem_fraction_static < 1:
        raise StartupError(
            "ValueError",
            f"--mem-fraction-static must be between 0 and 1 (got {args.mem_fraction_static})",
        )
    if not 0 < args.swa_full_tokens_ratio <= 1:
        # sglang/srt/server_args.py
        raise StartupError("ValueError", "--swa-full-tokens-ratio should be in range (0, 1.0].",
                           real=True)


def check_kv_events_config(text):
    """SGLang reads --kv-events-config as a JSON object (Infera's wrapper passes one)."""
    if text is None:
        return
    try:
        config = json.loads(text)
    except ValueError as error:
        raise StartupError("json.decoder.JSONDecodeError", str(error)) from None
    if not isinstance(config, dict):
        raise StartupError("TypeError", "--kv-events-config must be a JSON object")


def read_model_config(model_path):
    """The model's config.json as transformers would find it, or the error it raises."""
    config_path = os.path.join(model_path, "config.json")
    if not os.path.isfile(config_path):
        raise StartupError(
            "OSError",
            f"Can't load the configuration of '{model_path}'. Make sure '{model_path}' "
            f"is the correct path to a directory containing a config.json file",
        )
    try:
        with open(config_path, encoding="utf-8") as config_file:
            config = json.load(config_file)
    except ValueError as error:
        raise StartupError("OSError", f"{config_path} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise StartupError("OSError", f"{config_path} does not hold a JSON object")
    return config


def check_model_dir(args):
    config = read_model_config(args.model_path)
    if "auto_map" in config and not args.trust_remote_code:
        raise StartupError(
            "ValueError",
            f"The repository for {args.model_path} contains custom code which must be "
            f"executed to correctly load the model. Please pass --trust-remote-code",
        )
    return config


def visible_gpus(environ, count):
    """GPU indices the worker may use: HIP_VISIBLE_DEVICES, or 0..count-1 when unset."""
    listed = environ.get("HIP_VISIBLE_DEVICES")
    if listed is None:
        return list(range(count))
    try:
        return [int(item) for item in listed.split(",") if item.strip()]
    except ValueError:
        raise StartupError(
            "RuntimeError", f"HIP_VISIBLE_DEVICES={listed!r} is not a list of GPU indices"
        ) from None


def check_devices(args, environ, dev_root):
    if not os.path.exists(os.path.join(dev_root, "kfd")):
        raise StartupError(
            "RuntimeError",
            f"No HIP GPUs are available: {os.path.join(dev_root, 'kfd')} is missing "
            f"(run the container with --device=/dev/kfd)",
        )
    needed = gpu_count(args)
    gpus = visible_gpus(environ, needed)
    if len(gpus) < needed:
        flags = f"--tp-size {args.tp_size}"
        if needed != args.tp_size:
            flags += f" --dp-size {args.dp_size} (without DP-attention)"
        raise StartupError(
            "RuntimeError",
            f"{flags} needs {needed} GPUs but HIP_VISIBLE_DEVICES lists {len(gpus)} "
            f"({environ.get('HIP_VISIBLE_DEVICES')})",
        )
    for gpu in gpus[:needed]:
        node = os.path.join(dev_root, "dri", f"renderD{128 + gpu}")
        if not os.path.exists(node):
            raise StartupError(
                "RuntimeError",
                f"HIP error: invalid device ordinal: GPU {gpu} has no render node {node} "
                f"(run the container with --device=/dev/dri)",
            )
