# SPDX-License-Identifier: Apache-2.0
"""Search within limits: the limits and band checks, the bracket-and-bisect search, the best point, goodput."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_search as sweep_search
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    MEDIAN_INTERACTIVITY,
    THROUGHPUT_PER_GPU,
    latency_column,
)

TPOT = latency_column('P99', 'TPOT')
TTFT = latency_column('P99', 'TTFT')
TPOT_30 = {'tpot_p99_ms': 30}
GRID = (4, 8, 16, 32, 64, 128, 256, 512, 1024)   # the powers-of-two grid over the default band


def point(conc, tpot, ttft=100.0, throughput=None, interactivity=None):
    """The columns of a row the search reads."""
    return {'Concurrency': conc, 'Variant': 'nodp', TPOT: tpot, TTFT: ttft,
            THROUGHPUT_PER_GPU: 10.0 * conc ** 0.5 if throughput is None else throughput,
            MEDIAN_INTERACTIVITY: 1000.0 / tpot if interactivity is None and tpot else interactivity}


def rising(knee, invalid=()):
    """A recorded monotone curve: TPOT p99 grows with concurrency, 30 ms at ``knee``; ``invalid`` points ran badly."""
    def curve(conc):
        return None if conc in invalid else point(conc, 30.0 * conc / knee)
    return curve


def search(curve, limits=None, band=sweep_search.DEFAULT_BAND, measured=None):
    """Run the search to its end against ``curve``; every proposal must be new and inside the band."""
    measured = dict(measured or {})
    proposed = []
    while True:
        conc = sweep_search.next_concurrency(measured, list(band), limits or TPOT_30)
        if conc is None:
            return proposed, measured
        assert isinstance(conc, int) and band[0] <= conc <= band[1], conc
        assert conc not in measured, (conc, proposed)
        assert len(proposed) < 50, proposed   # only keeps a broken search from looping forever
        proposed.append(conc)
        measured[conc] = curve(conc)


def assert_resolved(measured, best):
    """The best passing point and the lowest failing one above it are within RESOLUTION or adjacent."""
    above = [conc for conc in measured if conc > best]
    if above:
        failing = min(above)
        assert failing <= best * sweep_search.RESOLUTION or failing - best == 1, (best, failing)


# ---------------------------------------------------------------- the search

def test_a_monotone_curve_is_bracketed_from_the_middle_then_bisected_with_fewer_points_than_the_grid():
    proposed, measured = search(rising(125))
    assert proposed == [64, 256, 128, 91]
    conc, row = sweep_search.best_point(measured, TPOT_30)
    assert (conc, row) == (91, measured[91])
    assert_resolved(measured, conc)
    assert len(proposed) < len(GRID)


@pytest.mark.parametrize('knee', [4, 5, 10, 17, 50, 64, 200, 300, 700, 1023])
def test_any_knee_in_the_band_is_found_within_the_resolution_in_fewer_points_than_the_grid(knee):
    proposed, measured = search(rising(knee))
    best, _row = sweep_search.best_point(measured, TPOT_30)
    assert knee / sweep_search.RESOLUTION <= best <= knee or knee - best <= 1
    assert_resolved(measured, best)
    assert len(proposed) < len(GRID)


def test_a_bad_point_in_the_middle_ends_the_bisection_below_it():
    proposed, measured = search(rising(125, invalid={91}))
    assert proposed == [64, 256, 128, 91]
    assert measured[91] is None
    assert sweep_search.best_point(measured, TPOT_30)[0] == 64


def test_a_failing_point_below_a_passing_one_does_not_stop_the_search_upward():
    curve = rising(125, invalid={16})
    earlier = {conc: curve(conc) for conc in (4, 8, 16, 32)}   # part of the grid, from an earlier run
    proposed, measured = search(curve, measured=earlier)
    assert proposed == [128, 64, 91]
    assert sweep_search.best_point(measured, TPOT_30)[0] == 91


def test_when_nothing_meets_the_search_steps_down_to_the_bottom_of_the_band_and_stops():
    proposed, measured = search(rising(3))
    assert proposed == [64, 16, 4]
    assert sweep_search.best_point(measured, TPOT_30) is None
    assert sweep_search.nothing_met(measured, TPOT_30) == 'no point met TPOT p99 <= 30 ms (best 40.0 ms at c4)'


def test_when_everything_meets_the_search_steps_up_to_the_top_of_the_band_and_stops():
    proposed, measured = search(rising(5000))
    assert proposed == [64, 256, 1024]
    assert sweep_search.best_point(measured, TPOT_30)[0] == 1024
    assert sweep_search.nothing_met(measured, TPOT_30) == ''


def test_a_passing_point_below_the_top_steps_up_to_the_top_and_a_passing_top_ends_the_search():
    assert sweep_search.next_concurrency({600: point(600, 10.0)}, [4, 1024], TPOT_30) == 1024
    assert sweep_search.next_concurrency({200: point(200, 10.0)}, [4, 1024], TPOT_30) == 800
    assert sweep_search.next_concurrency({1024: point(1024, 10.0)}, [4, 1024], TPOT_30) is None


def test_points_of_an_earlier_run_are_reused_and_never_proposed_again():
    earlier = {conc: rising(125)(conc) for conc in GRID[:5]}   # 4 .. 64 measured, all passing
    proposed, measured = search(rising(125), measured=earlier)
    assert proposed == [256, 128, 91]
    assert not set(proposed) & set(earlier)
    assert sweep_search.best_point(measured, TPOT_30)[0] == 91


def test_a_fully_measured_grid_needs_only_the_bisection():
    proposed, _measured = search(rising(125), measured={conc: rising(125)(conc) for conc in GRID})
    assert proposed == [91]


def test_points_outside_the_band_do_not_steer_it_and_the_start_is_the_geometric_middle():
    assert sweep_search.next_concurrency({}, [1, 100], TPOT_30) == 10
    assert sweep_search.next_concurrency({2048: point(2048, 1.0), '2': None}, [4, 1024], TPOT_30) == 64


def test_adjacent_concurrencies_end_the_search_even_when_their_ratio_is_above_the_resolution():
    measured = {2: point(2, 10.0), 3: point(3, 40.0)}
    assert sweep_search.next_concurrency(measured, [1, 8], TPOT_30) is None
    assert sweep_search.next_concurrency({2: point(2, 10.0), 4: point(4, 40.0)}, [1, 8], TPOT_30) == 3


def test_a_measured_concurrency_that_is_not_a_number_is_refused():
    with pytest.raises(SweepResultsError, match=r"^measured concurrency 'c64' is not a whole number such as 64$"):
        sweep_search.next_concurrency({'c64': None}, [4, 1024], TPOT_30)


# ---------------------------------------------------------------- limits and band

def test_limits_keep_only_the_given_keys_as_floats():
    limits = sweep_search.check_limits({'tok_s_user_min': 20, 'tpot_p99_ms': 30.5})
    assert limits == {'tpot_p99_ms': 30.5, 'tok_s_user_min': 20.0}
    assert [type(value) for value in limits.values()] == [float, float]


@pytest.mark.parametrize('limits, message', [
    ([30], "sweep_limits must be a mapping of tpot_p99_ms, ttft_p99_ms, tok_s_user_min to numbers, not [30]"),
    ({'tpot_ms': 30},
     "sweep_limits has unknown key(s) tpot_ms; allowed: tpot_p99_ms, ttft_p99_ms, tok_s_user_min"),
    ({}, "sweep_limits is empty; give at least one of tpot_p99_ms, ttft_p99_ms, tok_s_user_min"),
    ({'tpot_p99_ms': 0}, "sweep_limits.tpot_p99_ms is 0; it must be a number above 0"),
    ({'ttft_p99_ms': -5.0}, "sweep_limits.ttft_p99_ms is -5.0; it must be a number above 0"),
    ({'tok_s_user_min': True}, "sweep_limits.tok_s_user_min is True; it must be a number above 0"),
    ({'tpot_p99_ms': '30'}, "sweep_limits.tpot_p99_ms is '30'; it must be a number above 0"),
    ({'tpot_p99_ms': float('nan')}, "sweep_limits.tpot_p99_ms is nan; it must be a number above 0"),
])
def test_bad_limits_are_refused_in_one_line(limits, message):
    with pytest.raises(SweepResultsError) as caught:
        sweep_search.check_limits(limits)
    assert str(caught.value) == message


def test_the_band_defaults_to_4_to_1024():
    assert sweep_search.check_band() == sweep_search.DEFAULT_BAND == (4, 1024)
    assert sweep_search.check_band([1, 2]) == (1, 2)


@pytest.mark.parametrize('band', [[4], [0, 8], [8, 4], [4, 4], [4.0, 8], [True, 8], None, '4-1024'])
def test_a_bad_band_is_refused_in_one_line(band):
    with pytest.raises(SweepResultsError) as caught:
        sweep_search.check_band(band)
    assert str(caught.value) == ('sweep_search_band is %r; it must be [low, high], whole numbers with 1 <= low < high, '
                                 'e.g. [4, 1024]' % (band,))


# ---------------------------------------------------------------- one row against the limits

def test_a_row_misses_the_limits_it_is_beyond_and_those_it_has_no_figure_for():
    limits = sweep_search.check_limits({'tpot_p99_ms': 30, 'ttft_p99_ms': 500, 'tok_s_user_min': 40})
    assert sweep_search.missed_limits(point(8, 30.0, ttft=500.0, interactivity=40.0), limits) == []   # inclusive
    missed = sweep_search.missed_limits(point(8, 30.1, ttft=500.1, interactivity=39.9), limits)
    assert missed == list(sweep_search.LIMIT_KEYS)
    assert sweep_search.missed_limits({TPOT: 10.0, TTFT: None}, limits) == ['ttft_p99_ms', 'tok_s_user_min']
    assert sweep_search.missed_limits(None, {'ttft_p99_ms': 500.0}) == ['ttft_p99_ms']


def test_the_best_point_is_the_highest_throughput_within_limits_and_the_lower_concurrency_on_a_tie():
    measured = {8: point(8, 10.0, throughput=900.0), 16: point(16, 20.0, throughput=900.0),
                32: point(32, 29.0, throughput=800.0), 64: point(64, 31.0, throughput=5000.0), 128: None}
    assert sweep_search.best_point(measured, TPOT_30) == (8, measured[8])
    assert sweep_search.best_point({128: None}, TPOT_30) is None


def test_nothing_met_names_each_limit_no_point_met_and_the_closest_value_seen():
    measured = {4: point(4, 41.2, ttft=900.0, interactivity=24.3), 8: point(8, 45.0, ttft=700.0, interactivity=22.0),
                16: None}
    limits = {'tpot_p99_ms': 30, 'ttft_p99_ms': 800, 'tok_s_user_min': 50}
    assert sweep_search.nothing_met(measured, limits) == (
        'no point met TPOT p99 <= 30 ms (best 41.2 ms at c4), '
        'interactivity >= 50 tok/s/user (best 24.3 tok/s/user at c4)')
    assert sweep_search.nothing_met({16: None}, {'ttft_p99_ms': 250.5}) == (
        'no point met TTFT p99 <= 250.5 ms (no value measured)')


def test_nothing_met_says_so_when_each_limit_was_met_but_never_all_at_once():
    measured = {4: point(4, 20.0, ttft=900.0), 64: point(64, 40.0, ttft=100.0)}
    assert sweep_search.nothing_met(measured, {'tpot_p99_ms': 30, 'ttft_p99_ms': 500}) == (
        'no point met TPOT p99 <= 30 ms, TTFT p99 <= 500 ms at once')


def test_the_best_line_has_the_figures_to_one_decimal_and_the_duration_as_a_clock():
    row = point(108, 25.92, ttft=412.345, throughput=2345.678, interactivity=41.04)
    assert sweep_search.best_line('nodp', 108, row, 5, 3725.4) == (
        'best within limits: c108 nodp 2345.7 tok/s/GPU at 41.0 tok/s/user (TPOT p99 25.9 ms, TTFT p99 412.3 ms), '
        '5 points, 1:02:05')


# ---------------------------------------------------------------- goodput

def bench_record(duration=2.0):
    """One --output-details line: met, failed, slow first token, slow tokens, one token, too slow for a user."""
    return {
        'duration': duration, 'completed': 5,
        'errors': ['', 'Timeout', '', '', '', ''],
        'output_lens': [10, 0, 10, 10, 1, 10],
        'ttfts': [0.2, 0.0, 0.6, 0.2, 0.1, 0.2],
        'itls': [[0.02] * 9, [], [0.02] * 9, [0.035] * 9, [], [0.028] * 9],
    }


def test_goodput_counts_the_requests_that_met_every_limit_per_second():
    limits = {'tpot_p99_ms': 30, 'ttft_p99_ms': 500, 'tok_s_user_min': 40}
    # the first request and the one-token one
    assert sweep_search.request_goodput(bench_record(), limits) == pytest.approx(2 / 2.0)
    assert sweep_search.request_goodput(bench_record(), {'ttft_p99_ms': 500}) == pytest.approx(4 / 2.0)
    assert sweep_search.request_goodput(bench_record(), {'tpot_p99_ms': 30}) == pytest.approx(4 / 2.0)
    assert sweep_search.request_goodput(bench_record(), {'tok_s_user_min': 40}) == pytest.approx(3 / 2.0)


def test_a_request_with_an_error_never_counts_whatever_its_figures():
    record = dict(bench_record(), errors=['stream ended early'] + [''] * 5)   # the first request would meet
    assert sweep_search.request_goodput(record, {'ttft_p99_ms': 500}) == pytest.approx(3 / 2.0)


def test_goodput_is_none_without_per_request_details():
    record = bench_record()
    del record['itls']
    assert sweep_search.request_goodput(record, TPOT_30) is None
    assert sweep_search.request_goodput(dict(bench_record(), ttfts=[0.2]), TPOT_30) is None
    assert sweep_search.request_goodput(bench_record(duration=0), TPOT_30) is None
