# SPDX-License-Identifier: Apache-2.0
"""The CSV, the play's text table and the Markdown report of a collected run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_metrics as sweep_metrics
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_render as sweep_render
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_report as sweep_report

from .sweep_runs import (
    bench_record,
    point,
    standard_run,
    write_lines,
    write_manifest,
    write_targets,
)

# report.md of two_host_run() as a person reads it, checked by hand against docs/results.md.
REPORT = Path(__file__).resolve().parents[2] / 'data' / 'sweep-report.md'


# ---------------------------------------------------------------- outputs

def test_csv_columns_carry_the_inferencex_export_names():
    for column in ('TP', 'EP', 'DP Attention', 'Concurrency', 'Throughput/GPU (tok/s)', 'Output Throughput/GPU (tok/s)',
                   'Input Throughput/GPU (tok/s)', 'Mean TTFT (ms)', 'Median TTFT (ms)', 'P99 TTFT (ms)', 'Std TTFT (ms)',
                   'P99 TPOT (ms)', 'Mean Interactivity (tok/s/user)', 'Median Interactivity (tok/s/user)', 'Mean ITL (ms)',
                   'Std E2E Latency (ms)'):
        assert column in sweep_metrics.CSV_COLUMNS
    assert len(set(sweep_metrics.CSV_COLUMNS)) == len(sweep_metrics.CSV_COLUMNS)


def test_the_csv_round_trips_and_equals_a_recomputation_from_the_jsonl(run_dir, tmp_path):
    standard_run(run_dir)
    summary = sweep_report.rebuild(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {64: 655.36}\n'))
    loaded = sweep_render.load_csv(summary['csv_path'])
    assert loaded == summary['rows']
    header = (run_dir / 'results.csv').read_text(encoding='utf-8').splitlines()[0]
    assert header.split(',')[:3] == ['Run ID', 'Host', 'Simulated']
    for row in loaded:
        line = json.loads((run_dir / 'infera-node-1' / row['File']).read_text(encoding='utf-8').splitlines()[-1])
        gpus = 8
        assert row['GPUs'] == gpus
        assert row['Throughput/GPU (tok/s)'] == pytest.approx(
            (line['total_input_tokens'] + line['total_output_tokens']) / line['duration'] / gpus, rel=1e-12)
        assert row['Output Throughput/GPU (tok/s)'] == pytest.approx(line['total_output_tokens'] / line['duration'] / gpus, rel=1e-12)
        assert row['Input Throughput/GPU (tok/s)'] == pytest.approx(line['total_input_tokens'] / line['duration'] / gpus, rel=1e-12)
        assert row['Mean Interactivity (tok/s/user)'] == pytest.approx(1000.0 / line['mean_tpot_ms'], rel=1e-12)
        assert row['P99 TTFT (ms)'] == line['p99_ttft_ms']
        assert row['Completed'] == line['completed']
    assert [row['Below Target'] for row in loaded] == [None, True, None]


def test_the_report_says_simulated_and_marks_points_below_target(run_dir, tmp_path):
    standard_run(run_dir)
    write_manifest(run_dir, 'infera-node-2', [point(32, status='aborted', reason='router unhealthy')], simulated=False)
    summary = sweep_report.rebuild(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
    report = (run_dir / 'report.md').read_text(encoding='utf-8')
    assert report.startswith('# Sweep report: 20261129T100000Z (SIMULATED)\n')
    assert 'not hardware results' in report
    assert '**BELOW TARGET (0.50x)**' in report
    assert 'ok (1.02x)' in report
    assert '- infera-node-2 c32 `nodp` (aborted, `mix_c32.jsonl`): marked aborted by the sweep: router unhealthy' in report
    assert '--dp 8\n--enable-dp-attention\n--ep-size 8' in report
    assert 'SGLANG_DP_USE_GATHERV=1' in report
    assert 'sha256:' + 'ab' * 32 in report
    assert '| `random_input_len` | `8192` |' in report
    assert summary['table'].splitlines()[0].startswith('SIMULATED run 20261129T100000Z')
    assert 'BELOW TARGET (0.50x)' in summary['table']
    assert 'INVALID infera-node-2 c32 nodp (aborted): marked aborted by the sweep: router unhealthy' in summary['table']


def test_a_tokenizer_mismatch_is_flagged_in_the_table_the_report_and_the_csv(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(64)])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, total_output_tokens_retokenized=1024 * 320))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, total_output_tokens_retokenized=1024 * 640 * 13 // 10))
    summary = sweep_report.rebuild(str(run_dir))
    flagged = ('infera-node-1 c64 nodp: the client re-encoded the output to 851968 tokens where the server counted '
               '655360 (30.0 % apart, more than 10 %)')
    assert [line for line in summary['table'].splitlines() if line.startswith('TOKENIZER MISMATCH')] == [
        'TOKENIZER MISMATCH ' + sweep_render.tokenizer_mismatch_line(summary['rows'][1])]
    assert flagged in summary['table']
    report = (run_dir / 'report.md').read_text(encoding='utf-8')
    section = report.split('## Tokenizer mismatch\n', 1)[1].split('\n## ', 1)[0]
    assert '- **' + flagged in section
    assert 'c32' not in section
    rows = sweep_render.load_csv(summary['csv_path'])
    assert [(row['Concurrency'], row['Retokenized Output Tokens'], row['Tokenizer Mismatch']) for row in rows] == [
        (32, 327680, False), (64, 851968, True)]


def test_without_a_mismatch_the_report_says_none(run_dir):
    standard_run(run_dir)
    summary = sweep_report.rebuild(str(run_dir))
    assert 'TOKENIZER MISMATCH' not in summary['table']
    report = (run_dir / 'report.md').read_text(encoding='utf-8')
    assert report.split('## Tokenizer mismatch\n\n', 1)[1].startswith('None: on every point')


def mixed_run(run_dir):
    """standard_run plus a c128 point whose line has no P99 TTFT."""
    host_dir = standard_run(run_dir)
    write_manifest(run_dir, 'infera-node-1', [point(32), point(64), point(128), point(256, 'dp')])
    record = bench_record(128)
    del record['p99_ttft_ms']
    write_lines(host_dir / 'mix_c128.jsonl', record)


def test_the_play_output_table_lines_up_every_column(run_dir, tmp_path):
    mixed_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 40, 64: 40}\n'))
    assert sweep_render.text_table(run).splitlines() == [
        'SIMULATED run 20261129T100000Z: numbers from the GPU-free rehearsal simulator, not hardware results',
        'target: P99 TPOT (ms) per concurrency (t.yml)',
        'host           conc  variant  TP/DP/EP  tok/s/GPU  out/GPU   in/GPU  tok/s/user  TTFT p99 ms  TPOT p99 ms  target',
        'infera-node-1    32  nodp     8/1/1        1843.2    204.8   1638.4        52.6       1350.0         30.0  ok (0.75x)',
        'infera-node-1    64  nodp     8/1/1        2949.1    327.7   2621.4        35.1       1350.0         45.0  '
        'ABOVE TARGET (1.12x)',
        'infera-node-1   128  nodp     8/1/1       14745.6   1638.4  13107.2        52.6            -         30.0  -',
        'infera-node-1   256  dp       8/8/8        3686.4    409.6   3276.8        17.5       1350.0         90.0  -',
    ]


def test_the_report_table_bolds_only_a_missed_target(run_dir, tmp_path):
    mixed_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
    rows = [line for line in sweep_render.render_report(run).splitlines() if line.startswith('| infera-node-1 |')]
    assert rows == [
        '| infera-node-1 | 32 | nodp | 8/1/1 | 1843.2 | 204.8 | 1638.4 | 52.6 | 1350.0 | 30.0 | 200.0 | ok (1.02x) |',
        '| infera-node-1 | 64 | nodp | 8/1/1 | 2949.1 | 327.7 | 2621.4 | 35.1 | 1350.0 | 45.0 | 655.4 | '
        '**BELOW TARGET (0.50x)** |',
        '| infera-node-1 | 128 | nodp | 8/1/1 | 14745.6 | 1638.4 | 13107.2 | 52.6 | - | 30.0 | - | - |',
        '| infera-node-1 | 256 | dp | 8/8/8 | 3686.4 | 409.6 | 3276.8 | 17.5 | 1350.0 | 90.0 | - | - |',
    ]


def test_the_csv_spells_booleans_in_lower_case_and_ends_lines_with_newline_only(run_dir):
    standard_run(run_dir, simulated=False)
    text = sweep_render.render_csv(sweep_report.collect(str(run_dir))['rows'])
    assert '\r' not in text
    first = text.splitlines()[1].split(',')
    assert (first[sweep_metrics.CSV_COLUMNS.index('Simulated')], first[sweep_metrics.CSV_COLUMNS.index('DP Attention')]) == (
        'false', 'false')


def two_host_run(run_dir):
    """A simulated host with a valid, an aborted and a dp point; a hardware host whose manifest knows little."""
    host_dir = write_manifest(
        run_dir, 'infera-node-1', [point(32), point(256, 'dp'), point(128, status='aborted', reason='engine exited (code 137)')],
        variants={'nodp': {'argv': ['--tp-size', '8', '--chunked-prefill-size', '8192'], 'env': {'SGLANG_USE_AITER': '1'},
                           'accuracy': {'questions': 20, 'correct': 20, 'accuracy': 1.0, 'threshold': 0.8, 'passed': True,
                                        'line': '20/20 gsm8k-style answers right (100 %, threshold 80 %)'}},
                  'dp': {'argv': ['--tp-size', '8', '--dp', '8', '--enable-dp-attention'], 'env': {},
                         'accuracy': {'questions': 20, 'correct': 3, 'accuracy': 0.15, 'threshold': 0.8, 'passed': False,
                                      'line': '3/20 gsm8k-style answers right (15 %, threshold 80 %)'}}},
        bench_args={'random_input_len': 8192, 'random_output_len': 1024, 'tokenizer': 'a|b'})
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=200.0))
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256, duration=800.0, tpot=60.0))
    write_manifest(run_dir, 'infera-node-2', [point(64, 'tp4')], simulated=False, image=None, image_digest=None,
                   model=None, recipe=None, variants={'nodp': None}, bench_args={})


def test_the_report_reads_as_written_in_full(run_dir, tmp_path):
    two_host_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 128: 100, 1024: 50}\n'))
    assert sweep_render.render_report(run) == REPORT.read_text(encoding='utf-8')


def test_the_play_output_table_lists_invalid_points_last(run_dir, tmp_path):
    two_host_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 128: 100, 1024: 50}\n'))
    assert sweep_render.text_table(run).splitlines()[-2:] == [
        'INVALID infera-node-1 c128 nodp (aborted): marked aborted by the sweep: engine exited (code 137); '
        'mix_c128.jsonl is missing (the client writes no line when every request fails, or the point never ran)',
        "INVALID infera-node-2 c64 tp4 (ok): variant 'tp4' is not in the manifest, so TP/DP/EP are unknown"]


def test_every_target_the_sweep_did_not_run_is_listed(run_dir, tmp_path):
    standard_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {1024: 50, 2048: 50}\n'))
    assert 'Targets for concurrencies the sweep did not run: c1024, c2048.' in sweep_render.render_report(run).splitlines()


def test_a_manifest_without_a_run_id_shows_an_empty_one():
    assert sweep_render._manifest_section({'host': 'infera-node-9', 'simulated': False})[3] == '- run: ``'


def test_the_title_names_each_run_id_once_in_order(run_dir):
    standard_run(run_dir, host='infera-node-2')
    write_manifest(run_dir, 'infera-node-1', [point(32)], run_id='20261128T090000Z')
    write_manifest(run_dir, 'infera-node-3', [point(32)])
    report = sweep_render.render_report(sweep_report.collect(str(run_dir)))
    assert report.startswith('# Sweep report: 20261128T090000Z, 20261129T100000Z (SIMULATED)\n')


def test_a_manifest_without_a_run_id_adds_nothing_to_the_title():
    assert sweep_render.run_ids({'manifests': [{'host': 'infera-node-9', 'simulated': False}]}) == ''


def test_a_latency_target_is_lower_is_better_in_the_report(run_dir, tmp_path):
    standard_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 40, 64: 40}\n'))
    report = sweep_render.render_report(run).splitlines()
    assert 'Target: **P99 TPOT (ms)** per concurrency from `t.yml` (lower is better).' in report
    assert '| infera-node-1 | 64 | nodp | 8/1/1 | 2949.1 | 327.7 | 2621.4 | 35.1 | 1350.0 | 45.0 | 40.0 | ' \
           '**ABOVE TARGET (1.12x)** |' in report


def test_a_hardware_run_is_not_called_simulated(run_dir):
    standard_run(run_dir, simulated=False)
    summary = sweep_report.rebuild(str(run_dir))
    report = (run_dir / 'report.md').read_text(encoding='utf-8')
    assert 'SIMULATED' not in report
    assert report.startswith('# Sweep report: 20261129T100000Z\n\n3 valid point(s), 0 invalid, 0 missing the target.')
    assert '\n## Invalid or aborted points\n\nNone.\n' in report
    assert 'SIMULATED' not in summary['table']
    assert summary['table'].splitlines()[0].split() == ['host', 'conc', 'variant', 'TP/DP/EP', 'tok/s/GPU', 'out/GPU', 'in/GPU',
                                                        'tok/s/user', 'TTFT', 'p99', 'ms', 'TPOT', 'p99', 'ms', 'target']


# ---------------------------------------------------------------- fleets

def serving(count):
    return [{'worker_id': '10.0.0.%d:30000' % index, 'url': 'http://10.0.0.%d:30000' % index, 'dp_size': None}
            for index in range(1, count + 1)]


def fleet_run(run_dir, simulated=('node1', 'node2', 'node3')):
    """Node sweeps of three nodes (node2 a third slower at c64) and a fleet point through node1's router."""
    durations = {'node1': {32: 100.0, 64: 100.0}, 'node2': {32: 100.0, 64: 150.0}, 'node3': {32: 105.0, 64: 100.0}}
    for host, points in durations.items():
        entries = [point(conc, workers=serving(1)) for conc in points]
        if host == 'node1':
            entries.append(point(96, node_conc=32, fleet=True, workers=serving(3)))
        host_dir = write_manifest(run_dir, host, entries, simulated=host in simulated)
        for conc, duration in points.items():
            write_lines(host_dir / ('mix_c%d.jsonl' % conc), bench_record(conc, duration=duration))
    write_lines(run_dir / 'node1' / 'mix_c96.jsonl', bench_record(96, duration=110.0))
    return sweep_report.collect(str(run_dir))


