# SPDX-License-Identifier: Apache-2.0
"""The sglang_ready action plugin: slices, progress lines, reconnects."""

from __future__ import annotations

import functools
from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure

from ansible_collections.infera.serving.plugins.action import sglang_ready as action_plugin
from ansible_collections.infera.serving.plugins.module_utils import _readiness
from ansible_collections.infera.serving.plugins.modules import sglang_ready as ready_module
from ansible_collections.infera.serving.plugins.plugin_utils import _sliced_wait

from ..modules.utils import run_module
from . import harness

TASK_VARS = {'inventory_hostname': 'node1'}


def make_action(args, check_mode=False, clock=None):
    """The action for a task with args; with clock (a FakeClock), the controller's time is that clock's."""
    action = harness.make_action(action_plugin, 'infera.serving.sglang_ready', args, check_mode)
    if clock is not None:
        action._clock, action._sleep = clock.monotonic, clock.sleep
    return action


def progress(phase, done=0, total=0, bs=None, elapsed=0.0, log_bytes=0):
    return {'ready': False, 'changed': False, 'phase': phase, 'elapsed': elapsed, 'log_bytes': log_bytes,
            'graph_progress': {'done': done, 'total': total, 'bs': bs}}


READY = {'ready': True, 'changed': False, 'phase': 'ready', 'elapsed': 1805.0, 'log_bytes': 9000,
         'graph_progress': {'done': 20, 'total': 20, 'bs': 1}}


@pytest.fixture
def shown():
    with mock.patch.object(_sliced_wait.display, 'display') as display:
        yield display


def lines(display):
    return [call.args[0] for call in display.call_args_list]


def test_slices_print_progress_and_return_the_ready_result(shown):
    action = make_action({'log_path': '/var/log/sglang/engine.log', 'health_url': 'http://127.0.0.1:30000/health'})
    slices = [progress('loading_weights', elapsed=30.2, log_bytes=2048),
              progress('capturing_cuda_graph', 7, 20, 64, elapsed=751.9, log_bytes=7168),
              dict(READY)]
    with mock.patch.object(action, '_execute_module', side_effect=slices) as execute:
        result = action.run(task_vars=TASK_VARS)
    assert result['ready'] is True
    assert lines(shown) == [
        'node1: loading_weights graph 0/? (bs=-) elapsed 00:30, log +2048',
        'node1: capturing_cuda_graph graph 7/20 (bs=64) elapsed 12:31, log +5120',
    ]
    for call in execute.call_args_list:
        assert call.kwargs['module_name'] == 'infera.serving.sglang_ready'
        sent = call.kwargs['module_args']
        assert sent['max_wait'] == 30
        assert sent['node'] == 'node1'
        assert sent['state_file'] == '/var/log/sglang/engine.log.ready-state.json'
        assert sent['health_url'] == 'http://127.0.0.1:30000/health'
        assert not {'progress_interval', 'reconnect_retries', 'reconnect_delay'} & set(sent)


def test_a_simulated_cold_start_is_named_on_every_progress_line(shown):
    action = make_action({'log_path': '/l/engine.log', 'simulated': True})
    slices = [progress('loading_weights', elapsed=30.2, log_bytes=2048),
              progress('capturing_cuda_graph', 7, 20, 64, elapsed=751.9, log_bytes=7168), dict(READY)]
    with mock.patch.object(action, '_execute_module', side_effect=slices) as execute:
        action.run(task_vars=TASK_VARS)
    assert lines(shown) == [
        'node1: [SIMULATED engine] loading_weights graph 0/? (bs=-) elapsed 00:30, log +2048',
        'node1: [SIMULATED engine] capturing_cuda_graph graph 7/20 (bs=64) elapsed 12:31, log +5120',
    ]
    assert all('simulated' not in call.kwargs['module_args'] for call in execute.call_args_list)


