# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""A search within limits over a run's results folder (the sweep_search lookup, playbooks/sweep.yml -e sweep_search=true).

The decisions are _sweep_search.py's; this reads what the run has measured so far from the controller's results folder
(the same rows as the report), splits the band among the recipe's variants (each concurrency runs in the variant the
recipe picks for it, so each variant is searched over its own part of the band), and says which point runs next, then,
once every variant's search is done, the best point of each variant and overall.
"""

from __future__ import annotations

import datetime
import os

from ansible_collections.infera.serving.plugins.module_utils._variant import Recipe, choose_variant
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import THROUGHPUT_PER_GPU
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_record import TIME_FORMAT
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_report import collect
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_search import (
    best_line,
    best_point,
    check_band,
    check_limits,
    next_concurrency,
    nothing_met,
)


def variant_bands(recipe, band):
    """{variant: (low, high)}: the part of the band each variant of the recipe serves, in the order of their ranges."""
    low, high = check_band(band)
    bands = {}
    for conc in range(low, high + 1):
        variant = choose_variant(recipe, conc)[0]
        first, _last = bands.get(variant, (conc, conc))
        bands[variant] = (first, conc)
    return bands


def _seconds(point):
    try:
        started, ended = (datetime.datetime.strptime(point[key], TIME_FORMAT) for key in ('started', 'ended'))
    except (KeyError, TypeError, ValueError):
        return 0.0
    return max((ended - started).total_seconds(), 0.0)


def measured_points(run_dir, host):
    """{variant: {node concurrency: row, or None for a point that ran and is not valid}} and {variant: seconds the
    points took}, from the host's folder of the run (empty before the first point)."""
    if not os.path.isdir(os.path.join(run_dir, host)):
        return {}, {}
    run = collect(run_dir)
    measured, seconds = {}, {}
    for row in run['rows']:
        if row['Host'] == host:
            measured.setdefault(row['Variant'], {})[row['Node Concurrency']] = row
    for entry in run['invalid']:
        if entry['host'] == host and entry['node_conc'] is not None:
            measured.setdefault(entry['variant'], {}).setdefault(entry['node_conc'], None)
    for manifest in run['manifests']:
        if manifest['host'] == host:
            for point in manifest.get('points') or []:
                variant = point.get('variant')
                seconds[variant] = seconds.get(variant, 0.0) + _seconds(point)
    return measured, seconds


def search_step(run_dir, host, recipe_data, band, limits):
    """The search's state: {'next': the node concurrency to run next or None when done, 'variant': its variant,
    'lines': once done, one line per variant and one overall, 'kept': the run's valid points, 'points': how many points
    the search counts}."""
    limits = check_limits(limits)
    bands = variant_bands(Recipe(recipe_data), band)
    measured, seconds = measured_points(run_dir, host)
    for variant, variant_band in bands.items():
        mine = {conc: row for conc, row in measured.get(variant, {}).items()
                if variant_band[0] <= conc <= variant_band[1]}
        following = next_concurrency(mine, variant_band, limits)
        if following is not None:
            return {'next': following, 'variant': variant, 'lines': [], 'kept': _kept(measured),
                    'points': sum(len(points) for points in measured.values())}
    lines, overall = [], None
    for variant, variant_band in bands.items():
        mine = {conc: row for conc, row in measured.get(variant, {}).items()
                if variant_band[0] <= conc <= variant_band[1]}
        best = best_point(mine, limits)
        if best is None:
            lines.append('%s (c%d-c%d): %s' % (variant, variant_band[0], variant_band[1],
                                               nothing_met(mine, limits) or 'no point measured'))
            continue
        lines.append('%s: %s' % (variant, best_line(variant, best[0], best[1], len(mine), seconds.get(variant, 0.0))))
        if overall is None or best[1][THROUGHPUT_PER_GPU] > overall[2][THROUGHPUT_PER_GPU]:
            overall = (variant, best[0], best[1])
    count = sum(len(points) for points in measured.values())
    if overall is None:
        lines.append('overall: no point met every limit')
    else:
        lines.append('overall: ' + best_line(overall[0], overall[1], overall[2], count, sum(seconds.values())))
    return {'next': None, 'variant': None, 'lines': lines, 'kept': _kept(measured), 'points': count}


def _kept(measured):
    """The valid points of the run, by node concurrency: a round's sweep lists them with the next point, so that they
    are kept (resumed) in the manifest, not run again."""
    return sorted({conc for points in measured.values() for conc, row in points.items() if row is not None})
