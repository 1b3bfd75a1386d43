"""A 3-node fleet on the rehearsal platform: first deploy in parallel, then a rolling
nodp -> dp switch while real `sglang.bench_serving` load goes through one node's router.

Real parts: three Docker-in-Docker nodes, one etcd, Infera's router on every node and its
worker wrapper (SIGTERM: lease revoked, in-flight requests drained); only the engine under
the wrapper is simulated. The fleet registers under an etcd prefix of its own, so workers
other tests leave on the platform's etcd are not part of it.
"""

import json
import re
import time

import pytest

import faults
from rehearsal import LOAD_PROMPTS, Node, node_up, router_workers, run_playbook, start_load, stop_load

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('fleet-nodes')

# The fleet's nodes 1-3 are the platform's infera-node-2..4: infera-node-1 runs the single-node tests
# at the same time (tests/conftest.py), on the default etcd prefix this fleet does not use.
NODES = ["infera-node-2", "infera-node-3", "infera-node-4"]


@pytest.fixture(scope="module")
def fleet():
    settings = node_up(*NODES)  # the fleet's nodes alone (conftest.node_fixture says why)
    nodes = [Node(name) for name in NODES]
    for node in nodes:
        node.remove_worker_container()
    # The fleet's own prefix for the whole module (moving a serving fleet to another prefix is
    # not a rolling change: its routers would see two half fleets).
    prefix = f"/infera/test-fleet-{time.time_ns()}/"
    # What every node serves after a test that proved it (its asserts passed): the next test starts from
    # there without a no-op deploy of three nodes; alone, or after a failed test, it deploys first.
    served = {"variant": None}
    yield settings, nodes, prefix, served
    for node in nodes:
        node.remove_worker_container()


def deploy(prefix, conc):
    rc, out = run_playbook("deploy_mixed.yml", "-e", json.dumps({"conc": conc, "infera_fleet_etcd_prefix": prefix}),
                           limit=",".join(NODES), timeout=1200)
    assert rc == 0, out[-5000:]
    return " ".join(out.split())


def fleet_serving(prefix, served, conc, variant):
    """The fleet serving `variant` (picked by conc): as the test before left it, else deployed now."""
    if served["variant"] != variant:
        served["variant"] = None
        text = deploy(prefix, conc)
        assert f"variant per node: {', '.join(f'{name} {variant}' for name in NODES)}" in text, text[-3000:]
        served["variant"] = variant


def engine_launches(node):
    return node.in_container("sgl_mix", "ls /var/lib/infera/sgl_mix/logs/ | grep -c '^engine-' || true").stdout.strip()


def test_rolling_switch_under_load_fails_no_request(fleet):
    settings, nodes, prefix, served = fleet
    served["variant"] = None

    first = deploy(prefix, 64)
    assert "fleet: 3/3 nodes ready (serving topology)" in first, first[-3000:]
    # Every node's router sees the whole fleet.
    assert first.count("router sees 3 worker(s)") == 3, first[-3000:]
    # A first deploy runs on all nodes at once, not through the rolling play.
    assert re.search(r"PLAY \[Deploy mixed \| Rolling change[^]]*\] \**\s*skipping: no hosts matched", first), first[-3000:]
    launches_before = [int(engine_launches(node)) for node in nodes]

    loader = nodes[0]
    start_load(loader, settings)

    switched = deploy(prefix, 256)

    codes, runs, log_tail = stop_load(loader)

    # Zero failed requests: every client run completed every prompt and exited 0.
    assert codes and set(codes) == {"0"}, (codes, log_tail)
    assert len(runs) == len(codes) >= 2, (len(runs), codes, log_tail)
    assert [run["completed"] for run in runs] == [LOAD_PROMPTS] * len(runs), (runs, log_tail)

    # Every node on dp, each restarted exactly once, one node at a time.
    assert re.search(r"variant per node: (infera-node-\d dp(, )?){3}", switched), switched[-3000:]
    assert switched.count("engine restarted: True") == 3, switched[-3000:]
    launches_after = [int(engine_launches(node)) for node in nodes]
    assert [after - before for before, after in zip(launches_before, launches_after)] == [1, 1, 1]
    assert switched.count("PLAY [Deploy mixed | Rolling change, serving nodes one batch at a time]") == 3, \
        "one batch per node (serial 1)"
    # Every serving node looked at its image (pulling one it did not have) and compared its container at once,
    # before the first drain; each node's turn then used that check instead of repeating it.
    for task in ("Container | Look at the work directory, the GPU device paths and the image on the node",
                 "Container | The worker container as the walkthrough runs it: compare (changes nothing)"):
        checks = re.findall(re.escape(task) + r"\] \**((?: (?:ok|changed): \[infera-node-\d\])+)", switched)
        assert len(checks) == 1 and len(re.findall(r"infera-node-\d", checks[0])) == 3, (task, checks or switched[-3000:])
        assert switched.find(task + "]") < switched.find("Send SIGTERM to the worker wrapper"), (task, switched[-3000:])
    # The image was there: no pull, on no node.
    assert not re.search(r"Container \| Pull the engine image the node does not have\] \**\s*(ok|changed):", switched)
    served["variant"] = "dp"


