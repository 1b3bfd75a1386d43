# SPDX-License-Identifier: Apache-2.0
"""What the roles decide from one container_status look (plugin_utils/_container_found.py)."""

from __future__ import annotations

import hashlib

from ansible_collections.infera.serving.plugins.plugin_utils._container_found import (
    router_found, script_current, worker_found)

SCRIPT = "#!/bin/bash\n# variant: dp (conc 256)\nexec python -m infera.engine.sglang\n"


def found(wrapper=False, exit_code=None, log=True, engines=(), head=(), rootfs='/var/lib/docker/overlay2/x/merged'):
    """What find.yml's container_status returns, as far as these decisions read it."""
    return {"container": {"running": True, "rootfs": rootfs},
            "processes": {"wrapper": ["12 python -m infera.engine.sglang --port 30000"] if wrapper else [],
                          "engine": list(engines)},
            "files": {"exit": {"exists": exit_code is not None, "head": [] if exit_code is None else [exit_code]},
                      "script": {"head": list(head)}},
            "exists_only": {"log": {"exists": log}, "token": {"exists": False}}}


def test_a_script_is_current_only_with_the_same_text_and_mode():
    checksum = hashlib.sha1(SCRIPT.encode()).hexdigest()
    assert script_current({'checksum': checksum, 'mode': '0644'}, SCRIPT)
    assert not script_current({'checksum': checksum, 'mode': '0755'}, SCRIPT)
    assert not script_current({'checksum': checksum, 'mode': '0644'}, SCRIPT + ' ')
    assert not script_current({'exists': False}, SCRIPT)


def test_only_a_launch_that_did_not_end_in_infera_s_own_stop_may_have_left_a_record():
    cases = {"killed": found(exit_code="137"), "container_gone": found(exit_code=None),
             "stopped_cleanly": found(exit_code="0"), "serving": found(wrapper=True, exit_code="137"),
             "never_launched": found(exit_code=None, log=False)}
    seen = {name: worker_found(case, 'http://10.0.0.5:2379', '10.0.0.7') for name, case in cases.items()}
    seen["no_etcd"] = worker_found(found(exit_code="137"), '', '10.0.0.7')
    seen["no_address"] = worker_found(found(exit_code="137"), 'http://10.0.0.5:2379', '')
    assert {name: state["record_may_be_stale"] for name, state in seen.items()} == {
        "killed": True, "container_gone": True, "stopped_cleanly": False, "serving": False, "never_launched": False,
        "no_etcd": False, "no_address": False}
    assert seen["killed"]["last_exit"] == "137" and seen["container_gone"]["last_exit"] == ""
    assert worker_found(found(exit_code=" 143\n"))["last_exit"] == "143"


def test_engines_count_as_left_only_without_their_wrapper():
    engines = ["40 python3 -m sglang.launch_server --port 30000"]
    assert worker_found(found(engines=engines))["engines_left"] == engines
    assert worker_found(found(wrapper=True, engines=engines))["engines_left"] == []


def test_the_running_variant_is_the_running_script_s():
    head = ["#!/bin/bash", "# variant: dp (conc 256)"]
    assert worker_found(found(wrapper=True, head=head))["running_variant"] == "dp"
    assert worker_found(found(wrapper=False, head=head))["running_variant"] == "none"
    assert worker_found(found(wrapper=True, head=["#!/bin/bash"]))["running_variant"] == "none"
    assert worker_found(found(wrapper=True, head=head))["wrapper_running"] is True


def test_a_look_at_a_missing_container_reads_as_nothing_running():
    state = worker_found({"container": {"exists": False, "running": False}, "processes": {}, "files": {},
                          "exists_only": {}})
    assert state == {"wrapper_running": False, "engines_left": [], "running_variant": "none", "rootfs": "",
                     "last_exit": "", "record_may_be_stale": False}


ROUTER_SCRIPT = "#!/bin/bash\nexec python -m infera.server --port 8000\n"


def router_look(processes=(), checksum=None, mode='0644', has_processes=True):
    """What the router role's find.yml gets from container_status: its router process, its launch script."""
    look = {"container": {"exists": True, "running": True, "pid": 4242},
            "files": {"script": {"exists": checksum is not None, "checksum": checksum, "mode": mode}}}
    if has_processes:
        look["processes"] = {"router": list(processes)}
    return look


def test_the_router_runs_when_a_router_process_is_found():
    # As the role's Jinja read it: (processes | default({})).router | default([]) | length > 0.
    assert router_found(router_look(["31 python -m infera.server --port 8000"]))["running"] is True
    assert router_found(router_look([]))["running"] is False
    assert router_found(router_look(has_processes=False))["running"] is False
    assert router_found({"processes": {"other": ["7 sleep"]}})["running"] is False


def test_the_router_script_is_current_only_with_the_same_text_and_mode():
    checksum = hashlib.sha1(ROUTER_SCRIPT.encode()).hexdigest()
    assert router_found(router_look(checksum=checksum), ROUTER_SCRIPT)["script_current"] is True
    assert router_found(router_look(checksum=checksum, mode='0755'), ROUTER_SCRIPT)["script_current"] is False
    assert router_found(router_look(checksum=checksum), ROUTER_SCRIPT + "#\n")["script_current"] is False
    assert router_found(router_look(checksum=None), ROUTER_SCRIPT)["script_current"] is False


def test_a_stop_that_renders_no_script_reads_only_whether_the_router_runs():
    # absent.yml renders no launch script: nothing to compare, and a missing container reads as no router.
    assert router_found({"container": {"exists": False, "running": False}, "processes": {}, "files": {}}) == {
        "running": False, "script_current": None}
    assert router_found(router_look(["31 python -m infera.server"])) == {"running": True, "script_current": None}
