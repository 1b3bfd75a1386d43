# SPDX-License-Identifier: Apache-2.0
"""Waiting on a sweep point against real files, real child processes and a real local health server, on a fake
clock: the markers, log lines and health answers come between the wait's polls, at the fake times the test plans."""

from __future__ import annotations

import os
import signal
import threading
import uuid

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _bench_wait, _node_files, _procs
from ansible_collections.infera.serving.plugins.module_utils._bench_wait import ARGUMENT_SPEC, wait_for_point
from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError

from .health_server import HealthServer
from .processes import BenchProcess, signals_take_effect_at_once

RESULT_LINE = '{"backend": "sglang-oai", "max_concurrency": 64, "output_throughput": 5120.3}'
BENCH_LOG = [
    '#Input tokens: 524288',
    '#Output tokens: 65536',
    'Starting warmup with 128 sequences...',
    'Warmup completed with 128 sequences. Starting main benchmark run...',
]


# ---------------------------------------------------------------- helpers

def write_file(path, text):
    with open(path, 'w') as handle:
        handle.write(text)


def later(clock, delay, path, text):
    """Write text to path delay seconds from now on the clock, the way a wrapper writes its markers."""
    clock.after(delay, lambda: write_file(path, text))


@pytest.fixture
def clock(clock, monkeypatch):
    # _node_files waits for the code in an exit file that has just appeared on the time module: on this clock too.
    monkeypatch.setattr(_node_files, 'time', clock)
    return clock


@pytest.fixture
def point(tmp_path, clock):
    """Paths of one sweep point and its engine on a fake node, and the wait on the test's clock."""
    (tmp_path / 'run').mkdir()
    (tmp_path / 'results').mkdir()

    class Point:
        exit_file = str(tmp_path / 'results' / 'bench-c64.exit')
        output = str(tmp_path / 'results' / 'mix_c64.jsonl')
        log = str(tmp_path / 'results' / 'bench-c64.log')
        engine_exit = str(tmp_path / 'run' / 'engine-7.exit')
        engine_log = str(tmp_path / 'logs' / 'engine-7.log')

        @staticmethod
        def params(**overrides):
            params = {name: spec.get('default') for name, spec in ARGUMENT_SPEC.items()}
            params.update(exit_file=Point.exit_file, output_file=Point.output, log_path=Point.log,
                          engine_exit_file=Point.engine_exit, engine_log=Point.engine_log, poll_interval=0.05,
                          node='node3', conc=64, deadline=30)
            params.update(overrides)
            return params

        @staticmethod
        def wait(params):
            return wait_for_point(params, clock.time, clock.sleep, clock.in_background)

        @staticmethod
        def failure(params):
            with pytest.raises(WaitError) as error:
                Point.wait(params)
            return str(error.value), error.value.details

    with open(Point.log, 'w') as handle:
        handle.write('\n'.join(BENCH_LOG) + '\n')
    return Point


@pytest.fixture
def stopped_at_once(monkeypatch):
    signals_take_effect_at_once(monkeypatch)


# ---------------------------------------------------------------- finished points

def test_finished_point_succeeds(point, clock):
    later(clock, 0.3, point.output, RESULT_LINE + '\n')
    later(clock, 0.4, point.exit_file, '0\n')
    result, warnings = point.wait(point.params())
    # At the first look after the exit file appeared.
    assert clock.now == 0.4
    assert result == {'changed': False, 'rc': 0, 'elapsed': result['elapsed'], 'aborted': False, 'finished': True,
                      'output_lines': 1, 'log_tail': BENCH_LOG, 'killed_pids': [],
                      'progress': {'stage': 'main', 'warmup_requests': 128, 'completed': 0, 'total': None,
                                   'bar_elapsed': None},
                      'engine': {'checked': False, 'alive': None, 'failures': 0, 'last': None},
                      'router_workers': None}
    assert result['elapsed'] == 0.4
    assert warnings == []


def test_return_files_brings_back_the_jsonl_and_the_log_byte_for_byte(point, clock):
    later(clock, 0.1, point.output, RESULT_LINE + '\n')
    later(clock, 0.2, point.exit_file, '0\n')
    result, _warnings = point.wait(point.params(return_files=True))
    assert result['files'] == {'mix_c64.jsonl': RESULT_LINE + '\n', 'bench-c64.log': '\n'.join(BENCH_LOG) + '\n'}
    for name, text in result['files'].items():
        with open(os.path.join(os.path.dirname(point.output), name), 'rb') as handle:
            assert handle.read() == text.encode('utf-8')


def test_return_files_leaves_out_what_a_result_cannot_carry_for_the_play_to_fetch(point, clock, monkeypatch):
    with open(point.log, 'ab') as handle:
        handle.write(b'\xff not UTF-8\n')
    later(clock, 0.1, point.exit_file, '0\n')
    assert point.wait(point.params(return_files=True))[0]['files'] == {}  # no jsonl, a log that is not UTF-8
    with open(point.output, 'w') as handle:
        handle.write(RESULT_LINE + '\n')
    assert list(point.wait(point.params(return_files=True))[0]['files']) == ['mix_c64.jsonl']
    monkeypatch.setattr(_node_files, 'RETURN_LIMIT', len(RESULT_LINE))  # one byte short of the jsonl
    assert point.wait(point.params(return_files=True))[0]['files'] == {}


