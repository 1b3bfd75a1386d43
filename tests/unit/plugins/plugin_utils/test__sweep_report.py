# SPDX-License-Identifier: Apache-2.0
"""Collecting a results folder into rows and invalid points, and rebuilding its CSV, report and plot."""

from __future__ import annotations

import csv
import json

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_plot as sweep_plot
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_render as sweep_render
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_report as sweep_report
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError

from .sweep_runs import (
    DP_ARGV,
    PNG_SIGNATURE,
    bench_record,
    point,
    standard_run,
    write_lines,
    write_manifest,
    write_targets,
)


# ---------------------------------------------------------------- the results folder

def test_invalid_and_aborted_points_stay_out_of_the_rows_with_their_reason(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [
        point(32), point(64), point(128, status='aborted', reason='engine on infera-node-1 exited (code 137)'),
        point(256, 'dp', status='invalid', reason='only 2000 of 2560 requests completed'), point(512, 'dp', status='resumed'),
        point(1024, 'dp')])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, num_prompts=600))
    write_lines(host_dir / 'mix_c128.jsonl', bench_record(128))
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256, num_prompts=2000))
    write_lines(host_dir / 'mix_c512.jsonl', bench_record(512))
    write_lines(host_dir / 'mix_c1024.jsonl', bench_record(512, num_prompts=10240))
    run = sweep_report.collect(str(run_dir))
    assert [(row['Concurrency'], row['Status']) for row in run['rows']] == [(32, 'ok'), (512, 'resumed')]
    reasons = {entry['conc']: entry['reason'] for entry in run['invalid']}
    assert reasons[64] == 'only 600 of 640 requests completed'
    assert reasons[128] == 'marked aborted by the sweep: engine on infera-node-1 exited (code 137)'
    assert reasons[256] == 'marked invalid by the sweep; only 2000 of 2560 requests completed'
    assert reasons[1024] == 'the file reports max_concurrency 512, the manifest says 1024'


def test_a_variant_missing_from_the_manifest_makes_its_points_invalid(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32, 'tp4')])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    run = sweep_report.collect(str(run_dir))
    assert run['rows'] == []
    assert "variant 'tp4' is not in the manifest" in run['invalid'][0]['reason']


@pytest.mark.parametrize('make, message', [
    (lambda run_dir: run_dir / 'absent', 'does not exist'),
    (lambda run_dir: run_dir, 'no <host>/manifest.json under'),
])
def test_a_folder_without_manifests_is_an_error(run_dir, make, message):
    with pytest.raises(SweepResultsError, match=message):
        sweep_report.collect(str(make(run_dir)))


def test_a_broken_manifest_is_named(run_dir):
    (run_dir / 'infera-node-1').mkdir()
    (run_dir / 'infera-node-1' / 'manifest.json').write_text('{"points": ', encoding='utf-8')
    with pytest.raises(SweepResultsError, match='manifest.json is not JSON'):
        sweep_report.collect(str(run_dir))


def test_every_host_gets_its_rows_and_a_string_simulated_flag_is_understood(run_dir):
    standard_run(run_dir, 'infera-node-1', simulated='true')
    standard_run(run_dir, 'infera-node-2', simulated=False)
    run = sweep_report.collect(str(run_dir))
    assert [(row['Host'], row['Concurrency']) for row in run['rows']] == [
        ('infera-node-1', 32), ('infera-node-1', 64), ('infera-node-1', 256),
        ('infera-node-2', 32), ('infera-node-2', 64), ('infera-node-2', 256)]
    assert [row['Simulated'] for row in run['rows']] == [True] * 3 + [False] * 3
    assert run['simulated'] is True
    assert set(sweep_plot._series(run['rows'])) == {'infera-node-1 nodp', 'infera-node-1 dp', 'infera-node-2 nodp', 'infera-node-2 dp'}


def test_invalid_points_are_listed_by_concurrency_even_without_one(run_dir):
    write_manifest(run_dir, 'infera-node-1', [point(64), {'variant': 'nodp'}, point(1, 'dp'), point(32)])
    assert [(entry['conc'], entry['variant']) for entry in sweep_report.collect(str(run_dir))['invalid']] == [
        (None, 'nodp'), (1, 'dp'), (32, 'nodp'), (64, 'nodp')]


