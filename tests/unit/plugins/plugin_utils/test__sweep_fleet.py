# SPDX-License-Identifier: Apache-2.0
"""Nodes against their fleet: the median per concurrency and the nodes more than 10 % below it."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_fleet as sweep_fleet
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import THROUGHPUT_PER_GPU


def row(host, node_conc, value, fleet=False, simulated=False, workers=None):
    """The columns of a valid row the comparison reads."""
    return {'Host': host, 'Concurrency': node_conc * (workers or 1) if fleet else node_conc, 'Node Concurrency': node_conc,
            'Variant': 'nodp', 'Fleet': fleet, 'Workers': workers, 'Simulated': simulated, THROUGHPUT_PER_GPU: value}


def test_the_median_of_an_odd_fleet_is_its_middle_node_and_a_node_far_below_is_flagged():
    fleet = sweep_fleet.fleet_comparison([row('node1', 32, 2300.0), row('node2', 32, 1900.0), row('node3', 32, 2280.0)])
    [concurrency] = fleet['concurrencies']
    assert concurrency['median'] == 2280.0
    assert concurrency['values'] == {'node1': 2300.0, 'node2': 1900.0, 'node3': 2280.0}
    assert fleet['below'] == concurrency['below'] == [
        {'host': 'node2', 'node_conc': 32, 'value': 1900.0, 'median': 2280.0, 'shortfall': pytest.approx(380.0 / 2280.0)}]
    assert (fleet['metric'], fleet['threshold'], fleet['hosts']) == (THROUGHPUT_PER_GPU, 0.10, ['node1', 'node2', 'node3'])


def test_the_median_of_an_even_fleet_is_the_mean_of_its_two_middle_nodes():
    fleet = sweep_fleet.fleet_comparison([row('node%d' % index, 64, value)
                                          for index, value in enumerate((1000.0, 2000.0, 3000.0, 4000.0), 1)])
    assert fleet['concurrencies'][0]['median'] == 2500.0
    assert [entry['host'] for entry in fleet['below']] == ['node1', 'node2']   # 60 % and 20 % below


@pytest.mark.parametrize('value, flagged', [
    (900.0, False),        # exactly 10 % below the median of 1000: not flagged
    (899.99, True),        # just more than 10 % below
    (900.01, False),
    (1200.0, False),       # above the median
])
def test_the_flag_is_more_than_ten_percent_below_the_median(value, flagged):
    assert sweep_fleet.is_below_median(value, 1000.0) is flagged
    fleet = sweep_fleet.fleet_comparison([row('node1', 32, 1000.0), row('node2', 32, value), row('node3', 32, 1000.0)])
    assert [entry['host'] for entry in fleet['below']] == (['node2'] if flagged else [])


@pytest.mark.parametrize('median', [1843.2, 2256.1, 737.28, 3.3])
def test_exactly_ten_percent_below_written_in_decimal_is_not_flagged_by_a_rounding_error(median):
    value = round(median * 0.9, 6)
    assert sweep_fleet.is_below_median(value, median) is False
    assert sweep_fleet.is_below_median(value - 0.001, median) is True


def test_each_concurrency_has_its_own_median_and_a_node_missing_a_point_is_left_out_of_it():
    fleet = sweep_fleet.fleet_comparison([row('node1', 32, 1000.0), row('node2', 32, 1000.0), row('node3', 32, 500.0),
                                          row('node1', 64, 2000.0), row('node2', 64, 1700.0)])
    assert [(entry['node_conc'], entry['median']) for entry in fleet['concurrencies']] == [(32, 1000.0), (64, 1850.0)]
    assert fleet['concurrencies'][1]['values'] == {'node1': 2000.0, 'node2': 1700.0}
    assert [(entry['host'], entry['node_conc']) for entry in fleet['below']] == [('node3', 32)]


def test_fleet_points_are_listed_beside_the_medians_not_counted_as_a_node():
    rows = [row('node1', 32, 1000.0), row('node2', 32, 950.0), row('node1', 32, 400.0, fleet=True, workers=3)]
    fleet = sweep_fleet.fleet_comparison(rows)
    assert fleet['concurrencies'][0]['values'] == {'node1': 1000.0, 'node2': 950.0}
    assert fleet['below'] == []
    assert fleet['fleet_points'] == [{'host': 'node1', 'conc': 96, 'node_conc': 32, 'variant': 'nodp', 'workers': 3,
                                      'value': 400.0, 'simulated': False}]


@pytest.mark.parametrize('rows', [
    [],
    [row('node1', 32, 1000.0), row('node1', 64, 900.0)],                           # one node
    [row('node1', 32, 1000.0), row('node1', 96, 300.0, fleet=True, workers=3)],   # a fleet sweep's node alone
])
def test_fewer_than_two_swept_nodes_have_no_fleet_section(rows):
    assert sweep_fleet.fleet_comparison(rows) is None


def test_the_simulated_nodes_are_named():
    fleet = sweep_fleet.fleet_comparison([row('node1', 32, 1000.0, simulated=True), row('node2', 32, 1000.0)])
    assert fleet['simulated_hosts'] == ['node1']


def test_a_median_of_zero_flags_no_node():
    # Zero token counts make a valid record: two nodes that produced nothing put the median at 0, below which nothing is.
    fleet = sweep_fleet.fleet_comparison([row('node1', 32, 0.0), row('node2', 32, 0.0), row('node3', 32, 1000.0)])
    assert fleet['concurrencies'][0]['median'] == 0.0
    assert fleet['below'] == []
    assert (sweep_fleet.shortfall(0.0, 0.0), sweep_fleet.is_below_median(0.0, 0.0)) == (0.0, False)