def test_a_failed_point_returns_no_files(point, clock):
    later(clock, 0.1, point.exit_file, '1\n')
    assert 'files' not in point.failure(point.params(return_files=True))[1]


def test_finished_point_with_a_live_engine_succeeds(point, clock):
    with HealthServer() as health:
        clock.when(lambda: health.hits >= 2, lambda: write_file(point.exit_file, '0'))
        result, warnings = point.wait(point.params(engine_health_url=health.url, health_interval=0.05,
                                                   health_failures=1, deadline=5))
    assert result['rc'] == 0
    assert health.hits >= 2
    assert warnings == ['the bench client on node3 exited 0 for point c64 but %s has no result line; the point has '
                        'no numbers, see %s' % (point.output, point.log)]


def test_health_checks_bypass_a_proxy_from_the_environment(point, clock, monkeypatch):
    monkeypatch.setenv('http_proxy', 'http://127.0.0.1:9')
    monkeypatch.setenv('no_proxy', '')
    with HealthServer() as health:
        clock.when(lambda: health.hits >= 2, lambda: write_file(point.exit_file, '0'))
        result, _warnings = point.wait(point.params(engine_health_url=health.url, health_interval=0.05,
                                                    health_failures=1, deadline=5))
    assert result['aborted'] is False
    assert health.hits >= 2


def test_a_point_without_numbers_or_a_log_path_still_warns(point):
    with open(point.exit_file, 'w') as handle:
        handle.write('0\n')
    _result, warnings = point.wait(point.params(log_path=None))
    assert warnings == ['the bench client on node3 exited 0 for point c64 but %s has no result line; the point has '
                        'no numbers, see its log' % point.output]


def test_finished_point_wins_over_an_engine_that_died_after_it(point):
    with open(point.exit_file, 'w') as handle:
        handle.write('0\n')
    with open(point.engine_exit, 'w') as handle:
        handle.write('0\n')
    result, _warnings = point.wait(point.params())
    assert result['aborted'] is False


def test_client_failing_because_the_engine_died_blames_the_engine(point, clock):
    later(clock, 0.2, point.exit_file, '1\n')
    later(clock, 0.5, point.engine_exit, '137\n')
    message, details = point.failure(point.params())
    assert message.splitlines()[0].startswith('worker died during point c64 on node3')
    assert details['cause'] == 'the engine exit file %s appeared (code 137)' % point.engine_exit
    assert details['aborted'] is True


def test_engine_exit_code_written_just_after_its_file_appears_counts(point, clock):
    # The wrapper's `echo $? >FILE` creates the file a moment before the code is in it.
    with open(point.engine_exit, 'w'):
        pass
    later(clock, 0.3, point.engine_exit, '137\n')
    _message, details = point.failure(point.params())
    assert details['cause'] == 'the engine exit file %s appeared (code 137)' % point.engine_exit


def test_client_exit_code_fails_with_the_log_tail(point, clock):
    with open(point.log, 'a') as handle:
        handle.write('Traceback (most recent call last):\nValueError: All requests failed\n')
    later(clock, 0.2, point.exit_file, '1\n')
    message, details = point.failure(point.params())
    headline = message.splitlines()[0]
    assert headline.startswith('the bench client exited 1 during point c64 on node3')
    assert 'stage sweep' in headline
    assert 'Cause: the bench client exited 1: when every request fails the client writes no result line.' in headline
    assert 'Next step: see %s' % point.log in headline
    assert message.endswith('Last 6 lines of %s:\n%s' % (point.log, '\n'.join(details['log_tail'])))
    assert details['log_tail'][-1] == 'ValueError: All requests failed'
    assert details['rc'] == 1
    assert details['aborted'] is False
    assert details['changed'] is False
    assert details['output_lines'] == 0


def test_exit_file_without_a_code_fails_after_a_grace(point, clock):
    with open(point.exit_file, 'w'):
        pass
    message, details = point.failure(point.params())
    # The exit file's own grace (2 s), then the engine's (5 s: no engine exit file comes).
    assert clock.now == _node_files.EXIT_CODE_GRACE + _bench_wait._ENGINE_EXIT_GRACE
    assert details['rc'] is None
    assert 'holds no exit code' in message


def test_exit_code_written_just_after_the_file_appears_counts(point, clock):
    with open(point.exit_file, 'w'):
        pass
    later(clock, 0.3, point.exit_file, '0\n')
    result, _warnings = point.wait(point.params())
    assert result['rc'] == 0


RESULTS_BLOCK = [
    ' 100%|##########| 640/640 [01:40<00:00,  6.40it/s]',
    '============ Serving Benchmark Result ============',
    'Successful requests:                     640',
]


def test_the_results_block_written_as_the_client_exits_is_read(point, clock):
    # The client's last lines land while the wrapper is still writing its exit code: after the last poll read the log.
    with open(point.exit_file, 'w'):
        pass
    later(clock, 0.4, point.log, '\n'.join(BENCH_LOG + RESULTS_BLOCK) + '\n')
    later(clock, 0.6, point.exit_file, '0\n')
    result, _warnings = point.wait(point.params())
    assert result['progress'] == {'stage': 'results', 'warmup_requests': 128, 'completed': 640, 'total': 640,
                                  'bar_elapsed': 100}


