# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Search within limits: the highest tok/s/GPU whose point meets the user's TPOT p99, TTFT p99 and tok/s/user limits.

The decisions only; the sweep runs the points. Throughput per GPU rises with concurrency while the
latencies grow, so the best point within limits is (nearly) the highest concurrency that meets them.
The search starts at the band's geometric middle, brackets by stepping x4 up while points pass (÷4
down while they fail), then bisects on a log scale between the highest passing concurrency and the
lowest failing one above it, until the two are RESOLUTION apart or adjacent. Every measured point
counts, including those of an earlier run, so no concurrency is run twice. Over the default band
[4, 1024] a monotone curve takes 3 to 5 points (the powers-of-two grid takes 9, at resolution 2, coarser).
Each step looks only at what is measured, so the search is deterministic and can resume anywhere.
"""

from __future__ import annotations

import math

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    MEDIAN_INTERACTIVITY,
    THROUGHPUT_PER_GPU,
    latency_column,
    optional_float,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_progress import clock

LIMITS_VARIABLE = 'sweep_limits'
BAND_VARIABLE = 'sweep_search_band'
LIMIT_KEYS = ('tpot_p99_ms', 'ttft_p99_ms', 'tok_s_user_min')
DEFAULT_BAND = (4, 1024)
# Done when the highest passing and the lowest failing concurrency are at most this ratio apart (or adjacent).
RESOLUTION = 1.5
# The bracketing step, up from a passing point or down from a failing one.
_STEP = 4
TPOT_P99 = latency_column('P99', 'TPOT')
TTFT_P99 = latency_column('P99', 'TTFT')
# limit key -> (row column, True when the limit is a ceiling, how the limit reads, unit)
_LIMITS = {
    'tpot_p99_ms': (TPOT_P99, True, 'TPOT p99 <=', 'ms'),
    'ttft_p99_ms': (TTFT_P99, True, 'TTFT p99 <=', 'ms'),
    'tok_s_user_min': (MEDIAN_INTERACTIVITY, False, 'interactivity >=', 'tok/s/user'),
}


def _positive(value):
    """A finite number above 0 (bools are not numbers here)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)


def check_limits(limits):
    """The user's limits as ``{key: float}`` with only the keys given; one line naming the fault otherwise."""
    allowed = ', '.join(LIMIT_KEYS)
    if not isinstance(limits, dict):
        raise SweepResultsError('%s must be a mapping of %s to numbers, not %r' % (LIMITS_VARIABLE, allowed, limits))
    unknown = sorted(str(key) for key in limits if key not in LIMIT_KEYS)
    if unknown:
        raise SweepResultsError('%s has unknown key(s) %s; allowed: %s'
                                % (LIMITS_VARIABLE, ', '.join(unknown), allowed))
    if not limits:
        raise SweepResultsError('%s is empty; give at least one of %s' % (LIMITS_VARIABLE, allowed))
    for key in LIMIT_KEYS:
        if key in limits and not _positive(limits[key]):
            raise SweepResultsError('%s.%s is %r; it must be a number above 0' % (LIMITS_VARIABLE, key, limits[key]))
    return {key: float(limits[key]) for key in LIMIT_KEYS if key in limits}


def check_band(band=DEFAULT_BAND):
    """The concurrency band as ``(low, high)``: whole numbers, 1 <= low < high; the search never leaves it."""
    valid = (isinstance(band, (list, tuple)) and len(band) == 2
             and all(isinstance(end, int) and not isinstance(end, bool) and end >= 1 for end in band)
             and band[0] < band[1])
    if not valid:
        raise SweepResultsError('%s is %r; it must be [low, high], whole numbers with 1 <= low < high, e.g. [%d, %d]'
                                % ((BAND_VARIABLE, band) + DEFAULT_BAND))
    return (band[0], band[1])


def missed_limits(row, limits):
    """The limit keys a row misses, in LIMIT_KEYS order; a missing row or figure misses its limit."""
    limits = check_limits(limits)
    row = row or {}
    missed = []
    for key, limit in limits.items():
        column, ceiling, _text, _unit = _LIMITS[key]
        value = optional_float(row.get(column))
        if value is None or (value > limit if ceiling else value < limit):
            missed.append(key)
    return [key for key in LIMIT_KEYS if key in missed]


def _meets(row, limits):
    return row is not None and not missed_limits(row, limits)


def _points(measured):
    """``{conc: row or None}`` with int concurrencies (a JSON round trip may have made them text)."""
    if not isinstance(measured, dict):
        raise SweepResultsError('the measured points must be a mapping of concurrency to row, not %r' % (measured,))
    points = {}
    for conc, row in measured.items():
        if isinstance(conc, bool) or not str(conc).isdigit():
            raise SweepResultsError('measured concurrency %r is not a whole number such as 64' % (conc,))
        points[int(conc)] = row
    return points


