# SPDX-License-Identifier: Apache-2.0
"""Reading and judging a bench jsonl point, InferenceX normalisation, per-GPU arithmetic and targets."""

from __future__ import annotations

import json

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_metrics as sweep_metrics
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_render as sweep_render
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_report as sweep_report
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError

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
    write_targets,
)


# ---------------------------------------------------------------- real client lines

@pytest.mark.parametrize('line, client_keys', [
    (LINE_0_5, ('total_throughput',)),
    (LINE_0_4, ()),
], ids=['sglang-0.5.23', 'sglang-0.4.10.post2'])
def test_real_lines_of_both_client_versions_are_valid(line, client_keys):
    checked = sweep_metrics.validate_point(str(line), num_prompts=8)
    assert checked['valid'] is True, checked['reason']
    assert checked['reason'] == ''
    assert checked['record']['request_rate'] == 'Infinity'
    assert all(key in checked['record'] for key in client_keys)
    assert 'total_token_throughput' not in checked['record']


@pytest.mark.parametrize('line', [LINE_0_5, LINE_0_4], ids=['sglang-0.5.23', 'sglang-0.4.10.post2'])
def test_computed_throughputs_agree_with_what_the_real_client_printed(line):
    record = json.loads(line.read_text())
    metrics = sweep_metrics.throughput_metrics(record, gpus=1)
    assert metrics['Output Throughput (tok/s)'] == pytest.approx(record['output_throughput'], rel=1e-9)
    assert metrics['Input Throughput (tok/s)'] == pytest.approx(record['input_throughput'], rel=1e-9)
    assert metrics['Throughput (tok/s)'] == pytest.approx(record['input_throughput'] + record['output_throughput'], rel=1e-9)
    if 'total_throughput' in record:
        assert metrics['Throughput (tok/s)'] == pytest.approx(record['total_throughput'], rel=1e-9)


def test_real_lines_fill_every_latency_column_they_carry():
    record, problem = sweep_metrics.read_last_record(str(LINE_0_4))
    assert problem is None
    metrics = sweep_metrics.latency_metrics(record)
    assert metrics['P99 ITL (ms)'] == record['p99_itl_ms']
    assert metrics['Mean E2E Latency (ms)'] == record['mean_e2e_latency_ms']
    assert metrics['Median Interactivity (tok/s/user)'] == pytest.approx(1000.0 / record['median_tpot_ms'])
    assert metrics['Mean Interactivity (tok/s/user)'] == pytest.approx(1000.0 / record['mean_tpot_ms'])


# ---------------------------------------------------------------- parsing

def test_the_last_line_counts_when_the_client_appended_several(tmp_path):
    path = tmp_path / 'mix_c32.jsonl'
    write_lines(path, bench_record(32, num_prompts=5), bench_record(32, duration=123.0), '')
    checked = sweep_metrics.validate_point(str(path), num_prompts=320)
    assert checked['valid'] is True
    assert checked['record']['duration'] == 123.0


def test_infinity_and_nan_are_read_and_made_json_safe(tmp_path):
    path = tmp_path / 'mix_c32.jsonl'
    write_lines(path, '{"completed": 8, "duration": 2.0, "total_input_tokens": 10, "total_output_tokens": 4, '
                      '"request_rate": Infinity, "mean_tpot_ms": NaN, "p99_ttft_ms": -Infinity}')
    checked = sweep_metrics.validate_point(str(path), num_prompts=8)
    assert checked['valid'] is True
    assert checked['record']['request_rate'] == 'Infinity'
    json.dumps(checked['record'], allow_nan=False)
    metrics = sweep_metrics.latency_metrics(checked['record'])
    assert metrics['Mean TPOT (ms)'] is None
    assert metrics['Mean Interactivity (tok/s/user)'] is None
    assert metrics['P99 TTFT (ms)'] is None


def test_throughput_keys_of_any_version_are_ignored():
    record = bench_record(32, duration=200.0, total_token_throughput=1.0)
    metrics = sweep_metrics.throughput_metrics(record, gpus=8)
    assert metrics['Throughput (tok/s)'] == pytest.approx((8192 + 1024) * 320 / 200.0)


def test_missing_latency_keys_leave_empty_cells_not_errors():
    record = {'completed': 8, 'duration': 1.0, 'total_input_tokens': 8, 'total_output_tokens': 8, 'mean_ttft_ms': 12.5}
    row = sweep_metrics.normalise(record, {'GPUs': 8, 'Concurrency': 2, 'ISL': None, 'OSL': None})
    assert row['Mean TTFT (ms)'] == 12.5
    assert row['P99 TTFT (ms)'] is None
    assert row['Median Interactivity (tok/s/user)'] is None
    assert row['Output Throughput/GPU (tok/s)'] == pytest.approx(1.0)


