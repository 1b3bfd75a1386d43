# SPDX-License-Identifier: Apache-2.0
"""The collection's parsers on the real output of the bench client of rocm/infera:sglang-v0.1.1 (sglang 0.5.15.post1).

The fixtures in tests/unit/data/bench_client/ are what the real clients wrote (their README says how: a stand-in
server, so the figures are not measurements). 0.4.10.post2, the rehearsal's client, ran the same command beside it;
every test that holds for both runs on both, so a parser change cannot fix one version by breaking the other.

Where 0.5.15.post1 prints what is parsed here (sglang/benchmark/serving.py): "Starting warmup with N sequences..."
:1326, "Warmup completed with N sequences. ..." :1391, the tqdm bar :1451, " Serving Benchmark Result " :1547, the
jsonl record :1719 and :1827; the shim's FutureWarning is sglang/bench_serving.py:13.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _bench_wait
from ansible_collections.infera.serving.plugins.module_utils._node_files import log_tail
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_report as sweep_report
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    LATENCY_COLUMNS,
    METRIC_COLUMNS,
    normalise,
    validate_point,
)

from ..plugin_utils.sweep_runs import point, write_manifest

DATA = Path(__file__).resolve().parents[2] / 'data' / 'bench_client'
IMAGE_CLIENT = '0.5.15.post1'
REHEARSAL_CLIENT = '0.4.10.post2'
VERSIONS = (IMAGE_CLIENT, REHEARSAL_CLIENT)

# Both runs: --max-concurrency 2 --num-prompts 20 --warmup-requests 4, main run 3 s (its bar ends at [00:03<).
CONC, NUM_PROMPTS, WARMUP = 2, 20, 4
WHOLE_RUN = {'stage': 'results', 'warmup_requests': WARMUP, 'completed': NUM_PROMPTS, 'total': NUM_PROMPTS,
             'bar_elapsed': 3}
# The counts of every redraw of the main run's bar, as tqdm drew them in both logs.
BAR_COUNTS = [0, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 20]


def fixture(version, name):
    return DATA / version / name


def progress_of(path):
    reading, progress = _bench_wait.new_reading(), _bench_wait.new_progress()
    _bench_wait.read_progress(str(path), reading, progress)
    return progress


def progress_upto(tmp_path, version, marker, name='bench-c2.log'):
    """The progress of the log cut just before marker (bytes), as a wait would see it mid-run."""
    data = fixture(version, name).read_bytes()
    cut = tmp_path / name
    cut.write_bytes(data[:data.index(marker)])
    return progress_of(cut)


# ---------------------------------------------------------------- the log (_bench_wait)

@pytest.mark.parametrize('version', VERSIONS)
def test_the_whole_log_of_a_point_reads_as_its_results(version):
    assert progress_of(fixture(version, 'bench-c2.log')) == WHOLE_RUN


@pytest.mark.parametrize('version', VERSIONS)
@pytest.mark.parametrize('marker, stage, warmup, completed, total', [
    (b'Starting warmup', 'starting', None, 0, None),
    (b'Warmup completed', 'warmup', WARMUP, 0, None),
    (b'\r  0%', 'main', WARMUP, 0, None),
    (b'\r 55%', 'main', WARMUP, 9, NUM_PROMPTS),
    (b'\n\n=====', 'main', WARMUP, NUM_PROMPTS, NUM_PROMPTS),
])
def test_each_stage_of_the_real_log_is_told_apart(tmp_path, version, marker, stage, warmup, completed, total):
    progress = progress_upto(tmp_path, version, marker)
    assert (progress['stage'], progress['warmup_requests'], progress['completed'], progress['total']) == (
        stage, warmup, completed, total)


def test_the_shim_warning_and_the_ready_check_leave_the_client_starting(tmp_path):
    # 0.5.15.post1 prints its import warnings, the FutureWarning of the sglang.bench_serving shim and its wait for
    # GET /v1/models (serving.py:143, :151) before the warmup; none of them is a stage.
    data = fixture(IMAGE_CLIENT, 'bench-c2.log').read_bytes()
    before_warmup = data[:data.index(b'Starting warmup')].decode('utf-8')
    assert '`sglang.bench_serving` is deprecated and will be removed in a future release' in before_warmup
    assert 'to become ready...\nServer ready in ' in before_warmup
    assert progress_upto(tmp_path, IMAGE_CLIENT, b'Starting warmup') == _bench_wait.new_progress()


@pytest.mark.parametrize('version', VERSIONS)
def test_every_redraw_of_the_real_bar_is_counted_in_order(version):
    counts = []

    def scan(text):
        progress = _bench_wait.new_progress()
        _bench_wait.scan_bench_line(progress, text)
        if progress['total'] is not None:
            counts.append((progress['completed'], progress['total']))

    # The bar is on stderr (tqdm's default), each redraw after a carriage return.
    for segment in fixture(version, 'stderr.txt').read_text(encoding='utf-8').replace('\n', '\r').split('\r'):
        scan(segment)
    assert counts == [(count, NUM_PROMPTS) for count in BAR_COUNTS]


@pytest.mark.parametrize('version', VERSIONS)
def test_stdout_alone_carries_the_warmup_and_the_results(version):
    # With the streams apart (stdout.txt, stderr.txt) the stage lines are all on stdout; the sweep's log has both.
    assert progress_of(fixture(version, 'stdout.txt')) == {
        'stage': 'results', 'warmup_requests': WARMUP, 'completed': 0, 'total': None, 'bar_elapsed': None}


@pytest.mark.parametrize('version', VERSIONS)
def test_a_log_read_in_slices_cut_anywhere_ends_as_the_whole(tmp_path, version):
    # 97-byte appends cut lines, bar redraws and the bar's multi-byte blocks; each slice carries only the offset on.
    data = fixture(version, 'bench-c2.log').read_bytes()
    log = tmp_path / 'bench-c2.log'
    log.write_bytes(b'')
    progress, offset, seen = _bench_wait.new_progress(), 0, []
    for end in list(range(97, len(data), 97)) + [len(data)]:
        log.write_bytes(data[:end])
        reading = _bench_wait.new_reading(offset)
        _bench_wait.read_progress(str(log), reading, progress)
        offset = reading['read_offset']
        seen.append(progress['completed'])
    assert progress == WHOLE_RUN
    assert seen == sorted(seen)


@pytest.mark.parametrize('version', VERSIONS)
def test_the_eta_of_a_point_midway_comes_from_the_real_bar(tmp_path, version):
    # Cut at the 55% redraw: the last whole one reads 9/20 at 00:01, so 11 requests left at 1 s per 9.
    progress = progress_upto(tmp_path, version, b'\r 55%')
    assert progress['bar_elapsed'] == 1
    eta, how = _bench_wait.point_eta(progress, elapsed=20.0, estimate=600.0)
    assert how == 'rate'
    assert eta == pytest.approx(11 / 9.0)


def test_a_router_that_never_answers_leaves_the_point_starting_and_says_why_last():
    # 0.5.15.post1 waits --ready-check-timeout-sec (default 60) for GET /v1/models (serving.py:143, :157), then
    # exits 1 (serving.py:1964) before any warmup; 0.4.10.post2 has no such wait and fails its warmup at once.
    log = fixture(IMAGE_CLIENT, 'router-down-c2.log')
    assert progress_of(log) == _bench_wait.new_progress()
    assert log_tail(str(log))[-3:] == [
        'Waiting up to 60s for http://127.0.0.1:18599/v1/models to become ready...',
        'Server did not become ready within 60s timeout.',
        'Server at http://127.0.0.1:18599/v1/models is not ready. Exiting.',
    ]


# ---------------------------------------------------------------- the jsonl (_sweep_metrics, the report)

@pytest.mark.parametrize('version', VERSIONS)
def test_the_real_record_is_a_valid_point(version):
    checked = validate_point(str(fixture(version, 'mix_c2.jsonl')), NUM_PROMPTS, CONC)
    assert (checked['valid'], checked['reason']) == (True, '')
    record = checked['record']
    assert record['request_rate'] == 'Infinity'  # the client's json.dumps of inf, carried as a string
    assert (record['completed'], record['max_concurrency']) == (NUM_PROMPTS, CONC)
    json.dumps(record, allow_nan=False)  # Ansible can carry it


def test_the_image_clients_record_is_judged_against_its_own_point():
    path = str(fixture(IMAGE_CLIENT, 'mix_c2.jsonl'))
    assert validate_point(path, NUM_PROMPTS, 4)['reason'] == 'the file reports max_concurrency 2, the manifest says 4'
    assert validate_point(path, 40, CONC)['reason'] == 'only 20 of 40 requests completed'


def test_the_image_clients_record_has_only_new_keys_and_a_null_server_info():
    record = validate_point(str(fixture(IMAGE_CLIENT, 'mix_c2.jsonl')))['record']
    older = validate_point(str(fixture(REHEARSAL_CLIENT, 'mix_c2.jsonl')))['record']
    assert set(older) <= set(record)
    assert sorted(set(record) - set(older)) == [
        'max_concurrent_requests', 'max_output_tokens_per_s', 'p90_e2e_latency_ms', 'p90_itl_ms', 'p90_tpot_ms',
        'p90_ttft_ms', 'p95_e2e_latency_ms', 'p95_tpot_ms', 'p95_ttft_ms', 'server_info', 'tag',
        'total_input_text_tokens', 'total_input_vision_tokens', 'total_throughput']
    # GET /server_info (serving.py:1711) answered 404, as Infera's router does: null, not the engine's state.
    assert record['server_info'] is None


@pytest.mark.parametrize('version', VERSIONS)
def test_every_column_of_a_row_comes_from_the_real_record(version):
    record = validate_point(str(fixture(version, 'mix_c2.jsonl')))['record']
    context = {'Host': 'node', 'Concurrency': CONC, 'Node Concurrency': CONC, 'GPUs': 8, 'Variant': 'nodp'}
    row = normalise(record, context)
    assert (row['Completed'], row['ISL'], row['OSL'], row['Range Ratio']) == (NUM_PROMPTS, 32, 16, 1.0)
    assert (row['Total Input Tokens'], row['Total Output Tokens'], row['Retokenized Output Tokens']) == (640, 320, 320)
    assert row['Tokenizer Mismatch'] is False
    assert row['Duration (s)'] == record['duration']
    assert row['Output Throughput/GPU (tok/s)'] == pytest.approx(320 / record['duration'] / 8)
    # Every latency column, and so every interactivity column, is one of the record's own keys.
    assert [column for column in METRIC_COLUMNS if row[column] is None] == []
    assert row['Median TTFT (ms)'] == record['median_ttft_ms']
    assert row['P99 ITL (ms)'] == record['p99_itl_ms']
    assert row['Std E2E Latency (ms)'] == record['std_e2e_latency_ms']
    assert all(row[column] > 0 for column in LATENCY_COLUMNS)


def test_a_results_folder_of_the_image_clients_line_reports_its_point(tmp_path):
    run_dir = tmp_path / 'results' / '20261206T000000Z'
    bench_args = {'random_input_len': 32, 'random_output_len': 16, 'random_range_ratio': 1.0, 'request_rate': 'inf',
                  'backend': 'sglang-oai', 'dataset_name': 'random'}
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(CONC, num_prompts=NUM_PROMPTS)], bench_args=bench_args)
    shutil.copy(fixture(IMAGE_CLIENT, 'mix_c2.jsonl'), host_dir / 'mix_c2.jsonl')
    run = sweep_report.collect(str(run_dir))
    assert run['invalid'] == []
    [row] = run['rows']
    found = (row['Concurrency'], row['Completed'], row['Num Prompts'], row['Status'])
    assert found == (CONC, NUM_PROMPTS, NUM_PROMPTS, 'ok')
