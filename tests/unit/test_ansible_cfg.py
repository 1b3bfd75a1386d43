# SPDX-License-Identifier: Apache-2.0
"""The checkout's ansible.cfg: its pinned collections first (the rehearsal runs those), then Ansible's default paths,
so a clone runs its playbooks with a community.docker installed by `ansible-galaxy collection install`."""

from __future__ import annotations

import json
import os
import subprocess

from local_ansible import ANSIBLE_PLAYBOOK, REPO

ANSIBLE_CONFIG = os.path.join(os.path.dirname(ANSIBLE_PLAYBOOK), "ansible-config")


def test_collections_are_searched_in_the_checkout_then_where_ansible_galaxy_installs(tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), HOME=str(tmp_path), LANG="C.UTF-8")
    done = subprocess.run([ANSIBLE_CONFIG, "dump", "--only-changed", "--format", "json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    setting = next(entry for entry in json.loads(done.stdout) if entry["name"] == "COLLECTIONS_PATHS")
    assert setting["value"] == [str(REPO / ".build" / "collections"), f"{tmp_path}/.ansible/collections",
                                "/usr/share/ansible/collections"]
