# SPDX-License-Identifier: Apache-2.0
"""The sglang_bench_wait action plugin: slices, one progress line each, the carried state, reconnects."""

from __future__ import annotations

import functools
import os
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure

from ansible_collections.infera.serving.plugins.action import sglang_bench_wait as action_plugin
from ansible_collections.infera.serving.plugins.module_utils import _bench_wait
from ansible_collections.infera.serving.plugins.modules import sglang_bench_wait as bench_module
from ansible_collections.infera.serving.plugins.plugin_utils import _sliced_wait

from ..modules.utils import run_module
from . import harness

TASK_VARS = {'inventory_hostname': 'node1'}
ARGS = {'exit_file': '/r/mix_c64.exit', 'log_path': '/r/bench-c64.log', 'conc': 64, 'label': 'point 2/6 c64 nodp'}
ALIVE = {'checked': True, 'alive': True, 'failures': 0, 'last': 200}
FIXTURE = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'data', 'bench-c4.log')


def make_action(args, clock=None):
    """The action for a task with args; with clock (a FakeClock), the controller's time is that clock's."""
    action = harness.make_action(action_plugin, 'infera.serving.sglang_bench_wait', args)
    if clock is not None:
        action._clock, action._sleep = clock.monotonic, clock.sleep
    return action


def running(completed, elapsed, bar_elapsed=None, offset=0):
    progress = {'stage': 'main', 'warmup_requests': 128, 'completed': completed, 'total': 640,
                'bar_elapsed': bar_elapsed}
    return {'changed': False, 'finished': False, 'aborted': False, 'elapsed': elapsed, 'progress': progress,
            'engine': ALIVE, 'resume': {'started_at': 1000.0, 'health_failures': 0, 'read_offset': offset,
                                        'progress': progress}}


DONE = {'changed': False, 'finished': True, 'aborted': False, 'rc': 0, 'elapsed': 300.0}


@pytest.fixture
def shown():
    with mock.patch.object(_sliced_wait.display, 'display') as display:
        yield display


def lines(display):
    return [call.args[0] for call in display.call_args_list]


def test_one_line_per_slice_and_the_state_carried_to_the_next(shown):
    action = make_action(dict(ARGS, estimate=600))
    slices = [running(0, 30.0, offset=100), running(64, 60.0, 20, offset=900), dict(DONE)]
    with mock.patch.object(action, '_execute_module', side_effect=slices) as execute:
        result = action.run(task_vars=TASK_VARS)
    assert result['finished'] is True and result['rc'] == 0
    assert lines(shown) == [
        'node1: point 2/6 c64 nodp: main 0/640 requests, elapsed 00:30, ETA ~09:30, engine alive',
        'node1: point 2/6 c64 nodp: main 64/640 requests, elapsed 01:00, ETA 03:00, engine alive',
    ]
    sent = [call.kwargs['module_args'] for call in execute.call_args_list]
    assert [args.get('resume', {}).get('read_offset') for args in sent] == [None, 100, 900]
    for args in sent:
        assert args['max_wait'] == 30
        assert args['node'] == 'node1'
        assert execute.call_args.kwargs['module_name'] == 'infera.serving.sglang_bench_wait'
        assert not {'label', 'estimate', 'progress_interval', 'reconnect_retries', 'reconnect_delay'} & set(args)


def test_a_simulated_engine_is_named_on_every_progress_line(shown):
    action = make_action(dict(ARGS, estimate=600, simulated=True))
    slices = [running(0, 30.0, offset=100), dict(DONE)]
    with mock.patch.object(action, '_execute_module', side_effect=slices) as execute:
        action.run(task_vars=TASK_VARS)
    assert lines(shown) == [
        'node1: [SIMULATED engine] point 2/6 c64 nodp: main 0/640 requests, elapsed 00:30, ETA ~09:30, engine alive']
    # The module on the node never sees it.
    assert all('simulated' not in call.kwargs['module_args'] for call in execute.call_args_list)


