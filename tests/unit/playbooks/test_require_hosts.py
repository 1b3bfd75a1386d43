# SPDX-License-Identifier: Apache-2.0
"""playbooks/tasks/require_hosts.yml, the first play of every node playbook: an inventory whose hosts are not in the
playbook's group is refused in one line naming the group and the inventory, before any other check (conc included),
instead of every play saying "no hosts matched" and the run exiting 0 having done nothing."""

from __future__ import annotations

import shutil

import pytest

from local_ansible import REPO

from .runs import refusal

NODE_NEXT_STEP = ("next step: put the nodes in group mi355x of the inventory (as inventories/mi355x-example/hosts.yml "
                  "does), or name their group with -e infera_hosts=GROUP")


@pytest.fixture
def other_group(tmp_path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[other]\ngpu-a ansible_host=192.0.2.1\n")
    return inventory


@pytest.mark.parametrize("playbook, extra", [
    ("deploy_mixed.yml", ["-e", "conc=64"]),
    ("deploy_mixed.yml", []),
    ("preflight.yml", []),
    ("sweep.yml", ["-e", "run_id=r"]),
    ("teardown.yml", []),
])
def test_a_node_playbook_refuses_an_inventory_without_its_group(tmp_path, other_group, playbook, extra):
    message, ran = refusal(tmp_path, playbook, "-i", str(other_group), *extra)
    assert message == f"mi355x: no host of the inventory ({other_group}) is in group mi355x; {NODE_NEXT_STEP}"
    assert ran == ["Require hosts | Refuse a group that matches no host, or whose settings file the inventory ignores"]


def test_the_limit_is_named_when_it_leaves_no_host_of_the_group(tmp_path, other_group):
    other_group.write_text("[other]\ngpu-a\n[mi355x]\ngpu-b\n")
    message, _ran = refusal(tmp_path, "deploy_mixed.yml", "-i", str(other_group), "--limit", "gpu-a", "-e", "conc=64")
    assert message.startswith(f"mi355x: no host of the inventory ({other_group}) is in group mi355x within --limit gpu-a; ")


def test_the_etcd_playbook_names_its_own_group(tmp_path, other_group):
    message, _ran = refusal(tmp_path, "etcd.yml", "-i", str(other_group))
    assert message == (f"infera_etcd: no host of the inventory ({other_group}) is in group infera_etcd; next step: put the "
                       "etcd host in group infera_etcd of the inventory, or name it with -e infera_etcd_hosts=HOST (a fleet "
                       "with infera_etcd_endpoint set uses that etcd and needs no run of this playbook)")


def test_a_group_vars_file_hidden_by_the_group_folder_is_named(tmp_path):
    # An inventory copied from the old example (group_vars/mi355x.yml, a file), then given a vault.yml in the folder
    # group_vars/mi355x/: Ansible reads the folder alone, and every setting of the file is gone.
    inventory = tmp_path / "prod"
    shutil.copytree(REPO / "inventories" / "mi355x-example", inventory)
    (inventory / "group_vars" / "mi355x" / "vars.yml").rename(inventory / "group_vars" / "mi355x.yml")
    (inventory / "group_vars" / "mi355x" / "vault.yml").write_text("vault_hf_token: hf_x\n")
    message, _ran = refusal(tmp_path, "deploy_mixed.yml", "-i", str(inventory), "-e", "conc=64")
    hidden = inventory / "group_vars" / "mi355x.yml"
    assert message == (f"mi355x: {hidden} is ignored: Ansible reads the folder beside it ({inventory}/group_vars/mi355x/) "
                       "instead, so none of its settings apply; next step: move the file into that folder, e.g. as "
                       "group_vars/mi355x/vars.yml (the layout of inventories/mi355x-example)")
