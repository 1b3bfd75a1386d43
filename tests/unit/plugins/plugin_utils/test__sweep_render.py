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
        variants={'nodp': {'argv': ['--tp-size', '8', '--chunked-prefill-size', '8192'], 'env': {'SGLANG_USE_AITER': '1'}},
                  'dp': {'argv': ['--tp-size', '8', '--dp', '8', '--enable-dp-attention'], 'env': {}}},
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
