"""Molecule scenarios on the rehearsal platform, run by pytest so they count as tests.

Each scenario creates its own node through tests/rehearsal/platform node-up, converges
deploy_mixed.yml, checks idempotence, verifies the engine's real argv/env on the node
against the recipe, and destroys the node. Their nodes are in the `molecule` group, whose
isolated topology gives each its own etcd prefix, so they run at the same time: one
scenario's router never sees another's worker. The `fleet` scenario's three nodes serve
together on a prefix of their own (group `molecule_fleet`): preflight, first deploy,
idempotence, a rolling switch, verify.
"""

import os
import subprocess
import tempfile

import pytest

from rehearsal import REPO, platform_up

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('own-nodes')

SCENARIOS = ["default", "dp", "sweep", "fleet", "pd"]


@pytest.fixture(scope="module")
def running():
    """Start every scenario at once; each test waits for its own."""
    platform_up(1)
    env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PY_COLORS": "0",
           "ANSIBLE_FORCE_COLOR": "0", "NO_COLOR": "1"}
    started = {}
    for scenario in SCENARIOS:
        log = tempfile.TemporaryFile(mode="w+")  # pylint: disable=consider-using-with
        started[scenario] = (subprocess.Popen(["molecule", "test", "-s", scenario], cwd=REPO, env=env,  # pylint: disable=consider-using-with
                                              stdout=log, stderr=subprocess.STDOUT, text=True), log)
    yield started
    for process, log in started.values():
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(running, scenario):
    process, log = running[scenario]
    try:
        returncode = process.wait(timeout=1200)
    except subprocess.TimeoutExpired:
        process.kill()
        returncode = process.wait()
    log.seek(0)
    output = log.read()
    assert returncode == 0, f"molecule test -s {scenario} failed:\n{output[-6000:]}"
    steps = output.replace("\u279c ", "")
    # A second converge changed nothing; the sweep (not idempotent by nature) proves
    # resume in its verify step instead.
    expected = "verify: Executed: Successful" if scenario == "sweep" else "idempotence: Executed: Successful"
    assert expected in steps, output[-3000:]
