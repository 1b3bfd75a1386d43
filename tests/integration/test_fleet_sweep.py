"""sweep.yml on a 3-node rehearsal fleet: node sweeps compared with their fleet, and one fleet sweep.

Isolated topology: every node is swept through its own router, all at once; node 3 runs without
the fused-compress lever (about half as fast in the simulator), so the report flags it more than
10 % below the fleet median. Serving topology: every router round-robins across the fleet, so the
fleet is swept once through one router, each concurrency times the 3 workers, and each point
records the 3 workers that served it; here only node 2 runs a router (the inventory group
infera_routers), so the other nodes' workers register through it and the sweep goes through it. Tiny lengths, two concurrencies; every number is SIMULATED.
"""

import csv
import json
import re
import time

import pytest

from rehearsal import REPO, Node, node_up, run_playbook

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('fleet-nodes')

# The fleet's nodes 1-3 are the platform's infera-node-2..4: infera-node-1 runs the single-node tests
# at the same time (tests/conftest.py), on the default etcd prefix this fleet does not use.
NODES = ["infera-node-2", "infera-node-3", "infera-node-4"]
SETTINGS = {"concurrencies": [2, 4], "sweep_random_input_len": 64, "sweep_random_output_len": 64,
            "sweep_below_target": "ignore"}
# Node 3 without a throughput lever: a node the fleet section must find.
SLOW_NODE_3 = {"sglang_worker_allow_missing_levers": True,
               "infera_extra_env": "{{ {'INFERA_SIM_TIME_SCALE': '0.05'} | combine({'SGLANG_OPT_USE_FUSED_COMPRESS': none}"
                                   " if inventory_hostname == 'infera-node-4' else {}) }}"}


@pytest.fixture(scope="module")
def fleet():
    node_up(*NODES)  # the fleet's nodes alone (conftest.node_fixture says why)
    nodes = [Node(name) for name in NODES]
    for node in nodes:
        node.remove_worker_container()
    yield nodes
    for node in nodes:
        node.remove_worker_container()


def sweep(results, topology, inventory=(), **extra):
    run_id = f"fleet-{topology}-{time.time_ns()}"
    settings = {**SETTINGS, "run_id": run_id, "sweep_results_dir": str(results), "infera_topology": topology,
                "infera_fleet_etcd_prefix": f"/infera/test-fleet-sweep-{time.time_ns()}/", **extra}
    rc, out = run_playbook("sweep.yml", *inventory, "-e", json.dumps(settings), limit=",".join(NODES), timeout=1800)
    assert rc == 0, out[-5000:]
    return results / run_id, " ".join(out.split())


def manifest_points(run_dir, host):
    points = json.loads((run_dir / host / "manifest.json").read_text())["points"]
    return [(point["conc"], point["node_conc"], point["fleet"], point["status"], len(point["workers"] or []))
            for point in points]


def csv_rows(run_dir):
    with (run_dir / "results.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_isolated_nodes_are_swept_at_once_and_the_slow_node_is_flagged(fleet, tmp_path):
    run_dir, out = sweep(tmp_path / "results", "isolated", **SLOW_NODE_3)
    for host in NODES:
        assert manifest_points(run_dir, host) == [(2, 2, False, "ok", 1), (4, 4, False, "ok", 1)], host
    rows = csv_rows(run_dir)
    assert len(rows) == 6 and {(row["GPUs"], row["Workers"], row["Fleet"]) for row in rows} == {("8", "1", "false")}
    report = (run_dir / "report.md").read_text()
    assert "## Fleet: Throughput/GPU (tok/s) per node (SIMULATED)" in report
    flagged = re.findall(r"BELOW MEDIAN (infera-node-\d) c(\d+):", out)
    assert sorted(set(flagged)) == [("infera-node-4", "2"), ("infera-node-4", "4")], out[-4000:]


def test_a_serving_fleet_with_one_router_is_swept_once_through_it(fleet, tmp_path):
    """Routers only on the inventory group infera_routers (node 2 here): nodes 1 and 3 run none, their
    workers are checked through node 2's router, and the fleet is swept once through it."""
    routers = tmp_path / "routers.ini"
    routers.write_text("[infera_routers]\ninfera-node-3\n")
    inventory = ["-i", str(REPO / "inventories" / "rehearsal"), "-i", str(routers)]
    run_dir, out = sweep(tmp_path / "results", "serving", inventory=inventory)
    # One folder: the node whose router the fleet sweep went through.
    assert sorted(path.name for path in run_dir.iterdir() if path.is_dir()) == ["infera-node-3"]
    assert manifest_points(run_dir, "infera-node-3") == [(6, 2, True, "ok", 3), (12, 4, True, "ok", 3)]
    assert "infera-node-3: point 1/2 c6 nodp (fleet: 3 workers x c2), 60 prompts on 24 GPUs" in out, out[-4000:]
    rows = csv_rows(run_dir)
    assert [(row["Concurrency"], row["Node Concurrency"], row["Fleet"], row["Workers"], row["GPUs"]) for row in rows] == [
        ("6", "2", "true", "3", "24"), ("12", "4", "true", "3", "24")]
    # Only node 2 runs a router; the bench went through it only.
    for node in fleet:
        router = node.in_container("sgl_mix", "pgrep -f '^python -m infera[.]server'", check=False).returncode == 0
        assert router == (node.name == "infera-node-3"), node.name
        ran_client = node.in_container("sgl_mix", f"test -e /var/lib/infera/sgl_mix/results/{run_dir.name}",
                                       check=False).returncode == 0
        assert ran_client == (node.name == "infera-node-3"), node.name
