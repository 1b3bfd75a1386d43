# SPDX-License-Identifier: Apache-2.0
"""playbooks/report.yml as printed: one command, the same wherever it is printed (the playbook's own message, the
README, the demo's last line), that works as typed from the folder holding results/, with no node and no Docker."""

from __future__ import annotations

import re
import shlex
import subprocess

import yaml

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env
from plugins.plugin_utils.sweep_runs import standard_run

RUN_DIR = re.compile(r"run_dir=results/(<run_id>|\$run_id|first)\b")


def _command(text):
    """The report command in a line of text, its run folder written results/<run_id>."""
    found = re.search(r"ansible-playbook [^\n#\")]*infera\.serving\.report -e run_dir=results/[^\s)\"]+", text)
    assert found, text
    return RUN_DIR.sub("run_dir=results/<run_id>", found[0].strip())


def printed_command():
    """What report.yml prints when run_dir is missing."""
    (play,) = yaml.safe_load((REPO / "playbooks" / "report.yml").read_text())
    return _command(play["tasks"][0]["ansible.builtin.assert"]["fail_msg"])


def test_every_printed_copy_is_the_playbook_s_own():
    readme_block = (REPO / "README.md").read_text().split("## On real MI355X nodes", 1)[1].split("```bash", 3)[2]
    demo_line = next(line for line in (REPO / "scripts" / "demo").read_text().splitlines() if "infera.serving.report" in line)
    header = (REPO / "playbooks" / "report.yml").read_text().splitlines()[1]
    command = printed_command()
    # By its FQCN: the same command from a checkout (ansible.cfg's collections) and from the installed collection.
    assert command == "ansible-playbook -i localhost, infera.serving.report -e run_dir=results/<run_id>"
    assert [_command(readme_block), _command(demo_line), _command(header)] == [command] * 3


def test_the_printed_command_works_from_the_folder_holding_results(tmp_path):
    standard_run(tmp_path / "results" / "r1")
    argv = shlex.split(printed_command().replace("<run_id>", "r1"))
    # The checkout's ansible.cfg, whose default inventory is the rehearsal's (Docker): `-i localhost,` replaces it.
    done = subprocess.run([ANSIBLE_PLAYBOOK, *argv[1:]], cwd=tmp_path, env=ansible_env(), capture_output=True, text=True,
                          timeout=120, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert f"report: {tmp_path}/results/r1/report.md" in out, out[-3000:]
    assert (tmp_path / "results" / "r1" / "results.csv").is_file()