def test_the_report_compares_each_node_with_the_fleet_median_and_labels_simulated_figures(run_dir):
    report = sweep_render.render_report(fleet_run(run_dir, simulated=('node1', 'node2'))).splitlines()
    start = report.index('## Fleet: Throughput/GPU (tok/s) per node (SIMULATED)')
    assert report[start + 2:start + 18] == [
        'Each node swept through its own router, at each concurrency; the fleet median of the nodes with a valid point '
        'there; in bold the nodes more than 10 % below it (exactly 10 % below is not flagged).',
        'SIMULATED figures (the GPU-free rehearsal simulator, not hardware results): node1, node2.',
        '',
        '| conc | node1 (SIMULATED) | node2 (SIMULATED) | node3 | fleet median (SIMULATED) |',
        '|---|---|---|---|---|',
        '| 32 | 3686.4 | 3686.4 | 3510.9 | 3686.4 |',
        '| 64 | 7372.8 | **4915.2 (33.3 % below)** | 7372.8 | 7372.8 |',
        '',
        'Nodes more than 10 % below the fleet median:',
        '',
        '- **node2 c64: 4915.2 tok/s/GPU, 33.3 % below the fleet median 7372.8** (SIMULATED)',
        '',
        'Fleet points (one router for the whole fleet; they do not tell the nodes apart):',
        '',
        '- node1 c96 nodp (fleet: 3 workers x c32): 3351.3 tok/s/GPU (SIMULATED)',
        '',
    ]
    assert '| node1 (fleet: 3 workers) | 96 | nodp | 8/1/1 | 3351.3 | 372.4 | 2978.9 | 52.6 | 1350.0 | 30.0 | - | - |' in report
    assert report[4].startswith('7 valid point(s), 0 invalid, 0 missing the target. Per-GPU numbers divide by the GPUs of '
                                'the workers that served the point (serving workers x TP x PP)')