def test_a_point_without_its_concurrency_or_lengths_in_the_manifest_takes_them_from_its_line(run_dir):
    unnamed = {'variant': 'nodp', 'file': 'mix_unnamed.jsonl', 'num_prompts': 10}
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(1, 'dp'), unnamed, dict(unnamed, file='mix_c32.jsonl')],
                              bench_args={})
    record = bench_record(1, num_prompts=10)
    del record['max_concurrency']
    write_lines(host_dir / 'mix_unnamed.jsonl', record)
    write_lines(host_dir / 'mix_c1.jsonl', bench_record(1))
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, num_prompts=10))
    rows = sweep_report.collect(str(run_dir))['rows']
    assert [(row['Concurrency'], row['Variant'], row['ISL'], row['OSL']) for row in rows] == [
        (None, 'nodp', 8192, 1024), (1, 'dp', 8192, 1024), (32, 'nodp', 8192, 1024)]


def test_a_run_without_any_valid_point_still_gets_all_three_files(run_dir):
    write_manifest(run_dir, 'infera-node-1', [point(32)])
    summary = sweep_report.rebuild(str(run_dir))
    assert summary['rows'] == []
    assert (run_dir / 'throughput.png').read_bytes()[:8] == PNG_SIGNATURE
    assert (run_dir / 'results.csv').read_text(encoding='utf-8').count('\n') == 1
    assert '(no valid point)' in summary['table'].splitlines()


def test_rebuild_returns_where_everything_is_and_what_it_found(run_dir, tmp_path):
    standard_run(run_dir)
    write_manifest(run_dir, 'infera-node-2', [point(32, status='aborted', reason='engine exited')], simulated=False)
    summary = sweep_report.rebuild(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
    run = sweep_report.collect(str(run_dir), str(tmp_path / 't.yml'))
    assert {key: summary[key] for key in ('run_dir', 'csv_path', 'report_path', 'plot_path', 'simulated', 'hosts',
                                          'target_metric', 'rows', 'invalid', 'below', 'untargeted', 'table')} == {
        'run_dir': str(run_dir),
        'csv_path': str(run_dir / 'results.csv'),
        'report_path': str(run_dir / 'report.md'),
        'plot_path': str(run_dir / 'throughput.png'),
        'simulated': True,
        'hosts': ['infera-node-1', 'infera-node-2'],
        'target_metric': 'Output Throughput/GPU (tok/s)',
        'rows': run['rows'],
        'invalid': run['invalid'],
        'below': run['below'],
        'untargeted': [],
        'table': sweep_render.text_table(run),
    }
    assert [(miss['host'], miss['conc']) for miss in summary['below']] == [('infera-node-1', 64), ('infera-node-2', 32)]
    assert sweep_report.rebuild(str(run_dir))['target_metric'] is None


def test_rebuild_writes_once_then_reports_no_change_and_check_mode_writes_nothing(run_dir):
    standard_run(run_dir)
    dry = sweep_report.rebuild(str(run_dir), check_mode=True)
    assert dry['changed'] is True
    assert sorted(path.name for path in run_dir.iterdir()) == ['infera-node-1']
    first = sweep_report.rebuild(str(run_dir))
    assert first['changed_files'] == ['results.csv', 'report.md', 'throughput.png']
    assert sweep_report.rebuild(str(run_dir))['changed'] is False
    assert sweep_report.rebuild(str(run_dir), check_mode=True)['changed'] is False
    write_lines(run_dir / 'infera-node-1' / 'mix_c32.jsonl', bench_record(32, duration=100.0))
    assert sweep_report.rebuild(str(run_dir))['changed_files'] == ['results.csv', 'report.md', 'throughput.png']


# ---------------------------------------------------------------- the workers that served each point

def serving(count, dp_size=None):
    return [{'worker_id': '10.0.0.%d:30000' % index, 'url': 'http://10.0.0.%d:30000' % index, 'dp_size': dp_size}
            for index in range(1, count + 1)]


def only_row(run_dir):
    [row] = sweep_report.collect(str(run_dir))['rows']
    return row


def test_per_gpu_figures_divide_by_the_gpus_of_three_serving_workers(run_dir):
    # One node's router round-robins across the serving fleet's three workers: 24 GPUs made these tokens.
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32, workers=serving(3))])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=100.0))
    row = only_row(run_dir)
    assert (row['GPUs'], row['Workers'], row['TP'], row['Fleet'], row['Node Concurrency']) == (24, 3, 8, False, 32)
    assert row['Throughput/GPU (tok/s)'] == pytest.approx(320 * 9216 / 100.0 / 24)
    assert row['Output Throughput/GPU (tok/s)'] == pytest.approx(320 * 1024 / 100.0 / 24)


