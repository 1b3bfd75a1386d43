"""The simulator's own knobs, read from INFERA_SIM_* environment variables.

INFERA_SIM_TIME_SCALE   cold-start durations multiplier (1.0 = about a minute and a half)
INFERA_SIM_DEV_ROOT     where /dev/kfd and /dev/dri/renderD* are looked for (default /dev)
INFERA_SIM_JIT_DIR      JIT cache that grows during graph capture
                        (default /sgl-workspace/aiter/aiter/jit)
INFERA_SIM_FAULT        fault to inject, one of FAULTS (empty = none); wrong_answers serves
                        at full speed but answers arithmetic questions wrong
INFERA_SIM_FAULT_AFTER  seconds from ready until exit_after_ready exits (default 5)
INFERA_SIM_FAULT_DELAY  seconds slow_responses waits before the first token (default 5)
INFERA_SIM_FAULT_COUNT  how many KV transfers kv_transfer fails (default 1), then they succeed
INFERA_SIM_SGLANG_VERSION  the SGLang release whose log lines the engine writes, one of
                        SGLANG_VERSIONS (default the walkthrough image's, the first)
INFERA_SIM_LOAD_DIR     where the engine publishes its load for the SIMULATED amd-smi's power
                        model (default /tmp/infera-sim/load; format: load_file.py)
"""

from dataclasses import dataclass

from .load_file import DEFAULT_DIR as DEFAULT_LOAD_DIR

FAULTS = (
    "crash_weight_load",
    "oom_graph_capture",
    "hang",
    "exit_after_ready",
    "slow_responses",
    "fail_responses",
    "memory_access_fault",
    "gpu_hang",
    "wrong_answers",
    "kv_transfer",
)


# The SGLang releases the simulator speaks for (tests/rehearsal/sglang_lines has each one's
# extract); the first is the one in the walkthrough's image (rocm/infera:sglang-v0.1.1).
SGLANG_VERSIONS = ("0.5.15.post1", "0.5.17")


class SettingsError(ValueError):
    """An INFERA_SIM_* variable holds a value the simulator cannot use."""


@dataclass(frozen=True)
class Settings:
    time_scale: float
    dev_root: str
    jit_dir: str
    fault: str
    fault_after: float
    fault_delay: float
    sglang_version: str = SGLANG_VERSIONS[0]
    fault_count: int = 1
    load_dir: str = DEFAULT_LOAD_DIR


def _number(environ, name, default):
    raw = environ.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < 0:
        raise SettingsError(f"{name}={raw!r} must not be negative")
    return value


def load_settings(environ):
    fault = environ.get("INFERA_SIM_FAULT", "").strip()
    if fault and fault not in FAULTS:
        raise SettingsError(
            f"INFERA_SIM_FAULT={fault!r} is not a known fault; choose from {', '.join(FAULTS)}"
        )
    version = environ.get("INFERA_SIM_SGLANG_VERSION", "").strip() or SGLANG_VERSIONS[0]
    if version not in SGLANG_VERSIONS:
        raise SettingsError(
            f"INFERA_SIM_SGLANG_VERSION={version!r} is not a version the simulator speaks; "
            f"choose from {', '.join(SGLANG_VERSIONS)}"
        )
    return Settings(
        time_scale=_number(environ, "INFERA_SIM_TIME_SCALE", 1.0),
        dev_root=environ.get("INFERA_SIM_DEV_ROOT") or "/dev",
        jit_dir=environ.get("INFERA_SIM_JIT_DIR") or "/sgl-workspace/aiter/aiter/jit",
        fault=fault,
        fault_after=_number(environ, "INFERA_SIM_FAULT_AFTER", 5.0),
        fault_delay=_number(environ, "INFERA_SIM_FAULT_DELAY", 5.0),
        sglang_version=version,
        fault_count=int(_number(environ, "INFERA_SIM_FAULT_COUNT", 1)),
        load_dir=environ.get("INFERA_SIM_LOAD_DIR") or DEFAULT_LOAD_DIR,
    )