@pytest.mark.parametrize('code', [0, 1])
def test_a_finished_client_stops_no_process(point, code):
    # The wrapper that wrote the exit file may still be ending, and its command line has the output path too.
    with BenchProcess() as bench:
        with open(point.exit_file, 'w') as handle:
            handle.write('%d\n' % code)
        params = point.params(kill_match=bench.mark)
        if code == 0:
            result, _warnings = point.wait(params)
        else:
            _message, result = point.failure(params)
        assert bench.process.poll() is None
    assert (result['rc'], result['killed_pids'], result['changed']) == (code, [], False)


def test_a_failed_client_is_reported_once_the_engine_grace_is_over(point, clock):
    with open(point.exit_file, 'w') as handle:
        handle.write('1\n')
    _message, details = point.failure(point.params())
    assert clock.now == _bench_wait._ENGINE_EXIT_GRACE
    assert details['rc'] == 1


def test_a_failed_client_beside_a_live_engine_is_reported_without_the_grace(point, clock):
    # The whole 5 s grace is in force: the engine's /health answering 200 says at once it is the client's failure.
    assert _bench_wait._ENGINE_EXIT_GRACE >= 5.0
    with open(point.exit_file, 'w') as handle:
        handle.write('1\n')
    with HealthServer(status=200) as health:
        message, details = point.failure(point.params(engine_health_url=health.url, health_interval=10))
    assert message.startswith('the bench client exited 1 during point c64 on node3')
    assert details['rc'] == 1 and details['aborted'] is False
    # At once: the wait never slept.
    assert clock.slept == []


def test_a_failed_client_beside_an_engine_that_stopped_answering_waits_for_its_exit_marker(point, clock):
    later(clock, 0.1, point.exit_file, '1\n')
    later(clock, 0.8, point.engine_exit, '137\n')
    with HealthServer(status=503) as health:
        message, details = point.failure(point.params(engine_health_url=health.url, health_interval=10, health_failures=99))
    assert message.startswith('worker died during point c64 on node3'), message
    assert details['cause'] == 'the engine exit file %s appeared (code 137)' % point.engine_exit


def test_elapsed_is_counted_from_the_first_slice_in_tenths_of_a_second(point, clock):
    started_at = 1764480060.2
    clock.now = started_at + 754.26
    with open(point.exit_file, 'w') as handle:
        handle.write('0\n')
    resume = {'started_at': started_at, 'health_failures': 0, 'read_offset': 0, 'progress': None}
    result, _warnings = point.wait(point.params(resume=resume))
    assert result['elapsed'] == 754.3


# ---------------------------------------------------------------- aborted points

def test_engine_exit_mid_point_aborts_and_stops_the_client(point, clock, stopped_at_once):
    with BenchProcess() as bench:
        later(clock, 0.3, point.engine_exit, '137\n')
        message, details = point.failure(point.params(kill_match=bench.mark))
        assert bench.ended_by() == signal.SIGTERM
    headline = message.splitlines()[0]
    assert headline.startswith('worker died during point c64 on node3')
    assert ', stage sweep, 00:00 after the start. Cause' in headline
    assert 'Cause: the engine exit file %s appeared (code 137).' % point.engine_exit in headline
    assert ('Next step: the engine died: read the engine log %s and redeploy; the bench client was stopped (pids %d) and the '
            'partial point was discarded.' % (point.engine_log, bench.pid)) in headline
    assert details['killed_pids'] == [bench.pid]
    assert details['changed'] is True
    assert details['aborted'] is True
    assert details['rc'] is None
    assert details['cause'] == 'the engine exit file %s appeared (code 137)' % point.engine_exit
    assert message.endswith('\n'.join(BENCH_LOG))


def test_failing_health_aborts_after_n_checks_in_a_row(point, stopped_at_once):
    with HealthServer(status=503) as health, BenchProcess() as bench:
        result = point.failure(point.params(engine_health_url=health.url, health_interval=0.1, health_failures=4,
                                            kill_match=bench.mark, engine_log='/srv/sglang/logs/engine.log'))
        message, details = result
        assert bench.ended_by() == signal.SIGTERM
    assert health.hits >= 4
    assert details['elapsed'] == 0.3
    assert message.startswith('worker died during point c64 on node3')
    assert 'failed 4 checks in a row, 0.1 s apart (last: 503)' in details['cause']
    assert 'read the engine log /srv/sglang/logs/engine.log and redeploy' in message


def test_a_pd_leg_that_stops_answering_aborts_the_point_naming_the_leg(point, stopped_at_once):
    with HealthServer(status=200) as engine, HealthServer(status=503) as decode, BenchProcess() as bench:
        leg = {'name': 'decode leg on node4', 'health_url': decode.url}
        message, details = point.failure(point.params(engine_health_url=engine.url, legs=[leg], health_interval=0.1,
                                                      health_failures=3, kill_match=bench.mark))
        assert bench.ended_by() == signal.SIGTERM
    assert decode.hits >= 3 and details['elapsed'] == 0.2
    assert message.startswith('the decode leg on node4 died during point c64 on node3 (host vm), stage sweep')
    assert details['cause'] == 'the decode leg on node4 does not answer its health URL %s (last: 503)' % decode.url
    assert 'Next step: read the engine log on that node (logs/engine.log under its work directory), then run the sweep ' \
           'again with the same run_id: the pair is brought up again, valid points are kept and this point runs again' \
        in message