def test_the_play_output_ends_with_the_fleet_lines(run_dir):
    table = sweep_render.text_table(fleet_run(run_dir)).splitlines()
    assert table[0].startswith('SIMULATED run 20261129T100000Z')
    assert 'node1 (fleet: 3 workers)    96  nodp' in table[4]
    assert table[-5:] == [
        'fleet: Throughput/GPU (tok/s) per node, median per concurrency; BELOW MEDIAN: more than 10 % under it '
        '(SIMULATED: node1, node2, node3)',
        '  c32: median 3686.4 (node1 3686.4, node2 3686.4, node3 3510.9)',
        '  c64: median 7372.8 (node1 7372.8, node2 4915.2, node3 7372.8)',
        '  BELOW MEDIAN node2 c64: 4915.2 tok/s/GPU, 33.3 % below the fleet median 7372.8 (SIMULATED)',
        '  fleet point node1 c96 nodp (fleet: 3 workers x c32): 3351.3 tok/s/GPU (SIMULATED)',
    ]


def test_a_hardware_fleet_within_ten_percent_says_so_without_simulated(run_dir):
    for host, duration in (('node1', 100.0), ('node2', 109.0)):
        host_dir = write_manifest(run_dir, host, [point(32)], simulated=False)
        write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=duration))
    run = sweep_report.collect(str(run_dir))
    report = sweep_render.render_report(run)
    assert 'SIMULATED' not in report + sweep_render.text_table(run)
    assert '## Fleet: Throughput/GPU (tok/s) per node\n' in report
    assert '\nEvery node is within 10 % of the fleet median.\n' in report
    assert sweep_render.text_table(run).splitlines()[-1] == '  every node within 10 % of the fleet median'
    # No point records its workers (an older manifest): the report says the old divisor.
    assert 'Per-GPU numbers divide by the GPUs of the point (TP x PP)' in report


