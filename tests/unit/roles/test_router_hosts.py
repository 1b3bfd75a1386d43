"""Which nodes run a router (the inventory group infera_routers) and which router each node's
worker is checked and verified through, run through Ansible on three local hosts (no node needed)."""

import json
import subprocess
import sys
from pathlib import Path

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env

PLAYBOOK = Path(__file__).parent / "playbooks" / "router_hosts.yml"


def routers(tmp_path, routers_group=(), **extra_vars):
    inventory = tmp_path / "hosts.ini"
    lines = ["[fleet]", "node-c", "node-a", "node-b", "[fleet:vars]", "ansible_connection=local",
             f"ansible_python_interpreter={sys.executable}"]
    if routers_group:
        lines += ["[infera_routers]", *routers_group]
    inventory.write_text("\n".join(lines) + "\n")
    out = tmp_path / "routers"
    out.mkdir()
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), str(PLAYBOOK),
                             "-e", json.dumps({"out": str(out), **extra_vars})],
                            cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}


def test_without_the_group_every_node_runs_its_own_router(tmp_path):
    nodes = routers(tmp_path)
    assert {host: node["router_hosts"] for host, node in nodes.items()} == \
        {host: ["node-a", "node-b", "node-c"] for host in nodes}
    assert {host: node["address"] for host, node in nodes.items()} == {host: "127.0.0.1" for host in nodes}


def test_only_the_group_runs_routers_and_the_others_use_the_first_by_name(tmp_path):
    # node-c is listed first in the inventory (address 10.0.0.11) but node-b comes first by name.
    nodes = routers(tmp_path, routers_group=["node-c", "node-b", "elsewhere"])
    assert {host: node["router_hosts"] for host, node in nodes.items()} == {host: ["node-b", "node-c"] for host in nodes}
    assert nodes["node-b"]["address"] == nodes["node-c"]["address"] == "127.0.0.1"
    assert nodes["node-a"]["address"] == "10.0.0.13"  # node-b's


def test_a_group_with_none_of_the_fleet_leaves_every_node_its_router(tmp_path):
    nodes = routers(tmp_path, routers_group=["elsewhere"])
    assert nodes["node-a"]["router_hosts"] == ["node-a", "node-b", "node-c"]


def test_isolated_nodes_each_keep_their_router_whatever_the_group(tmp_path):
    nodes = routers(tmp_path, routers_group=["node-b"], infera_topology="isolated")
    assert {host: node["router_hosts"] for host, node in nodes.items()} == {host: [host] for host in nodes}
    assert {host: node["address"] for host, node in nodes.items()} == {host: "127.0.0.1" for host in nodes}