def next_concurrency(measured, band, limits):
    """The next concurrency to run, or None when the search is done; never one already measured or outside the band.

    ``measured``: ``{conc: row or None}``, None for a point that ran but is not valid (it fails).
    Only the points inside the band steer the search. Done when the lowest band point fails with
    nothing passing above it (nothing meets), the highest passing point is the band's top, or the
    highest passing point and the lowest failing one above it are within RESOLUTION (or adjacent).
    A failing point below a passing one (a non-monotone curve) does not stop the search upward.
    """
    low, high = check_band(band)
    limits = check_limits(limits)
    points = {conc: row for conc, row in _points(measured).items() if low <= conc <= high}
    if not points:
        return int(round(math.sqrt(low * high)))
    passing = [conc for conc, row in points.items() if _meets(row, limits)]
    if not passing:
        lowest = min(points)
        return None if lowest == low else max(low, lowest // _STEP)
    best = max(passing)
    above = [conc for conc in points if conc > best]
    if not above:
        return None if best == high else min(high, best * _STEP)
    failing = min(above)
    if failing <= best * RESOLUTION or failing - best <= 1:
        return None
    return min(max(int(round(math.sqrt(best * failing))), best + 1), failing - 1)


def best_point(measured, limits):
    """``(conc, row)`` of the row meeting every limit with the highest tok/s/GPU (ties: lower conc), or None."""
    limits = check_limits(limits)
    met = [(conc, row) for conc, row in _points(measured).items() if _meets(row, limits)]
    if not met:
        return None

    def rank(point):
        value = optional_float(point[1].get(THROUGHPUT_PER_GPU))
        return (value is not None, value or 0.0, -point[0])
    return max(met, key=rank)


def _limit_text(key, limit):
    _column, _ceiling, text, unit = _LIMITS[key]
    return '%s %g %s' % (text, limit, unit)


def nothing_met(measured, limits):
    """'' when a measured row meets every limit; else one line: each limit no point met and the closest value seen.

    When each limit was met by some point but never all of them by one, the line names them all.
    """
    limits = check_limits(limits)
    rows = {conc: row for conc, row in _points(measured).items() if row is not None}
    if any(_meets(row, limits) for row in rows.values()):
        return ''
    unmet = []
    for key, limit in limits.items():
        column, ceiling, _text, unit = _LIMITS[key]
        seen = [(optional_float(row.get(column)), conc) for conc, row in sorted(rows.items())]
        seen = [(value, conc) for value, conc in seen if value is not None]
        if any(key not in missed_limits({column: value}, {key: limit}) for value, conc in seen):
            continue
        if not seen:
            unmet.append('%s (no value measured)' % _limit_text(key, limit))
            continue
        value, conc = min(seen, key=lambda pair, sign=1 if ceiling else -1: (sign * pair[0], pair[1]))
        unmet.append('%s (best %.1f %s at c%d)' % (_limit_text(key, limit), value, unit, conc))
    if unmet:
        return 'no point met %s' % ', '.join(unmet)
    return 'no point met %s at once' % ', '.join(_limit_text(key, limit) for key, limit in limits.items())


def _figure(value):
    value = optional_float(value)
    return 'n/a' if value is None else '%.1f' % value


def best_line(variant, conc, row, points, seconds):
    """The closing line of a search: the best point within limits, how many points it took and how long."""
    columns = (THROUGHPUT_PER_GPU, MEDIAN_INTERACTIVITY, TPOT_P99, TTFT_P99)
    figures = tuple(_figure(row.get(column)) for column in columns)
    return ('best within limits: c%d %s %s tok/s/GPU at %s tok/s/user (TPOT p99 %s ms, TTFT p99 %s ms), %d points, %s'
            % ((conc, variant) + figures + (points, clock(seconds))))


def _request_meets(error, output_len, ttft, itl, limits):
    """One request against the limits: no error, TTFT, and TPOT/interactivity when it has more than one token."""
    if error or output_len is None or output_len < 1 or ttft is None:
        return False
    if 'ttft_p99_ms' in limits and ttft * 1000.0 > limits['ttft_p99_ms']:
        return False
    if output_len == 1:
        return True   # no TPOT: it meets the TPOT and interactivity limits
    gaps = [optional_float(gap) for gap in itl or ()]
    if None in gaps:
        return False
    tpot_ms = sum(gaps) * 1000.0 / (output_len - 1)
    if 'tpot_p99_ms' in limits and tpot_ms > limits['tpot_p99_ms']:
        return False
    return 'tok_s_user_min' not in limits or tpot_ms <= 0 or 1000.0 / tpot_ms >= limits['tok_s_user_min']


# The fields, from SGLang 0.5.15.post1 sglang/benchmark/serving.py: lines 1806-1813 (result_details, written with
# --output-details) hold per request ``ttfts`` (seconds), ``itls`` (a list of seconds), ``output_lens`` (0 for a
# failed request) and ``errors`` ('' when it succeeded); line 1733 writes ``duration`` (seconds). The client's own
# TPOT, lines 1072-1073, is (latency - ttft) / (output_len - 1); latency is not in the details, the itls span the same.
def request_goodput(record, limits):
    """Requests per second that met the limits, from one bench jsonl record; None without per-request details.

    A request meets them with no error, its TTFT within ``ttft_p99_ms``, and its TPOT (the sum of its
    itls over output_len - 1) within ``tpot_p99_ms`` and 1000/TPOT at least ``tok_s_user_min``; a
    one-token output has no TPOT and meets those two. The goodput of every CSV row, whatever its p99s.
    """
    limits = check_limits(limits)
    details = [record.get(key) for key in ('errors', 'output_lens', 'ttfts', 'itls')]
    if not all(isinstance(column, list) for column in details) or len({len(column) for column in details}) != 1:
        return None
    duration = optional_float(record.get('duration'))
    if duration is None or duration <= 0:
        return None
    met = sum(1 for error, output_len, ttft, itl in zip(*details)
              if _request_meets(error, optional_float(output_len), optional_float(ttft), itl, limits))
    return met / duration