def test_a_pd_leg_down_when_the_client_ends_fails_the_point_a_live_one_does_not(point, clock):
    with HealthServer(status=200) as decode:
        leg = {'name': 'decode leg on node4', 'health_url': decode.url}
        later(clock, 0.2, point.output, RESULT_LINE + '\n')
        later(clock, 0.3, point.exit_file, '0\n')
        result, _warnings = point.wait(point.params(legs=[leg], health_interval=60))
        assert result['aborted'] is False
        # Down at the end, before three checks (an hour apart) could see it: the client's requests failed on it.
        os.remove(point.exit_file)
        decode.status = 503
        later(clock, 0.3, point.exit_file, '0\n')
        _message, details = point.failure(point.params(legs=[leg], health_interval=3600))
    assert details['cause'] == 'the decode leg on node4 does not answer its health URL %s (last: 503)' % decode.url


def test_health_recovering_resets_the_count(point, clock):
    with HealthServer(status=503) as health:
        # Two failures, then healthy again: three in a row never happen.
        clock.after(0.15, lambda: setattr(health, 'status', 200))
        later(clock, 0.6, point.exit_file, '0')
        result, _warnings = point.wait(point.params(engine_health_url=health.url, health_interval=0.1,
                                                    health_failures=3))
    assert result['aborted'] is False


def test_a_success_between_failures_resets_the_count(point, clock):
    # Four failures in all but never three in a row: the point must finish, not abort.
    with HealthServer(statuses=[503, 503, 200, 503, 503, 200, 503, 503]) as health:
        clock.when(lambda: not health.statuses, lambda: write_file(point.exit_file, '0'))
        result, _warnings = point.wait(point.params(engine_health_url=health.url, health_interval=0.05,
                                                    health_failures=3))
    assert result['aborted'] is False


def test_three_failures_in_a_row_after_a_recovery_abort(point):
    with HealthServer(statuses=[503, 200, 503, 503, 503], status=200) as health:
        message, details = point.failure(point.params(engine_health_url=health.url, health_interval=0.05,
                                                      health_failures=3, deadline=5))
    assert details['aborted'] is True
    assert 'failed 3 checks in a row' in details['cause']
    assert not health.statuses
    assert message.startswith('worker died during point c64 on node3')


def test_whole_second_intervals_are_written_without_decimals(point):
    with HealthServer(status=503) as health:
        _message, details = point.failure(point.params(engine_health_url=health.url, health_interval=1.0, health_failures=1))
    assert details['cause'] == 'the engine health URL %s failed 1 checks in a row, 1 s apart (last: 503)' % health.url


def test_unreachable_health_url_counts_as_failures(point):
    message, details = point.failure(point.params(engine_health_url='http://127.0.0.1:9/health', health_interval=0.05,
                                                  health_failures=2))
    assert 'worker died during point c64' in message
    # Without an HTTP status, the error says why the check failed.
    assert details['cause'].endswith('failed 2 checks in a row, 0.1 s apart (last: <urlopen error [Errno 111] '
                                     'Connection refused>)')
    assert 'no bench process' not in message
    assert 'stop it by hand' in message
    assert details['killed_pids'] == []
    assert details['changed'] is False


def test_deadline_aborts_and_stops_the_client(point, clock, stopped_at_once):
    with BenchProcess() as bench:
        # deadline is whole seconds: the point started 0.7 s before this slice, so 0.3 s are left.
        resume = {'started_at': clock.time() - 0.7, 'health_failures': 0, 'read_offset': 0, 'progress': None}
        message, details = point.failure(point.params(deadline=1, kill_match=bench.mark, resume=resume))
        assert bench.ended_by() == signal.SIGTERM
    assert clock.now == 0.3
    headline = message.splitlines()[0]
    assert headline.startswith('point c64 exceeded its deadline of 1 s on node3')
    assert ', stage sweep, 00:0' in headline
    assert 'Cause: the bench exit file %s did not appear within 1 s.' % point.exit_file in headline
    assert 'raise deadline or lower --num-prompts' in headline
    assert details['killed_pids'] == [bench.pid]
    assert details['aborted'] is True


def test_abort_with_nothing_left_to_stop_changes_nothing(point):
    with open(point.engine_exit, 'w') as handle:
        handle.write('1')
    message, details = point.failure(point.params(kill_match='bench-wait-test-%s' % uuid.uuid4().hex, stage='sweep-dp',
                                                  conc=None, node='node9'))
    assert message.startswith('worker died during the point on node9')
    assert 'stage sweep-dp' in message
    assert 'none was stopped' in message
    assert details['changed'] is False


def test_processes_it_may_not_signal_are_named_in_the_message(point, monkeypatch):
    real_kill = os.kill
    with BenchProcess() as bench:
        def kill(pid, signum):
            if pid == bench.pid:
                raise PermissionError(1, 'Operation not permitted')
            real_kill(pid, signum)
        monkeypatch.setattr(_procs.os, 'kill', kill)
        with open(point.engine_exit, 'w') as handle:
            handle.write('137')
        message, details = point.failure(point.params(kill_match=bench.mark))
        monkeypatch.undo()
    assert details['killed_pids'] == []
    assert details['changed'] is False
    assert ('the bench processes %d could not be stopped (permission denied): run this task with become'
            % bench.pid) in message