def test_a_dp_worker_is_one_worker_of_eight_gpus(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(256, 'dp', workers=serving(1, dp_size=8))])
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256, duration=100.0))
    row = only_row(run_dir)
    assert (row['GPUs'], row['Workers'], row['DP']) == (8, 1, 8)
    assert row['Throughput/GPU (tok/s)'] == pytest.approx(2560 * 9216 / 100.0 / 8)


def test_an_older_manifest_without_workers_keeps_the_variants_gpus(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32)])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=100.0))
    row = only_row(run_dir)
    assert (row['GPUs'], row['Workers'], row['Fleet'], row['Node Concurrency'], row['Status']) == (8, None, False, 32, 'ok')
    assert row['Throughput/GPU (tok/s)'] == pytest.approx(320 * 9216 / 100.0 / 8)


def fleet_point(node_conc=32, workers=3, **extra):
    return point(node_conc * 3, node_conc=node_conc, fleet=True, workers=serving(workers), **extra)


def test_a_fleet_point_is_per_gpu_of_the_fleet_and_held_to_its_node_concurrencys_target(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [fleet_point()])
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96, duration=100.0))
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 99999, 96: 1}\n'))
    [row] = run['rows']
    assert (row['Concurrency'], row['Node Concurrency'], row['Fleet'], row['Workers'], row['GPUs']) == (96, 32, True, 3, 24)
    assert row['Output Throughput/GPU (tok/s)'] == pytest.approx(960 * 1024 / 100.0 / 24)
    assert (row['Target'], row['Below Target']) == (99999.0, True)
    assert run['untargeted'] == [96]


def test_a_fleet_point_missing_a_worker_is_invalid_and_misses_its_target(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [fleet_point(workers=2)])
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 100}\n'))
    assert run['rows'] == []
    [entry] = run['invalid']
    assert (entry['conc'], entry['node_conc']) == (96, 32)
    assert entry['reason'] == ('the router listed 2 serving worker(s) (10.0.0.1:30000, 10.0.0.2:30000); '
                               'the fleet point c96 planned 3 (3 x c32)')
    assert [(miss['conc'], miss['target']) for miss in run['below']] == [(96, 100.0)]


def test_a_point_the_sweep_marked_invalid_for_its_workers_says_it_once(run_dir):
    reason = 'worker(s) 10.0.0.1:30000 run dp_size 1, the dp variant DP 8 (a fleet with mixed variants)'
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(256, 'dp', status='invalid', reason=reason,
                                                               workers=serving(1))])
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256))
    [entry] = sweep_report.collect(str(run_dir))['invalid']
    assert entry['reason'] == 'marked invalid by the sweep; ' + reason


def node_sweeps(run_dir, values, simulated=True):
    """Per-node sweeps of one run: {host: {conc: duration}}; every point 320 prompts of 9216 tokens per 10 concurrency."""
    for host, durations in values.items():
        host_dir = write_manifest(run_dir, host, [point(conc, workers=serving(1)) for conc in durations], simulated=simulated)
        for conc, duration in durations.items():
            write_lines(host_dir / ('mix_c%d.jsonl' % conc), bench_record(conc, duration=duration))


def test_several_nodes_get_a_fleet_comparison_with_the_slow_node_flagged(run_dir):
    node_sweeps(run_dir, {'node1': {32: 100.0, 64: 100.0}, 'node2': {32: 100.0, 64: 150.0}, 'node3': {32: 105.0, 64: 100.0}})
    summary = sweep_report.rebuild(str(run_dir))
    fleet = summary['fleet']
    assert fleet['hosts'] == ['node1', 'node2', 'node3']
    assert [(entry['host'], entry['node_conc']) for entry in fleet['below']] == [('node2', 64)]
    assert fleet['below'][0]['shortfall'] == pytest.approx(1 / 3)
    assert fleet['simulated_hosts'] == ['node1', 'node2', 'node3']