def test_a_dropped_connection_is_retried_and_the_wait_resumes(shown):
    action = make_action({'log_path': '/l/engine.log', 'reconnect_delay': 0, 'progress_interval': 20})
    slices = [progress('capturing_cuda_graph', 3, 20, 96, elapsed=600),
              AnsibleConnectionFailure('Failed to connect to the host via ssh: Connection reset by peer'),
              {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: Connection timed out'},
              progress('capturing_cuda_graph', 9, 20, 48, elapsed=700),
              dict(READY)]
    with mock.patch.object(action, '_execute_module', side_effect=slices) as execute:
        result = action.run(task_vars=TASK_VARS)
    assert result['ready'] is True
    assert execute.call_count == 5
    assert {call.kwargs['module_args']['state_file'] for call in execute.call_args_list} == {
        '/l/engine.log.ready-state.json'}
    assert all(call.kwargs['module_args']['max_wait'] == 20 for call in execute.call_args_list)
    assert action._connection.reset.call_count == 2
    shown_lines = lines(shown)
    assert shown_lines[1] == ('node1: connection lost (Failed to connect to the host via ssh: Connection reset by '
                              'peer); retry 1/10 in 0s from /l/engine.log.ready-state.json, the engine keeps running')
    assert shown_lines[2].startswith('node1: connection lost (Failed to connect to the host via ssh: Connection '
                                     'timed out); retry 2/10')
    assert shown_lines[3] == 'node1: capturing_cuda_graph graph 9/20 (bs=48) elapsed 11:40, log +0'


def test_gives_up_as_unreachable_after_the_retries(shown):
    action = make_action({'log_path': '/l/engine.log', 'reconnect_delay': 0, 'reconnect_retries': 2})
    with mock.patch.object(action, '_execute_module', side_effect=AnsibleConnectionFailure('no route to host')):
        result = action.run(task_vars=TASK_VARS)
    assert result['unreachable'] is True
    assert result['msg'] == ('lost the connection to node1 3 times in a row while waiting for the SGLang engine '
                             '(last error: no route to host). The engine keeps starting on its own; run the task '
                             'again to resume from /l/engine.log.ready-state.json.')


def test_retry_count_is_per_outage_not_per_task(shown):
    action = make_action({'log_path': '/l/engine.log', 'reconnect_delay': 0, 'reconnect_retries': 1})
    lost = AnsibleConnectionFailure('reset')
    slices = [lost, progress('launching'), lost, progress('loading_weights'), lost, dict(READY)]
    with mock.patch.object(action, '_execute_module', side_effect=slices):
        assert action.run(task_vars=TASK_VARS)['ready'] is True


def test_module_failure_is_returned_as_is(shown):
    action = make_action({'log_path': '/l/engine.log'})
    failed = {'failed': True, 'ready': False, 'phase': 'failed', 'msg': 'SGLang engine on node1 failed ...'}
    with mock.patch.object(action, '_execute_module', side_effect=[progress('loading_weights'), failed]):
        result = action.run(task_vars=TASK_VARS)
    assert result['failed'] is True
    assert result['msg'] == 'SGLang engine on node1 failed ...'


def test_overall_max_wait_returns_not_ready(shown, clock):
    action = make_action({'log_path': '/l/engine.log', 'max_wait': 0.05}, clock=clock)

    def slow_slice(**_kwargs):
        clock.sleep(0.03)  # the slice takes 0.03 s of the controller's clock
        return progress('capturing_cuda_graph', 1, 20, 128)

    with mock.patch.object(action, '_execute_module', side_effect=slow_slice) as execute:
        result = action.run(task_vars=TASK_VARS)
    assert result['ready'] is False
    assert 'failed' not in result
    assert execute.call_count == 2
    assert execute.call_args_list[0].kwargs['module_args']['max_wait'] == 1


def test_explicit_node_and_state_file_are_kept(shown):
    action = make_action({'log_path': '/l/engine.log', 'node': 'gpu-07', 'state_file': '/tmp/s.json'})
    with mock.patch.object(action, '_execute_module', return_value=dict(READY)) as execute:
        action.run(task_vars=TASK_VARS)
    sent = execute.call_args.kwargs['module_args']
    assert (sent['node'], sent['state_file']) == ('gpu-07', '/tmp/s.json')


@pytest.mark.parametrize('args, expected', [
    ({'progress_interval': 90}, 'progress_interval must be between 1 and 60 seconds'),
    ({'progress_interval': 0}, 'progress_interval must be between 1 and 60 seconds'),
    ({'reconnect_retries': -1}, 'reconnect_retries must be 0 or more'),
    ({'stall_timeout': 'soon'}, 'stall_timeout'),
    ({'bogus': 1}, 'bogus'),
])
def test_bad_options_fail_on_the_controller(shown, args, expected):
    action = make_action(dict({'log_path': '/l/engine.log'}, **args))
    with mock.patch.object(action, '_execute_module') as execute:
        with pytest.raises(AnsibleActionFail) as error:
            action.run(task_vars=TASK_VARS)
    assert expected in str(error.value)
    execute.assert_not_called()


def test_real_module_slices_share_the_state_file(shown, tmp_path, clock, monkeypatch):
    """Slices of the real module, on one fake clock with the controller, against a log that grows for 2.7 s:
    progress lines, then ready."""
    log = tmp_path / 'engine.log'
    steps = ['Load weight begin', 'Load weight end. elapsed=1.0 s', 'Capture cuda graph begin'] + [
        'Capturing batches (bs=%d avail_mem=9GB): %d/4' % (bs, k) for k, bs in enumerate((8, 4, 2, 1), 1)] + [
        'Capture cuda graph end', 'The server is fired up and ready to roll!']

    def engine_logs(step):
        with open(log, 'a') as handle:
            handle.write(step + '\n')

    for number, step in enumerate(steps, 1):
        clock.after(0.3 * number, functools.partial(engine_logs, step))
    monkeypatch.setattr(ready_module, 'wait_until_ready',
                        functools.partial(_readiness.wait_until_ready, clock=clock.time, sleep=clock.sleep))

    def execute_on_node(module_name, module_args, task_vars):
        kind, result, _warnings = run_module(ready_module.main, dict(module_args, poll_interval=0.05))
        return result if kind == 'exit' else dict(result, failed=True)

    action = make_action({'log_path': str(log), 'progress_interval': 1}, clock=clock)
    with mock.patch.object(action, '_execute_module', side_effect=execute_on_node):
        result = action.run(task_vars=TASK_VARS)
    assert result['ready'] is True
    assert list(result['phases'])[-1] == 'ready'
    shown_lines = lines(shown)
    # One line a progress interval (1 s): after the first and the second slice; the third is ready at 2.7 s.
    assert clock.now == 2.7
    assert len(shown_lines) == 2
    assert all(line.startswith('node1: ') for line in shown_lines)
    assert any('capturing_cuda_graph graph' in line for line in shown_lines)