# ---------------------------------------------------------------- the engine log

def test_a_dead_engine_shows_the_tail_of_engine_log(point, clock):
    os.makedirs(os.path.dirname(point.engine_log))
    with open(point.engine_log, 'w') as handle:
        handle.write('[TP0] Scheduler hit an exception: Traceback (most recent call last):\n'
                     'torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB\n')
    later(clock, 0.2, point.engine_exit, '137\n')
    message, details = point.failure(point.params())
    assert message.splitlines()[1:4] == [
        'Last 2 lines of %s:' % point.engine_log,
        '[TP0] Scheduler hit an exception: Traceback (most recent call last):',
        'torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB',
    ]
    assert message.endswith('Last 4 lines of %s:\n%s' % (point.log, '\n'.join(BENCH_LOG)))
    assert details['log_tail'] == BENCH_LOG


def test_a_dead_engine_without_engine_log_says_none_was_given(point):
    with open(point.engine_exit, 'w') as handle:
        handle.write('137\n')
    message, details = point.failure(point.params(engine_log=None))
    assert message.splitlines()[1] == '(no engine log was given: set engine_log to show its last lines here)'
    assert 'read the engine log (engine.log in the sglang_worker log dir) and redeploy' in message.splitlines()[0]
    assert details['cause'] == 'the engine exit file %s appeared (code 137)' % point.engine_exit


def test_nothing_is_derived_from_the_engine_exit_file(point):
    # The sglang_worker layout once gave <work>/logs/engine-7.log for <work>/run/engine-7.exit; now only engine_log does.
    os.makedirs(os.path.dirname(point.engine_log))
    with open(point.engine_log, 'w') as handle:
        handle.write('engine line that must not be shown\n')
    with open(point.engine_exit, 'w') as handle:
        handle.write('1\n')
    message, _details = point.failure(point.params(engine_log=None))
    assert 'engine line that must not be shown' not in message
    assert point.engine_log not in message


def test_the_old_option_name_engine_log_path_is_an_alias():
    assert ARGUMENT_SPEC['engine_log']['aliases'] == ['engine_log_path']


# ---------------------------------------------------------------- options

@pytest.mark.parametrize('overrides, message', [
    ({'deadline': 0}, 'deadline must be more than 0 seconds; got 0'),
    ({'health_failures': 0}, 'health_failures must be 1 or more; got 0'),
    ({'health_interval': 0}, 'health_interval must be more than 0 seconds; got 0'),
    ({'poll_interval': 0}, 'poll_interval must be more than 0 and at most 10 seconds; got 0'),
    ({'poll_interval': 10.5}, 'poll_interval must be more than 0 and at most 10 seconds; got 10.5'),
    ({'poll_interval': 30}, 'poll_interval must be more than 0 and at most 10 seconds; got 30'),
    ({'conc': 0}, 'conc must be 1 or more; got 0'),
    ({'kill_match': '  '}, 'kill_match must not be empty; use a text only the bench command line has, such as its '
                           'output file path'),
    ({'engine_health_url': '127.0.0.1:30000/health'},
     "engine_health_url must be an http:// or https:// URL; got '127.0.0.1:30000/health'"),
    ({'router_url': '127.0.0.1:8000'}, "router_url must be an http:// or https:// URL; got '127.0.0.1:8000'"),
])
def test_bad_options_fail_before_waiting(point, overrides, message):
    error, _details = point.failure(point.params(**overrides))
    assert error == message


@pytest.mark.parametrize('overrides', [{'poll_interval': 10}, {'conc': 1}])
def test_options_at_their_limits_are_accepted(point, overrides):
    with open(point.exit_file, 'w') as handle:
        handle.write('0\n')
    result, _warnings = point.wait(point.params(**overrides))
    assert (result['finished'], result['rc']) == (True, 0)


def test_a_stage_left_unset_is_called_sweep(point):
    with open(point.engine_exit, 'w') as handle:
        handle.write('137\n')
    message, _details = point.failure(point.params(stage=None))
    headline = message.splitlines()[0]
    assert headline.startswith('worker died during point c64 on node3')
    assert ', stage sweep, 00:00 after the start. Cause: ' in headline


# ---------------------------------------------------------------- progress of the client (slices)

# A bench log as sglang.bench_serving 0.4.10.post2 writes it: its warmup lines on stdout, then
# the main run's bar drawn by tqdm 4.70 (real output: carriage returns, no newline until it closes).
BENCH_FIXTURE = os.path.join(os.path.dirname(__file__), 'data', 'bench-c4.log')


def fixture_bytes():
    with open(BENCH_FIXTURE, 'rb') as handle:
        return handle.read()


def test_the_whole_log_gives_the_main_run_and_its_results():
    reading, progress = _bench_wait.new_reading(), _bench_wait.new_progress()
    _bench_wait.read_progress(BENCH_FIXTURE, reading, progress)
    assert progress == {'stage': 'results', 'warmup_requests': 8, 'completed': 8, 'total': 8, 'bar_elapsed': 4}


