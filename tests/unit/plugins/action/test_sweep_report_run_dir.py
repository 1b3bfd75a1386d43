# SPDX-License-Identifier: Apache-2.0
"""The sweep_report action's run_dir: a relative folder is from where ansible-playbook runs (the controller's working
directory, where the sweep writes results/), not from the playbook's folder."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail

from ..plugin_utils.sweep_runs import standard_run
from .test_sweep_report import make_action


def test_a_relative_run_dir_is_from_the_working_directory(tmp_path, monkeypatch):
    here, playbook_dir = tmp_path / "here", tmp_path / "playbooks"
    standard_run(here / "results" / "r1")
    playbook_dir.mkdir()
    monkeypatch.chdir(here)
    result = make_action({"run_dir": "results/r1"}, playbook_dir).run(task_vars={})
    assert result["csv_path"] == str(here / "results" / "r1" / "results.csv")
    assert (here / "results" / "r1" / "report.md").is_file()


def test_a_run_dir_beside_the_playbook_only_is_not_found_there(tmp_path, monkeypatch):
    standard_run(tmp_path / "playbooks" / "results" / "r1")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    with pytest.raises(AnsibleActionFail, match=f"{tmp_path}/here/results/r1 does not exist"):
        make_action({"run_dir": "results/r1"}, tmp_path / "playbooks").run(task_vars={})
