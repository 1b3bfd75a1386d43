# SPDX-License-Identifier: Apache-2.0
"""Parsing, validation, InferenceX normalisation, targets and the outputs of a sweep results folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_results as results

from .sweep_runs import (
    DP_ARGV,
    LINE_0_4,
    LINE_0_5,
    NODP_ARGV,
    bench_record,
    point,
    standard_run,
    write_lines,
    write_manifest,
)

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
# report.md of two_host_run() as a person reads it, checked by hand against docs/results.md.
REPORT = Path(__file__).resolve().parents[2] / 'data' / 'sweep-report.md'


@pytest.fixture
def run_dir(tmp_path):
    directory = tmp_path / 'results' / '20261129T100000Z'
    directory.mkdir(parents=True)
    return directory


def write_targets(path, text):
    path.write_text(text, encoding='utf-8')
    return str(path)


# ---------------------------------------------------------------- real client lines

@pytest.mark.parametrize('line, client_keys', [
    (LINE_0_5, ('total_throughput',)),
    (LINE_0_4, ()),
], ids=['sglang-0.5.23', 'sglang-0.4.10.post2'])
def test_real_lines_of_both_client_versions_are_valid(line, client_keys):
    checked = results.validate_point(str(line), num_prompts=8)
    assert checked['valid'] is True, checked['reason']
    assert checked['reason'] == ''
    assert checked['record']['request_rate'] == 'Infinity'
    assert all(key in checked['record'] for key in client_keys)
    assert 'total_token_throughput' not in checked['record']


@pytest.mark.parametrize('line', [LINE_0_5, LINE_0_4], ids=['sglang-0.5.23', 'sglang-0.4.10.post2'])
def test_computed_throughputs_agree_with_what_the_real_client_printed(line):
    record = json.loads(line.read_text())
    metrics = results.throughput_metrics(record, gpus=1)
    assert metrics['Output Throughput (tok/s)'] == pytest.approx(record['output_throughput'], rel=1e-9)
    assert metrics['Input Throughput (tok/s)'] == pytest.approx(record['input_throughput'], rel=1e-9)
    assert metrics['Throughput (tok/s)'] == pytest.approx(record['input_throughput'] + record['output_throughput'], rel=1e-9)
    if 'total_throughput' in record:
        assert metrics['Throughput (tok/s)'] == pytest.approx(record['total_throughput'], rel=1e-9)


def test_real_lines_fill_every_latency_column_they_carry():
    record, problem = results.read_last_record(str(LINE_0_4))
    assert problem is None
    metrics = results.latency_metrics(record)
    assert metrics['P99 ITL (ms)'] == record['p99_itl_ms']
    assert metrics['Mean E2E Latency (ms)'] == record['mean_e2e_latency_ms']
    assert metrics['Median Interactivity (tok/s/user)'] == pytest.approx(1000.0 / record['median_tpot_ms'])
    assert metrics['Mean Interactivity (tok/s/user)'] == pytest.approx(1000.0 / record['mean_tpot_ms'])


# ---------------------------------------------------------------- parsing

def test_the_last_line_counts_when_the_client_appended_several(tmp_path):
    path = tmp_path / 'mix_c32.jsonl'
    write_lines(path, bench_record(32, num_prompts=5), bench_record(32, duration=123.0), '')
    checked = results.validate_point(str(path), num_prompts=320)
    assert checked['valid'] is True
    assert checked['record']['duration'] == 123.0


def test_infinity_and_nan_are_read_and_made_json_safe(tmp_path):
    path = tmp_path / 'mix_c32.jsonl'
    write_lines(path, '{"completed": 8, "duration": 2.0, "total_input_tokens": 10, "total_output_tokens": 4, '
                      '"request_rate": Infinity, "mean_tpot_ms": NaN, "p99_ttft_ms": -Infinity}')
    checked = results.validate_point(str(path), num_prompts=8)
    assert checked['valid'] is True
    assert checked['record']['request_rate'] == 'Infinity'
    json.dumps(checked['record'], allow_nan=False)
    metrics = results.latency_metrics(checked['record'])
    assert metrics['Mean TPOT (ms)'] is None
    assert metrics['Mean Interactivity (tok/s/user)'] is None
    assert metrics['P99 TTFT (ms)'] is None


def test_throughput_keys_of_any_version_are_ignored():
    record = bench_record(32, duration=200.0, total_token_throughput=1.0)
    metrics = results.throughput_metrics(record, gpus=8)
    assert metrics['Throughput (tok/s)'] == pytest.approx((8192 + 1024) * 320 / 200.0)


def test_missing_latency_keys_leave_empty_cells_not_errors():
    record = {'completed': 8, 'duration': 1.0, 'total_input_tokens': 8, 'total_output_tokens': 8, 'mean_ttft_ms': 12.5}
    row = results.normalise(record, {'GPUs': 8, 'Concurrency': 2, 'ISL': None, 'OSL': None})
    assert row['Mean TTFT (ms)'] == 12.5
    assert row['P99 TTFT (ms)'] is None
    assert row['Median Interactivity (tok/s/user)'] is None
    assert row['Output Throughput/GPU (tok/s)'] == pytest.approx(1.0)


def test_inferencex_client_e2el_keys_fill_the_e2e_columns():
    metrics = results.latency_metrics({'mean_e2el_ms': 1500.0, 'p99_e2el_ms': 2500.0})
    assert metrics['Mean E2E Latency (ms)'] == 1500.0
    assert metrics['P99 E2E Latency (ms)'] == 2500.0


def test_zero_tpot_gives_no_interactivity_instead_of_dividing_by_zero():
    metrics = results.latency_metrics({'std_tpot_ms': 0.0, 'mean_tpot_ms': 40.0})
    assert metrics['Std Interactivity (tok/s/user)'] is None
    assert metrics['Mean Interactivity (tok/s/user)'] == 25.0


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize('content, num_prompts, reason', [
    (None, 320, 'mix_c32.jsonl is missing (the client writes no line when every request fails'),
    ('', 320, 'mix_c32.jsonl has no result line (the client writes no line when every request fails)'),
    ('\n  \n', 320, 'has no result line'),
    ('{"completed": 320, "duration": 10', 320, 'the last line of mix_c32.jsonl is not JSON'),
    ('[1, 2]', 320, 'is a JSON list, not an object'),
    (bench_record(32, num_prompts=310), 320, 'only 310 of 320 requests completed'),
    ({'duration': 5.0, 'total_input_tokens': 1, 'total_output_tokens': 1}, 320, "no 'completed' count"),
    (bench_record(32, duration=0), 320, 'duration is 0; it must be more than 0 seconds'),
    (bench_record(32, duration=-1.5), 320, 'duration is -1.5'),
    (bench_record(32, duration=float('inf')), 320, "no finite 'duration'"),
    ({k: v for k, v in bench_record(32).items() if k != 'duration'}, 320, "no finite 'duration' (found None)"),
    ({k: v for k, v in bench_record(32).items() if k != 'total_output_tokens'}, 320, "no 'total_output_tokens'"),
    (bench_record(32, num_prompts=0), 0, 'no request completed'),
], ids=['missing', 'empty', 'blank', 'truncated', 'not-object', 'completed-short', 'no-completed', 'duration-0',
        'duration-negative', 'duration-infinite', 'no-duration', 'no-output-tokens', 'none-completed'])
def test_invalid_points_say_why(tmp_path, content, num_prompts, reason):
    path = tmp_path / 'mix_c32.jsonl'
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content) + '\n', encoding='utf-8')
    checked = results.validate_point(str(path), num_prompts)
    assert checked['valid'] is False
    assert reason in checked['reason']
    assert checked['path'] == str(path)


@pytest.mark.parametrize('record, problem', [
    ({}, "the result has no 'completed' count"),
    ({'completed': 0}, 'no request completed'),
    ({'completed': 1}, "the result has no finite 'duration' (found None)"),
    ({'completed': 1, 'duration': -1}, 'duration is -1; it must be more than 0 seconds'),
    ({'completed': 1, 'duration': 2.0, 'total_output_tokens': 5},
     "the result has no 'total_input_tokens', so throughput cannot be computed"),
])
def test_record_problems_are_named_in_full(record, problem):
    assert results.record_problem(record) == problem


def test_infinities_and_nan_are_spelled_out_at_any_depth_and_never_count_as_numbers():
    assert results._json_safe({'a': [float('nan'), float('inf'), -float('inf'), 1.5], 'b': 0.0}) == {
        'a': ['NaN', 'Infinity', '-Infinity', 1.5], 'b': 0.0}
    assert [results._finite(value) for value in (float('nan'), float('inf'), 2.5)] == [None, None, 2.5]


def test_without_num_prompts_any_completed_request_is_enough(tmp_path):
    path = tmp_path / 'mix_c32.jsonl'
    write_lines(path, bench_record(32, num_prompts=3))
    assert results.validate_point(str(path))['valid'] is True


# ---------------------------------------------------------------- parallelism and per-GPU arithmetic

@pytest.mark.parametrize('argv, expected', [
    (NODP_ARGV, {'TP': 8, 'PP': 1, 'DP': 1, 'EP': 1, 'DP Attention': False, 'GPUs': 8}),
    (DP_ARGV, {'TP': 8, 'PP': 1, 'DP': 8, 'EP': 8, 'DP Attention': True, 'GPUs': 8}),
    (['--tp-size=4', '--pp-size', '2'], {'TP': 4, 'PP': 2, 'DP': 1, 'EP': 1, 'DP Attention': False, 'GPUs': 8}),
    (['--tensor-parallel-size', '8', '--dp-size', '8', '--enable-dp-attention', '--expert-parallel-size', '8'],
     {'TP': 8, 'PP': 1, 'DP': 8, 'EP': 8, 'DP Attention': True, 'GPUs': 8}),
    (['--tp', '4', '--dp-size', '2'], {'TP': 4, 'PP': 1, 'DP': 2, 'EP': 1, 'DP Attention': False, 'GPUs': 8}),
    ([], {'TP': 1, 'PP': 1, 'DP': 1, 'EP': 1, 'DP Attention': False, 'GPUs': 1}),
], ids=['nodp', 'dp-attention', 'pp', 'long-names', 'plain-dp', 'defaults'])
def test_parallelism_from_the_engine_argv(argv, expected):
    assert results.parallelism(argv) == expected


@pytest.mark.parametrize('argv, key, expected', [
    (['--tp-size', '4', '--pp-size', '2', '--tp-size', '8'], 'TP', 8),
    (['--tp', '2', '--tensor-parallel-size=4'], 'TP', 4),
    (['--ep-size=2', '--ep', '8'], 'EP', 8),
], ids=['same-flag', 'alias-then-inline', 'inline-then-alias'])
def test_the_last_of_repeated_parallel_flags_counts_as_argparse_does(argv, key, expected):
    # An override appended to the recipe's argv (extra_args) is the value the engine runs with.
    assert results.parallelism(argv)[key] == expected


@pytest.mark.parametrize('argv', [['--tp-size', 'eight'], ['--ep-size', '0']])
def test_bad_parallel_sizes_are_named(argv):
    with pytest.raises(results.SweepResultsError, match=argv[0]):
        results.parallelism(argv)


def test_per_gpu_numbers_divide_by_tp_times_pp_and_dp_attention_adds_no_gpu(run_dir):
    standard_run(run_dir)
    rows = {row['Concurrency']: row for row in results.collect(str(run_dir))['rows']}
    dp_row = rows[256]
    assert (dp_row['TP'], dp_row['DP'], dp_row['EP'], dp_row['GPUs']) == (8, 8, 8, 8)
    assert dp_row['Output Throughput/GPU (tok/s)'] == pytest.approx(1024 * 2560 / 800.0 / 8)
    assert dp_row['Input Throughput/GPU (tok/s)'] == pytest.approx(8192 * 2560 / 800.0 / 8)
    assert dp_row['Throughput/GPU (tok/s)'] == pytest.approx((8192 + 1024) * 2560 / 800.0 / 8)
    assert rows[32]['Output Throughput/GPU (tok/s)'] == pytest.approx(204.8)
    assert rows[32]['Median Interactivity (tok/s/user)'] == pytest.approx(1000.0 / 19.0)


def tp_pp_run(run_dir):
    """c32 on TP 4 x PP 2 (8 GPUs) and c64 on TP 4 alone (4 GPUs), with token rates that are whole numbers."""
    variants = {'tp4pp2': {'argv': ['--tp-size', '4', '--pp-size', '2'], 'env': {}},
                'tp4': {'argv': ['--tp-size', '4'], 'env': {}}}
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32, 'tp4pp2'), point(64, 'tp4')], variants=variants)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=160.0))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, duration=320.0))


@pytest.mark.parametrize('conc, gpus, total, output, input_', [
    # c32: 320 prompts x (8192 + 1024) tokens in 160 s = 18432 tok/s on the node.
    (32, 8, 18432 / 8, 2048 / 8, 16384 / 8),
    # c64: 640 prompts in 320 s, the same node rate on half the GPUs.
    (64, 4, 18432 / 4, 2048 / 4, 16384 / 4),
], ids=['tp4-pp2', 'tp4'])
def test_per_gpu_numbers_divide_by_the_points_own_tp_times_pp(run_dir, conc, gpus, total, output, input_):
    tp_pp_run(run_dir)
    row = {row['Concurrency']: row for row in results.collect(str(run_dir))['rows']}[conc]
    assert row['GPUs'] == gpus
    assert row['Throughput (tok/s)'] == 18432
    assert (row['Throughput/GPU (tok/s)'], row['Output Throughput/GPU (tok/s)'], row['Input Throughput/GPU (tok/s)']) == (
        total, output, input_)


# ---------------------------------------------------------------- targets

@pytest.mark.parametrize('metric', ['Output Throughput/GPU', 'Output Throughput/GPU (tok/s)', 'output_tput_per_gpu',
                                    'output throughput/gpu', 'output throughput/gpu (tok/s)'])
def test_target_metric_names_resolve_to_the_column(metric):
    assert results.resolve_metric(metric) == 'Output Throughput/GPU (tok/s)'


def test_targets_file_shape_and_defaults(tmp_path):
    targets = results.load_targets(write_targets(tmp_path / 't.yml', 'targets: {32: 250, "c64": 400.5, "128": 500}\n'))
    assert targets['metric'] == 'Output Throughput/GPU (tok/s)'
    assert targets['higher_is_better'] is True
    assert targets['targets'] == {32: 250.0, 64: 400.5, 128: 500.0}
    latency = results.load_targets(write_targets(tmp_path / 'l.yml', 'metric: P99 TTFT\ntargets: {32: 2000}\n'))
    assert latency['metric'] == 'P99 TTFT (ms)'
    assert latency['higher_is_better'] is False


NOT_A_TARGETS_FILE = ('{path} must be a mapping with a non-empty "targets" mapping of concurrency: value '
                      '(and optionally "metric" and "higher_is_better")')


@pytest.mark.parametrize('text, message', [
    ('metric: Watts/GPU\ntargets: {32: 1}\n',
     "unknown target metric 'Watts/GPU'; use one of: " + ', '.join(results.NUMERIC_COLUMNS)),
    ('targets: {32: 0}\n', '{path}: the target for concurrency 32 is 0; it must be a number above 0'),
    ('targets: {32: fast}\n', "{path}: the target for concurrency 32 is 'fast'; it must be a number above 0"),
    ('targets: {many: 3}\n', "{path}: 'many' is not a concurrency (expected an integer such as 64)"),
    ('targets: {X64: 3}\n', "{path}: 'X64' is not a concurrency (expected an integer such as 64)"),
    ('targets: {0: 3}\n', '{path}: concurrency 0 must be at least 1'),
    ('- 32\n', NOT_A_TARGETS_FILE),
    ('targets: {}\n', NOT_A_TARGETS_FILE),
    ('metric: Output Throughput/GPU\ntarget: {32: 1}\n', NOT_A_TARGETS_FILE),
    ('targets: {32: 1}\nunit: tok\n', "{path} has unknown keys ['unit']; allowed: metric, targets, higher_is_better"),
    ('targets: {32: 1}\nhigher_is_better: maybe\n', "{path}: higher_is_better must be true or false, not 'maybe'"),
])
def test_bad_targets_files_are_refused_with_the_cause(tmp_path, text, message):
    path = write_targets(tmp_path / 'targets.yml', text)
    with pytest.raises(results.SweepResultsError) as raised:
        results.load_targets(path)
    assert str(raised.value) == message.format(path=path)


def test_a_targets_file_that_is_not_yaml_is_named(tmp_path):
    path = write_targets(tmp_path / 'targets.yml', 'targets: [32: 1\n')
    with pytest.raises(results.SweepResultsError) as raised:
        results.load_targets(path)
    assert str(raised.value).startswith('the targets file %s is not YAML: while parsing a flow sequence' % path)


def test_a_missing_targets_file_is_an_error(tmp_path):
    path = str(tmp_path / 'nope.yml')
    with pytest.raises(results.SweepResultsError) as raised:
        results.load_targets(path)
    assert str(raised.value) == 'cannot read the targets file %s: No such file or directory' % path


def test_the_smallest_concurrency_and_a_fractional_target_are_accepted(tmp_path):
    path = write_targets(tmp_path / 'targets.yml', 'targets: {1: 0.5}\n')
    assert results.load_targets(path) == {'metric': 'Output Throughput/GPU (tok/s)', 'higher_is_better': True,
                                          'targets': {1: 0.5}, 'path': path}


def test_targets_give_ratio_and_below_flag(run_dir, tmp_path):
    standard_run(run_dir)
    targets = write_targets(tmp_path / 't.yml', 'metric: Output Throughput/GPU\ntargets: {32: 200, 64: 655.36, 256: 400}\n')
    run = results.collect(str(run_dir), targets)
    rows = {row['Concurrency']: row for row in run['rows']}
    assert rows[32]['Target'] == 200.0
    assert rows[32]['Ratio'] == pytest.approx(1.024)
    assert rows[32]['Below Target'] is False
    assert rows[64]['Ratio'] == pytest.approx(0.5)
    assert rows[64]['Below Target'] is True
    assert rows[256]['Below Target'] is False
    assert [(miss['host'], miss['conc'], miss['variant']) for miss in run['below']] == [('infera-node-1', 64, 'nodp')]
    assert run['below'][0]['value'] == pytest.approx(327.68)
    assert results.verdict(rows[64]) == 'BELOW TARGET (0.50x)'
    assert results.verdict(rows[32]) == 'ok (1.02x)'


@pytest.mark.parametrize('ratio, higher_is_better, missed', [
    (1.0, True, False), (0.999, True, True), (1.001, True, False),
    (1.0, False, False), (1.001, False, True), (0.999, False, False),
])
def test_a_target_is_missed_only_strictly_below_or_above(ratio, higher_is_better, missed):
    assert results.misses_target(ratio, higher_is_better) is missed


def test_a_point_exactly_on_its_target_meets_it(run_dir, tmp_path):
    tp_pp_run(run_dir)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 256, 64: 512}\n'))
    assert [(row['Ratio'], row['Below Target']) for row in run['rows']] == [(1.0, False), (1.0, False)]
    assert run['below'] == []
    assert results.verdict(run['rows'][0]) == 'ok (1.00x)'


def test_a_latency_exactly_on_its_target_meets_it(run_dir, tmp_path):
    tp_pp_run(run_dir)
    # bench_record's P99 TPOT is 1.5 x 20 ms.
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 30}\n'))
    row = run['rows'][0]
    assert (row['Ratio'], row['Below Target']) == (1.0, False)
    assert run['below'] == []


def test_a_targeted_point_without_the_targeted_value_misses(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32)])
    record = bench_record(32)
    del record['p99_ttft_ms']
    write_lines(host_dir / 'mix_c32.jsonl', record)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TTFT\ntargets: {32: 2000}\n'))
    row = run['rows'][0]
    assert (row['Target'], row['Ratio'], row['Below Target']) == (2000.0, None, True)
    assert results.verdict(row, higher_is_better=False) == 'NO VALUE (P99 TTFT (ms) missing)'
    assert [(miss['conc'], miss['value'], miss['target']) for miss in run['below']] == [(32, None, 2000.0)]


def test_latency_targets_miss_when_above(run_dir, tmp_path):
    standard_run(run_dir)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 40, 64: 40}\n'))
    rows = {row['Concurrency']: row for row in run['rows']}
    assert rows[32]['Below Target'] is False
    assert rows[64]['Below Target'] is True
    assert results.verdict(rows[64], higher_is_better=False) == 'ABOVE TARGET (1.12x)'
    assert rows[256]['Target'] is None


def test_a_targeted_point_without_a_valid_result_misses_and_untried_targets_are_listed(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(64, status='aborted', reason='engine exited')])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=200.0))
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 100, 64: 100, 1024: 50}\n'))
    assert [(miss['conc'], miss['value'], miss['ratio']) for miss in run['below']] == [(64, None, None)]
    assert 'engine exited' in run['below'][0]['reason']
    assert run['untargeted'] == [1024]


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
    run = results.collect(str(run_dir))
    assert [(row['Concurrency'], row['Status']) for row in run['rows']] == [(32, 'ok'), (512, 'resumed')]
    reasons = {entry['conc']: entry['reason'] for entry in run['invalid']}
    assert reasons[64] == 'only 600 of 640 requests completed'
    assert reasons[128] == 'marked aborted by the sweep: engine on infera-node-1 exited (code 137)'
    assert reasons[256] == 'marked invalid by the sweep; only 2000 of 2560 requests completed'
    assert reasons[1024] == 'the file reports max_concurrency 512, the manifest says 1024'


def test_a_variant_missing_from_the_manifest_makes_its_points_invalid(run_dir):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32, 'tp4')])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    run = results.collect(str(run_dir))
    assert run['rows'] == []
    assert "variant 'tp4' is not in the manifest" in run['invalid'][0]['reason']


@pytest.mark.parametrize('make, message', [
    (lambda run_dir: run_dir / 'absent', 'does not exist'),
    (lambda run_dir: run_dir, 'no <host>/manifest.json under'),
])
def test_a_folder_without_manifests_is_an_error(run_dir, make, message):
    with pytest.raises(results.SweepResultsError, match=message):
        results.collect(str(make(run_dir)))


def test_a_broken_manifest_is_named(run_dir):
    (run_dir / 'infera-node-1').mkdir()
    (run_dir / 'infera-node-1' / 'manifest.json').write_text('{"points": ', encoding='utf-8')
    with pytest.raises(results.SweepResultsError, match='manifest.json is not JSON'):
        results.collect(str(run_dir))


def test_every_host_gets_its_rows_and_a_string_simulated_flag_is_understood(run_dir):
    standard_run(run_dir, 'infera-node-1', simulated='true')
    standard_run(run_dir, 'infera-node-2', simulated=False)
    run = results.collect(str(run_dir))
    assert [(row['Host'], row['Concurrency']) for row in run['rows']] == [
        ('infera-node-1', 32), ('infera-node-1', 64), ('infera-node-1', 256),
        ('infera-node-2', 32), ('infera-node-2', 64), ('infera-node-2', 256)]
    assert [row['Simulated'] for row in run['rows']] == [True] * 3 + [False] * 3
    assert run['simulated'] is True
    assert set(results._series(run['rows'])) == {'infera-node-1 nodp', 'infera-node-1 dp', 'infera-node-2 nodp', 'infera-node-2 dp'}


# ---------------------------------------------------------------- outputs

def test_csv_columns_carry_the_inferencex_export_names():
    for column in ('TP', 'EP', 'DP Attention', 'Concurrency', 'Throughput/GPU (tok/s)', 'Output Throughput/GPU (tok/s)',
                   'Input Throughput/GPU (tok/s)', 'Mean TTFT (ms)', 'Median TTFT (ms)', 'P99 TTFT (ms)', 'Std TTFT (ms)',
                   'P99 TPOT (ms)', 'Mean Interactivity (tok/s/user)', 'Median Interactivity (tok/s/user)', 'Mean ITL (ms)',
                   'Std E2E Latency (ms)'):
        assert column in results.CSV_COLUMNS
    assert len(set(results.CSV_COLUMNS)) == len(results.CSV_COLUMNS)


def test_the_csv_round_trips_and_equals_a_recomputation_from_the_jsonl(run_dir, tmp_path):
    standard_run(run_dir)
    summary = results.rebuild(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {64: 655.36}\n'))
    loaded = results.load_csv(summary['csv_path'])
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
    summary = results.rebuild(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
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
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 40, 64: 40}\n'))
    assert results.text_table(run).splitlines() == [
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
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
    rows = [line for line in results.render_report(run).splitlines() if line.startswith('| infera-node-1 |')]
    assert rows == [
        '| infera-node-1 | 32 | nodp | 8/1/1 | 1843.2 | 204.8 | 1638.4 | 52.6 | 1350.0 | 30.0 | 200.0 | ok (1.02x) |',
        '| infera-node-1 | 64 | nodp | 8/1/1 | 2949.1 | 327.7 | 2621.4 | 35.1 | 1350.0 | 45.0 | 655.4 | '
        '**BELOW TARGET (0.50x)** |',
        '| infera-node-1 | 128 | nodp | 8/1/1 | 14745.6 | 1638.4 | 13107.2 | 52.6 | - | 30.0 | - | - |',
        '| infera-node-1 | 256 | dp | 8/8/8 | 3686.4 | 409.6 | 3276.8 | 17.5 | 1350.0 | 90.0 | - | - |',
    ]


def test_the_csv_spells_booleans_in_lower_case_and_ends_lines_with_newline_only(run_dir):
    standard_run(run_dir, simulated=False)
    text = results.render_csv(results.collect(str(run_dir))['rows'])
    assert '\r' not in text
    first = text.splitlines()[1].split(',')
    assert (first[results.CSV_COLUMNS.index('Simulated')], first[results.CSV_COLUMNS.index('DP Attention')]) == (
        'false', 'false')


def test_invalid_points_are_listed_by_concurrency_even_without_one(run_dir):
    write_manifest(run_dir, 'infera-node-1', [point(64), {'variant': 'nodp'}, point(1, 'dp'), point(32)])
    assert [(entry['conc'], entry['variant']) for entry in results.collect(str(run_dir))['invalid']] == [
        (None, 'nodp'), (1, 'dp'), (32, 'nodp'), (64, 'nodp')]


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
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 128: 100, 1024: 50}\n'))
    assert results.render_report(run) == REPORT.read_text(encoding='utf-8')


def test_the_play_output_table_lists_invalid_points_last(run_dir, tmp_path):
    two_host_run(run_dir)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 128: 100, 1024: 50}\n'))
    assert results.text_table(run).splitlines()[-2:] == [
        'INVALID infera-node-1 c128 nodp (aborted): marked aborted by the sweep: engine exited (code 137); '
        'mix_c128.jsonl is missing (the client writes no line when every request fails, or the point never ran)',
        "INVALID infera-node-2 c64 tp4 (ok): variant 'tp4' is not in the manifest, so TP/DP/EP are unknown"]


def test_every_target_the_sweep_did_not_run_is_listed(run_dir, tmp_path):
    standard_run(run_dir)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {1024: 50, 2048: 50}\n'))
    assert 'Targets for concurrencies the sweep did not run: c1024, c2048.' in results.render_report(run).splitlines()


def test_a_manifest_without_a_run_id_shows_an_empty_one():
    assert results._manifest_section({'host': 'infera-node-9', 'simulated': False})[3] == '- run: ``'


def test_a_latency_target_is_lower_is_better_in_the_report(run_dir, tmp_path):
    standard_run(run_dir)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 40, 64: 40}\n'))
    report = results.render_report(run).splitlines()
    assert 'Target: **P99 TPOT (ms)** per concurrency from `t.yml` (lower is better).' in report
    assert '| infera-node-1 | 64 | nodp | 8/1/1 | 2949.1 | 327.7 | 2621.4 | 35.1 | 1350.0 | 45.0 | 40.0 | ' \
           '**ABOVE TARGET (1.12x)** |' in report


def test_a_point_without_its_concurrency_or_lengths_in_the_manifest_takes_them_from_its_line(run_dir):
    unnamed = {'variant': 'nodp', 'file': 'mix_unnamed.jsonl', 'num_prompts': 10}
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(1, 'dp'), unnamed, dict(unnamed, file='mix_c32.jsonl')],
                              bench_args={})
    record = bench_record(1, num_prompts=10)
    del record['max_concurrency']
    write_lines(host_dir / 'mix_unnamed.jsonl', record)
    write_lines(host_dir / 'mix_c1.jsonl', bench_record(1))
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, num_prompts=10))
    rows = results.collect(str(run_dir))['rows']
    assert [(row['Concurrency'], row['Variant'], row['ISL'], row['OSL']) for row in rows] == [
        (None, 'nodp', 8192, 1024), (1, 'dp', 8192, 1024), (32, 'nodp', 8192, 1024)]


def test_a_hardware_run_is_not_called_simulated(run_dir):
    standard_run(run_dir, simulated=False)
    summary = results.rebuild(str(run_dir))
    report = (run_dir / 'report.md').read_text(encoding='utf-8')
    assert 'SIMULATED' not in report
    assert report.startswith('# Sweep report: 20261129T100000Z\n\n3 valid point(s), 0 invalid, 0 missing the target.')
    assert '\n## Invalid or aborted points\n\nNone.\n' in report
    assert 'SIMULATED' not in summary['table']
    assert summary['table'].splitlines()[0].split() == ['host', 'conc', 'variant', 'TP/DP/EP', 'tok/s/GPU', 'out/GPU', 'in/GPU',
                                                        'tok/s/user', 'TTFT', 'p99', 'ms', 'TPOT', 'p99', 'ms', 'target']


def test_the_plot_is_a_png_and_is_drawn_the_same_way_twice(run_dir, tmp_path):
    standard_run(run_dir)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {64: 655.36}\n'))
    image = results.render_plot(run)
    assert image[:8] == PNG_SIGNATURE
    # 13 x 5.5 inches at 100 dpi: wide enough for two panels and their labels.
    assert (int.from_bytes(image[16:20], 'big'), int.from_bytes(image[20:24], 'big')) == (1300, 550)
    assert results.render_plot(run) == image


def plotted_figure(run, monkeypatch):
    """The figure render_plot saves (it keeps the figure to itself)."""
    from matplotlib.figure import Figure

    saved = []
    savefig = Figure.savefig

    def spy(figure, *args, **kwargs):
        saved.append(figure)
        return savefig(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, 'savefig', spy)
    results.render_plot(run)
    return saved[0]


def plot_title(run, monkeypatch):
    return plotted_figure(run, monkeypatch).get_suptitle()


def test_each_panel_plots_every_variant_against_interactivity_with_labels_and_targets(run_dir, tmp_path, monkeypatch):
    standard_run(run_dir)
    run = results.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
    total, output = plotted_figure(run, monkeypatch).axes
    for axes, label in zip((total, output), ('Token throughput per GPU (tok/s/GPU)', 'Output token throughput per GPU (tok/s/GPU)')):
        assert (axes.get_xlabel(), axes.get_ylabel()) == ('Interactivity (tok/s/user, 1000 / median TPOT)', label)
        assert [(line.get_label(), line.get_marker()) for line in axes.get_lines()] == [('nodp', 'o'), ('dp', 'o')]
        assert [(text.get_text(), text.get_fontsize(), text.xyann) for text in axes.texts] == [
            ('c64 nodp', 7, (4, 4)), ('c32 nodp', 7, (4, 4)), ('c256 dp', 7, (4, 4))]
    nodp = output.get_lines()[0]
    assert list(nodp.get_xdata()) == [pytest.approx(1000 / 28.5), pytest.approx(1000 / 19.0)]
    assert list(nodp.get_ydata()) == [pytest.approx(327.68), pytest.approx(204.8)]
    marks, = output.collections
    assert [tuple(point) for point in marks.get_offsets()] == [
        (pytest.approx(1000 / 19.0), 200.0), (pytest.approx(1000 / 28.5), 655.36)]
    assert [tuple(color) for color in marks.get_facecolors()] == [(0.0, 0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 1.0)]
    assert not total.collections


def test_an_empty_plot_says_so(run_dir, monkeypatch):
    write_manifest(run_dir, 'infera-node-1', [point(32)])
    for axes in plotted_figure(results.collect(str(run_dir)), monkeypatch).axes:
        assert [text.get_text() for text in axes.texts] == ['no valid point']


def test_a_point_without_interactivity_is_left_off_the_plot(run_dir, monkeypatch):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(64)])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, median_tpot_ms=None))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64))
    lines = plotted_figure(results.collect(str(run_dir)), monkeypatch).axes[0].get_lines()
    assert [len(line.get_xdata()) for line in lines] == [1]


@pytest.mark.parametrize('simulated, start', [
    (True, 'SIMULATED (not hardware numbers): DeepSeek-V4-Pro sweep 20261129T100000Z'),
    (False, 'DeepSeek-V4-Pro sweep 20261129T100000Z'),
], ids=['simulated', 'hardware'])
def test_the_plot_title_says_simulated_only_for_a_simulated_run(run_dir, monkeypatch, simulated, start):
    standard_run(run_dir, simulated=simulated)
    assert plot_title(results.collect(str(run_dir)), monkeypatch).startswith(start)


def test_a_run_without_any_valid_point_still_gets_all_three_files(run_dir):
    write_manifest(run_dir, 'infera-node-1', [point(32)])
    summary = results.rebuild(str(run_dir))
    assert summary['rows'] == []
    assert (run_dir / 'throughput.png').read_bytes()[:8] == PNG_SIGNATURE
    assert (run_dir / 'results.csv').read_text(encoding='utf-8').count('\n') == 1
    assert '(no valid point)' in summary['table'].splitlines()


def test_rebuild_returns_where_everything_is_and_what_it_found(run_dir, tmp_path):
    standard_run(run_dir)
    write_manifest(run_dir, 'infera-node-2', [point(32, status='aborted', reason='engine exited')], simulated=False)
    summary = results.rebuild(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
    run = results.collect(str(run_dir), str(tmp_path / 't.yml'))
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
        'table': results.text_table(run),
    }
    assert [(miss['host'], miss['conc']) for miss in summary['below']] == [('infera-node-1', 64), ('infera-node-2', 32)]
    assert results.rebuild(str(run_dir))['target_metric'] is None


def test_rebuild_writes_once_then_reports_no_change_and_check_mode_writes_nothing(run_dir):
    standard_run(run_dir)
    dry = results.rebuild(str(run_dir), check_mode=True)
    assert dry['changed'] is True
    assert sorted(path.name for path in run_dir.iterdir()) == ['infera-node-1']
    first = results.rebuild(str(run_dir))
    assert first['changed_files'] == ['results.csv', 'report.md', 'throughput.png']
    assert results.rebuild(str(run_dir))['changed'] is False
    assert results.rebuild(str(run_dir), check_mode=True)['changed'] is False
    write_lines(run_dir / 'infera-node-1' / 'mix_c32.jsonl', bench_record(32, duration=100.0))
    assert results.rebuild(str(run_dir))['changed_files'] == ['results.csv', 'report.md', 'throughput.png']