@pytest.mark.parametrize('upto, expected', [
    ('Namespace(', {'stage': 'starting', 'warmup_requests': None, 'completed': 0, 'total': None}),
    ('Warmup completed', {'stage': 'warmup', 'warmup_requests': 8, 'completed': 0, 'total': None}),
    ('\r  0%', {'stage': 'main', 'warmup_requests': 8, 'completed': 0, 'total': None}),
    ('\r 50%', {'stage': 'main', 'warmup_requests': 8, 'completed': 3, 'total': 8}),
    ('\n\n====', {'stage': 'main', 'warmup_requests': 8, 'completed': 8, 'total': 8}),
])
def test_warmup_and_main_run_are_told_apart(tmp_path, upto, expected):
    data = fixture_bytes()
    log = tmp_path / 'bench-c4.log'
    log.write_bytes(data[:data.index(upto.encode())])
    reading, progress = _bench_wait.new_reading(), _bench_wait.new_progress()
    _bench_wait.read_progress(str(log), reading, progress)
    assert {key: progress[key] for key in expected} == expected


def test_a_bar_redraw_cut_in_the_middle_is_read_whole_by_the_next_slice(tmp_path):
    data = fixture_bytes()
    log = tmp_path / 'bench-c4.log'
    cut = data.index(b'| 5/8') + 3
    reading, progress = _bench_wait.new_reading(), _bench_wait.new_progress()
    seen = []
    for end in (data.index(b'\r 38%'), cut, len(data)):
        log.write_bytes(data[:end])
        # A new slice starts from the carried offset alone, as the action passes it on.
        reading = _bench_wait.new_reading(reading['read_offset'])
        _bench_wait.read_progress(str(log), reading, progress)
        seen.append(progress['completed'])
    # Half a redraw ("| 5/") is not counted until it is whole; then the next slice reads on from it.
    assert seen == [2, 4, 8]


def test_a_rewritten_log_starts_the_progress_over(tmp_path):
    log = tmp_path / 'bench-c4.log'
    log.write_bytes(fixture_bytes())
    reading, progress = _bench_wait.new_reading(), _bench_wait.new_progress()
    _bench_wait.read_progress(str(log), reading, progress)
    log.write_text('Starting warmup with 8 sequences...\n')
    _bench_wait.read_progress(str(log), reading, progress)
    assert (progress['stage'], progress['completed']) == ('warmup', 0)


def test_a_missing_log_leaves_the_progress_alone(tmp_path):
    progress = _bench_wait.new_progress()
    _bench_wait.read_progress(str(tmp_path / 'none.log'), _bench_wait.new_reading(), progress)
    assert progress == _bench_wait.new_progress()


@pytest.mark.parametrize('text, completed, total, elapsed', [
    (' 12%|█▏        | 1229/10240 [10:13<1:14:59,  2.00it/s]', 1229, 10240, 613),
    (' 99%|█████████▉| 10200/10240 [1:24:30<00:19,  2.01it/s]', 10200, 10240, 5070),
])
def test_a_tqdm_bar_gives_completed_total_and_elapsed(text, completed, total, elapsed):
    progress = _bench_wait.new_progress()
    _bench_wait.scan_bench_line(progress, text)
    assert (progress['stage'], progress['completed'], progress['total'], progress['bar_elapsed']) == (
        'main', completed, total, elapsed)


@pytest.mark.parametrize('progress, elapsed, estimate, expected', [
    ({'stage': 'main', 'completed': 1024, 'total': 10240, 'bar_elapsed': 600}, 700, 5000, (5400.0, 'rate')),
    ({'stage': 'main', 'completed': 0, 'total': 10240, 'bar_elapsed': 3}, 60, 5000, (4940.0, 'estimate')),
    ({'stage': 'warmup', 'completed': 0, 'total': None, 'bar_elapsed': None}, 6000, 5000, (0.0, 'estimate')),
    ({'stage': 'starting', 'completed': 0, 'total': None, 'bar_elapsed': None}, 10, None, (None, None)),
    # The results block is out but the client has not exited yet: the bar is still the best guess.
    ({'stage': 'results', 'completed': 640, 'total': 640, 'bar_elapsed': 300}, 330, 5000, (0.0, 'rate')),
])
def test_eta_from_the_rate_then_the_estimate(progress, elapsed, estimate, expected):
    assert _bench_wait.point_eta(progress, elapsed, estimate) == expected


ALIVE = {'checked': True, 'alive': True, 'failures': 0, 'last': 200}


@pytest.mark.parametrize('result, estimate, expected', [
    ({'elapsed': 5.2, 'progress': _bench_wait.new_progress(), 'engine': ALIVE}, None,
     'node1: point 2/6 c64 nodp: client starting, elapsed 00:05, ETA ?, engine alive'),
    ({'elapsed': 45, 'progress': dict(_bench_wait.new_progress(), stage='warmup', warmup_requests=128),
      'engine': ALIVE}, 5245,
     'node1: point 2/6 c64 nodp: warmup (128 requests), elapsed 00:45, ETA ~86:40, engine alive'),
    ({'elapsed': 721, 'progress': {'stage': 'main', 'warmup_requests': 128, 'completed': 3584, 'total': 10240,
                                   'bar_elapsed': 600}, 'engine': ALIVE}, 5245,
     'node1: point 2/6 c64 nodp: main 3584/10240 requests, elapsed 12:01, ETA 18:34, engine alive'),
    ({'elapsed': 90, 'progress': {'stage': 'main', 'warmup_requests': 128, 'completed': 64, 'total': 640,
                                  'bar_elapsed': 60},
      'engine': {'checked': True, 'alive': False, 'failures': 2, 'last': 503}}, None,
     'node1: point 2/6 c64 nodp: main 64/640 requests, elapsed 01:30, ETA 09:00, engine not answering '
     '(2 failed checks in a row, last: 503)'),
    ({'elapsed': 3, 'progress': _bench_wait.new_progress(),
      'engine': {'checked': True, 'alive': None, 'failures': 0, 'last': None}}, None,
     'node1: point 2/6 c64 nodp: client starting, elapsed 00:03, ETA ?, engine not checked yet'),
    ({'elapsed': 3, 'progress': _bench_wait.new_progress(),
      'engine': {'checked': False, 'alive': None, 'failures': 0, 'last': None}}, None,
     'node1: point 2/6 c64 nodp: client starting, elapsed 00:03, ETA ?, engine not checked'),
])
def test_the_progress_line(result, estimate, expected):
    assert _bench_wait.progress_line('node1', result, 'point 2/6 c64 nodp', estimate) == expected