def test_a_failing_node_stops_the_rollout_and_a_rerun_finishes_it(fleet):
    """After the switch above every node serves dp. Back to nodp, with node 2's next engine crashing while
    loading weights: the rollout stops at node 2 (budget 0), says which node runs what, and the nodes it did
    not reach keep serving; the same command without the fault finishes the job."""
    _settings, nodes, prefix, served = fleet
    fleet_serving(prefix, served, 256, "dp")  # as the test above leaves it; alone, a first deploy
    served["variant"] = None
    faulty_env = ("{{ {'INFERA_SIM_TIME_SCALE': '0.05'} | combine({'INFERA_SIM_FAULT': 'crash_weight_load'}"
                  " if inventory_hostname == 'infera-node-3' else {}) }}")
    rc, out = run_playbook("deploy_mixed.yml", "-e", json.dumps({"conc": 64, "infera_fleet_etcd_prefix": prefix,
                                                                 "infera_extra_env": faulty_env}),
                           limit=",".join(NODES), timeout=1200)
    text = " ".join(out.split())
    assert rc != 0, text[-3000:]
    fleet_now = re.search(r"The fleet now: (.*?)\. Next step: fix the cause above, then rerun the same command", text)
    assert fleet_now, text[-4000:]
    states = dict(entry.split(" ", 1) for entry in fleet_now.group(1).split("; "))
    assert states["infera-node-3"] == "FAILED here, was serving dp", states
    others = {host: state for host, state in states.items() if host != "infera-node-3"}
    assert set(others.values()) <= {"nodp (restarted in this run)", "dp (not reached)"}, states
    assert "dp (not reached)" in others.values(), "the rollout must stop before the last node"
    # The failure names the node, the stage and the cause, with the engine log's last lines.
    assert "infera-node-3: stage rolling change:" in text, text[-4000:]
    assert "Scheduler hit an exception" in text, text[-4000:]
    # Nodes the rollout did not reach still serve: their routers list the other healthy workers.
    serving = [node for node in nodes if node.name != "infera-node-3"]
    for node in serving:
        workers = node.in_container("sgl_mix", "curl -s http://127.0.0.1:8000/v1/workers").stdout
        assert len(json.loads(workers)["workers"]) == 2, workers

    again = deploy(prefix, 64)
    assert re.search(r"variant per node: (infera-node-\d nodp(, )?){3}", again), again[-3000:]
    assert "fleet: 3/3 nodes ready" in again, again[-3000:]
    served["variant"] = "nodp"


def test_a_node_lost_mid_rollout_is_reported_and_the_rest_finishes_within_the_budget(fleet):
    """From nodp (the test above ends there) to dp with a budget of one node in three. Node 2 is killed
    (SIGKILL: no drain, no lease revoke) as soon as node 1's new engine starts. Node 1 finishes with node 2's
    router left out of its checks, node 2 is reported lost at its turn, node 3 still switches, the run fails
    naming node 2, and the routers drop node 2's worker once its etcd lease expires."""
    _settings, nodes, prefix, served = fleet
    fleet_serving(prefix, served, 64, "nodp")  # as the test above leaves it; alone, a first deploy
    served["variant"] = None
    try:
        # Shared with benchmarks/fault_matrix, which deploys nodp first; here the fleet already serves it.
        row = faults.node_lost_mid_rollout(nodes, prefix, budget=34, serving_nodp=True)
        text = " ".join(row.output.split())
        assert row.detected_after is not None, "node 2 was never killed or never reported: " + text[-3000:]
        assert row.rc != 0, text[-3000:]
        # Node 1 went on without node 2's router; node 2 is reported at its turn, within the budget.
        assert "infera-node-2: stage verify: the router of infera-node-3 does not answer" in text, text[-4000:]
        assert row.message.startswith("infera-node-2: stage verify: the router of infera-node-3 does not answer"), row.message
        lost = text[text.find("infera-node-3: stage rolling change"):][:3000]
        assert lost.startswith("infera-node-3: stage rolling change: Deploy mixed | Fail when the node was lost failed; "
                               "the rollout goes on (1 of 3 node(s) failed, failure budget 34 % = 1.02). "
                               "the node does not answer ("), lost or text[-4000:]
        assert "The fleet now: infera-node-2 dp (restarted in this run); infera-node-3 FAILED here, was serving nodp; " \
               "infera-node-4 nodp (not reached)" in text, text[-4000:]
        # The rest finished: node 3 switched after node 2 was lost; the run fails naming node 2.
        assert "fleet: 2/3 nodes ready (serving topology) [SIMULATED engine]" in text, text[-3000:]
        assert "variant per node: infera-node-2 dp, infera-node-3 FAILED, infera-node-4 dp" in text, text[-3000:]
        assert "1 node(s) failed their change within the failure budget (infera-node-3)" in text, text[-3000:]
        assert row.results_kept == "2/3 nodes ready; failure budget honoured (34 %), the rest switched", row.results_kept
        # The routers that remain drop node 2's worker when its lease (30 s) expires.
        survivors = [nodes[0], nodes[2]]
        deadline = time.monotonic() + 60
        listed = {}
        while time.monotonic() < deadline:
            listed = {node.name: router_workers(node, "sgl_mix", "127.0.0.1") for node in survivors}
            if all(len(workers) == 2 for workers in listed.values()):
                break
            time.sleep(1)
        assert all(len(workers) == 2 for workers in listed.values()), listed
        assert not any(worker.startswith(nodes[1].address + ":") for workers in listed.values() for worker in workers), listed
    finally:
        node_up(*NODES)  # a fresh node 2 for the tests after this one
