"""Conformance: what the collection assumes about Infera, checked against the pinned Infera.

Not against the simulator: an earlier simulator invented Infera's API and every test passed
against the invention. Here the collection's own pieces meet Infera's own code:
- the router role's launch script parses with ``infera.server``'s argument parser;
- the worker argv the sglang_worker role selects (shipped recipe, both variants, both
  planes) parses with Infera's wrapper parser, and its plane flags agree with the router's;
- the readiness wait and the router role's verify step pass against the real router once the
  real wrapper has registered, and see the worker leave when the wrapper is stopped.
"""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sim_harness import (REPO, Proc, free_port, python_module, simulator_env, wait_until,
                         wrapper_args)

PLAYBOOK = Path(__file__).parent / "playbooks" / "collection.yml"
COLLECTIONS = REPO / ".build" / "collections"
PLANE_FLAGS = ("discovery_backend", "request_transport", "kv_event_transport")

sys.path.insert(0, str(COLLECTIONS))


def run_step(tmp_path, step, **extra_vars):
    """Run one step of playbooks/collection.yml on localhost; return what it wrote."""
    out = tmp_path / f"{step}.out"
    env = {**os.environ, "LANG": "C.UTF-8", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
           "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "NO_PROXY": "127.0.0.1,localhost"}
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env.pop(proxy, None)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         str(PLAYBOOK), "-e", json.dumps({"step": step, "out": str(out),
                                          "ansible_python_interpreter": sys.executable, **extra_vars})],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return out.read_text()


def router_argv(script):
    """The argv of `python -m infera.server` in a rendered router.sh."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    start = words.index("infera.server") + 1
    return words[start:]


@pytest.fixture(scope="module")
def selections(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("select")
    return {(plane, conc): json.loads(run_step(tmp_path, "worker_argv", plane=plane, conc=conc))
            for plane in ("dev", "production") for conc in (64, 256)}


@pytest.mark.parametrize("plane, expected", [
    ("dev", ("etcd", "http", "zmq")),
    ("production", ("kubernetes", "nats", "nats")),
])
def test_router_script_parses_with_infera_servers_own_parser(tmp_path, plane, expected):
    from infera.server.args import parse_server_args

    script = run_step(tmp_path, "router_script", infera_plane=plane, router_etcd_endpoint="http://10.0.0.5:2379",
                      router_tokenizer_path="/models/DeepSeek-V4-Pro")
    args = parse_server_args(router_argv(script))
    assert tuple(getattr(args, flag) for flag in PLANE_FLAGS) == expected
    assert (args.host, args.port, args.etcd_endpoint) == ("0.0.0.0", 8000, "http://10.0.0.5:2379")
    assert (args.router_tokenizer_path, args.router_policy) == ("/models/DeepSeek-V4-Pro", "round-robin")


@pytest.mark.parametrize("plane, expected", [
    ("dev", ("etcd", "http", "zmq")),
    ("production", ("kubernetes", "nats", "nats")),
])
@pytest.mark.parametrize("conc, dp_size", [(64, 1), (256, 8)])
def test_selected_worker_argv_parses_with_infera_wrappers_own_parser(selections, plane, expected, conc, dp_size):
    from infera.engine.sglang.args import parse_sglang_args

    selected = selections[(plane, conc)]
    # The plan names the node's address as the walkthrough does; the launch script has the address there.
    planned = selected["argv"]
    assert planned[planned.index("--advertise-host") + 1] == "$HOST"
    assert selected["argv_as_run"] == [("10.0.0.11" if token == "$HOST" else token) for token in planned]
    args = parse_sglang_args(selected["argv_as_run"])
    assert tuple(getattr(args, flag) for flag in PLANE_FLAGS) == expected
    assert (args.etcd_endpoint, args.advertise_host) == ("http://10.0.0.5:2379", "10.0.0.11")
    assert args.etcd_prefix == "/infera/workers/"
    server = args.server_args
    assert (server.tp_size, server.dp_size, server.port) == (8, dp_size, 30000)
    assert server.kv_cache_dtype == "fp8_e4m3", "Infera fills in the walkthrough's fp8 KV cache"


def test_an_unknown_worker_flag_is_refused_by_infera(selections, capsys):
    from infera.engine.sglang.args import parse_sglang_args

    with pytest.raises(SystemExit) as exit_info:
        parse_sglang_args(selections[("dev", 64)]["argv_as_run"] + ["--not-an-sglang-flag", "1"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --not-an-sglang-flag" in capsys.readouterr().err


@pytest.fixture
def worker(etcd, router, model_dir, dev_root, tmp_path):
    port = free_port()
    command_env, argv = wrapper_args("nodp", model_dir, etcd, port)
    process = Proc(python_module("infera.engine.sglang", argv),
                   {**simulator_env(dev_root, tmp_path / "jit"), **command_env}, tmp_path, "wrapper")
    process.port = port
    yield process
    process.kill()


def test_readiness_and_verify_pass_against_the_real_router(worker, router, model_dir, tmp_path):
    from ansible_collections.infera.serving.plugins.module_utils import _readiness

    worker_id = f"127.0.0.1:{worker.port}"
    params = {name: spec.get("default") for name, spec in _readiness.ARGUMENT_SPEC.items()}
    params.update(log_path=str(worker.stderr_path), node="conformance", stall_timeout=60, deadline=120,
                  health_url=f"http://127.0.0.1:{worker.port}/health",
                  workers_url=f"{router.url}/v1/workers", worker_id=worker_id)
    result = _readiness.wait_until_ready(params)
    assert result["ready"] is True, worker.describe()
    assert worker_id in result["router_workers"]
    assert "registering" in result["phases"], "the wrapper registers after the engine's ready line"

    seen = json.loads(run_step(tmp_path, "verify", port=int(router.url.rsplit(":", 1)[1]),
                               worker_id=worker_id, model_path=str(model_dir)))
    assert seen["health"]["status"] == "ok" and seen["health"]["active_workers"] >= 1
    assert worker_id in seen["workers"]
    assert seen["completion"]

    worker.terminate()
    assert worker.wait_exit(timeout=60) == 0, worker.describe()
    listed, _error = _readiness.listed_workers(f"{router.url}/v1/workers")
    assert worker_id not in listed, "the stopped worker must be gone from the router at once (lease revoked)"
    wait_until(lambda: "deregistered worker" in worker.stderr, 5, "no deregistration in the wrapper's log")