@pytest.mark.parametrize('progress, num_prompts, expected', [
    # A progress that names no stage yet (an empty one is replaced by a new one, which does).
    ({'completed': 0}, None, 'client starting'),
    ({'stage': 'warmup', 'warmup_requests': None}, None, 'warmup (? requests)'),
    # Warmup over, no bar drawn yet: the planned number of prompts, else '?'.
    ({'stage': 'main', 'completed': 0, 'total': None}, 640, 'main 0/640 requests'),
    ({'stage': 'main', 'completed': 0, 'total': None}, None, 'main 0/? requests'),
    ({'stage': 'results', 'completed': 640, 'total': 640}, 640, 'results 640/640 requests'),
])
def test_the_requests_part_of_the_progress_line(progress, num_prompts, expected):
    result = {'elapsed': 0, 'progress': progress, 'engine': None}
    assert _bench_wait.progress_line('node1', result, num_prompts=num_prompts) == (
        'node1: the point: %s, elapsed 00:00, ETA ?, engine not checked' % expected)


def test_a_slice_returns_what_the_next_one_needs(point, clock):
    result, warnings = point.wait(point.params(max_wait=0.2))
    assert warnings == []
    assert result['elapsed'] == 0.2
    progress = {'stage': 'main', 'warmup_requests': 128, 'completed': 0, 'total': None, 'bar_elapsed': None}
    assert result['resume']['started_at'] == 0.0
    assert result == {'changed': False, 'rc': None, 'elapsed': result['elapsed'], 'aborted': False, 'finished': False,
                      'output_lines': 0, 'log_tail': BENCH_LOG, 'killed_pids': [], 'progress': progress,
                      'engine': {'checked': False, 'alive': None, 'failures': 0, 'last': None}, 'router_workers': None,
                      'resume': {'started_at': result['resume']['started_at'], 'health_failures': 0,
                                 'read_offset': os.path.getsize(point.log), 'progress': progress,
                                 'router_workers': None}}
    later(clock, 0.1, point.exit_file, '0\n')
    result, _warnings = point.wait(point.params(resume=result['resume']))
    assert result['finished'] is True
    assert result['elapsed'] == 0.3
    # The log gained nothing since: the progress is the one the first slice read.
    assert result['progress'] == progress


def test_the_first_slice_reads_the_log_from_its_first_byte(point):
    with open(point.log, 'w') as handle:
        handle.write('Starting warmup with 8 sequences...\n')
    result, _warnings = point.wait(point.params(max_wait=0.05))
    assert result['progress'] == {'stage': 'warmup', 'warmup_requests': 8, 'completed': 0, 'total': None,
                                  'bar_elapsed': None}


def test_a_log_rewritten_between_slices_starts_the_progress_over(point):
    first, _warnings = point.wait(point.params(max_wait=0.05))
    assert first['progress']['stage'] == 'main'
    with open(point.log, 'w') as handle:
        handle.write('Starting warmup with 8 sequences...\n')
    with open(point.exit_file, 'w') as handle:
        handle.write('0\n')
    result, _warnings = point.wait(point.params(resume=first['resume']))
    assert result['progress'] == {'stage': 'warmup', 'warmup_requests': 8, 'completed': 0, 'total': None,
                                  'bar_elapsed': None}


def test_the_deadline_counts_from_the_first_slice(point, clock):
    resume = {'started_at': clock.time() - 5, 'health_failures': 0, 'read_offset': 0, 'progress': None}
    message, details = point.failure(point.params(deadline=3, max_wait=2, resume=resume))
    assert details['aborted'] is True
    assert 'deadline' in message


def test_failed_health_checks_in_a_row_span_slices(point, clock):
    with HealthServer(status=503) as health:
        resume = {'started_at': clock.time(), 'health_failures': 2, 'read_offset': 0, 'progress': None}
        _message, details = point.failure(point.params(engine_health_url=health.url, health_interval=60, max_wait=30,
                                                       resume=resume))
    # At the slice's first check, not after its 30 s.
    assert clock.slept == []
    assert details['engine']['failures'] == 3


