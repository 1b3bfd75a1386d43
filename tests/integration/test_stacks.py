"""The second supported stack, Infera v0.2.10 on SGLang 0.5.17, under the collection, on a rehearsal node.

The rest of the suite runs on the rehearsal's default stack, the walkthrough image's (Infera v0.1.1 on SGLang
0.5.15.post1). The engine image of stack v0.2.10 (tests/rehearsal/platform image v0.2.10) has the vendored Infera
v0.2.10 installed and a simulated engine that writes SGLang 0.5.17's lines. On it a deploy runs Infera's own v0.2.10
files with no ready-limit warning (its wrapper reads INFERA_ENGINE_READY_TIMEOUT), a sweep point's manifest names both
versions, a stop leaves the drain to Infera's own (no SIGSTOP, no lease revoke by the collection), and a GPU fault in
the cold start is named, and a rolling switch of two nodes under load fails no request. On node 7 (tests/conftest.py:
group own-nodes) and node 8, which the rolling switch brings up and removes, with an etcd prefix of their own.
"""

import json
import re
import subprocess
import time

import pytest

from conftest import node_fixture, node_name
from faults import ENGINE_FAULTS, SCALE
from rehearsal import (LOAD_PROMPTS, REPO, Node, installed_infera_hashes, node_up, playbook_env, run_playbook,
                       send_in_flight, start_load, stop_load, vendored_infera_hashes)

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('own-nodes')

NODE = node_name(7)
STACK = "v0.2.10"
SUMMARY = ("stack: Infera 0.2.10 on SGLang 0.5.17 (simulated engine) (ready limit INFERA_ENGINE_READY_TIMEOUT, drains "
           "on SIGTERM)")
# At the simulated nodp rate (~88 tokens/s for one request) about 40 s: still in flight when the stop's SIGTERM
# comes, even on a loaded machine, and done within the drain timeout of 60 s.
DRAIN_TOKENS = 3500
DRAIN_TIMEOUT = 60

node = node_fixture(7)


