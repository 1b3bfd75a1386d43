"""The worker role's decisions about the record a dead Infera wrapper may have left in etcd
(roles/sglang_worker/vars/main.yml, used by tasks/stale_record.yml): when to look, where etcd is (as Infera reads
the endpoint), which lease to revoke and what the play says. Run through Ansible on the controller (no node)."""

import json
import subprocess
import sys
from pathlib import Path

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env

PLAYBOOK = Path(__file__).parent / "playbooks" / "stale_record.yml"
KEY = "/infera/workers/10.0.0.7:30000"


def found(wrapper=False, exit_code=None, log=True):
    """What find.yml's container_status returns, as far as these decisions read it."""
    return {"container": {"running": True},
            "processes": {"wrapper": ["12 python -m infera.engine.sglang --port 30000"] if wrapper else [], "engine": []},
            "files": {"exit": {"exists": exit_code is not None, "head": [] if exit_code is None else [exit_code]}},
            "exists_only": {"log": {"exists": log}, "token": {"exists": False}}}


def decide(tmp_path, *cases):
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", str(PLAYBOOK),
                             "-e", json.dumps({"out": str(out), "cases": list(cases),
                                               "ansible_python_interpreter": sys.executable})],
                            cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    return {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}


def test_only_a_launch_that_did_not_end_in_infera_s_own_stop_is_looked_for_in_etcd(tmp_path):
    seen = decide(tmp_path,
                  {"name": "killed", "found": found(exit_code="137")},
                  {"name": "container_gone", "found": found(exit_code=None)},
                  {"name": "stopped_cleanly", "found": found(exit_code="0")},
                  {"name": "serving", "found": found(wrapper=True, exit_code="137")},
                  {"name": "never_launched", "found": found(exit_code=None, log=False)},
                  {"name": "no_etcd", "found": found(exit_code="137"), "endpoint": ""})
    assert {name: case["may_be_stale"] for name, case in seen.items()} == {
        "killed": True, "container_gone": True, "stopped_cleanly": False, "serving": False, "never_launched": False,
        "no_etcd": False}
    assert seen["killed"]["exit"] == "137" and seen["container_gone"]["exit"] == ""
    assert seen["killed"]["key"] == KEY


def test_etcd_is_reached_as_infera_reads_the_endpoint(tmp_path):
    # infera/common/discovery.py _normalize_endpoint: a URL as it is, host:port over http, a bare host on 2379.
    killed = found(exit_code="137")
    seen = decide(tmp_path, {"name": "url", "endpoint": "https://etcd.example.net:2379/", "found": killed},
                  {"name": "host_port", "endpoint": "10.0.0.5:2390", "found": killed},
                  {"name": "host", "endpoint": "etcd-1", "found": killed})
    assert {name: case["url"] for name, case in seen.items()} == {
        "url": "https://etcd.example.net:2379", "host_port": "http://10.0.0.5:2390", "host": "http://etcd-1:2379"}


def test_the_play_says_what_became_of_the_record(tmp_path):
    record = {"status": 200, "json": {"kvs": [{"key": "x", "lease": "7668682692136634651"}]}}
    seen = decide(tmp_path,
                  {"name": "revoked", "found": found(exit_code="137"), "look": record, "revoke": {"status": 200}},
                  {"name": "ran_out", "found": found(exit_code="137"), "look": record, "revoke": {"status": 404}},
                  {"name": "refused", "found": found(exit_code="137"), "look": record,
                   "revoke": {"status": 503, "msg": "Status code was 503 and not [200, 404]"}},
                  {"name": "no_record", "found": found(exit_code="137"), "look": {"status": 200, "json": {}}},
                  {"name": "no_answer", "found": found(exit_code=None),
                   "look": {"status": -1, "msg": "Request failed: <urlopen error [Errno 111] Connection refused>"}})
    said = {name: " ".join(case["message"].split()) for name, case in seen.items()}
    assert seen["revoked"]["lease"] == 7668682692136634651
    assert said["revoked"] == (
        f"localhost: stage worker: revoked etcd lease 7668682692136634651 of {KEY}, the record Infera's wrapper left "
        "when it died (its launch ended with exit 137): the router no longer sends requests to worker 10.0.0.7:30000")
    assert said["ran_out"].endswith("the record Infera's wrapper left when it died, ran out by itself")
    assert said["refused"].startswith("WARNING localhost: stage worker: could not revoke etcd lease 7668682692136634651")
    assert "Status code was 503" in said["refused"]
    assert said["refused"].endswith(
        """Next step: curl -s -X POST http://10.0.0.5:2379/v3/lease/revoke -d '{"ID": "7668682692136634651"}'""")
    assert said["no_record"] == "" and seen["no_record"]["lease"] == 0
    assert said["no_answer"].startswith("WARNING localhost: stage worker: Infera's wrapper died without revoking its "
                                        "etcd lease (its launch never wrote an exit code)")
    assert "Connection refused" in said["no_answer"]
    assert said["no_answer"].endswith("Next step: curl -s http://10.0.0.5:2379/health")