def test_a_lost_connection_retries_with_the_last_state(shown):
    action = make_action(dict(ARGS, reconnect_delay=0, progress_interval=10))
    slices = [running(10, 10.0, 5, offset=400), AnsibleConnectionFailure('Connection reset by peer'),
              running(20, 25.0, 15, offset=800), dict(DONE)]
    with mock.patch.object(action, '_execute_module', side_effect=slices) as execute:
        result = action.run(task_vars=TASK_VARS)
    assert result['finished'] is True
    sent = [call.kwargs['module_args'] for call in execute.call_args_list]
    assert [args.get('resume', {}).get('read_offset') for args in sent] == [None, 400, 400, 800]
    assert lines(shown)[1] == 'node1: connection lost (Connection reset by peer); retry 1/10 in 0s, the bench client keeps running'
    assert action._connection.reset.call_count == 1


def test_gives_up_as_unreachable_naming_the_point(shown):
    action = make_action(dict(ARGS, reconnect_delay=0, reconnect_retries=1))
    with mock.patch.object(action, '_execute_module', side_effect=AnsibleConnectionFailure('no route to host')):
        result = action.run(task_vars=TASK_VARS)
    assert result['unreachable'] is True
    assert result['msg'].startswith('lost the connection to node1 2 times in a row while waiting for point c64 '
                                    '(last error: no route to host). The bench client may still be running')


def test_a_failed_point_is_returned_as_is(shown):
    action = make_action(dict(ARGS))
    failed = {'failed': True, 'finished': True, 'aborted': True, 'msg': 'worker died during point c64 on node1 ...'}
    with mock.patch.object(action, '_execute_module', side_effect=[running(3, 30.0, 25), failed]):
        result = action.run(task_vars=TASK_VARS)
    assert result['failed'] is True and result['msg'].startswith('worker died during point c64')
    assert len(lines(shown)) == 1


@pytest.mark.parametrize('args, expected', [
    ({'progress_interval': 61}, 'progress_interval must be between 1 and 60 seconds'),
    ({'bogus': 1}, 'bogus'),
])
def test_bad_options_fail_on_the_controller(shown, args, expected):
    action = make_action(dict(ARGS, **args))
    with mock.patch.object(action, '_execute_module') as execute:
        with pytest.raises(AnsibleActionFail) as error:
            action.run(task_vars=TASK_VARS)
    assert expected in str(error.value)
    execute.assert_not_called()


def test_real_module_slices_follow_a_growing_bench_log(shown, tmp_path, clock, monkeypatch):
    """Slices of the real module, on one fake clock with the controller, against a bench log that grows for 6.5 s:
    progress lines, then the point ends."""
    with open(FIXTURE, 'rb') as handle:
        data = handle.read()
    log, exit_file = tmp_path / 'bench-c4.log', tmp_path / 'mix_c4.exit'
    cuts = [data.index(b'Starting warmup'), data.index(b'\r 25%'), data.index(b'\r 62%')]

    def client_finishes():
        log.write_bytes(data)
        exit_file.write_text('0\n')

    # Each part of the log stays for two slices of 1 s; the client exits half way through the seventh.
    log.write_bytes(data[:cuts[0]])
    clock.after(2, functools.partial(log.write_bytes, data[:cuts[1]]))
    clock.after(4, functools.partial(log.write_bytes, data[:cuts[2]]))
    clock.after(6.5, client_finishes)
    monkeypatch.setattr(bench_module, 'wait_for_point', functools.partial(
        _bench_wait.wait_for_point, clock=clock.time, sleep=clock.sleep, in_background=clock.in_background))

    def execute_on_node(module_name, module_args, task_vars):
        kind, result, _warnings = run_module(bench_module.main, dict(module_args, poll_interval=0.05))
        return result if kind == 'exit' else dict(result, failed=True)

    action = make_action({'exit_file': str(exit_file), 'log_path': str(log), 'conc': 4, 'label': 'point 1/1 c4 nodp',
                          'progress_interval': 1}, clock=clock)
    with mock.patch.object(action, '_execute_module', side_effect=execute_on_node):
        result = action.run(task_vars=TASK_VARS)
    assert result['finished'] is True and result['rc'] == 0
    assert result['progress']['stage'] == 'results'
    shown_lines = lines(shown)
    # One line a progress interval (1 s): after each of the six slices before the point ended.
    assert clock.now == 6.5
    assert len(shown_lines) == 6
    assert all(line.startswith('node1: point 1/1 c4 nodp: ') for line in shown_lines)
    completed = [int(line.split(' main ')[1].split('/')[0]) for line in shown_lines if ' main ' in line]
    assert completed == sorted(completed) and completed[-1] > completed[0]