PD_ARGV = DP_ARGV + ['--disaggregation-mode', 'prefill']
PD_PAIR = {'kind': 'pd', 'label': '1P1D', 'prefill': ['node9'], 'decode': ['node10'], 'router': 'node9'}


def test_a_pd_point_counts_both_legs_gpus_and_stands_beside_mixed_nodes_not_among_them(run_dir):
    # Two mixed nodes and a 1P1D pair at c64, one workload: the pair's router listed both legs, 16 GPUs made its tokens.
    node_sweeps(run_dir, {'node1': {64: 100.0}, 'node2': {64: 100.0}})
    pd_dir = write_manifest(run_dir, 'node9', [point(64, 'prefill', workers=serving(2, dp_size=8))],
                            variants={'prefill': {'argv': PD_ARGV, 'env': {}},
                                      'decode': {'argv': DP_ARGV + ['--disaggregation-mode', 'decode'], 'env': {}}},
                            topology=PD_PAIR)
    # Far below the mixed nodes per GPU: a node of the fleet would be flagged, the pair is not a node of it.
    write_lines(pd_dir / 'mix_c64.jsonl', bench_record(64, duration=400.0))
    run = sweep_report.collect(str(run_dir))
    pd_row = next(row for row in run['rows'] if row['Host'] == 'node9')
    assert (pd_row['Topology'], pd_row['Workers'], pd_row['GPUs'], pd_row['Concurrency']) == ('1P1D', 2, 16, 64)
    assert pd_row['Throughput/GPU (tok/s)'] == pytest.approx(640 * 9216 / 400.0 / 16)
    assert [row['Topology'] for row in run['rows'] if row['Host'] != 'node9'] == ['mixed', 'mixed']
    assert run['fleet']['hosts'] == ['node1', 'node2'] and run['fleet']['below'] == []
    table = sweep_render.text_table(run).splitlines()
    assert [line.split()[:4] for line in table if line.startswith(('node1', 'node9'))] == [
        ['node1', '64', 'nodp', '8/1/1'], ['node9', '(2', 'workers)', '64']]
    assert '1P1D' in next(line for line in table if line.startswith('node9'))
    report = sweep_render.render_report(run)
    assert '- topology: 1P1D (prefill node9; decode node10; router on node9;' in report
    assert '### Engine levers: variant `decode`' in report


def test_a_manifest_without_a_topology_is_mixed(run_dir):
    standard_run(run_dir)
    assert {row['Topology'] for row in sweep_report.collect(str(run_dir))['rows']} == {'mixed'}


def test_one_node_has_no_fleet_comparison(run_dir):
    standard_run(run_dir)
    assert sweep_report.rebuild(str(run_dir))['fleet'] is None


# ---------------------------------------------------------------- manifests written by hand or by an older sweep

def csv_rows(run_dir):
    with open(run_dir / 'results.csv', encoding='utf-8', newline='') as handle:
        return list(csv.DictReader(handle))


def test_a_bare_manifest_still_rebuilds_with_its_unknown_identity_cells_empty(run_dir):
    """Only the variants and the points: no run_id, model or bench_args; a second host has no point yet."""
    host_dir = run_dir / 'infera-node-1'
    host_dir.mkdir()
    (host_dir / 'manifest.json').write_text(json.dumps({'variants': {'nodp': {'argv': ['--tp-size', '8']}},
                                                        'points': [point(32)]}), encoding='utf-8')
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    (run_dir / 'infera-node-2').mkdir()
    (run_dir / 'infera-node-2' / 'manifest.json').write_text('{"host": "infera-node-2"}', encoding='utf-8')
    summary = sweep_report.rebuild(str(run_dir))
    assert (summary['hosts'], summary['invalid']) == (['infera-node-1', 'infera-node-2'], [])
    [row] = csv_rows(run_dir)
    assert {column: row[column] for column in ('Run ID', 'Host', 'Simulated', 'Model', 'ISL', 'OSL', 'Variant',
                                               'Concurrency', 'Num Prompts', 'Completed')} == {
        'Run ID': '', 'Host': 'infera-node-1', 'Simulated': 'false', 'Model': '', 'ISL': '8192', 'OSL': '1024',
        'Variant': 'nodp', 'Concurrency': '32', 'Num Prompts': '320', 'Completed': '320'}
    # The rows it returns are the CSV read back: an unknown cell is null in both.
    assert sweep_render.load_csv(str(run_dir / 'results.csv')) == summary['rows']
    assert (summary['rows'][0]['Run ID'], summary['rows'][0]['Model']) == (None, None)