def test_inferencex_client_e2el_keys_fill_the_e2e_columns():
    metrics = sweep_metrics.latency_metrics({'mean_e2el_ms': 1500.0, 'p99_e2el_ms': 2500.0})
    assert metrics['Mean E2E Latency (ms)'] == 1500.0
    assert metrics['P99 E2E Latency (ms)'] == 2500.0


def test_zero_tpot_gives_no_interactivity_instead_of_dividing_by_zero():
    metrics = sweep_metrics.latency_metrics({'std_tpot_ms': 0.0, 'mean_tpot_ms': 40.0})
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
    checked = sweep_metrics.validate_point(str(path), num_prompts)
    assert checked['valid'] is False
    assert reason in checked['reason']
    assert checked['path'] == str(path)


NO_LINE = 'the client writes no line when every request fails'


@pytest.mark.parametrize('content, problem', [
    (None, 'mix_c32.jsonl is missing (%s, or the point never ran)' % NO_LINE),
    ('\n  \n', 'mix_c32.jsonl has no result line (%s)' % NO_LINE),
    ('{"completed": 320, "duration": 10',
     "the last line of mix_c32.jsonl is not JSON (Expecting ',' delimiter: line 1 column 34 (char 33))"),
    ('{"completed": 320}\n[1, 2]\n', 'the last line of mix_c32.jsonl is a JSON list, not an object'),
], ids=['missing', 'blank', 'truncated', 'not-object'])
def test_unreadable_last_lines_are_named_in_full(tmp_path, content, problem):
    path = tmp_path / 'mix_c32.jsonl'
    if content is not None:
        path.write_text(content, encoding='utf-8')
    assert sweep_metrics.read_last_record(str(path)) == (None, problem)


def test_a_jsonl_that_cannot_be_opened_says_why(tmp_path):
    path = tmp_path / 'mix_c32.jsonl'
    path.mkdir()
    assert sweep_metrics.read_last_record(str(path)) == (None, 'cannot read mix_c32.jsonl: Is a directory')


def test_bytes_that_are_not_utf8_do_not_make_the_point_unreadable(tmp_path):
    # An earlier run's line cut off in the middle of a character, then a whole line from the next run.
    path = tmp_path / 'mix_c32.jsonl'
    path.write_bytes(b'{"completed": 3, "model": "caf\xc3\n' + json.dumps(bench_record(32)).encode('utf-8') + b'\n')
    checked = sweep_metrics.validate_point(str(path), num_prompts=320)
    assert (checked['valid'], checked['reason'], checked['record']['completed']) == (True, '', 320)
    path.write_bytes(b'{"completed": 320, "model": "caf\xc3"}\n')
    assert sweep_metrics.read_last_record(str(path)) == ({'completed': 320, 'model': 'caf\ufffd'}, None)


@pytest.mark.parametrize('record, problem', [
    ({}, "the result has no 'completed' count"),
    ({'completed': 0}, 'no request completed'),
    ({'completed': 1}, "the result has no finite 'duration' (found None)"),
    ({'completed': 1, 'duration': -1}, 'duration is -1; it must be more than 0 seconds'),
    ({'completed': 1, 'duration': 2.0, 'total_output_tokens': 5},
     "the result has no 'total_input_tokens', so throughput cannot be computed"),
])
def test_record_problems_are_named_in_full(record, problem):
    assert sweep_metrics.record_problem(record) == problem


def test_infinities_and_nan_are_spelled_out_at_any_depth_and_never_count_as_numbers():
    assert sweep_metrics._json_safe({'a': [float('nan'), float('inf'), -float('inf'), 1.5], 'b': 0.0}) == {
        'a': ['NaN', 'Infinity', '-Infinity', 1.5], 'b': 0.0}
    assert [sweep_metrics._finite(value) for value in (float('nan'), float('inf'), 2.5)] == [None, None, 2.5]


def test_without_num_prompts_any_completed_request_is_enough(tmp_path):
    path = tmp_path / 'mix_c32.jsonl'
    write_lines(path, bench_record(32, num_prompts=3))
    assert sweep_metrics.validate_point(str(path))['valid'] is True


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
    assert sweep_metrics.parallelism(argv) == expected


