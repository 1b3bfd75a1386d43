"""Per-stage tags work on every playbook (a rehearsal node, real Infera router and wrapper).

`--tags worker` used to fail with 'ansible_default_ipv4' is undefined: the pre_tasks that
learn the node's address were untagged, so a tagged run skipped them.
"""

import json
import re

import pytest

from rehearsal import run_playbook

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-1')


@pytest.fixture(scope="module")
def prepared(node):
    """One node for the whole module: the tags run against a worker the first test deploys."""
    node.remove_worker_container()
    yield node
    node.remove_worker_container()


def playbook(name, *extra):
    rc, out = run_playbook(name, *extra, timeout=600)
    assert rc == 0, out[-4000:]
    return out


def stages_run(out):
    """The stage prefixes of the tasks that ran ('Container', 'Router', 'SGLang worker', 'Sweep', ...)."""
    names = [name.split(" : ")[-1] for name in re.findall(r"^TASK \[(.+?)\]", out, re.MULTILINE)]
    return {name.split(" | ")[0] for name in names if " | " in name}


def test_deploy_tags_run_one_stage(prepared):
    playbook("deploy_mixed.yml", "-e", "conc=64")

    worker = playbook("deploy_mixed.yml", "-e", "conc=64", "--tags", "worker")
    assert "SGLang worker" in stages_run(worker)
    assert not {"Container", "Router"} & stages_run(worker), stages_run(worker)

    verify = playbook("deploy_mixed.yml", "-e", "conc=64", "--tags", "verify")
    assert "router sees 1 worker(s)" in verify
    # The container stage did not run, yet the summary still knows the engine is simulated.
    assert "[SIMULATED engine]" in verify, verify[-3000:]
    assert "Container" not in stages_run(verify), stages_run(verify)
    # The worker's variant selection always runs (it validates conc); its start does not.
    assert "SGLang worker | Write the launch script if it changed and start the engine" not in verify


def test_sweep_skip_tags_sweep_prepares_only(prepared, tmp_path):
    out = playbook("sweep.yml", "--skip-tags", "sweep",
                   "-e", json.dumps({"concurrencies": [4], "sweep_results_dir": str(tmp_path)}))
    assert {"Container", "Router"} <= stages_run(out)
    assert "Sweep" not in stages_run(out)
    assert not list(tmp_path.iterdir()), "a skipped sweep wrote results"


def test_teardown_tag_stops_only_the_worker(prepared):
    out = playbook("teardown.yml", "--tags", "worker")
    assert "SGLang worker" in stages_run(out)
    assert not {"Router", "Container"} & stages_run(out)
    assert prepared.sh("docker exec sgl_mix pgrep -f '^python -m infera[.]server '", check=False).returncode == 0, \
        "the router should still run"
