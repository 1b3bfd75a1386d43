# SPDX-License-Identifier: Apache-2.0
"""inventories/mi355x-example, copied (tests/integration/test_user_path.py runs the pages' own copy command, from the
installed collection) and given a vaulted token exactly as docs/quickstart-mi355x.md prints it: the group's settings
and the token both reach the nodes (the folder layout group_vars/mi355x/ keeps vars.yml read beside vault.yml; a
group_vars/mi355x.yml file would be ignored once the recipe made the folder)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env

BIN = Path(ANSIBLE_PLAYBOOK).parent


def _printed(path, start):
    """The first line of path's shell blocks starting with start, its comment left off."""
    line = next(line for line in path.read_text().splitlines() if line.startswith(start))
    return line.split("  #", 1)[0].strip()


def _shell(command, cwd, env):
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done.stdout


def test_the_quickstart_vault_recipe_keeps_the_group_settings(tmp_path):
    shutil.copytree(REPO / "inventories" / "mi355x-example", tmp_path / "inventories" / "prod")
    password = tmp_path / "vault-password"
    password.write_text("throwaway\n")
    env = ansible_env(PATH=f"{BIN}:/usr/bin:/bin", ANSIBLE_VAULT_PASSWORD_FILE=str(password))
    _shell(_printed(REPO / "docs" / "quickstart-mi355x.md", "ansible-vault encrypt_string "), tmp_path, env)
    # The recipe's next line: uncomment infera_hf_token in vars.yml.
    settings = tmp_path / "inventories" / "prod" / "group_vars" / "mi355x" / "vars.yml"
    settings.write_text(settings.read_text().replace('# infera_hf_token: "{{ vault_hf_token }}"',
                                                     'infera_hf_token: "{{ vault_hf_token }}"'))

    host = json.loads(_shell("ansible-inventory -i inventories/prod --host mi355x-01", tmp_path, env))
    assert host["infera_image"] == "rocm/infera:sglang-v0.1.1"
    assert host["infera_etcd_endpoint"] == "http://10.0.0.5:2379"
    assert "__ansible_vault" in host["vault_hf_token"]
    # Decrypted with the vault password, through the group's own setting (debug needs no connection to the node).
    token = _shell("ansible -i inventories/prod mi355x-01 -m ansible.builtin.debug -a var=infera_hf_token", tmp_path, env)
    assert "infera_hf_token: hf_..." in token, token
