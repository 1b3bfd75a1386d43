"""Fixtures that run the simulator as the user would: real etcd, real subprocesses.

etcd (Debian's etcd-server) must be installed; the tests fail, never skip, without it.
Every process gets free loopback ports and its own temporary directories.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from sim_harness import (FUSED_COMPRESS_ENV, GPU_COUNT, SIM_ROOT, Etcd, Router, SimProcess,
                         free_port, router_args, wait_until, worker_args)

# The unit tests import the simulator's modules directly.
sys.path.insert(0, str(SIM_ROOT))


@pytest.fixture
def etcd(tmp_path):
    binary = shutil.which("etcd")
    if binary is None:
        pytest.fail("the simulator tests need the etcd binary (apt-get install etcd-server)")
    client_url = f"http://127.0.0.1:{free_port()}"
    peer_url = f"http://127.0.0.1:{free_port()}"
    # A short election timeout makes a single node leader at once and allows short leases.
    process = subprocess.Popen(
        [binary, "--data-dir", str(tmp_path / "etcd"), "--name", "default",
         "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
         "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
         "--initial-cluster", f"default={peer_url}",
         "--heartbeat-interval", "10", "--election-timeout", "100"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    server = Etcd(client_url)

    def serving():
        try:
            server.workers()
            return True
        except OSError:
            return False

    try:
        wait_until(serving, 15, "etcd did not start")
        yield server
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def dev_root(tmp_path):
    """Stand-ins for /dev/kfd and one render node per GPU."""
    root = tmp_path / "dev"
    (root / "dri").mkdir(parents=True)
    (root / "kfd").touch()
    for gpu in range(GPU_COUNT):
        (root / "dri" / f"renderD{128 + gpu}").touch()
    return root


@pytest.fixture
def model_dir(tmp_path):
    model = tmp_path / "DeepSeek-V4-Pro"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["DeepseekV4ForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV4Config"},
    }))
    (model / "tokenizer.json").write_text("{}")
    return model


@pytest.fixture
def sim_env(tmp_path, dev_root):
    """The tuned recipe's environment; the caller's own INFERA_SIM_* and SGLANG_* are dropped."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("INFERA_SIM_", "SGLANG_"))}
    env.update(FUSED_COMPRESS_ENV)
    env.update({
        "PYTHONPATH": str(SIM_ROOT),
        "PYTHONUNBUFFERED": "1",
        "INFERA_SIM_TIME_SCALE": "0.02",
        "INFERA_SIM_DEV_ROOT": str(dev_root),
        "INFERA_SIM_JIT_DIR": str(tmp_path / "jit"),
        "HIP_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in range(GPU_COUNT)),
    })
    return env


@pytest.fixture
def launch(tmp_path):
    """launch(module, args, env) -> SimProcess; whatever still runs is killed afterwards."""
    started = []

    def start(module, args, env):
        process = SimProcess(module, [str(arg) for arg in args], env, tmp_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def router(etcd, model_dir, sim_env, launch):
    port = free_port()
    process = launch("infera.server", router_args(etcd.endpoint, port, model_dir), sim_env)
    process.wait_for("listening on")
    return Router(process, f"http://127.0.0.1:{port}")


@pytest.fixture
def start_worker(etcd, model_dir, sim_env, launch):
    """start_worker(env=..., extra=[...], variant=...) -> (SimProcess, base URL).

    ``env`` overrides sim_env; a value of None removes the variable.
    """

    def start(env=None, extra=(), variant="nodp"):
        port = free_port()
        merged = {**sim_env, **(env or {})}
        process = launch("infera.engine.sglang",
                         worker_args(model_dir, etcd.endpoint, port, variant) + list(extra),
                         {name: value for name, value in merged.items() if value is not None})
        return process, f"http://127.0.0.1:{port}"

    return start