@pytest.mark.parametrize('argv, key, expected', [
    (['--tp-size', '4', '--pp-size', '2', '--tp-size', '8'], 'TP', 8),
    (['--tp', '2', '--tensor-parallel-size=4'], 'TP', 4),
    (['--ep-size=2', '--ep', '8'], 'EP', 8),
], ids=['same-flag', 'alias-then-inline', 'inline-then-alias'])
def test_the_last_of_repeated_parallel_flags_counts_as_argparse_does(argv, key, expected):
    # An override appended to the recipe's argv (extra_args) is the value the engine runs with.
    assert sweep_metrics.parallelism(argv)[key] == expected


@pytest.mark.parametrize('argv, message', [
    (['--tp-size', 'eight'], "--tp-size 'eight' in the engine argv is not an integer"),
    (['--tensor-parallel-size=eight'], "--tp-size 'eight' in the engine argv is not an integer"),
    (['--ep-size', '0'], "--ep-size '0' in the engine argv must be at least 1"),
], ids=['not-an-integer', 'inline-not-an-integer', 'zero'])
def test_bad_parallel_sizes_are_named(argv, message):
    with pytest.raises(SweepResultsError) as raised:
        sweep_metrics.parallelism(argv)
    assert str(raised.value) == message


@pytest.mark.parametrize('argv, expected', [
    (['--tp-size', '4', '--pp-size'], {'TP': 4, 'PP': 1, 'DP': 1, 'EP': 1, 'DP Attention': False, 'GPUs': 4}),
    (['--tp-size', '4', '--tp-size'], {'TP': 4, 'PP': 1, 'DP': 1, 'EP': 1, 'DP Attention': False, 'GPUs': 4}),
], ids=['other-flag', 'same-flag'])
def test_a_flag_without_its_value_at_the_end_of_the_argv_is_not_a_size(argv, expected):
    assert sweep_metrics.parallelism(argv) == expected


def test_per_gpu_numbers_divide_by_tp_times_pp_and_dp_attention_adds_no_gpu(run_dir):
    standard_run(run_dir)
    rows = {row['Concurrency']: row for row in sweep_report.collect(str(run_dir))['rows']}
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
    row = {row['Concurrency']: row for row in sweep_report.collect(str(run_dir))['rows']}[conc]
    assert row['GPUs'] == gpus
    assert row['Throughput (tok/s)'] == 18432
    assert (row['Throughput/GPU (tok/s)'], row['Output Throughput/GPU (tok/s)'], row['Input Throughput/GPU (tok/s)']) == (
        total, output, input_)


# ---------------------------------------------------------------- targets

@pytest.mark.parametrize('metric', ['Output Throughput/GPU', 'Output Throughput/GPU (tok/s)', 'output_tput_per_gpu',
                                    'output throughput/gpu', 'output throughput/gpu (tok/s)'])
def test_target_metric_names_resolve_to_the_column(metric):
    assert sweep_metrics.resolve_metric(metric) == 'Output Throughput/GPU (tok/s)'


def test_targets_file_shape_and_defaults(tmp_path):
    targets = sweep_metrics.load_targets(write_targets(tmp_path / 't.yml', 'targets: {32: 250, "c64": 400.5, "128": 500}\n'))
    assert targets['metric'] == 'Output Throughput/GPU (tok/s)'
    assert targets['higher_is_better'] is True
    assert targets['targets'] == {32: 250.0, 64: 400.5, 128: 500.0}
    latency = sweep_metrics.load_targets(write_targets(tmp_path / 'l.yml', 'metric: P99 TTFT\ntargets: {32: 2000}\n'))
    assert latency['metric'] == 'P99 TTFT (ms)'
    assert latency['higher_is_better'] is False


NOT_A_TARGETS_FILE = ('{path} must be a mapping with a non-empty "targets" mapping of concurrency: value '
                      '(and optionally "metric" and "higher_is_better")')


