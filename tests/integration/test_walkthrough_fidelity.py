"""Fidelity proof: the user's walkthrough, pasted as written, works on a rehearsal node.

The commands are read from docs/reference/sglang-mixed-dsv4-pro-mi355x.txt (a copy of
the user's walkthrough), not retyped here, so a flag the simulator does not take, or a
step that does not work on the platform, fails this test. The only edits are the ones a
GPU-free rehearsal needs, each named below: small prompt lengths, fewer concurrencies for
the bench loop, and `--dataset-path` to a staged file (the client would download it).
All numbers produced are SIMULATED.
"""

import json
import re

import pytest

from rehearsal import Node, Walkthrough, platform_up, read_jsonl, wait_for_worker

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-1')

CONTAINER = "sgl_mix"
READY = "The server is fired up and ready to roll!"
FATAL = r"unrecognized arguments|Traceback|error:"
# The simulator's cold start in seconds rather than minutes (rehearsal-only knob).
SIM_ENV = {"INFERA_SIM_TIME_SCALE": "0.02"}


@pytest.fixture(scope="module")
def platform():
    return platform_up(1)


@pytest.fixture(scope="module")
def node(platform):
    return Node(platform["NODES"].split()[0])


@pytest.fixture(scope="module")
def walkthrough():
    return Walkthrough.load()


@pytest.fixture(scope="module")
def shell_env(platform, node):
    """What section 2 says to export: IMG, HF_CACHE, MODEL, HOST, ETCD."""
    return {
        "IMG": platform["IMG"],
        "HF_CACHE": platform["HF_CACHE"],
        "MODEL": platform["MODEL"],
        "HOST": node.address,
        "ETCD": platform["ETCD"],
    }


@pytest.fixture
def worker_container(node, walkthrough, shell_env):
    """Section 2: the persistent worker container, as written; removed afterwards."""
    node.remove_worker_container(CONTAINER)
    node.sh(walkthrough.command("docker run -d --name sgl_mix"), env=shell_env)
    yield CONTAINER
    node.remove_worker_container(CONTAINER)


def _start(node, walkthrough, shell_env, worker_prefix, log):
    env_block = walkthrough.command("export SGLANG_USE_AITER=1")
    router = walkthrough.command("python -m infera.server")
    worker = walkthrough.command(worker_prefix)
    node.in_container(CONTAINER, f"{router} >/tmp/router.log 2>&1", env=shell_env, detach=True)
    node.in_container(CONTAINER, f"{env_block}\n{worker} >{log} 2>&1",
                      env={**shell_env, **SIM_ENV}, detach=True)
    return node.wait_for_line(CONTAINER, log, READY, timeout=180, fatal=FATAL)


def _verify(node, walkthrough, shell_env):
    # Infera's wrapper registers after the engine answers /health: the walkthrough's reader waits a moment too.
    wait_for_worker(node, CONTAINER, shell_env["HOST"], f"{shell_env['HOST']}:30000")
    health = node.in_container(CONTAINER, walkthrough.command("curl -sf http://$HOST:8000/health"), env=shell_env)
    assert health.stdout.rstrip().endswith("OK"), health.stdout
    assert json.loads(health.stdout.rstrip()[:-2]) == {"status": "ok", "active_workers": 1}

    workers = node.in_container(CONTAINER, walkthrough.command("curl -s http://$HOST:8000/v1/workers"), env=shell_env)
    listed = json.loads(workers.stdout)
    assert len(listed["workers"]) == 1, workers.stdout
    assert listed["workers"][0]["worker_id"] == f"{shell_env['HOST']}:30000"
    assert listed["workers"][0]["url"] == f"http://{shell_env['HOST']}:30000"

    chat = node.in_container(CONTAINER, walkthrough.command("curl -s http://$HOST:8000/v1/chat/completions"),
                             env=shell_env)
    text = json.loads(chat.stdout)["choices"][0]["message"]["content"]
    assert text.strip(), chat.stdout


def _bench_loop(walkthrough, concurrencies):
    loop = walkthrough.block("for C in 32 64 128; do", "done")
    assert "--backend sglang-oai --base-url http://$HOST:8000" in loop  # the router, not the engine
    rehearsal = (loop
                 .replace("for C in 32 64 128;", f"for C in {' '.join(map(str, concurrencies))};")
                 .replace("--random-input-len 8192", "--random-input-len 64")
                 .replace("--random-output-len 1024", "--random-output-len 8")
                 .replace("--dataset-name random", "--dataset-name random --dataset-path $DATASET"))
    assert rehearsal.count("$DATASET") == 1 and "--random-input-len 64" in rehearsal
    return "cd /tmp && rm -f mix_c*.jsonl\n" + rehearsal


@pytest.mark.parametrize("variant, worker_prefix, concurrencies", [
    ("nodp", "HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m infera.engine.sglang", [4, 8]),
    ("dp", "SGLANG_DP_USE_GATHERV=1 HIP_VISIBLE_DEVICES", [16]),
])
def test_walkthrough_runs_as_written(node, walkthrough, shell_env, platform, worker_container,
                                     variant, worker_prefix, concurrencies):
    log = f"/tmp/worker-{variant}.log"
    startup = _start(node, walkthrough, shell_env, worker_prefix, log)
    # SGLang 0.5.15.post1's own lines (model_runner.py), as the simulated engine writes them.
    for phase in ("Load weight begin", "Load weight end", "Capture target decode CUDA graph begin.",
                  "Capture target decode CUDA graph end."):
        assert phase in startup, f"{phase!r} missing from the cold-start log"
    assert "MISSING" not in startup, "a throughput lever is missing from the walkthrough's own commands"

    _verify(node, walkthrough, shell_env)

    bench_env = {**shell_env, "DATASET": platform["DATASET"]}
    node.in_container(CONTAINER, _bench_loop(walkthrough, concurrencies), env=bench_env, timeout=900)
    for conc in concurrencies:
        out = node.in_container(CONTAINER, f"cat /tmp/mix_c{conc}.jsonl", check=False)
        assert out.returncode == 0, f"the bench client wrote no mix_c{conc}.jsonl"
        runs = read_jsonl(out.stdout)
        assert len(runs) == 1
        assert runs[0]["completed"] == conc * 10, runs[0]
        assert runs[0]["max_concurrency"] == conc


def test_misspelled_flag_is_rejected(node, walkthrough, shell_env, worker_container):
    worker = walkthrough.command("HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m infera.engine.sglang")
    misspelled = worker.replace("--chunked-prefill-size", "--chunked-prefil-size")
    assert misspelled != worker
    result = node.in_container(CONTAINER, misspelled, env=shell_env, check=False, timeout=60)
    assert result.returncode == 2
    assert re.search(r"unrecognized arguments: --chunked-prefil-size", result.stderr + result.stdout)
