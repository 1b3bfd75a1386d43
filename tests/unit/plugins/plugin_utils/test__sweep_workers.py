# SPDX-License-Identifier: Apache-2.0
"""The workers that serve a point: which the router lists, the fleet's concurrency, the GPU divisor, the checks."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_workers as sweep_workers
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import parallelism

from .sweep_runs import DP_ARGV, NODP_ARGV

MODEL = '/data/hf-cache/DeepSeek-V4-Pro'
NODP = parallelism(NODP_ARGV)
DP = parallelism(DP_ARGV)


def listed(worker_id, status='active', model=MODEL, dp_size=None):
    """One entry of Infera's GET /v1/workers, with every key the router returns."""
    host = worker_id.split(':')[0]
    return {'worker_id': worker_id, 'url': 'http://%s' % worker_id, 'model_name': model, 'engine': 'sglang',
            'status': status, 'disagg_mode': 'mixed', 'disagg_meta': {}, 'kv_events_endpoint': 'tcp://%s:5557' % host,
            'kv_block_size': 64, 'dp_rank': None, 'dp_size': dp_size}


def kept(worker_id, dp_size=None):
    return {'worker_id': worker_id, 'url': 'http://%s' % worker_id, 'dp_size': dp_size}


THREE = [kept('10.0.0.%d:30000' % index) for index in (1, 2, 3)]


# ---------------------------------------------------------------- what the router lists

def test_the_serving_workers_are_the_active_ones_of_the_bench_model_sorted_with_the_kept_keys():
    answer = {'workers': [listed('10.0.0.3:30000'), listed('10.0.0.1:30000', dp_size=8),
                          listed('10.0.0.2:30000', status='draining'), listed('10.0.0.4:30000', status='dead'),
                          listed('10.0.0.5:30000', model='/data/other-model')]}
    assert sweep_workers.serving_workers(answer, MODEL) == [kept('10.0.0.1:30000', dp_size=8), kept('10.0.0.3:30000')]


def test_workers_left_out_do_not_hide_the_ones_listed_after_them():
    answer = [listed('10.0.0.4:30000', status='draining'), listed('10.0.0.5:30000', model='/data/other-model'),
              'not a worker', listed('10.0.0.2:30000'), listed('10.0.0.6:30000', status='dead'), listed('10.0.0.1:30000')]
    assert sweep_workers.serving_workers(answer, MODEL) == [kept('10.0.0.1:30000'), kept('10.0.0.2:30000')]


def test_a_worker_listed_without_a_status_serves():
    without_status = {key: value for key, value in listed('10.0.0.1:30000', dp_size=8).items() if key != 'status'}
    assert sweep_workers.serving_workers([without_status], MODEL) == [kept('10.0.0.1:30000', dp_size=8)]


def test_without_a_model_every_active_worker_serves_and_the_bare_list_is_read_too():
    workers = [listed('10.0.0.1:30000'), listed('10.0.0.2:30000', model='/data/other-model'), 'not a worker']
    assert [worker['worker_id'] for worker in sweep_workers.serving_workers(workers)] == ['10.0.0.1:30000', '10.0.0.2:30000']


@pytest.mark.parametrize('answer', [{}, {'workers': None}, [], None])
def test_a_router_listing_nothing_has_no_serving_worker(answer):
    assert sweep_workers.serving_workers(answer, MODEL) == []


@pytest.mark.parametrize('point, expected', [
    ({'conc': 32}, None),                       # a manifest written before workers were recorded
    ({'conc': 32, 'workers': None}, None),
    ({'conc': 32, 'workers': []}, None),
    ({'conc': 32, 'workers': ['junk']}, None),
    ({'conc': 32, 'workers': THREE}, THREE),
])
def test_recorded_workers(point, expected):
    assert sweep_workers.recorded_workers(point) == expected


def test_a_point_that_ran_records_the_router_listing_and_a_kept_point_its_earlier_workers():
    answer = [listed('10.0.0.2:30000'), listed('10.0.0.1:30000', status='draining')]
    assert sweep_workers.point_workers(answer, THREE, MODEL) == [kept('10.0.0.2:30000')]
    assert sweep_workers.point_workers(None, THREE, MODEL) == THREE
    assert sweep_workers.point_workers(None, None, MODEL) is None


def test_a_point_records_only_the_workers_of_its_model_and_without_a_model_every_active_one():
    answer = [listed('10.0.0.1:30000', model='/data/other-model'), listed('10.0.0.2:30000')]
    assert sweep_workers.point_workers(answer, None, MODEL) == [kept('10.0.0.2:30000')]
    assert sweep_workers.point_workers(answer) == [kept('10.0.0.1:30000'), kept('10.0.0.2:30000')]


# ---------------------------------------------------------------- concurrency and GPUs

@pytest.mark.parametrize('fleet_workers, expected', [
    (1, {'conc': 32, 'node_conc': 32, 'fleet': False}),
    (2, {'conc': 64, 'node_conc': 32, 'fleet': True}),
    (3, {'conc': 96, 'node_conc': 32, 'fleet': True}),
    (0, {'conc': 32, 'node_conc': 32, 'fleet': False}),
])
def test_a_fleet_sweep_sends_each_concurrency_times_its_serving_workers(fleet_workers, expected):
    assert sweep_workers.fleet_point(32, fleet_workers) == expected


