# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Nodes against their fleet: each node's tok/s/GPU per concurrency, the fleet median, the nodes well below it.

Finding a bad node is the main reason to sweep a fleet. Node sweeps (each node through its own
router, the isolated topology) give one figure per node and concurrency; a node more than
BELOW_MEDIAN under the median of the nodes measured at that concurrency is flagged. Fleet points
(one router for the whole fleet) cannot tell the nodes apart: they are listed beside the medians.
"""

from __future__ import annotations

import statistics

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import THROUGHPUT_PER_GPU

# The figure nodes are compared on: InferenceX's main one, token throughput per GPU.
FLEET_METRIC = THROUGHPUT_PER_GPU
# A node whose figure is more than this fraction below the fleet median is flagged.
BELOW_MEDIAN = 0.10
# A value written exactly 10 % below in decimal must not be flagged by a rounding error of its division.
_ROUNDING = 1e-9


def shortfall(value, median):
    """How far below the median a value is, as a fraction of the median (negative above it)."""
    return (median - value) / median if median else 0.0


def is_below_median(value, median):
    """More than BELOW_MEDIAN below the median; exactly 10 % below is not."""
    return shortfall(value, median) > BELOW_MEDIAN + _ROUNDING


def _concurrency_entry(node_conc, values):
    median = statistics.median(values.values())
    below = [{'host': host, 'node_conc': node_conc, 'value': value, 'median': median, 'shortfall': shortfall(value, median)}
             for host, value in sorted(values.items()) if is_below_median(value, median)]
    return {'node_conc': node_conc, 'values': dict(sorted(values.items())), 'median': median, 'below': below}


def fleet_comparison(rows):
    """The fleet section of a run, or None when fewer than two nodes have a valid node point.

    ``rows``: the run's valid rows; a PD pair's points stand beside the nodes, not among them. Per node concurrency (the concurrency of the sweep's list),
    each node's FLEET_METRIC, the median of the nodes measured there and the nodes more than
    BELOW_MEDIAN below it; ``below`` lists those across concurrencies; ``simulated_hosts`` names the
    nodes whose figures come from the simulator; ``fleet_points`` the points of fleet sweeps.
    """
    node_rows = [row for row in rows if not row['Fleet'] and row.get('Topology', 'mixed') == 'mixed'
                 and row[FLEET_METRIC] is not None]
    hosts = sorted({row['Host'] for row in node_rows})
    if len(hosts) < 2:
        return None
    values = {}
    for row in node_rows:
        values.setdefault(row['Node Concurrency'], {})[row['Host']] = row[FLEET_METRIC]
    concurrencies = [_concurrency_entry(node_conc, values[node_conc]) for node_conc in sorted(values)]
    return {
        'metric': FLEET_METRIC,
        'threshold': BELOW_MEDIAN,
        'hosts': hosts,
        'simulated_hosts': sorted({row['Host'] for row in node_rows if row['Simulated']}),
        'concurrencies': concurrencies,
        'below': [entry for concurrency in concurrencies for entry in concurrency['below']],
        'fleet_points': [{'host': row['Host'], 'conc': row['Concurrency'], 'node_conc': row['Node Concurrency'],
                          'variant': row['Variant'], 'workers': row['Workers'], 'value': row[FLEET_METRIC],
                          'simulated': row['Simulated']}
                         for row in rows if row['Fleet']],
    }
