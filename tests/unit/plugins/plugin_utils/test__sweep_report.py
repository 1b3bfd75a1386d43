# SPDX-License-Identifier: Apache-2.0
"""Collecting a results folder into rows and invalid points, and rebuilding its CSV, report and plot."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_plot as sweep_plot
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_render as sweep_render
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_report as sweep_report
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError

from .sweep_runs import (
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