@pytest.mark.parametrize('point, expected', [
    ({'conc': 96, 'node_conc': 32}, 32), ({'conc': 64}, 64), ({'conc': '64'}, 64), ({'node_conc': None, 'conc': 8}, 8), ({}, None)])
def test_the_node_concurrency_of_a_point_and_of_an_older_manifest_point(point, expected):
    assert sweep_workers.node_concurrency(point) == expected


@pytest.mark.parametrize('sizes, worker_count, gpus', [
    (NODP, 3, 24),      # three nodp workers of TP 8
    (DP, 1, 8),         # one dp worker (dp_size 8, DP attention) is one worker of 8 GPUs, not 64
    (DP, 3, 24),
    (NODP, None, 8),    # no recorded workers: one worker, the rule of older manifests
    (NODP, 0, 8),
    (parallelism(['--tp-size', '4', '--pp-size', '2']), 2, 16),
])
def test_the_gpu_divisor_is_the_serving_workers_times_one_workers_tp_x_pp(sizes, worker_count, gpus):
    assert sweep_workers.point_gpus(sizes, worker_count) == gpus


# ---------------------------------------------------------------- can the workers stand for the point

def fleet(workers, conc=96, variant='nodp'):
    return {'conc': conc, 'node_conc': 32, 'fleet': True, 'variant': variant, 'workers': workers}


def test_a_fleet_point_served_by_as_many_workers_as_it_was_scaled_by_is_fine():
    assert sweep_workers.workers_problem(fleet(THREE), NODP) == ''


@pytest.mark.parametrize('workers, listed_text', [
    (THREE[:2], '2 serving worker(s) (10.0.0.1:30000, 10.0.0.2:30000)'),
    (THREE + [kept('10.0.0.4:30000')], '4 serving worker(s) (10.0.0.1:30000, 10.0.0.2:30000, 10.0.0.3:30000, 10.0.0.4:30000)'),
])
def test_a_fleet_point_with_another_number_of_workers_is_named(workers, listed_text):
    assert sweep_workers.workers_problem(fleet(workers), NODP) == (
        'the router listed %s; the fleet point c96 planned 3 (3 x c32)' % listed_text)


@pytest.mark.parametrize('workers', [[], None, ['not a worker']])
def test_a_fleet_point_that_records_no_workers_cannot_stand_for_the_fleet(workers):
    # Its per-GPU figures would divide by one worker's GPUs while the fleet's served it.
    point = fleet(workers)
    del point['conc']  # not even the planned count to compare with
    assert sweep_workers.workers_problem(point, NODP) == (
        'the fleet point records no workers the router listed, so the GPUs that served it are unknown')


def test_a_fleet_point_whose_concurrency_was_written_as_text_is_checked_as_a_number():
    point = fleet(THREE)
    point['conc'] = '96'
    assert sweep_workers.workers_problem(point, NODP) == ''
    point['workers'] = THREE[:2]
    assert sweep_workers.workers_problem(point, NODP) == (
        'the router listed 2 serving worker(s) (10.0.0.1:30000, 10.0.0.2:30000); the fleet point c96 planned 3 (3 x c32)')


def test_a_worker_of_the_other_variant_is_named():
    mixed = [kept('10.0.0.1:30000', dp_size=8), kept('10.0.0.2:30000'), kept('10.0.0.3:30000', dp_size=8)]
    assert sweep_workers.workers_problem(fleet(mixed, variant='dp'), DP) == (
        'worker(s) 10.0.0.2:30000 run dp_size 1, the dp variant DP 8 (a fleet with mixed variants)')
    assert sweep_workers.workers_problem(fleet(mixed, variant='nodp'), NODP) == (
        'worker(s) 10.0.0.1:30000, 10.0.0.3:30000 run dp_size 8, the nodp variant DP 1 (a fleet with mixed variants)')


def test_workers_of_two_other_variants_are_named_with_both_dp_sizes():
    mixed = [kept('10.0.0.1:30000', dp_size=8), kept('10.0.0.2:30000', dp_size=4), kept('10.0.0.3:30000')]
    assert sweep_workers.workers_problem(fleet(mixed, variant='dp'), DP) == (
        'worker(s) 10.0.0.2:30000, 10.0.0.3:30000 run dp_size 1/4, the dp variant DP 8 (a fleet with mixed variants)')


@pytest.mark.parametrize('point', [
    {'conc': 32, 'variant': 'dp'},                                          # older manifest: nothing recorded
    {'conc': 32, 'variant': 'dp', 'workers': [kept('10.0.0.1:30000', dp_size=8)] * 2},   # node point: any number
    {'conc': 32, 'variant': 'dp', 'workers': [{'worker_id': '10.0.0.1:30000'}]},   # no dp_size kept: not checked
])
def test_node_points_and_points_without_recorded_workers_are_not_held_to_a_count(point):
    assert sweep_workers.workers_problem(point, DP) == ''