@pytest.mark.parametrize('text, message', [
    ('metric: Watts/GPU\ntargets: {32: 1}\n',
     "unknown target metric 'Watts/GPU'; use one of: " + ', '.join(sweep_metrics.NUMERIC_COLUMNS)),
    ('targets: {32: 0}\n', '{path}: the target for concurrency 32 is 0; it must be a number above 0'),
    ('targets: {32: fast}\n', "{path}: the target for concurrency 32 is 'fast'; it must be a number above 0"),
    ('targets: {many: 3}\n', "{path}: 'many' is not a concurrency (expected an integer such as 64)"),
    ('targets: {X64: 3}\n', "{path}: 'X64' is not a concurrency (expected an integer such as 64)"),
    ('targets: {0: 3}\n', '{path}: concurrency 0 must be at least 1'),
    ('- 32\n', NOT_A_TARGETS_FILE),
    ('targets: {}\n', NOT_A_TARGETS_FILE),
    ('metric: Output Throughput/GPU\ntarget: {32: 1}\n', NOT_A_TARGETS_FILE),
    ('targets: {32: 1}\nunit: tok\n', "{path} has unknown keys ['unit']; allowed: metric, targets, higher_is_better, "
                                      "random_input_len, random_output_len, random_range_ratio"),
    ('targets: {32: 1}\nrandom_range_ratio: high\n', "{path}: random_range_ratio must be a number, not 'high'"),
    ('targets: {32: 1}\nrandom_input_len: true\n', "{path}: random_input_len must be a number, not True"),
    ('targets: {32: 1}\nrandom_range_ratio: -0.5\n', "{path}: random_range_ratio must be a number, not -0.5"),
    ('targets: {32: 1}\nhigher_is_better: maybe\n', "{path}: higher_is_better must be true or false, not 'maybe'"),
])
def test_bad_targets_files_are_refused_with_the_cause(tmp_path, text, message):
    path = write_targets(tmp_path / 'targets.yml', text)
    with pytest.raises(SweepResultsError) as raised:
        sweep_metrics.load_targets(path)
    assert str(raised.value) == message.format(path=path)


def test_a_targets_file_that_is_not_yaml_is_named(tmp_path):
    path = write_targets(tmp_path / 'targets.yml', 'targets: [32: 1\n')
    with pytest.raises(SweepResultsError) as raised:
        sweep_metrics.load_targets(path)
    assert str(raised.value).startswith('the targets file %s is not YAML: while parsing a flow sequence' % path)
    assert '\n' not in str(raised.value), 'one line, as every error the play prints'


def test_a_missing_targets_file_is_an_error(tmp_path):
    path = str(tmp_path / 'nope.yml')
    with pytest.raises(SweepResultsError) as raised:
        sweep_metrics.load_targets(path)
    assert str(raised.value) == 'cannot read the targets file %s: No such file or directory' % path


def test_the_smallest_concurrency_and_a_fractional_target_are_accepted(tmp_path):
    path = write_targets(tmp_path / 'targets.yml', 'targets: {1: 0.5}\n')
    assert sweep_metrics.load_targets(path) == {'metric': 'Output Throughput/GPU (tok/s)', 'higher_is_better': True,
                                                'targets': {1: 0.5}, 'path': path, 'workload': {}}


def test_a_targets_file_names_the_workload_it_was_measured_at(tmp_path):
    path = write_targets(tmp_path / 'targets.yml', 'targets: {64: 100}\nrandom_input_len: 8192\nrandom_output_len: 1024\n'
                                                   'random_range_ratio: 0.8\n')
    assert sweep_metrics.load_targets(path)['workload'] == {'ISL': 8192.0, 'OSL': 1024.0, 'Range Ratio': 0.8}


def test_a_workload_mismatch_names_each_option_the_run_did_not_use():
    targets = {'workload': {'Range Ratio': 0.8, 'ISL': 8192.0, 'OSL': 1024.0}}
    rows = [{'ISL': 8192, 'OSL': 1024, 'Range Ratio': 1.0}, {'ISL': 8192, 'OSL': 1024, 'Range Ratio': None}]
    assert sweep_metrics.workload_mismatch(targets, rows) == [('Range Ratio', 0.8, [1.0])]
    assert sweep_metrics.workload_mismatch(targets, [{'ISL': 1024, 'OSL': 1024, 'Range Ratio': 0.8}]) == [('ISL', 8192.0, [1024])]
    assert sweep_metrics.workload_mismatch({'workload': {}}, rows) == []
    assert sweep_metrics.workload_mismatch(None, rows) == []