def test_a_point_served_by_several_workers_says_so_in_the_host_cell(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32, workers=serving(3))])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    [row] = sweep_report.collect(str(run_dir))['rows']
    assert sweep_render.host_label(row) == 'infera-node-1 (3 workers)'
    assert sweep_render.host_label(dict(row, Workers=2)) == 'infera-node-1 (2 workers)'
    assert sweep_render.host_label(dict(row, Workers=1)) == 'infera-node-1'


def test_the_csv_carries_the_workers_fleet_and_node_concurrency(run_dir):
    fleet_run(run_dir)
    rows = sweep_render.load_csv(sweep_report.rebuild(str(run_dir))['csv_path'])
    assert [(row['Host'], row['Concurrency'], row['Node Concurrency'], row['Fleet'], row['Workers'], row['GPUs'])
            for row in rows if row['Host'] == 'node1'] == [
        ('node1', 32, 32, False, 1, 8), ('node1', 64, 64, False, 1, 8), ('node1', 96, 32, True, 3, 24)]


def hardware_fleet_run(run_dir, fleet_point):
    """Two hardware nodes (node2 a third slower at c32, no c64) and a fleet point through node1's router."""
    host_dir = write_manifest(run_dir, 'node1', [point(32), point(64), fleet_point], simulated=False)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=100.0))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, duration=100.0))
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96, duration=110.0))
    host_dir = write_manifest(run_dir, 'node2', [point(32)], simulated=False)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=150.0))
    return sweep_report.collect(str(run_dir))


