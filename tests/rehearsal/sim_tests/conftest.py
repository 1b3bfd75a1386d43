"""Fixtures that run the simulated engine the way the user's commands do: real etcd,
the real Infera router and worker wrapper (installed in the venv), real subprocesses.

etcd (Debian's etcd-server) and Infera must be installed; the tests fail, never skip,
without them. Every process gets free loopback ports and its own temporary directories.
"""

import shutil
import subprocess
import sys

import pytest

from sim_harness import (GPU_COUNT, MAKE_MODEL, SIM_ROOT, Proc, free_port, http_json,
                         loopback_env, python_module, router_args, simulator_env, wait_until)

# The unit tests import the simulator's modules, and Infera imports its ``sglang``.
sys.path.insert(0, str(SIM_ROOT))


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """The rehearsal's stand-in for $MODEL: config.json and a real tokenizer.json."""
    root = tmp_path_factory.mktemp("model")
    subprocess.run([sys.executable, str(MAKE_MODEL), str(root / "DeepSeek-V4-Pro"),
                    str(root / "dataset.json")], check=True)
    return root / "DeepSeek-V4-Pro"


@pytest.fixture(scope="session")
def tokenizer(model_dir):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="session")
def dev_root(tmp_path_factory):
    """Stand-ins for /dev/kfd and one render node per GPU."""
    root = tmp_path_factory.mktemp("dev")
    (root / "dri").mkdir()
    (root / "kfd").touch()
    for gpu in range(GPU_COUNT):
        (root / "dri" / f"renderD{128 + gpu}").touch()
    return root


@pytest.fixture
def sim_env(tmp_path, dev_root):
    return simulator_env(dev_root, tmp_path / "jit")


@pytest.fixture
def launch(tmp_path):
    """launch(module, args, env) -> Proc; whatever it started is killed afterwards."""
    started = []

    def start(module, args, env):
        process = Proc(python_module(module, args), env, tmp_path, module)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    binary = shutil.which("etcd")
    if binary is None:
        pytest.fail("the simulator tests need the etcd binary (apt-get install etcd-server)")
    data_dir = tmp_path_factory.mktemp("etcd")
    client_url = f"http://127.0.0.1:{free_port()}"
    peer_url = f"http://127.0.0.1:{free_port()}"
    process = Proc([binary, "--data-dir", str(data_dir / "data"), "--name", "default",
                    "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                    "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                    "--initial-cluster", f"default={peer_url}",
                    "--heartbeat-interval", "10", "--election-timeout", "100"],
                   loopback_env(), data_dir, "etcd")
    try:
        wait_until(lambda: _answers(f"{client_url}/health"), 15, "etcd did not start")
        yield client_url
    finally:
        process.kill()


def _answers(url):
    try:
        return http_json("GET", url, timeout=2)[0] == 200
    except OSError:
        return False


class Router:
    def __init__(self, process, url):
        self.process = process
        self.url = url

    def get(self, path):
        return http_json("GET", self.url + path)

    def post(self, path, body, timeout=30):
        return http_json("POST", self.url + path, body, timeout)

    def workers(self):
        return self.get("/v1/workers")[1]["workers"]

    def wait_for_workers(self, count, timeout=20):
        wait_until(lambda: len(self.workers()) == count, timeout,
                   f"the router never listed {count} worker(s)\n" + self.process.describe())


@pytest.fixture(scope="module")
def router(etcd, model_dir, dev_root, tmp_path_factory):
    """The real ``python -m infera.server`` with the walkthrough's flags."""
    log_dir = tmp_path_factory.mktemp("router")
    url = f"http://127.0.0.1:{free_port()}"
    process = Proc(python_module("infera.server",
                                 router_args(etcd, url.rsplit(":", 1)[1], model_dir)),
                   loopback_env(), log_dir, "router")
    try:
        wait_until(lambda: _answers(f"{url}/health") or process.process.poll() is not None,
                   60, "the router did not start")
        assert process.process.poll() is None, process.describe()
        yield Router(process, url)
    finally:
        process.kill()
