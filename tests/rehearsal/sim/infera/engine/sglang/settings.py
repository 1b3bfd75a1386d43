"""The simulator's own knobs, read from INFERA_SIM_* environment variables.

INFERA_SIM_TIME_SCALE   cold-start durations multiplier (1.0 = about a minute and a half)
INFERA_SIM_DEV_ROOT     where /dev/kfd and /dev/dri/renderD* are looked for (default /dev)
INFERA_SIM_JIT_DIR      JIT cache that grows during graph capture
                        (default /sgl-workspace/aiter/aiter/jit)
INFERA_SIM_LEASE_TTL    etcd lease TTL in seconds (default 10)
INFERA_SIM_FAULT        fault to inject, one of FAULTS (empty = none)
INFERA_SIM_FAULT_AFTER  seconds from ready until exit_after_ready exits (default 5)
INFERA_SIM_FAULT_DELAY  seconds slow_responses waits before the first token (default 5)
"""

from dataclasses import dataclass

FAULTS = (
    "crash_weight_load",
    "oom_graph_capture",
    "hang",
    "exit_after_ready",
    "slow_responses",
    "fail_responses",
    "memory_access_fault",
)


class SettingsError(ValueError):
    """An INFERA_SIM_* variable holds a value the simulator cannot use."""


@dataclass(frozen=True)
class Settings:
    time_scale: float
    dev_root: str
    jit_dir: str
    lease_ttl: int
    fault: str
    fault_after: float
    fault_delay: float


def _number(environ, name, default, kind=float):
    raw = environ.get(name, "")
    if raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < 0:
        raise SettingsError(f"{name}={raw!r} must not be negative")
    return value


def _lease_ttl(environ):
    ttl = _number(environ, "INFERA_SIM_LEASE_TTL", 10, int)
    if ttl < 1:
        raise SettingsError("INFERA_SIM_LEASE_TTL must be at least 1 second")
    return ttl


def load_settings(environ):
    fault = environ.get("INFERA_SIM_FAULT", "").strip()
    if fault and fault not in FAULTS:
        raise SettingsError(
            f"INFERA_SIM_FAULT={fault!r} is not a known fault; choose from {', '.join(FAULTS)}"
        )
    return Settings(
        time_scale=_number(environ, "INFERA_SIM_TIME_SCALE", 1.0),
        dev_root=environ.get("INFERA_SIM_DEV_ROOT") or "/dev",
        jit_dir=environ.get("INFERA_SIM_JIT_DIR") or "/sgl-workspace/aiter/aiter/jit",
        lease_ttl=_lease_ttl(environ),
        fault=fault,
        fault_after=_number(environ, "INFERA_SIM_FAULT_AFTER", 5.0),
        fault_delay=_number(environ, "INFERA_SIM_FAULT_DELAY", 5.0),
    )