def test_a_slice_that_ends_lets_the_health_check_in_flight_answer(point, clock):
    answer = threading.Event()
    with HealthServer(status=503, answer_when=answer) as health:
        # The check goes out in its thread at the slice's first look; its answer comes only as the slice ends.
        clock.after(0.05, answer.set)
        result, _warnings = wait_for_point(point.params(engine_health_url=health.url, health_interval=5, max_wait=0.05),
                                           clock.time, clock.sleep)
    assert result['engine'] == {'checked': True, 'alive': False, 'failures': 1, 'last': 503}
    assert result['resume']['health_failures'] == 1


def test_max_wait_must_not_be_negative(point):
    message, _details = point.failure(point.params(max_wait=-1))
    assert message == 'max_wait must be 0 (wait until the point ends) or more seconds; got -1'


# ---------------------------------------------------------------- the router the point goes through

def test_the_first_slice_reads_the_routers_workers_and_the_last_checks_the_router(point, clock):
    with HealthServer(workers=['10.0.0.5:30000']) as router:
        router_url = 'http://%s/' % router.address
        first, _warnings = point.wait(point.params(router_url=router_url, max_wait=0.1))
        assert router.paths == ['/v1/workers']
        listed = [{'worker_id': '10.0.0.5:30000', 'url': 'http://10.0.0.5:30000', 'engine': 'sglang'}]
        assert first['router_workers'] == first['resume']['router_workers'] == listed
        # The listing changes later (a worker draining): the point keeps the workers it started with.
        router.workers = []
        later(clock, 0.1, point.exit_file, '0\n')
        last, _warnings = point.wait(point.params(router_url=router_url, resume=first['resume']))
    assert (last['finished'], last['rc'], last['router_workers']) == (True, 0, listed)
    # No second listing; one /health once the client exited 0.
    assert router.paths == ['/v1/workers', '/health']


def test_a_router_that_stopped_answering_fails_a_finished_point(point):
    with HealthServer(status=503, workers=['10.0.0.5:30000']) as router:
        with open(point.exit_file, 'w') as handle:
            handle.write('0\n')
        message, details = point.failure(point.params(router_url='http://%s' % router.address))
    headline = message.splitlines()[0]
    assert headline.startswith('the Infera router stopped answering during point c64 on node3')
    assert ', stage sweep, 00:00 after the start. ' in headline
    assert ('Cause: the Infera router at http://%s stopped answering (GET http://%s/health answered '
            % (router.address, router.address)) in headline
    assert '503' in headline
    assert 'Next step: read the router log on its node, then run the sweep again with the same run_id' in headline
    assert (details['aborted'], details['finished']) == (True, True)
    assert message.endswith('\n'.join(BENCH_LOG))


def test_a_failed_client_is_not_blamed_on_a_router_that_answers(point):
    with HealthServer(workers=['10.0.0.5:30000']) as router:
        with open(point.exit_file, 'w') as handle:
            handle.write('1\n')
        message, _details = point.failure(point.params(router_url='http://%s' % router.address))
    assert message.startswith('the bench client exited 1 during point c64')
    # A failed client is not followed by a router check here: the sweep's rescue asks the router itself.
    assert router.paths == ['/v1/workers']


def test_a_router_that_cannot_list_its_workers_aborts_the_point_at_once_and_stops_the_client(point, clock, stopped_at_once):
    with BenchProcess() as bench:
        message, details = point.failure(point.params(router_url='http://127.0.0.1:9', kill_match=bench.mark, deadline=30))
        assert bench.ended_by() == signal.SIGTERM
    # At once: the wait never slept.
    assert clock.slept == []
    headline = message.splitlines()[0]
    assert headline.startswith('the Infera router stopped answering during point c64 on node3')
    assert 'Cause: the Infera router at http://127.0.0.1:9 stopped answering (GET http://127.0.0.1:9/v1/workers ' \
           'answered ' in headline
    assert 'the bench client was stopped (pids %d) and the partial point was discarded' % bench.pid in headline
    assert details['killed_pids'] == [bench.pid]
    assert details['router_workers'] is None


def test_a_router_whose_listing_times_out_while_busy_is_read_again_before_the_point_is_judged(point, clock, monkeypatch):
    # Under the warmup's 2xC requests a loaded router answered GET /v1/workers after more than ROUTER_TIMEOUT (a CI run
    # of the quickstart's first sweep at c256): one slow reading aborted a point the router went on to serve.
    listed = [{'worker_id': '10.0.0.5:30000'}]
    answers = iter([(None, 'GET http://r/v1/workers answered timed out')] * 2 + [(listed, None)])
    monkeypatch.setattr(_bench_wait._health, 'router_workers', lambda url, timeout: next(answers))
    first, _warnings = point.wait(point.params(router_url='http://r', max_wait=0.1))
    assert first['router_workers'] == listed
    assert clock.slept[:2] == [1.0, 1.0]


def test_a_router_whose_listing_keeps_timing_out_fails_the_point_after_the_patience(point, clock, monkeypatch):
    readings = []

    def timed_out(url, timeout):
        readings.append(clock.now)
        return None, 'GET %s answered timed out' % url

    monkeypatch.setattr(_bench_wait._health, 'router_workers', timed_out)
    message, details = point.failure(point.params(router_url='http://r', deadline=300))
    assert message.splitlines()[0].startswith('the Infera router stopped answering during point c64 on node3')
    assert 'GET http://r/v1/workers answered timed out' in message
    assert details['router_workers'] is None
    assert readings[-1] - readings[0] == _bench_wait.ROUTER_PATIENCE
