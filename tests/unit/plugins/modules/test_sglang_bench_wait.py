# SPDX-License-Identifier: Apache-2.0
"""The whole sglang_bench_wait module: arguments in, exit_json/fail_json out, against real files and a real process,
its wait on a fake clock."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
import uuid

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _bench_wait
from ansible_collections.infera.serving.plugins.modules import sglang_bench_wait

from ..module_utils.processes import signals_take_effect_at_once
from .utils import run_module


@pytest.fixture(autouse=True)
def on_the_clock(clock, monkeypatch):
    """The module's wait, on the test's clock (on a node it keeps the real one)."""
    monkeypatch.setattr(sglang_bench_wait, 'wait_for_point', functools.partial(
        _bench_wait.wait_for_point, clock=clock.time, sleep=clock.sleep, in_background=clock.in_background))


@pytest.fixture
def point(tmp_path):
    paths = {
        'exit_file': tmp_path / 'bench-c128.exit',
        'output_file': tmp_path / 'mix_c128.jsonl',
        'log_path': tmp_path / 'bench-c128.log',
        'engine_exit_file': tmp_path / 'engine-3.exit',
    }
    paths['log_path'].write_text('Starting warmup with 256 sequences...\n')
    return paths


def args(point, **overrides):
    values = {name: str(path) for name, path in point.items()}
    values.update(poll_interval=0.05, node='node5', conc=128)
    values.update(overrides)
    return values


def test_finished_point_exits_unchanged(point):
    point['output_file'].write_text('{"max_concurrency": 128, "output_throughput": 9000.1}\n')
    point['exit_file'].write_text('0\n')
    kind, result, warnings = run_module(sglang_bench_wait.main, args(point))
    assert kind == 'exit'
    assert result['changed'] is False
    assert result['rc'] == 0
    assert result['aborted'] is False
    assert result['output_lines'] == 1
    assert result['log_tail'] == ['Starting warmup with 256 sequences...']
    assert result['killed_pids'] == []
    assert warnings == []


def test_finished_point_without_a_result_line_warns(point):
    point['exit_file'].write_text('0\n')
    kind, result, warnings = run_module(sglang_bench_wait.main, args(point))
    assert kind == 'exit'
    assert result['output_lines'] == 0
    assert warnings[0].startswith('the bench client on node5 exited 0 for point c128 but %s has no result line'
                                  % point['output_file'])


def test_client_failure_fails_with_a_message_for_a_person(point, clock):
    clock.after(0.2, functools.partial(point['exit_file'].write_text, '1\n'))
    kind, result, _warnings = run_module(sglang_bench_wait.main, args(point))
    assert kind == 'fail'
    assert result['rc'] == 1
    headline = result['msg'].splitlines()[0]
    assert headline.startswith('the bench client exited 1 during point c128 on node5')
    assert ', stage sweep, ' in headline
    assert 'when every request fails the client writes no result line' in headline
    assert 'Next step: see %s' % point['log_path'] in headline
    assert result['msg'].endswith('\nLast line of %s:\nStarting warmup with 256 sequences...' % point['log_path'])


def test_dead_engine_aborts_the_point_and_stops_the_client(point, clock, monkeypatch):
    signals_take_effect_at_once(monkeypatch)
    mark = 'bench-wait-module-test-%s' % uuid.uuid4().hex
    # Runs until stopped, or until its stdin closes with the tests.
    bench = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()', mark], stdin=subprocess.PIPE)
    try:
        clock.after(0.3, functools.partial(point['engine_exit_file'].write_text, '137\n'))
        kind, result, _warnings = run_module(sglang_bench_wait.main, args(point, kill_match=mark, stage='sweep-nodp'))
        assert bench.wait(timeout=10) == -signal.SIGTERM
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        bench.stdin.close()
    assert kind == 'fail'
    assert result['changed'] is True
    assert result['aborted'] is True
    assert result['killed_pids'] == [bench.pid]
    assert result['msg'].startswith('worker died during point c128 on node5')
    assert ', stage sweep-nodp, ' in result['msg']
    assert 'the engine died: read' in result['msg']


def test_check_mode_is_skipped(point):
    kind, result, _warnings = run_module(sglang_bench_wait.main, args(point), check_mode=True)
    assert kind == 'exit'
    assert result['skipped'] is True
    assert result['changed'] is False


def test_bad_option_fails_before_waiting(point):
    kind, result, _warnings = run_module(sglang_bench_wait.main, args(point, kill_match=''))
    assert kind == 'fail'
    assert result['msg'].startswith('kill_match must not be empty')


def test_exit_file_is_required():
    kind, result, _warnings = run_module(sglang_bench_wait.main, {})
    assert kind == 'fail'
    assert 'exit_file' in result['msg']


@pytest.mark.parametrize('option', ['engine_log', 'engine_log_path'])
def test_dead_engine_shows_the_tail_of_engine_log(point, tmp_path, option):
    # engine_log_path is the option's name from before it was renamed engine_log.
    engine_log = tmp_path / 'engine-3.log'
    engine_log.write_text('Load weight end.\n\rCapturing batches: 3/20\rCapturing batches: 4/20\nKilled\n')
    point['engine_exit_file'].write_text('137\n')
    kind, result, _warnings = run_module(sglang_bench_wait.main, args(point, **{option: str(engine_log)}))
    assert kind == 'fail'
    assert result['msg'].splitlines()[1:5] == ['Last 3 lines of %s:' % engine_log, 'Load weight end.',
                                               'Capturing batches: 4/20', 'Killed']
    assert 'read the engine log %s and redeploy' % engine_log in result['msg']
    assert result['log_tail'] == ['Starting warmup with 256 sequences...']


def test_dead_engine_without_engine_log_says_no_engine_log_was_given(point):
    point['engine_exit_file'].write_text('137\n')
    kind, result, _warnings = run_module(sglang_bench_wait.main, args(point))
    assert kind == 'fail'
    assert result['msg'].splitlines()[1] == '(no engine log was given: set engine_log to show its last lines here)'
    assert result['msg'].endswith('\nLast line of %s:\nStarting warmup with 256 sequences...' % point['log_path'])