def test_targets_give_ratio_and_below_flag(run_dir, tmp_path):
    standard_run(run_dir)
    targets = write_targets(tmp_path / 't.yml', 'metric: Output Throughput/GPU\ntargets: {32: 200, 64: 655.36, 256: 400}\n')
    run = sweep_report.collect(str(run_dir), targets)
    rows = {row['Concurrency']: row for row in run['rows']}
    assert rows[32]['Target'] == 200.0
    assert rows[32]['Ratio'] == pytest.approx(1.024)
    assert rows[32]['Below Target'] is False
    assert rows[64]['Ratio'] == pytest.approx(0.5)
    assert rows[64]['Below Target'] is True
    assert rows[256]['Below Target'] is False
    assert [(miss['host'], miss['conc'], miss['variant']) for miss in run['below']] == [('infera-node-1', 64, 'nodp')]
    assert run['below'][0]['value'] == pytest.approx(327.68)
    assert sweep_render.verdict(rows[64]) == 'BELOW TARGET (0.50x)'
    assert sweep_render.verdict(rows[32]) == 'ok (1.02x)'


@pytest.mark.parametrize('ratio, higher_is_better, missed', [
    (1.0, True, False), (0.999, True, True), (1.001, True, False),
    (1.0, False, False), (1.001, False, True), (0.999, False, False),
])
def test_a_target_is_missed_only_strictly_below_or_above(ratio, higher_is_better, missed):
    assert sweep_metrics.misses_target(ratio, higher_is_better) is missed


def test_a_point_exactly_on_its_target_meets_it(run_dir, tmp_path):
    tp_pp_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 256, 64: 512}\n'))
    assert [(row['Ratio'], row['Below Target']) for row in run['rows']] == [(1.0, False), (1.0, False)]
    assert run['below'] == []
    assert sweep_render.verdict(run['rows'][0]) == 'ok (1.00x)'


def test_a_latency_exactly_on_its_target_meets_it(run_dir, tmp_path):
    tp_pp_run(run_dir)
    # bench_record's P99 TPOT is 1.5 x 20 ms.
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 30}\n'))
    row = run['rows'][0]
    assert (row['Ratio'], row['Below Target']) == (1.0, False)
    assert run['below'] == []


def test_a_targeted_point_without_the_targeted_value_misses(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32)])
    record = bench_record(32)
    del record['p99_ttft_ms']
    write_lines(host_dir / 'mix_c32.jsonl', record)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TTFT\ntargets: {32: 2000}\n'))
    row = run['rows'][0]
    assert (row['Target'], row['Ratio'], row['Below Target']) == (2000.0, None, True)
    assert sweep_render.verdict(row, higher_is_better=False) == 'NO VALUE (P99 TTFT (ms) missing)'
    assert [(miss['conc'], miss['value'], miss['target']) for miss in run['below']] == [(32, None, 2000.0)]


def test_a_point_without_the_targeted_value_does_not_stop_the_next_being_judged(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(64)])
    record = bench_record(32)
    del record['p99_ttft_ms']
    write_lines(host_dir / 'mix_c32.jsonl', record)
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64))
    # bench_record's P99 TTFT is 1.5 x 900 ms.
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TTFT\ntargets: {32: 2000, 64: 1350}\n'))
    assert [(row['Concurrency'], row['Target'], row['Ratio'], row['Below Target']) for row in run['rows']] == [
        (32, 2000.0, None, True), (64, 1350.0, 1.0, False)]


def test_latency_targets_miss_when_above(run_dir, tmp_path):
    standard_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'metric: P99 TPOT\ntargets: {32: 40, 64: 40}\n'))
    rows = {row['Concurrency']: row for row in run['rows']}
    assert rows[32]['Below Target'] is False
    assert rows[64]['Below Target'] is True
    assert sweep_render.verdict(rows[64], higher_is_better=False) == 'ABOVE TARGET (1.12x)'
    assert rows[256]['Target'] is None


def test_a_targeted_point_without_a_valid_result_misses_and_untried_targets_are_listed(run_dir, tmp_path):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(64, status='aborted', reason='engine exited')])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=200.0))
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 100, 64: 100, 1024: 50}\n'))
    assert [(miss['conc'], miss['value'], miss['ratio']) for miss in run['below']] == [(64, None, None)]
    assert 'engine exited' in run['below'][0]['reason']
    assert run['untargeted'] == [1024]


