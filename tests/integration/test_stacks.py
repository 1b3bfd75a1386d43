"""The walkthrough image's stack, Infera v0.1.1 on SGLang 0.5.15.post1, under the collection, on a rehearsal node.

The engine image of stack v0.1.1 (tests/rehearsal/platform image v0.1.1) has the vendored Infera v0.1.1 installed and
a simulated engine that writes SGLang 0.5.15.post1's lines. A deploy on it must run Infera's own v0.1.1 files, name the
wrapper's fixed 1,800 s ready limit before the launch (the role's deadline is 2,700 s), and name the stack in the
summary and the sweep's manifest. On node 7 (tests/conftest.py: group own-nodes), with an etcd prefix of its own.
"""

import hashlib
import json
import subprocess
import tarfile
import time

import pytest

from conftest import node_fixture, node_name
from rehearsal import REPO, playbook_env, run_playbook, send_in_flight

NODE = node_name(7)
STACK = "v0.1.1"
TARBALL = REPO.parent / "shared" / "vendor" / f"amd-infera-{STACK}.tar.gz"
WARNING = (f"WARNING {NODE}: stage worker: this image's Infera wrapper (amd-infera 0.1.1) gives up on the engine after "
           "a fixed 1800 s")
SUMMARY = ("stack: Infera 0.1.1 on SGLang 0.5.15.post1 (simulated engine) (a fixed 1800 s ready limit, no drain on "
           "SIGTERM)")

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
    yield ("-e", json.dumps({"infera_image": image}))
    run_playbook("teardown.yml", limit=NODE)
    node.remove_worker_container()


def tarball_hashes():
    """{path under infera/: sha256} of the vendored release."""
    hashes = {}
    with tarfile.open(TARBALL) as archive:
        for member in archive.getmembers():
            inner = member.name.split("/", 1)[-1]
            if member.isfile() and inner.startswith("infera/"):
                hashes[inner] = hashlib.sha256(archive.extractfile(member).read()).hexdigest()
    return hashes


def test_the_walkthrough_image_s_stack_is_named_before_the_launch_and_runs_its_own_files(node, on_stack, tmp_path):
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", *on_stack, limit=NODE)
    assert rc == 0, out[-4000:]
    # The YAML callback folds long messages and doubles the apostrophe in a quoted one.
    text = " ".join(out.split()).replace("''", "'")
    assert WARNING in text and "less than sglang_worker_ready_deadline 2700 s" in text, out[-4000:]
    # Said before the engine starts, not after.
    assert text.index(WARNING) < text.index("Write the launch script if it changed and start the engine detached")
    assert SUMMARY in text, out[-3000:]

    # The Infera the worker runs is v0.1.1's, file for file.
    listed = node.sh("docker exec sgl_mix sh -c 'cd \"$(python3 -c \"import infera, os; "
                     "print(os.path.dirname(infera.__file__))\")/..\" && find infera -name \"*.py\" "
                     "-exec sha256sum {} +'").stdout
    installed = {path: digest for digest, path in (line.split() for line in listed.splitlines())}
    expected = {path: digest for path, digest in tarball_hashes().items() if path.endswith(".py")}
    assert expected and {path: installed.get(path) for path in expected} == expected

    # The engine wrote SGLang 0.5.15.post1's capture lines, not an invented older one.
    log = node.sh("cat /var/lib/infera/sgl_mix/logs/engine.log").stdout
    assert "Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[" in log
    assert "Capture cuda graph begin" not in log

    # A sweep point on it: the manifest names both versions.
    results = tmp_path / "results"
    settings = {"concurrencies": [4], "run_id": "stack", "sweep_results_dir": str(results),
                "sweep_random_input_len": 64, "sweep_random_output_len": 64, **json.loads(on_stack[1])}
    done = subprocess.run(["ansible-playbook", "playbooks/sweep.yml", "--limit", NODE, "-e", json.dumps(settings)],
                          cwd=REPO, env=playbook_env(), capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    manifest = json.loads((results / "stack" / NODE / "manifest.json").read_text())
    assert manifest["stack"]["infera"] == "0.1.1" and manifest["stack"]["sglang"] == "0.5.15.post1 (simulated engine)"
    assert manifest["stack"]["ready_limit"] == 1800 and manifest["stack"]["drain"] == "none"
    assert "- stack: Infera 0.1.1 on SGLang 0.5.15.post1 (simulated engine)" in \
        (results / "stack" / "report.md").read_text()


# At the simulated nodp rate (~88 tokens/s for one request) about 40 s: still in flight when the stop's drain begins,
# even on a loaded machine, and done within its sglang_worker_drain_timeout of 60 s.
DRAIN_TOKENS = 3500


def test_a_stop_on_an_infera_without_a_drain_lets_the_request_in_flight_finish(node, on_stack):
    """Infera v0.1.1 SIGTERMs the engine's process group at once, which cuts the requests in flight; the collection
    holds the wrapper, revokes its lease and lets SGLang finish them (drain.yml). The worker alone is stopped
    (--tags worker keeps the container), so the engine's log shows SGLang's drain saw the request."""
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", *on_stack, limit=NODE)
    assert rc == 0, out[-3000:]
    outcome = send_in_flight(node, DRAIN_TOKENS)
    time.sleep(2)  # the request is sent at once and generates for ~40 s
    rc, out = run_playbook("teardown.yml", "--tags", "worker", "-e", "sglang_worker_drain_timeout=60", limit=NODE)
    assert rc == 0, out[-3000:]
    code, completion = outcome()
    assert code == "200", "the request in flight was cut by the stop"
    assert completion["usage"]["completion_tokens"] == DRAIN_TOKENS
    assert "Hold the worker wrapper still (SIGSTOP)" in out and "Revoke the worker's lease" in out, out[-3000:]
    assert "the engine still had requests in flight" not in out, out[-3000:]
    log = node.sh("cat /var/lib/infera/sgl_mix/logs/engine.log").stdout
    # SGLang's own drain (tokenizer_manager.py sigterm_watchdog) saw the request, then none.
    assert "Gracefully exiting... Remaining number of requests 1." in log, log[-2000:]
    assert log.index("Remaining number of requests 1.") < log.index("Remaining number of requests 0.")
    assert "crashed with exit code" not in log, "the engine was stopped by a SIGTERM to its process group"
