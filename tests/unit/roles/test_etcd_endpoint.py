"""Where the routers, workers and preflight find the fleet's etcd (playbooks/vars/inventory.yml):
infera_etcd_endpoint when given, else the etcd playbooks/etcd.yml runs on the infera_etcd host;
neither is one line before anything starts. Run through Ansible on local hosts (no node needed)."""

import json
import subprocess
import sys
from pathlib import Path

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env

PLAYBOOK = Path(__file__).parent / "playbooks" / "etcd_endpoint.yml"


def run(tmp_path, playbook, inventory_lines, *extra):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("\n".join(inventory_lines) + "\n")
    return subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), str(playbook), *extra],
                          cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)


def endpoints(tmp_path, *inventory_lines):
    out = tmp_path / "endpoints"
    out.mkdir()
    lines = ["[fleet]", "node-a", "node-b", "[fleet:vars]", "ansible_connection=local",
             f"ansible_python_interpreter={sys.executable}", *inventory_lines]
    result = run(tmp_path, PLAYBOOK, lines, "-e", json.dumps({"out": str(out)}))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}


def test_the_endpoint_given_wins_over_an_etcd_host(tmp_path):
    nodes = endpoints(tmp_path, "infera_etcd_endpoint=http://etcd.example.net:2379",
                      "[infera_etcd]", "etcd-1 ansible_host=10.0.0.9")
    assert nodes == {host: dict.fromkeys(["router", "worker", "preflight"], "http://etcd.example.net:2379")
                     for host in ("node-a", "node-b")}


def test_without_one_the_infera_etcd_host_is_used_at_the_address_and_port_its_role_advertises(tmp_path):
    nodes = endpoints(tmp_path, "[infera_etcd]", "etcd-1 ansible_host=10.0.0.9 etcd_advertise_host=10.1.0.5 etcd_client_port=2390",
                      "etcd-2 ansible_host=10.0.0.10")
    assert {endpoint for node in nodes.values() for endpoint in node.values()} == {"http://10.1.0.5:2390"}


def test_the_etcd_host_without_an_advertised_address_is_reached_at_its_infera_advertise_host_or_ansible_host(tmp_path):
    nodes = endpoints(tmp_path, "[infera_etcd]", "etcd-1 ansible_host=10.0.0.9 infera_advertise_host=10.1.0.6")
    assert nodes["node-a"]["router"] == "http://10.1.0.6:2379"
    (tmp_path / "endpoints").rename(tmp_path / "first")
    nodes = endpoints(tmp_path, "[infera_etcd]", "etcd-1 ansible_host=10.0.0.9")
    assert nodes["node-b"]["worker"] == "http://10.0.0.9:2379"


def test_neither_stops_deploy_with_one_line_before_anything_runs(tmp_path):
    lines = ["[mi355x]", "node-a", "[mi355x:vars]", "ansible_connection=local", f"ansible_python_interpreter={sys.executable}"]
    result = run(tmp_path, REPO / "playbooks" / "deploy_mixed.yml", lines, "-e", "conc=64")
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).splitlines()
    errors = [index for index, line in enumerate(lines) if line.startswith("[ERROR]: Task failed")]
    assert len(errors) == 1, result.stdout[-3000:]
    assert lines[errors[0]] == (
        "[ERROR]: Task failed: Action failed: node-a: stage checks: infera_etcd_endpoint is not set and the inventory "
        "has no infera_etcd host. Next step: set infera_etcd_endpoint (the walkthrough's $ETCD, e.g. http://10.0.0.5:2379), "
        "or put one host in the infera_etcd group and run playbooks/etcd.yml")
    assert lines[errors[0] + 1].startswith("Origin: "), result.stdout[-3000:]
    # Only the checks ran: no role, no node address, nothing after the failed assert.
    tasks = [line for line in result.stdout.splitlines() if line.startswith("TASK [")]
    assert [task.split("]")[0] for task in tasks] == ["TASK [Require hosts | Refuse a group that matches no host, or whose "
                                                      "settings file the inventory ignores",
                                                      "TASK [Deploy mixed | Require the concurrency",
                                                      "TASK [Settings | Require the fleet's etcd (infera_etcd_endpoint, or an infera_etcd host)"]
