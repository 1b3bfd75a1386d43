# SPDX-License-Identifier: Apache-2.0
"""The words of a failed wait: durations, what was stopped, and where the engine log's tail goes."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _bench_wait, _readiness, _remediation
from ansible_collections.infera.serving.plugins.module_utils._remediation import format_duration, seconds


def bench_options(**overrides):
    params = {name: spec.get('default') for name, spec in _bench_wait.ARGUMENT_SPEC.items()}
    params.update(exit_file='/results/bench-c64.exit', log_path='/results/bench-c64.log',
                  engine_exit_file='/run/engine-7.exit', node='node3', conc=64)
    params.update(overrides)
    return _bench_wait._Options(params)


def engine_died(options, engine_tail):
    result = {'cause': 'the engine exit file /run/engine-7.exit appeared (code 137)', 'killed_pids': [],
              'log_tail': ['Starting warmup with 128 sequences...']}
    return _remediation.point_failure_message(options, 'engine_exited', 137, result, 12.0, [], engine_tail)


@pytest.mark.parametrize('kill_match, killed, denied, expected', [
    ('mix_c64', [], [41, 42], 'the bench processes 41, 42 could not be stopped (permission denied): run this task with '
                              'become, and stop them by hand before the next point; the partial point was discarded'),
    ('mix_c64', [41, 42], [], 'the bench client was stopped (pids 41, 42) and the partial point was discarded'),
    ('mix_c64', [], [], "no bench process matched 'mix_c64', so none was stopped; the partial point was discarded"),
    (None, [], [], 'the bench client was not stopped (no kill_match given), so stop it by hand before the next point; '
                   'the partial point was discarded'),
])
def test_what_was_stopped_is_said_in_full(kill_match, killed, denied, expected):
    options = bench_options(kill_match=kill_match)
    assert _remediation._stopped(options, killed, denied) == expected


@pytest.mark.parametrize('seconds_, text', [(0, '00:00'), (59.9, '00:59'), (61, '01:01'), (2700, '45:00'), (-3, '00:00')])
def test_format_duration(seconds_, text):
    assert format_duration(seconds_) == text


@pytest.mark.parametrize('value, whole_from, text', [
    (900.4, 10, '900'),
    (12.5, 10, '12'),
    (0.6, 10, '0.6'),
    (5.0, 10, '5'),
    (12.5, None, '12.5'),
    (1.0, None, '1'),
])
def test_seconds_as_a_person_reads_them(value, whole_from, text):
    assert seconds(value, whole_from) == text


def test_seconds_drop_the_fraction_from_10_by_default():
    assert (seconds(9.5), seconds(10.5)) == ('9.5', '10')


def test_a_dead_worker_shows_the_engine_log_tail_before_the_bench_log():
    message = engine_died(bench_options(engine_log='/logs/engine-7.log'), ['Traceback (most recent call last):',
                                                                           'torch.OutOfMemoryError: HIP out of memory'])
    assert message.splitlines()[1:] == [
        'Last 2 lines of /logs/engine-7.log:',
        'Traceback (most recent call last):',
        'torch.OutOfMemoryError: HIP out of memory',
        'Last line of /results/bench-c64.log:',
        'Starting warmup with 128 sequences...',
    ]
    assert 'read the engine log /logs/engine-7.log and redeploy' in message.splitlines()[0]


def test_an_empty_engine_log_is_said_to_be_empty():
    message = engine_died(bench_options(engine_log='/logs/engine-7.log'), [])
    assert message.splitlines()[1] == '(no lines in /logs/engine-7.log)'


def test_without_engine_log_the_message_says_none_was_given():
    message = engine_died(bench_options(), None)
    assert message.splitlines()[1] == '(no engine log was given: set engine_log to show its last lines here)'
    assert 'the engine log (engine.log in the sglang_worker log dir)' in message.splitlines()[0]


def test_a_point_that_only_ran_out_of_time_shows_no_engine_log():
    result = {'cause': 'the bench exit file /results/bench-c64.exit did not appear within 3600 s', 'killed_pids': [],
              'log_tail': []}
    message = _remediation.point_failure_message(bench_options(engine_log='/logs/engine-7.log'), 'deadline', None,
                                                 result, 3600.0, [])
    assert 'engine-7.log:' not in message
    assert 'no engine log' not in message
    assert message.endswith('\n(no lines in /results/bench-c64.log)')


@pytest.mark.parametrize('kind, detail, overrides, expected', [
    ('done', None, {}, 'the exit file /results/bench-c64.exit appeared but holds no exit code'),
    ('engine_exited', 137, {}, 'the engine exit file /run/engine-7.exit appeared (code 137)'),
    ('engine_exited', None, {}, 'the engine exit file /run/engine-7.exit appeared (no code in it)'),
    # A health interval keeps its fraction even from 10 s up: it is what the user set.
    ('unhealthy', 503, {'engine_health_url': 'http://node3:30000/health', 'health_interval': 12.5},
     'the engine health URL http://node3:30000/health failed 3 checks in a row, 12.5 s apart (last: 503)'),
], ids=['no-exit-code', 'engine-exit-code', 'engine-exit-without-code', 'unhealthy'])
def test_each_cause_of_a_failed_point_in_full(kind, detail, overrides, expected):
    assert _remediation.point_cause(bench_options(**overrides), kind, detail) == expected


def readiness_options(**overrides):
    params = {name: spec.get('default') for name, spec in _readiness.ARGUMENT_SPEC.items()}
    params.update(log_path='/srv/sglang/logs/engine.log', health_url='http://127.0.0.1:30000/health', node='node7')
    params.update(overrides)
    return _readiness._Options(params)


INSPECT = 'inspect /srv/sglang/logs/engine.log'
# What a readiness wait saw of the registration: before the wrapper logged it, and once it did (then the router is asked).
NOT_REGISTERED = {'listed': None, 'error': None, 'logged': None}
REGISTERED = {'listed': None, 'error': None,
              'logged': 'INFO:infera.common.registration:registered with etcd as worker 10.0.0.7:30000 (lease=76)'}
CAPTURE = ('capture can look like a hang: check for progress with du -sh %s on node7, then raise stall_timeout or '
           'lower --cuda-graph-max-bs to capture fewer graphs; ' + INSPECT)
STORAGE = ('check that the model storage is mounted and being read on node7 (the HF cache bind mount, iostat); '
           'raise stall_timeout if it is only slow; ' + INSPECT)


@pytest.mark.parametrize('state, watch_dirs, expected', [
    ({'log_size_seen': None}, [],
     'check that the launch wrapper started the engine (docker ps / docker logs on node7) and that log_path is the '
     'host-side path of the mounted log'),
    ({'stage': 'registering', 'ready_line_seen': True, 'registration': NOT_REGISTERED}, [],
     'check that the wrapper still runs (ps -ef in the worker container on node7) and that etcd answers at its '
     '--etcd-endpoint, and look for a lease error or a traceback after the ready line in /srv/sglang/logs/engine.log'),
    ({'stage': 'registering', 'ready_line_seen': True,
      'registration': dict(REGISTERED, listed=[])}, [],
     'check that the worker and the router use the same etcd endpoint and prefix and the same plane flags '
     '(--discovery-backend, --request-transport), and look for "registered with etcd as worker" or a lease error in '
     '/srv/sglang/logs/engine.log'),
    ({'stage': 'graph_captured', 'ready_line_seen': True}, [],
     'check that health_url matches the engine host and port (curl -v http://127.0.0.1:30000/health on node7)'),
    ({'stage': 'capturing_cuda_graph'}, ['/jit/aiter', '/jit/triton'], CAPTURE % '/jit/aiter /jit/triton'),
    ({'stage': 'capturing_cuda_graph'}, [],
     CAPTURE % '/sgl-workspace/aiter/aiter/jit (or wherever the JIT cache is mounted)'),
    ({'stage': 'launching'}, [], STORAGE),
    ({'stage': 'loading_weights'}, [], STORAGE),
    ({'stage': 'weights_loaded'}, [], INSPECT),
], ids=['no-log', 'registration-not-logged', 'registering', 'ready-line-but-no-health', 'capture-watched',
        'capture-unwatched', 'launching',
        'loading-weights', 'weights-loaded'])
def test_what_to_do_after_each_stall_is_said_in_full(state, watch_dirs, expected):
    stalled = dict({'log_size_seen': 4096, 'stage': 'launching', 'ready_line_seen': False}, **state)
    options = readiness_options(watch_dirs=watch_dirs)
    assert _remediation._readiness_next_step(options, stalled, 'stalled', None) == expected


@pytest.mark.parametrize('kind, detail, overrides, expected', [
    ('done', None, {'log_path': None},
     'make the wrapper write the exit code into its exit file in one step (a temporary file, then a rename), and see '
     'the bench log for how the client ended'),
    ('done', 1, {'engine_log': '/logs/engine-7.log'},
     'see /results/bench-c64.log for the first error of the client (the tail is below), then check that the router '
     'and the engine answer, and read the engine log /logs/engine-7.log'),
    ('deadline', None, {'kill_match': 'mix_c64'},
     'check in the engine log (engine.log in the sglang_worker log dir) that the engine still makes progress, then '
     'raise deadline or lower --num-prompts for this concurrency; the bench client was stopped (pids 41) and the '
     'partial point was discarded'),
], ids=['no-exit-code', 'client-failed', 'deadline'])
def test_what_to_do_after_a_failed_point_is_said_in_full(kind, detail, overrides, expected):
    assert _remediation._point_next_step(bench_options(**overrides), kind, detail, [41], []) == expected


def test_a_client_without_an_exit_code_is_named_in_the_headline():
    assert _remediation._headline(bench_options(), 'done', None) == 'the bench client of point c64 left no exit code'


ROUTER = dict(workers_url='http://10.0.0.5:8080/v1/workers', worker_id='10.0.0.7:30000')


def readiness_state(**overrides):
    """What a readiness wait saw, 27:05 into a launch that has made no progress for 905 s (now is 1725)."""
    state = {'started_at': 100.0, 'last_progress_at': 820.0, 'log_size_seen': 4096, 'stage': 'loading_weights',
             'ready_line_seen': False, 'graph': {'done': 0, 'total': 0, 'bs': None}, 'fatal': None,
             'health': {'status': None, 'error': None}, 'registration': dict(NOT_REGISTERED)}
    state.update(overrides)
    return state


OOM_LINE = 'torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB'
PID_GONE = {'code': None, 'how': 'process 4242 from /run/engine.pid is gone'}


@pytest.mark.parametrize('kind, state, exited, overrides, expected', [
    ('failed', {'fatal': {'pattern': 'OutOfMemoryError', 'line': OOM_LINE, 'stage': 'capturing_cuda_graph'}}, None, {},
     "log line matched 'OutOfMemoryError': " + OOM_LINE),
    ('failed', {'fatal': {'pattern': 'OutOfMemoryError', 'line': OOM_LINE, 'stage': 'capturing_cuda_graph'}},
     PID_GONE, {},
     "log line matched 'OutOfMemoryError': " + OOM_LINE + '; then the engine exited (process 4242 from '
     '/run/engine.pid is gone)'),
    ('exited', {}, {'code': 137, 'how': 'exit file /run/engine.exit appeared (code 137)'}, {},
     'the engine process exited: exit file /run/engine.exit appeared (code 137)'),
    ('timed_out', {}, None, {'deadline': 1500.0}, 'not ready 27:05 after the start (deadline 1500 s)'),
    ('stalled', {'log_size_seen': None}, None, {},
     'the log /srv/sglang/logs/engine.log has not appeared for 905 s'),
    ('stalled', {'stage': 'registering', 'ready_line_seen': True,
                 'registration': NOT_REGISTERED}, None, ROUTER,
     'the engine is ready but Infera\'s wrapper has not logged its registration of worker 10.0.0.7:30000 for 905 s '
     '(no "registered with etcd as worker 10.0.0.7:30000" line in /srv/sglang/logs/engine.log)'),
    ('stalled', {'stage': 'registering', 'ready_line_seen': True,
                 'registration': dict(REGISTERED, error='<urlopen error [Errno 111] Connection refused>')},
     None, ROUTER,
     'the engine is ready and Infera\'s wrapper registered it, but the router (http://10.0.0.5:8080/v1/workers) has '
     'not listed worker 10.0.0.7:30000 for 905 s (<urlopen error [Errno 111] Connection refused>)'),
    ('stalled', {'stage': 'registering', 'ready_line_seen': True,
                 'registration': dict(REGISTERED, listed=['10.0.0.8:30000', '10.0.0.9:30000'])}, None, ROUTER,
     'the engine is ready and Infera\'s wrapper registered it, but the router (http://10.0.0.5:8080/v1/workers) has '
     'not listed worker 10.0.0.7:30000 for 905 s (it lists 10.0.0.8:30000, 10.0.0.9:30000)'),
    ('stalled', {'stage': 'registering', 'ready_line_seen': True,
                 'registration': dict(REGISTERED, listed=[])}, None, ROUTER,
     'the engine is ready and Infera\'s wrapper registered it, but the router (http://10.0.0.5:8080/v1/workers) has '
     'not listed worker 10.0.0.7:30000 for 905 s (it lists no worker)'),
    ('stalled', {'stage': 'graph_captured', 'ready_line_seen': True, 'health': {'status': 503, 'error': None}},
     None, {},
     'the ready line was logged but http://127.0.0.1:30000/health has not answered 200 for 905 s (last: 503)'),
    ('stalled', {'stage': 'graph_captured', 'ready_line_seen': True,
                 'health': {'status': None, 'error': '<urlopen error [Errno 111] Connection refused>'}}, None, {},
     'the ready line was logged but http://127.0.0.1:30000/health has not answered 200 for 905 s '
     '(last: <urlopen error [Errno 111] Connection refused>)'),
    ('stalled', {'stage': 'capturing_cuda_graph'}, None, {'watch_dirs': ['/jit/aiter', '/jit/triton']},
     'no new log output from the engine and no change in /jit/aiter, /jit/triton for 905 s (stall_timeout 900 s; '
     'the wrapper\'s "waiting for SGLang HTTP" lines do not count)'),
    ('stalled', {}, None, {}, 'no new log output from the engine for 905 s (stall_timeout 900 s; the wrapper\'s '
     '"waiting for SGLang HTTP" lines do not count)'),
], ids=['fatal-line', 'fatal-line-then-exit', 'exited', 'timed-out', 'no-log', 'registration-not-logged',
        'router-unreachable',
        'router-lists-others', 'router-lists-none', 'health-status', 'health-error', 'stalled-watched', 'stalled'])
def test_each_cause_of_a_failed_readiness_wait_in_full(kind, state, exited, overrides, expected):
    options = readiness_options(**overrides)
    assert _remediation.readiness_cause(options, readiness_state(**state), 1725.0, kind, exited) == expected


GPU_FAULT = ('check the GPUs on node7 (rocm-smi, dmesg); a GPU reset or draining the node may be needed before a '
             'restart; ' + INSPECT)


@pytest.mark.parametrize('line, stage, expected', [
    (OOM_LINE, 'launching',
     'lower --mem-fraction-static and check that nothing else holds GPU memory (rocm-smi --showpids on node7), then '
     'restart the worker'),
    (OOM_LINE, 'loading_weights',
     'lower --mem-fraction-static and check that nothing else holds GPU memory (rocm-smi --showpids on node7), then '
     'restart the worker'),
    ('RuntimeError: Capture cuda graph failed: HIP out of memory', 'capturing_cuda_graph',
     'lower --cuda-graph-max-bs or --mem-fraction-static in the recipe, then restart the worker'),
    (':0:rocdevice.cpp:3020: Callback: Queue aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION',
     'capturing_cuda_graph', GPU_FAULT),
    ('Memory access fault by GPU node-2 (Agent handle: 0x5a1b) on address 0x7f00. Reason: Unknown.', 'ready',
     GPU_FAULT),
    ('launch_server.py: error: unrecognized arguments: --cuda-graph-bs-max 64', 'launching',
     "check the flag against the recipe and against the engine's --help inside the image"),
    ('Scheduler hit an exception: Traceback (most recent call last):', 'weights_loaded',
     'read the traceback that follows this line in the log tail below; ' + INSPECT),
    ('Received sigquit from a child process. It usually means the child failed.', 'loading_weights',
     'a child process died: find the first error above this line in the log tail below; ' + INSPECT),
    ('NCCL error: unhandled system error', 'loading_weights', INSPECT),
], ids=['oom-launching', 'oom-loading-weights', 'oom-capturing', 'hsa-error', 'gpu-fault', 'bad-flag', 'scheduler',
        'sigquit', 'custom-pattern'])
def test_what_to_do_after_each_fatal_line_is_said_in_full(line, stage, expected):
    state = readiness_state(fatal={'pattern': 'x', 'line': line, 'stage': stage})
    assert _remediation._readiness_next_step(readiness_options(), state, 'failed', None) == expected


def test_what_to_do_after_the_deadline_is_said_in_full():
    assert _remediation._readiness_next_step(readiness_options(), readiness_state(), 'timed_out', None) == (
        'if the log or the watch dirs still move, raise deadline (cold start with cuda-graph capture takes ~30 min on '
        '8xMI355X); to start faster lower --cuda-graph-max-bs; ' + INSPECT)


def test_a_failed_readiness_wait_is_told_in_full(monkeypatch):
    monkeypatch.setattr('socket.gethostname', lambda: 'gpu-host-3')
    state = readiness_state(stage='capturing_cuda_graph', graph={'done': 7, 'total': 20, 'bs': 64},
                            fatal={'pattern': 'OutOfMemoryError', 'line': OOM_LINE, 'stage': 'capturing_cuda_graph'})
    result = {'stage': 'capturing_cuda_graph', 'cause': "log line matched 'OutOfMemoryError': " + OOM_LINE,
              'log_tail': ['Capturing batches (bs=64 avail_mem=1.2 GB): 7/20', OOM_LINE]}
    message = _remediation.readiness_failure_message(readiness_options(), state, 1725.0, 'failed', None, result)
    assert message.splitlines() == [
        'SGLang engine on node7 (host gpu-host-3) failed during stage capturing_cuda_graph (graph 7/20, bs=64), 27:05 '
        "after the start. Cause: log line matched 'OutOfMemoryError': " + OOM_LINE + '. Next step: lower '
        '--cuda-graph-max-bs or --mem-fraction-static in the recipe, then restart the worker.',
        'Last 2 lines of /srv/sglang/logs/engine.log:',
        'Capturing batches (bs=64 avail_mem=1.2 GB): 7/20',
        OOM_LINE,
    ]


def test_a_readiness_wait_on_the_machine_itself_before_any_graph_and_any_log_line(monkeypatch):
    monkeypatch.setattr('socket.gethostname', lambda: 'node7')
    state = readiness_state(log_size_seen=None, stage='launching')
    result = {'stage': 'launching', 'cause': 'the log /srv/sglang/logs/engine.log has not appeared for 905 s',
              'log_tail': []}
    message = _remediation.readiness_failure_message(readiness_options(node=None), state, 1725.0, 'stalled', None,
                                                     result)
    assert message == (
        'SGLang engine on node7 stalled during stage launching, 27:05 after the start. Cause: the log '
        '/srv/sglang/logs/engine.log has not appeared for 905 s. Next step: check that the launch wrapper started the '
        'engine (docker ps / docker logs on node7) and that log_path is the host-side path of the mounted log.\n'
        '(no log lines from /srv/sglang/logs/engine.log)')


def test_an_engine_stopped_by_the_wrapper_at_its_own_ready_limit_is_named_so(monkeypatch):
    """Infera v0.1.1's wrapper gives up after a fixed 1800 s, stops the engine and kills its own process group: the
    wait sees an exit, and the message names the wrapper's limit (its line: infera/engine/sglang/worker.py)."""
    monkeypatch.setattr('socket.gethostname', lambda: 'node7')
    tail = ['ERROR:__main__:engine failed to start; tearing down', 'TimeoutError: SGLang not ready after 1800s']
    exited = {'code': 143, 'how': 'exit file /srv/sglang/run/engine.exit appeared (code 143)'}
    state = readiness_state(stage='capturing_cuda_graph', started_at=0.0)
    cause = _remediation.readiness_cause(readiness_options(), state, 1805.0, 'exited', exited, tail)
    assert cause == ('Infera\'s wrapper gave up on the engine at its own ready limit ("SGLang not ready after 1800s", '
                     '30:05 after the start) and stopped it: the wrapper\'s limit, not this wait\'s deadline (2700 s), '
                     'ended the cold start')
    message = _remediation.readiness_failure_message(readiness_options(), state, 1805.0, 'exited', exited,
                                                     {'stage': 'capturing_cuda_graph', 'cause': cause,
                                                      'log_tail': tail})
    assert 'Next step: use an image whose Infera reads INFERA_ENGINE_READY_TIMEOUT (v0.2.0 and later' in message
    assert message.endswith(tail[-1])
    # Without the wrapper's line, an exit is an exit.
    assert _remediation.readiness_cause(readiness_options(), state, 1805.0, 'exited', exited, tail[:1]) == \
        'the engine process exited: ' + exited['how']
