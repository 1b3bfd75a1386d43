# SPDX-License-Identifier: Apache-2.0
"""The sweep's start on one host (plugin_utils/_sweep_start.py): whose router, where the results go, the plan."""

from __future__ import annotations

import os

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_start import bench_host, start_sweep

from .sweep_runs import DP_ARGV, NODP_ARGV, bench_record, write_lines, write_targets

PHASES = [{'variant': 'nodp', 'concurrencies': [32, 64], 'argv': NODP_ARGV, 'env': {}},
          {'variant': 'dp', 'concurrencies': [1024], 'argv': DP_ARGV, 'env': {}}]
FLEET = ['node-1', 'node-2', 'node-3']


def params(**overrides):
    base = {'run_id': 'r1', 'phases': PHASES, 'recipe': 'dsv4-pro-mi355x', 'work_dir': '/var/lib/infera/sgl_mix',
            'results_dir': 'results', 'topology': 'serving', 'fleet_hosts': FLEET, 'router_hosts': FLEET,
            'play_hosts': FLEET, 'prompts_per_conc': 10, 'random_input_len': 8192, 'random_output_len': 1024,
            'targets_file': '', 'force': False, 'pair': {}}
    base.update(overrides)
    return base


def test_a_serving_fleet_goes_through_its_first_router_node_still_in_the_play():
    assert bench_host('node-2', 'serving', FLEET, FLEET, FLEET) == ('node-1', 3)
    assert bench_host('node-3', 'serving', FLEET, ['node-3', 'node-2'], FLEET) == ('node-3', 3)
    # node-1 left the play (failed earlier): the fleet is the nodes still in it.
    assert bench_host('node-3', 'serving', FLEET, FLEET, ['node-2', 'node-3']) == ('node-2', 2)


def test_a_node_sweeps_through_its_own_router_outside_a_serving_fleet():
    assert bench_host('node-2', 'serving', FLEET, FLEET, ['node-2']) == ('node-2', 1)
    assert bench_host('node-2', 'standalone', FLEET, FLEET, FLEET) == ('node-2', 1)
    assert bench_host('node-2', 'serving', FLEET, [], FLEET) == ('node-2', 1)


def test_a_pd_pair_goes_through_its_router_with_each_concurrency_as_it_is_and_lists_every_leg(tmp_path):
    def dwim(path):
        return str(tmp_path / path)

    pair = {'prefill': ['p-1'], 'decode': ['d-1'], 'hosts': ['d-1', 'p-1'], 'router': 'p-1',
            'modes': {'prefill': 1, 'decode': 1}, 'label': '1P1D'}
    legs = ['d-1', 'p-1']
    prefill = [{'variant': 'prefill', 'concurrencies': [64, 128], 'argv': DP_ARGV, 'env': {}}]
    decode = start_sweep(params(phases=[dict(prefill[0], variant='decode')], fleet_hosts=legs, router_hosts=['p-1'],
                                play_hosts=legs, pair=pair), 'd-1', dwim)
    assert (decode['bench_host'], decode['benches_here'], decode['plan']) == ('p-1', False, None)
    bench = start_sweep(params(phases=prefill, fleet_hosts=legs, router_hosts=['p-1'], play_hosts=legs, pair=pair),
                        'p-1', dwim)
    assert (bench['fleet_workers'], bench['router_workers']) == (1, 2)
    assert [(point['conc'], point['fleet']) for point in bench['plan']['points']] == [(64, False), (128, False)]
    # Without the pair, the same two nodes are a serving fleet: C x 2.
    fleet = start_sweep(params(phases=prefill, fleet_hosts=legs, router_hosts=['p-1'], play_hosts=legs), 'p-1', dwim)
    assert [point['conc'] for point in fleet['plan']['points']] == [128, 256]


def test_the_node_that_runs_the_points_plans_them_with_what_the_controller_holds(tmp_path):
    def dwim(path):
        return path if os.path.isabs(path) else str(tmp_path / path)

    host_dir = tmp_path / 'results' / 'r1' / 'node-1'
    host_dir.mkdir(parents=True)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    write_targets(tmp_path / 'targets.yml', 'metric: Throughput/GPU\ntargets: {64: 2100, 1024: 2256}\n')
    one = start_sweep(params(play_hosts=['node-1'], targets_file='targets.yml'), 'node-1', dwim)
    assert {key: one[key] for key in ('run_id', 'bench_host', 'benches_here', 'fleet_workers', 'remote_dir',
                                      'local_dir', 'recipe')} == {
        'run_id': 'r1', 'bench_host': 'node-1', 'benches_here': True, 'fleet_workers': 1,
        'remote_dir': '/var/lib/infera/sgl_mix/results/r1', 'local_dir': 'results/r1/node-1',
        'recipe': 'dsv4-pro-mi355x'}
    assert one['plan']['pending'] == [64, 1024]
    assert one['plan']['lines'][3] == 'node-1:   point 3/3 c1024 dp, 10240 prompts on 8 GPUs: ~1:27:09'


def test_a_fleet_node_that_follows_plans_nothing_and_the_bench_node_sends_each_conc_times_the_fleet(tmp_path):
    def dwim(path):
        return str(tmp_path / path)

    follower = start_sweep(params(), 'node-2', dwim)
    assert (follower['bench_host'], follower['benches_here'], follower['plan']) == ('node-1', False, None)
    bench = start_sweep(params(), 'node-1', dwim)
    assert [point['conc'] for point in bench['plan']['points']] == [96, 192, 3072]


def test_an_unreadable_targets_file_is_the_collection_s_error(tmp_path):
    with pytest.raises(SweepResultsError):
        start_sweep(params(play_hosts=['node-1'], targets_file='missing.yml'), 'node-1', lambda path: str(tmp_path / path))
