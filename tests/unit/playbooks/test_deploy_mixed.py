# SPDX-License-Identifier: Apache-2.0
"""deploy_mixed.yml serves one concurrency: a conc naming several (the comma list a sweep takes) is refused in one
line before any task reaches the node, instead of the deploy quietly serving the first phase's variant."""

from __future__ import annotations

import json

import pytest

from .runs import node_inventory, refusal, run_playbook

# What reads or changes the node: none may run after the refusal.
NODE_STAGES = ("Deploy mixed | Read what the node serves now", "Container |", "Preflight |", "Router |")


@pytest.fixture
def inventory(tmp_path):
    # No Python on the "node": a task that gets past the controller's checks to the node fails at once.
    return node_inventory(tmp_path, f"{tmp_path}/none")


@pytest.mark.parametrize("conc, extra, expected", [
    ("32,256", [], 'conc "32,256" names 2 concurrencies (32, 256) and a deploy serves one; next step: give one, e.g. '
                   "-e conc=256 (playbooks/sweep.yml measures several: -e '{\"concurrencies\": [32, 256]}')"),
    ([256, 32], [], "conc [256, 32] names 2 concurrencies (32, 256) and a deploy serves one; "),
    ("32 64", ["-e", "variant=nodp"], 'conc "32 64" names 2 concurrencies (32, 64) and a deploy serves one; '),
])
def test_several_concurrencies_are_refused_in_one_line_before_the_node(tmp_path, inventory, conc, extra, expected):
    message, ran = refusal(tmp_path, "deploy_mixed.yml", "-i", str(inventory), "-e", json.dumps({"conc": conc}), *extra)
    assert message.startswith(expected), message
    assert ran[-1] == "Deploy mixed | Require one concurrency", ran
    assert not [task for task in ran if task.startswith(NODE_STAGES)], ran


@pytest.mark.parametrize("conc", ["64", 64, [64]])
def test_one_concurrency_passes_the_check(tmp_path, inventory, conc):
    _returncode, lines = run_playbook(tmp_path, "deploy_mixed.yml", "-i", str(inventory), "-e", json.dumps({"conc": conc}))
    check = next(index for index, line in enumerate(lines) if line.startswith("TASK [Deploy mixed | Require one concurrency]"))
    assert lines[check + 1] == "ok: [node-a]", "\n".join(lines[check:check + 10])
