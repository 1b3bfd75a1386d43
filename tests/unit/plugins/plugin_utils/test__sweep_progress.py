# SPDX-License-Identifier: Apache-2.0
"""What a sweep tells about its time: plan, estimates, the line after a point, wall times."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_progress as progress
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    INPUT_THROUGHPUT_PER_GPU,
    MEDIAN_INTERACTIVITY,
    OUTPUT_THROUGHPUT_PER_GPU,
    THROUGHPUT_PER_GPU,
)

from .sweep_runs import DP_ARGV, NODP_ARGV, bench_record, point

PHASES = [{'variant': 'nodp', 'concurrencies': [32, 64], 'argv': NODP_ARGV},
          {'variant': 'dp', 'concurrencies': [1024], 'argv': DP_ARGV}]
BENCH = {'prompts_per_conc': 10, 'random_input_len': 8192, 'random_output_len': 1024}


def targets(values, metric=THROUGHPUT_PER_GPU):
    return {'metric': metric, 'higher_is_better': True, 'targets': values, 'path': 'targets.yml'}


@pytest.mark.parametrize('metric, expected', [
    # The c1024 point: 10,240 prompts of 8192+1024 tokens at 2,256 tok/s/GPU on 8 GPUs, ~87 min.
    (THROUGHPUT_PER_GPU, 10240 * 9216 / (2256.0 * 8)),
    (OUTPUT_THROUGHPUT_PER_GPU, 10240 * 1024 / (2256.0 * 8)),
    (INPUT_THROUGHPUT_PER_GPU, 10240 * 8192 / (2256.0 * 8)),
    (MEDIAN_INTERACTIVITY, None),
])
def test_estimate_counts_the_tokens_the_target_metric_counts(metric, expected):
    assert progress.estimate_point(10240, 8192, 1024, 8, 2256.0, metric) == expected


@pytest.mark.parametrize('target, gpus', [(None, 8), (0, 8), (2256.0, 0)])
def test_no_target_or_no_gpus_is_no_estimate(target, gpus):
    assert progress.estimate_point(10240, 8192, 1024, gpus, target, THROUGHPUT_PER_GPU) is None


def test_the_plan_orders_numbers_estimates_and_names_the_restart():
    plan = progress.plan_sweep(PHASES, {32: True}, BENCH, targets({32: 2000.0, 64: 2100.0, 1024: 2256.0}))
    assert [(p['label'], p['runs'], p['gpus']) for p in plan['points']] == [
        ('point 1/3 c32 nodp', False, 8), ('point 2/3 c64 nodp', True, 8), ('point 3/3 c1024 dp', True, 8)]
    assert plan['pending'] == [64, 1024]
    assert plan['restarts'] == [{'from': 'nodp', 'to': 'dp'}]
    assert plan['estimate'] == pytest.approx(640 * 9216 / (2100.0 * 8) + 10240 * 9216 / (2256.0 * 8))
    assert progress.plan_lines('node1', plan) == [
        'node1: sweep plan: 2 point(s) to run (skipped, already valid: c32); engine restart(s): 1 (nodp -> dp); '
        'estimated ~1:33:00 in total (from targets.yml; warmup and restarts not counted)',
        'node1:   point 1/3 c32 nodp, 320 prompts on 8 GPUs: skipped (already valid)',
        'node1:   point 2/3 c64 nodp, 640 prompts on 8 GPUs: ~0:05:51',
        'node1:   point 3/3 c1024 dp, 10240 prompts on 8 GPUs: ~1:27:09',
    ]


def test_a_phase_with_nothing_to_run_makes_no_restart():
    plan = progress.plan_sweep(PHASES, {1024: True}, BENCH)
    assert plan['restarts'] == []
    assert plan['pending'] == [32, 64]
    assert plan['estimate'] is None
    assert progress.plan_lines('node1', plan)[0] == (
        'node1: sweep plan: 2 point(s) to run (skipped, already valid: c1024); engine restart(s): none between '
        'phases; estimated no estimate (no per-GPU throughput target in sweep_targets_file)')


def test_force_runs_valid_points_and_a_partial_estimate_has_no_total():
    plan = progress.plan_sweep(PHASES, {32: True, 64: True, 1024: True}, BENCH, targets({64: 2100.0}), force=True)
    assert plan['pending'] == [32, 64, 1024]
    assert plan['estimate'] is None
    lines = progress.plan_lines('node1', plan)
    assert lines[0].endswith('estimated for 1 of 3 points only (no target for the rest), so no total')
    assert lines[1].endswith('320 prompts on 8 GPUs: no estimate')


def test_nothing_to_run():
    plan = progress.plan_sweep(PHASES, {32: True, 64: True, 1024: True}, BENCH)
    assert progress.plan_lines('node1', plan)[0] == (
        'node1: sweep plan: 0 point(s) to run (skipped, already valid: c32, c64, c1024); engine restart(s): none '
        'between phases; estimated 0:00:00')


def test_figures_come_from_the_judged_record():
    figures = progress.point_figures(bench_record(64, duration=100.0, tpot=20.0), NODP_ARGV)
    assert figures == {'tput_per_gpu': pytest.approx(640 * 9216 / 100.0 / 8),
                       'output_tput_per_gpu': pytest.approx(640 * 1024 / 100.0 / 8),
                       'interactivity': pytest.approx(1000.0 / 19.0), 'ttft_p99_ms': pytest.approx(1350.0)}


@pytest.mark.parametrize('record, argv', [(None, NODP_ARGV), ({'completed': 1}, NODP_ARGV),
                                          (bench_record(64), ['--tp-size', 'eight'])])
def test_no_figures_without_a_usable_record(record, argv):
    assert progress.point_figures(record, argv) == {}


@pytest.mark.parametrize('entry, figures, expected', [
    (point(64), {'tput_per_gpu': 7372.8, 'output_tput_per_gpu': 819.2, 'interactivity': 52.6, 'ttft_p99_ms': 1350.0},
     'node1: point 2/3 c64 nodp done: 7373 tok/s/GPU (819 output), 52.6 tok/s/user, TTFT p99 1350 ms, valid; '
     'sweep time 1:02:03'),
    (point(64, status='invalid', reason='only 600 of 640 requests completed'), {},
     'node1: point 2/3 c64 nodp done: invalid: only 600 of 640 requests completed; sweep time 1:02:03'),
    (point(64, status='resumed'), {'tput_per_gpu': 1.0, 'output_tput_per_gpu': 1.0, 'interactivity': 1.0,
                                   'ttft_p99_ms': None},
     'node1: point 2/3 c64 nodp done: valid (kept from an earlier run); sweep time 1:02:03'),
    (point(64, status='aborted', reason='mix_c64.jsonl is missing'), {},
     'node1: point 2/3 c64 nodp done: aborted: mix_c64.jsonl is missing; sweep time 1:02:03'),
])
def test_the_line_after_a_point(entry, figures, expected):
    assert progress.point_line('node1', 'point 2/3 c64 nodp', entry, figures, 3723) == expected


def test_the_figures_of_a_simulated_engine_are_labelled_so():
    figures = {'tput_per_gpu': 762.0, 'output_tput_per_gpu': 152.0, 'interactivity': 82.1, 'ttft_p99_ms': 115.0}
    assert progress.point_line('node1', 'point 1/3 c16 nodp', point(16), figures, 20, simulated=True) == (
        'node1: point 1/3 c16 nodp done: [SIMULATED engine] 762 tok/s/GPU (152 output), 82.1 tok/s/user, '
        'TTFT p99 115 ms, valid; sweep time 0:00:20')
    # No figures, nothing to label.
    assert '[SIMULATED' not in progress.point_line('node1', 'c16', point(16, status='invalid', reason='r'), {}, 20,
                                                   simulated=True)


def test_wall_times_per_point_and_restart_and_the_running_total():
    points = [point(32, started='2026-11-29T10:00:00Z', ended='2026-11-29T10:14:08Z'),
              point(64, started='2026-11-29T10:14:10Z', ended=None, status='aborted')]
    assert progress.wall_seconds(points[0]) == 848
    assert progress.wall_seconds(points[1]) is None
    now = datetime.datetime(2026, 11, 29, 11, 0, 0, tzinfo=datetime.timezone.utc)
    assert progress.sweep_seconds(points, now) == 3600
    assert progress.sweep_seconds([], now) == 0.0
    assert progress.timing_lines('node1', points, [{'variant': 'dp', 'seconds': 1781.4}, {'variant': 'nodp'}]) == [
        'node1: c32 nodp: 0:14:08 (ok)', 'node1: c64 nodp: ? (aborted)', 'node1: engine (re)start to dp: 0:29:41',
        'node1: engine (re)start to nodp: ?']


# ---------------------------------------------------------------- a fleet sweep

def test_a_fleet_plan_sends_each_concurrency_times_its_workers_on_their_gpus_held_to_the_node_target():
    plan = progress.plan_sweep(PHASES, {}, BENCH, targets({32: 2000.0, 96: 1.0, 1024: 2256.0}), fleet_workers=3)
    assert [(p['conc'], p['node_conc'], p['fleet'], p['num_prompts'], p['gpus']) for p in plan['points']] == [
        (96, 32, True, 960, 24), (192, 64, True, 1920, 24), (3072, 1024, True, 30720, 24)]
    assert plan['pending'] == [96, 192, 3072]
    assert plan['restarts'] == [{'from': 'nodp', 'to': 'dp'}]
    # Three times the tokens on three times the GPUs at the node's target: the node point's duration.
    assert plan['points'][0]['estimate'] == pytest.approx(320 * 9216 / (2000.0 * 8))
    assert plan['points'][1]['estimate'] is None
    assert progress.plan_lines('node1', plan)[1:] == [
        'node1:   point 1/3 c96 nodp (fleet: 3 workers x c32), 960 prompts on 24 GPUs: ~0:03:04',
        'node1:   point 2/3 c192 nodp (fleet: 3 workers x c64), 1920 prompts on 24 GPUs: no estimate',
        'node1:   point 3/3 c3072 dp (fleet: 3 workers x c1024), 30720 prompts on 24 GPUs: ~1:27:09',
    ]


def test_a_point_kept_from_an_earlier_run_keeps_its_workers_and_a_point_that_runs_has_none_yet():
    workers = [{'worker_id': '10.0.0.1:30000', 'url': 'http://10.0.0.1:30000', 'dp_size': None}]
    plan = progress.plan_sweep(PHASES, {32: {'workers': workers}, 64: {'workers': None}, 1024: None}, BENCH)
    assert [(p['conc'], p['runs'], p['workers']) for p in plan['points']] == [
        (32, False, workers), (64, False, None), (1024, True, None)]
    forced = progress.plan_sweep(PHASES, {32: {'workers': workers}}, BENCH, force=True)
    assert forced['points'][0]['workers'] is None


def test_figures_count_the_gpus_of_the_serving_workers():
    record = bench_record(64, duration=100.0)
    assert progress.point_figures(record, NODP_ARGV, 3)['tput_per_gpu'] == pytest.approx(640 * 9216 / 100.0 / 24)
    assert progress.point_figures(record, DP_ARGV, 1)['tput_per_gpu'] == pytest.approx(640 * 9216 / 100.0 / 8)
    assert progress.point_figures(record, NODP_ARGV, 0)['tput_per_gpu'] == pytest.approx(640 * 9216 / 100.0 / 8)