def test_every_miss_is_returned_in_full_in_concurrency_order(run_dir, tmp_path):
    # Variant names sort the other way round (tp4 before tp4pp2): the order is the host's concurrencies.
    variants = {'tp4pp2': {'argv': ['--tp-size', '4', '--pp-size', '2'], 'env': {}},
                'tp4': {'argv': ['--tp-size', '4'], 'env': {}}}
    host_dir = write_manifest(run_dir, 'infera-node-1', [
        point(32, 'tp4pp2'), point(48, 'tp4', status='aborted', reason='engine exited'), point(64, 'tp4')], variants=variants)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=160.0))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, duration=320.0))
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 512, 48: 100, 64: 1024}\n'))
    metric = 'Output Throughput/GPU (tok/s)'
    assert run['below'] == [
        {'host': 'infera-node-1', 'conc': 32, 'variant': 'tp4pp2', 'metric': metric, 'value': 256.0, 'target': 512.0,
         'ratio': 0.5, 'reason': ''},
        {'host': 'infera-node-1', 'conc': 48, 'variant': 'tp4', 'metric': metric, 'value': None, 'target': 100.0,
         'ratio': None, 'reason': 'no valid result: marked aborted by the sweep: engine exited; mix_c48.jsonl is missing '
                                  '(the client writes no line when every request fails, or the point never ran)'},
        {'host': 'infera-node-1', 'conc': 64, 'variant': 'tp4', 'metric': metric, 'value': 512.0, 'target': 1024.0,
         'ratio': 0.5, 'reason': ''},
    ]


def test_a_host_whose_manifest_lists_no_points_tried_no_target(run_dir, tmp_path):
    standard_run(run_dir)
    # A host that failed before its sweep started: its manifest has no "points" at all.
    manifest_path = write_manifest(run_dir, 'infera-node-2', []) / 'manifest.json'
    manifest = json.loads(manifest_path.read_text(encoding='utf-8'))
    del manifest['points']
    manifest_path.write_text(json.dumps(manifest), encoding='utf-8')
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 100, 1024: 50}\n'))
    assert [manifest['host'] for manifest in run['manifests']] == ['infera-node-1', 'infera-node-2']
    assert run['untargeted'] == [1024]


def test_the_metric_columns_follow_the_inferencex_export_order():
    statistics = ('Mean', 'Median', 'P99', 'Std')
    assert sweep_metrics.METRIC_COLUMNS == (
        ('Throughput/GPU (tok/s)', 'Output Throughput/GPU (tok/s)', 'Input Throughput/GPU (tok/s)')
        + tuple('%s TTFT (ms)' % statistic for statistic in statistics)
        + tuple('%s TPOT (ms)' % statistic for statistic in statistics)
        + tuple('%s Interactivity (tok/s/user)' % statistic for statistic in statistics)
        + tuple('%s ITL (ms)' % statistic for statistic in statistics)
        + tuple('%s E2E Latency (ms)' % statistic for statistic in statistics))


# ---------------------------------------------------------------- tokenizer mismatch

@pytest.mark.parametrize('retokenized, gap, flagged', [
    (1024 * 320, 0.0, False),
    (1024 * 352, 0.1, False),       # exactly 10 % more: not flagged
    (1024 * 352 + 1, 0.1, True),    # one token past 10 %
    (1024 * 288, 0.1, False),       # exactly 10 % fewer
    (1024 * 288 - 1, 0.1, True),
    (None, None, None),             # a client that writes no retokenized count
])
def test_points_whose_counts_differ_by_more_than_ten_percent_are_flagged(retokenized, gap, flagged):
    extra = {} if retokenized is None else {'total_output_tokens_retokenized': retokenized}
    record = bench_record(32, output_tokens=1024 * 320)
    record.pop('total_output_tokens_retokenized')
    record.update(extra)
    row = sweep_metrics.normalise(record, {'GPUs': 8})
    assert row['Retokenized Output Tokens'] == retokenized
    assert row['Tokenizer Mismatch'] is flagged
    assert sweep_metrics.retokenized_gap(row) == (None if gap is None else pytest.approx(gap, abs=1e-5))


def test_a_point_whose_server_counted_no_output_has_no_gap_to_judge():
    row = sweep_metrics.normalise(bench_record(2, num_prompts=2, output_tokens=0, total_output_tokens_retokenized=5),
                                  {'GPUs': 8})
    assert (sweep_metrics.retokenized_gap(row), row['Tokenizer Mismatch']) == (None, None)


@pytest.mark.parametrize('line', [LINE_0_5, LINE_0_4], ids=['sglang-0.5.23', 'sglang-0.4.10.post2'])
def test_real_lines_from_a_stub_server_are_flagged(line):
    # These lines came from a stub server whose text does not re-encode to the counts it reported.
    record = json.loads(line.read_text())
    row = sweep_metrics.normalise(record, {'GPUs': 1})
    assert row['Retokenized Output Tokens'] == record['total_output_tokens_retokenized']
    assert row['Total Output Tokens'] == record['total_output_tokens']
    assert row['Tokenizer Mismatch'] is True