def test_a_hardware_fleet_report_says_nothing_simulated_and_shows_a_node_without_a_point(run_dir):
    run = hardware_fleet_run(run_dir, point(96, node_conc=32, fleet=True, workers=serving(3)))
    report = sweep_render.render_report(run).splitlines()
    start = report.index('## Fleet: Throughput/GPU (tok/s) per node')
    assert report[start:start + 16] == [
        '## Fleet: Throughput/GPU (tok/s) per node',
        '',
        'Each node swept through its own router, at each concurrency; the fleet median of the nodes with a valid point '
        'there; in bold the nodes more than 10 % below it (exactly 10 % below is not flagged).',
        '',
        '| conc | node1 | node2 | fleet median |',
        '|---|---|---|---|',
        '| 32 | 3686.4 | **2457.6 (20.0 % below)** | 3072.0 |',
        '| 64 | 7372.8 | - | 7372.8 |',
        '',
        'Nodes more than 10 % below the fleet median:',
        '',
        '- **node2 c32: 2457.6 tok/s/GPU, 20.0 % below the fleet median 3072.0**',
        '',
        'Fleet points (one router for the whole fleet; they do not tell the nodes apart):',
        '',
        '- node1 c96 nodp (fleet: 3 workers x c32): 3351.3 tok/s/GPU',
    ]
    table = sweep_render.text_table(run).splitlines()
    assert table[-7:] == [
        'node2                       32  nodp     8/1/1        2457.6    273.1  2184.5        52.6       1350.0         30.0  -',
        '',
        'fleet: Throughput/GPU (tok/s) per node, median per concurrency; BELOW MEDIAN: more than 10 % under it',
        '  c32: median 3072.0 (node1 3686.4, node2 2457.6)',
        '  c64: median 7372.8 (node1 7372.8)',
        '  BELOW MEDIAN node2 c32: 2457.6 tok/s/GPU, 20.0 % below the fleet median 3072.0',
        '  fleet point node1 c96 nodp (fleet: 3 workers x c32): 3351.3 tok/s/GPU',
    ]


