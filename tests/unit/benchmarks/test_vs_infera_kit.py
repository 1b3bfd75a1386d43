# SPDX-License-Identifier: Apache-2.0
"""benchmarks/vs_infera_kit's summary: min / median / max per figure, collection / kit of the medians, and the one
parseable line other tools read (the rounds' figures are made up here; the benchmark measures them)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO / 'benchmarks'), str(REPO / 'tests' / 'integration')]

import vs_infera_kit  # noqa: E402  pylint: disable=wrong-import-position


def test_the_summary_gives_each_figures_spread_and_the_ratio_of_the_medians():
    kit = [{'P1': 20.0, 'P3': 22.0, 'P6': 5.0}, {'P1': 24.0, 'P3': 21.0, 'P6': 5.5}, {'P1': 22.0, 'P3': 23.0, 'P6': 6.0}]
    ours = [{'P1': 30.0, 'P1b': 9.0, 'P3': 8.0, 'P5': 2.5, 'P6': 11.0},
            {'P1': 11.0, 'P1b': 7.0, 'P3': 9.0, 'P5': None, 'P6': 12.0},
            {'P1': 18.0, 'P1b': 8.0, 'P3': 7.5, 'P5': 3.5, 'P6': 13.0}]
    rows, line = vs_infera_kit.summary(kit, ours)
    p1 = next(row for row in rows if row.startswith('| P1 |'))
    assert '| 20.00 / 22.00 / 24.00 | 11.00 / 18.00 / 30.00 | 0.82 |' in p1
    # A round that measured nothing (None) is left out of the spread, not counted as 0.
    p5 = next(row for row in rows if row.startswith('| P5 |'))
    assert '| - | 2.50 / 3.00 / 3.50 | - |' in p5
    assert line == 'figures: P1=0.82 P1b=8.00 P2=- P2b=- P3=8.00 P5=3.00 P6=2.18'
    assert re.fullmatch(r'figures:( P\d+b?=(-|\d+\.\d\d))+', line)


def test_a_figure_no_round_measured_is_a_dash_everywhere():
    rows, line = vs_infera_kit.summary([{}], [{}])
    assert all(row.endswith('| - | - | - |') for row in rows[2:])
    assert line == 'figures: P1=- P1b=- P2=- P2b=- P3=- P5=- P6=-'
