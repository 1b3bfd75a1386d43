# SPDX-License-Identifier: Apache-2.0
"""docs/targets/: the targets files the collection ships, read as the report reads them (plugin_utils/_sweep_metrics),
each naming its source and date and the workload it was measured at, so a comparison says when a run differs."""

from __future__ import annotations

import re

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_metrics as sweep_metrics

from local_ansible import REPO

SHIPPED = sorted((REPO / "docs" / "targets").glob("*.yml"))


def test_there_is_a_shipped_targets_file():
    assert [path.name for path in SHIPPED] == ["inferencex-dsv4-pro-mi355x-sglang.yml"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_a_shipped_targets_file_loads_and_names_its_source_date_and_workload(path):
    targets = sweep_metrics.load_targets(path)
    text = path.read_text()
    assert re.search(r"https://\S+", text), "no source address"
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", text), "no date"
    assert targets["metric"] == sweep_metrics.THROUGHPUT_PER_GPU and targets["higher_is_better"] is True
    assert set(targets["workload"]) == set(sweep_metrics.TARGET_WORKLOAD_KEYS.values())
    assert all(value > 0 for value in targets["targets"].values())


def test_inferencex_figures_are_the_published_ones_at_8192_1024():
    targets = sweep_metrics.load_targets(REPO / "docs" / "targets" / "inferencex-dsv4-pro-mi355x-sglang.yml")
    # The blog's 2026-05-21 table: c256 peaks, c512 falls back.
    assert targets["targets"][256] == 2256.1 and targets["targets"][512] == 1814.4
    assert max(targets["targets"], key=targets["targets"].get) == 256
    assert sorted(targets["workload"].values()) == [0.8, 1024, 8192]
