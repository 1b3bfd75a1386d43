# SPDX-License-Identifier: Apache-2.0
"""A playbook run on the controller as a user runs it, against a temporary inventory whose hosts are never reached:
each test's run must stop at a check before any task touches a node."""

from __future__ import annotations

import subprocess

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env


def run_playbook(cwd, playbook, *extra):
    """(returncode, output lines) of `ansible-playbook playbooks/<playbook> ...` started in cwd."""
    result = subprocess.run([ANSIBLE_PLAYBOOK, str(REPO / "playbooks" / playbook), *extra], cwd=cwd,
                            env=ansible_env(PWD=str(cwd)), capture_output=True, text=True, timeout=120, check=False)
    return result.returncode, (result.stdout + result.stderr).splitlines()


def refusal(cwd, playbook, *extra):
    """(the one error line's message, the names of the tasks that ran) of a run that must fail in one line."""
    returncode, lines = run_playbook(cwd, playbook, *extra)
    text = "\n".join(lines[-60:])
    assert returncode != 0, text
    errors = [index for index, line in enumerate(lines) if line.startswith("[ERROR]:")]
    assert len(errors) == 1 and lines[errors[0]].startswith("[ERROR]: Task failed: Action failed: "), text
    # Ansible prints where the task is right after the message: a line between would be more of the message.
    assert lines[errors[0] + 1].startswith("Origin: "), text
    ran = [line.removeprefix("TASK [").split("]")[0] for line in lines if line.startswith("TASK [")]
    return lines[errors[0]].removeprefix("[ERROR]: Task failed: Action failed: "), ran


def node_inventory(directory, interpreter):
    """An inventory file in directory: one node, node-a, in group mi355x with every required setting, reached
    locally with the given Python (a path that does not exist makes any task that reaches the node fail at once)."""
    path = directory / "hosts.ini"
    path.write_text("\n".join([
        "[mi355x]", "node-a", "[mi355x:vars]", "ansible_connection=local", f"ansible_python_interpreter={interpreter}",
        "infera_image=registry.example.com/sglang:dsv4", f"infera_hf_cache={directory}/hf",
        f"infera_model_path={directory}/hf/model", "infera_etcd_endpoint=http://127.0.0.1:2379",
        "infera_advertise_host=127.0.0.1"]) + "\n")
    return path
