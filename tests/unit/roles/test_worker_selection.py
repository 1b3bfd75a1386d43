"""The worker role's selection step, run through Ansible on localhost (no node needed)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env

PLAYBOOK = Path(__file__).parent / "playbooks" / "select.yml"
# The venv's own, whatever ansible-playbook comes first on PATH.
DEV_PLANE = ["--discovery-backend", "--request-transport", "--kv-event-transport"]


def select(tmp_path, **extra_vars):
    out = tmp_path / "selected.json"
    result = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(PLAYBOOK),
         "-e", json.dumps({"out": str(out), "ansible_python_interpreter": sys.executable, **extra_vars})],
        cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return json.loads(out.read_text())


def test_the_plan_is_the_same_whatever_the_nodes_address(tmp_path):
    """deploy_mixed.yml plans before its preflight reads the node's address, and the worker stage reuses that plan
    (its inputs are the same): the plan names the address $HOST, as the walkthrough does."""
    first = select(tmp_path, sglang_worker_conc=64, sglang_worker_advertise_host="")
    second = select(tmp_path, sglang_worker_conc=64, sglang_worker_advertise_host="10.0.0.12")
    assert first == second
    assert first["argv"][first["argv"].index("--advertise-host") + 1] == "$HOST"
    assert first["inputs"]["recipe"]["args"]["--advertise-host"] == "$HOST"


def test_dev_plane_passes_the_three_flags(tmp_path):
    argv = select(tmp_path, sglang_worker_conc=64, infera_plane="dev")["argv"]
    assert [argv[argv.index(flag) + 1] for flag in DEV_PLANE] == ["etcd", "http", "zmq"]


def test_production_plane_drops_exactly_the_three_flags(tmp_path):
    dev = select(tmp_path, sglang_worker_conc=64, infera_plane="dev")["argv"]
    production = select(tmp_path, sglang_worker_conc=64, infera_plane="production")["argv"]
    assert not set(DEV_PLANE) & set(production)
    dropped = [token for flag in DEV_PLANE for token in (flag, dev[dev.index(flag) + 1])]
    assert [token for token in dev if token not in dropped] == production


def test_router_and_worker_take_the_same_dev_plane_flags_from_the_infera_role():
    """The flags have one owner: the router's launch script and the worker's argv both read it."""
    plane = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())["infera_dev_plane_args"]
    assert list(plane) == DEV_PLANE
    router_script = (REPO / "roles" / "router" / "templates" / "router.sh.j2").read_text()
    assert "infera_plane_args" in router_script and "--discovery-backend" not in router_script
    recipe = yaml.safe_load((REPO / "roles" / "sglang_worker" / "recipes" / "dsv4-pro-mi355x-mixed.yml").read_text())
    assert not set(DEV_PLANE) & set(recipe["args"]), "the recipe must not spell the plane's flags again"


def test_production_plane_drops_the_flags_from_a_recipe_that_spells_them_out(tmp_path):
    recipe = yaml.safe_load((REPO / "roles" / "sglang_worker" / "recipes" / "dsv4-pro-mi355x-mixed.yml").read_text())
    recipe["args"].update({"--discovery-backend": "etcd", "--request-transport": "http"})
    argv = select(tmp_path, sglang_worker_conc=64, infera_plane="production", sglang_worker_recipe=recipe)["argv"]
    assert not set(DEV_PLANE) & set(argv)


def test_serving_topology_on_infera_default_prefix_passes_no_etcd_prefix(tmp_path):
    """The default is the walkthrough's layout: Infera's own prefix, no flag."""
    argv = select(tmp_path, sglang_worker_conc=64)["argv"]
    assert "--etcd-prefix" not in argv


def test_isolated_topology_gives_each_node_its_own_prefix_beside_the_fleets(tmp_path):
    argv = select(tmp_path, sglang_worker_conc=64, infera_topology="isolated")["argv"]
    prefix = argv[argv.index("--etcd-prefix") + 1]
    assert prefix == "/infera/workers-isolated/localhost/"
    # Infera's router watches everything under its prefix: the fleet's must not contain it.
    assert not prefix.startswith("/infera/workers/")


def test_a_fleet_prefix_of_its_own_reaches_the_worker_and_its_isolated_prefixes(tmp_path):
    serving = select(tmp_path, sglang_worker_conc=64, infera_fleet_etcd_prefix="/staging/workers/")["argv"]
    assert serving[serving.index("--etcd-prefix") + 1] == "/staging/workers/"
    isolated = select(tmp_path, sglang_worker_conc=64, infera_fleet_etcd_prefix="/staging/workers/",
                      infera_topology="isolated")["argv"]
    assert isolated[isolated.index("--etcd-prefix") + 1] == "/staging/workers-isolated/localhost/"


def test_production_plane_drops_the_etcd_prefix_too(tmp_path):
    argv = select(tmp_path, sglang_worker_conc=64, infera_topology="isolated", infera_plane="production")["argv"]
    assert "--etcd-prefix" not in argv


@pytest.mark.parametrize("tp, devices", [(8, "0,1,2,3,4,5,6,7"), (4, "0,1,2,3")])
def test_gpu_count_follows_tp_size(tmp_path, tp, devices):
    selected = select(tmp_path, sglang_worker_conc=256, sglang_worker_tp_size=tp)
    argv = selected["argv"]
    assert selected["env"]["HIP_VISIBLE_DEVICES"] == devices
    assert argv[argv.index("--tp-size") + 1] == str(tp)
    assert argv[argv.index("--dp") + 1] == str(tp) and argv[argv.index("--ep-size") + 1] == str(tp)


def test_cuda_graph_batch_list_reaches_argv_as_separate_values(tmp_path):
    argv = select(tmp_path, sglang_worker_conc=32, sglang_worker_cuda_graph_bs=[1, 2, 4, 8])["argv"]
    start = argv.index("--cuda-graph-bs")
    assert argv[start + 1:start + 5] == ["1", "2", "4", "8"]