def test_a_line_that_does_not_name_its_lengths_takes_them_from_the_manifests_bench_args(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32)],
                              bench_args={'random_input_len': 1024, 'random_output_len': 8192})
    record = bench_record(32, input_tokens=1024 * 320, output_tokens=8192 * 320)
    del record['random_input_len'], record['random_output_len']
    write_lines(host_dir / 'mix_c32.jsonl', record)
    sweep_report.rebuild(str(run_dir))
    [row] = csv_rows(run_dir)
    assert (row['ISL'], row['OSL'], row['Num Prompts']) == ('1024', '8192', '320')


def test_a_point_that_is_not_an_object_or_names_no_variant_is_invalid_not_a_crash(run_dir):
    write_manifest(run_dir, 'infera-node-1', [None, {'conc': 32, 'num_prompts': 320}])
    run = sweep_report.collect(str(run_dir))
    assert run['rows'] == []
    assert [(entry['conc'], entry['variant'], entry['reason']) for entry in run['invalid']] == [
        (None, '', "variant '' is not in the manifest, so TP/DP/EP are unknown"),
        (32, '', "variant '' is not in the manifest, so TP/DP/EP are unknown")]


def test_a_point_without_its_concurrency_is_held_to_the_target_of_the_concurrency_its_line_reports(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [{'variant': 'nodp', 'file': 'mix_c64.jsonl', 'num_prompts': 640}])
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, duration=100.0))
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {64: 1000}\n'))
    [row] = run['rows']
    assert (row['Concurrency'], row['Node Concurrency'], row['Target'], row['Below Target']) == (64, 64, 1000.0, True)
    assert [(miss['conc'], miss['value'], miss['target']) for miss in run['below']] == [
        (64, pytest.approx(640 * 1024 / 100.0 / 8), 1000.0)]


def test_a_point_s_energy_recomputes_from_its_samples_and_its_goodput_from_its_requests(run_dir):
    # One node, 8 GPUs, c4: the client measured 10 s; the sampler read every GPU at 300 W, then 500 W, a second apart,
    # the last reading when the client ended. Energy: 8 GPUs x (300 held to the window's start, then 300->500 over a
    # second, then 500 held to the end): a trapezoid over [0, 10].
    host_dir = write_manifest(run_dir, 'node1', [point(4, workers=serving(1))],
                              bench_args={'random_input_len': 8192, 'random_output_len': 1024, 'random_range_ratio': 1.0,
                                          'limits': {'ttft_p99_ms': 1000}})
    record = bench_record(4, duration=10.0, ttfts=[0.5] * 20 + [2.0] * 20, itls=[[0.01]] * 40, output_lens=[2] * 40,
                          errors=[''] * 40)
    write_lines(host_dir / 'mix_c4.jsonl', record)
    end = 1_800_000_010.0
    with open(host_dir / 'power_c4.jsonl', 'w', encoding='utf-8') as handle:
        for stamp, watts in ((end - 1, 300.0), (end, 500.0)):
            for gpu in range(8):
                handle.write(json.dumps({'time': stamp, 'gpu': gpu, 'watts': watts}) + '\n')
    row = only_row(run_dir)
    energy = 8 * (300.0 * 9 + (300.0 + 500.0) / 2)
    assert row['avg_power_w'] == pytest.approx(energy / 10 / 8)
    assert row['peak_power_w'] == 500.0
    assert row['j_per_output_token'] == pytest.approx(energy / (40 * 1024))
    assert row['tok_s_per_kw'] == pytest.approx((40 * 9216 / 10) / (energy / 10 / 1000))
    # 20 of the 40 requests had their first token within 1000 ms: 2 requests per second over the 10 s.
    assert row['goodput_req_s'] == pytest.approx(2.0)
    # A fleet point (16 GPUs, 8 sampled) gets no energy figures; without limits, no goodput.
    host_dir = write_manifest(run_dir, 'node1', [point(4, workers=serving(2))])
    assert (only_row(run_dir)['avg_power_w'], only_row(run_dir)['goodput_req_s']) == (None, None)
