# SPDX-License-Identifier: Apache-2.0
"""The results/<run_id> folder every _sweep_* test builds its run in."""

from __future__ import annotations

import pytest


@pytest.fixture
def run_dir(tmp_path):
    directory = tmp_path / 'results' / '20261129T100000Z'
    directory.mkdir(parents=True)
    return directory
