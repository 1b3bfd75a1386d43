"""The fleet filters deploy_mixed.yml reads (plugins/filter/fleet.py) over Ansible's own hostvars, on three local
hosts: what a node published reaches them as the play sees it (no node needed)."""

import json
import subprocess
import sys
from pathlib import Path

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env

PLAYBOOK = Path(__file__).parent / "playbooks" / "fleet_filters.yml"


def test_the_fleet_filters_read_every_node_s_published_facts(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("\n".join(["[fleet]", "node-a", "node-b", "node-c", "[fleet:vars]", "ansible_connection=local",
                                    f"ansible_python_interpreter={sys.executable}"]) + "\n")
    out = tmp_path / "fleet.json"
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(inventory), str(PLAYBOOK), "-e", json.dumps({"out": str(out)})],
                            cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    said = json.loads(out.read_text())
    assert said["failed"] == ["node-b"]
    assert said["verdict"]["over_budget"] is False
    assert said["verdict"]["fleet_now"] == ["node-a dp (restarted in this run)",
                                            "node-b FAILED earlier in this run, was serving nodp",
                                            "node-c FAILED here, was serving nodp"]
    assert said["routers"] == {"node-c": "http://10.0.0.13:8000"}
    assert said["summary"] == ("fleet: 2/3 nodes ready (serving topology) [SIMULATED engine]; slowest node-a 41.5 s "
                               "to ready; variant per node: node-a dp, node-b FAILED, node-c FAILED")