def test_a_fleet_point_that_records_no_workers_is_left_out_as_invalid(run_dir):
    # A manifest entry with neither its conc (read back from the line) nor the workers the router listed:
    # divided by one worker's GPUs it would show about three times what each GPU did.
    fleet_point = point(96, node_conc=32, fleet=True)
    del fleet_point['conc']
    run = hardware_fleet_run(run_dir, fleet_point)
    assert [sweep_render.host_label(row) for row in run['rows']] == ['node1', 'node1', 'node2']
    assert [(entry['host'], entry['reason']) for entry in run['invalid']] == [
        ('node1', 'the fleet point records no workers the router listed, so the GPUs that served it are unknown')]
    assert not [line for line in sweep_render.text_table(run).splitlines() if line.startswith('  fleet point')]


# ---------------------------------------------------------------- workload (ISL, OSL, range ratio)

def test_every_csv_row_carries_the_range_ratio_from_the_manifest_or_else_the_line(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(64)],
                              bench_args={'random_input_len': 8192, 'random_output_len': 1024, 'random_range_ratio': 0.8})
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64))
    host_dir = write_manifest(run_dir, 'infera-node-2', [point(32)], bench_args={})
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, random_range_ratio=0.5))
    summary = sweep_report.rebuild(str(run_dir))
    rows = sweep_render.load_csv(summary['csv_path'])
    assert [(row['Host'], row['ISL'], row['OSL'], row['Range Ratio']) for row in rows] == [
        ('infera-node-1', 8192, 1024, 0.8), ('infera-node-1', 8192, 1024, 0.8), ('infera-node-2', 8192, 1024, 0.5)]
    header = (run_dir / 'results.csv').read_text(encoding='utf-8').splitlines()[0].split(',')
    assert header[4:7] == ['ISL', 'OSL', 'Range Ratio']
    report = sweep_render.render_report(sweep_report.collect(str(run_dir))).splitlines()
    assert "Workload: `--dataset-name random`, ISL 8192, OSL 1024, `--random-range-ratio` 0.5/0.8 (each request's " \
           "lengths drawn between ratio x and the full ISL and OSL). InferenceX's fixed-length runs use 0.8; compare " \
           "with its figures at the same ratio (docs/results.md)." in report


def test_targets_measured_at_another_workload_say_so_beside_the_comparison(run_dir, tmp_path):
    standard_run(run_dir)  # ISL 8192, OSL 1024, range ratio 1.0
    targets = write_targets(tmp_path / 't.yml', 'targets: {64: 600}\nrandom_input_len: 8192\nrandom_output_len: 1024\n'
                                                'random_range_ratio: 0.8\n')
    report = sweep_render.render_report(sweep_report.collect(str(run_dir), targets)).splitlines()
    start = report.index('Target: **Output Throughput/GPU (tok/s)** per concurrency from `t.yml` (higher is better).')
    assert report[start + 1:start + 4] == [
        '',
        '**The targets were measured at `--random-range-ratio` 0.8; this run used 1.0: not the same workload, so the '
        'ratios to target compare unlike figures.**',
        '']


def test_targets_measured_at_the_same_workload_add_nothing(run_dir, tmp_path):
    standard_run(run_dir)
    targets = write_targets(tmp_path / 't.yml', 'targets: {64: 600}\nrandom_range_ratio: 1.0\nrandom_output_len: 1024\n')
    report = sweep_render.render_report(sweep_report.collect(str(run_dir), targets))
    assert 'The targets were measured at' not in report