@pytest.fixture(scope="module")
def image():
    """The stack's engine image in the platform's registry, built when missing."""
    done = subprocess.run([str(REPO / "tests" / "rehearsal" / "platform"), "image", STACK], cwd=REPO,
                          env=playbook_env(), capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def on_stack(node, image):
    node.remove_worker_container()
    yield {"infera_image": image}
    run_playbook("teardown.yml", limit=NODE)
    node.remove_worker_container()


def test_deploy_sweep_point_and_stop_on_the_second_stack(node, on_stack, tmp_path):
    settings = {**on_stack, "sglang_worker_drain_timeout": DRAIN_TIMEOUT}
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", "-e", json.dumps(settings), limit=NODE)
    assert rc == 0, out[-4000:]
    # The YAML callback folds long messages and doubles the apostrophe in a quoted one.
    text = " ".join(out.split()).replace("''", "'")
    assert SUMMARY in text, out[-3000:]
    assert "gives up on the engine after a fixed" not in text, "v0.2.10's wrapper reads INFERA_ENGINE_READY_TIMEOUT"

    # The Infera the worker runs is v0.2.10's, file for file.
    installed = installed_infera_hashes(node)
    expected = vendored_infera_hashes(STACK)
    assert expected and {path: installed.get(path) for path in expected} == expected

    # The engine wrote SGLang 0.5.17's capture line (model_runner.py: num_tokens_per_req), not 0.5.15.post1's.
    log = node.sh("cat /var/lib/infera/sgl_mix/logs/engine.log").stdout
    assert "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[" in log
    assert "num_tokens_per_bs" not in log and "Capture cuda graph begin" not in log

    # A sweep point on it: the manifest names both versions.
    results = tmp_path / "results"
    sweep = {"concurrencies": [4], "run_id": "stack", "sweep_results_dir": str(results),
             "sweep_random_input_len": 64, "sweep_random_output_len": 64, **on_stack}
    done = subprocess.run(["ansible-playbook", "playbooks/sweep.yml", "--limit", NODE, "-e", json.dumps(sweep)],
                          cwd=REPO, env=playbook_env(), capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    manifest = json.loads((results / "stack" / NODE / "manifest.json").read_text())
    stack = manifest["stack"]
    assert (stack["infera"], stack["sglang"], stack["ready_limit"], stack["drain"]) == \
        ("0.2.10", "0.5.17 (simulated engine)", None, "infera"), stack
    assert [point["status"] for point in manifest["points"]] == ["ok"], manifest["points"]
    assert "- stack: Infera 0.2.10 on SGLang 0.5.17 (simulated engine)" in (results / "stack" / "report.md").read_text()

    # A stop with a request in flight: Infera's own drain finishes it; the collection's drain stays out of the way.
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", "-e", json.dumps(settings), limit=NODE)
    assert rc == 0, out[-3000:]
    outcome = send_in_flight(node, DRAIN_TOKENS)
    time.sleep(2)
    rc, out = run_playbook("teardown.yml", "-e", json.dumps(settings), limit=NODE)
    assert rc == 0, out[-3000:]
    code, completion = outcome()
    assert code == "200", "the request in flight was cut by the stop"
    assert completion["usage"]["completion_tokens"] == DRAIN_TOKENS
    assert "Hold the worker wrapper still (SIGSTOP)" not in out, "the collection drained an Infera that drains itself"
    log = node.sh("cat /var/lib/infera/sgl_mix/logs/engine.log").stdout
    # Infera's drain logs "engine idle" only when it saw the request in flight (infera/engine/drain.py: peak > 0),
    # after it deregistered.
    assert "drain: engine idle" in log, "\n".join(log.splitlines()[-15:])
    assert log.index(f"deregistered worker {node.address}:30000") < log.index("drain: engine idle")


def test_a_gpu_fault_in_the_cold_start_is_named_on_the_second_stack(node, on_stack):
    spec = next(spec for spec in ENGINE_FAULTS if spec.fault == "memory_access_fault")
    settings = {**on_stack, "infera_extra_env": {"INFERA_SIM_TIME_SCALE": SCALE, "INFERA_SIM_FAULT": spec.fault}}
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", "-e", json.dumps(settings), limit=NODE)
    assert rc != 0, out[-3000:]
    text = " ".join(out.split())
    # The engine's failure message (_remediation.py): the node, the stage, the cause, the next step.
    assert f"SGLang engine on {NODE} " in text and " during stage " in text and "Cause: " in text, out[-3000:]
    for words in spec.says:
        assert words in text, f"{words!r} missing from the failure:\n{out[-3000:]}"
    # The wrapper's view of the engine's end on 0.5.17: the scheduler died of the HIP abort, the launcher exited 1.
    assert "Rank 0 scheduler died during initialization (exit code: -6)" in text, out[-3000:]


@pytest.fixture
def pair(node, image):
    """Nodes 7 and 8 on the stack's image, node 8 brought up for the test and removed after it."""
    settings = node_up(node_name(8))
    nodes = [node, Node(node_name(8))]
    for each in nodes:
        each.remove_worker_container()
    yield settings, nodes
    run_playbook("teardown.yml", limit=",".join(each.name for each in nodes))
    subprocess.run([str(REPO / "tests" / "rehearsal" / "platform"), "node-down", node_name(8)], check=False)
    node.remove_worker_container()


def test_a_rolling_switch_under_load_fails_no_request_on_the_second_stack(pair, image):
    """nodp -> dp across two nodes, one at a time, while real client runs go through node 7's router: Infera
    v0.2.10 drains each worker itself on SIGTERM, so no request fails (the default stack's is test_fleet's)."""
    settings, nodes = pair
    hosts = ",".join(each.name for each in nodes)
    rc, out = run_playbook("deploy_mixed.yml", "-e", json.dumps({"conc": 64, "infera_image": image}), limit=hosts,
                           timeout=1200)
    assert rc == 0, out[-4000:]
    assert " ".join(out.split()).count("router sees 2 worker(s)") == 2, out[-3000:]
    start_load(nodes[0], settings)
    rc, out = run_playbook("deploy_mixed.yml", "-e", json.dumps({"conc": 256, "infera_image": image}), limit=hosts,
                           timeout=1200)
    codes, runs, log_tail = stop_load(nodes[0])
    assert rc == 0, out[-4000:]
    switched = " ".join(out.split())
    assert codes and set(codes) == {"0"}, (codes, log_tail)
    assert len(runs) == len(codes) >= 2, (len(runs), codes, log_tail)
    assert [run["completed"] for run in runs] == [LOAD_PROMPTS] * len(runs), (runs, log_tail)
    assert re.search(rf"variant per node: {NODE} dp, {node_name(8)} dp", switched), switched[-3000:]
    assert switched.count("engine restarted: True") == 2, switched[-3000:]
    # Infera drained: the collection's own drain was not used.
    assert "Hold the worker wrapper still (SIGSTOP)" not in out
