# SPDX-License-Identifier: Apache-2.0
"""Readiness waiting against real files and a real local health server, on a fake clock: the engine's log lines,
exit files and health answers come between the wait's polls, at the fake times the test plans."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _node_files, _readiness
from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._readiness import (
    ARGUMENT_SPEC,
    DEFAULT_FATAL_PATTERNS,
    progress_line,
    wait_until_ready,
)

from .health_server import HealthServer

READY = 'The server is fired up and ready to roll!'
LAUNCH = [
    '[2025-11-29 10:00:00] server_args=ServerArgs(model_path=/models/DeepSeek-V4-Pro, tp_size=8)',
    '[2025-11-29 10:00:03 TP0] Load weight begin. avail mem=287.11 GB',
    '[2025-11-29 10:03:00 TP0] Load weight end. elapsed=176.93 s, type=DeepseekV4ForCausalLM, avail mem=101.20 GB',
    '[2025-11-29 10:03:01 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, '
    'bs=[1, 64, 128], avail mem=98.00 GB',
    'Capturing batches (bs=128 avail_mem=97.10 GB):  33%|███▎      | 1/3 [05:00<10:00, 300.00s/it]',
    'Capturing batches (bs=64 avail_mem=96.90 GB):  67%|██████▋   | 2/3 [10:00<05:00, 300.00s/it]',
    'Capturing batches (bs=1 avail_mem=96.80 GB): 100%|██████████| 3/3 [17:00<00:00, 340.00s/it]',
    '[2025-11-29 10:20:00 TP0] Capture target decode CUDA graph end. elapsed=1019.20 s, mem usage=1.20 GB, '
    'avail mem=96.80 GB.',
    '[2025-11-29 10:20:05] INFO:     Uvicorn running on http://0.0.0.0:30000',
    '[2025-11-29 10:20:09] ' + READY,
]

# Infera's wrapper, once it has put its record in etcd (infera/common/registration.py).
REGISTERED = ('INFO:infera.common.registration:registered with etcd as worker %s (lease=7668682686337768167, ttl=30s, '
              'engine=EngineType.SGLANG, disagg=DisaggMode.MIXED)')

# One line per default fatal pattern, as the engine would print it.
FATAL_LINES = {
    'Capture cuda graph failed': 'Exception: Capture cuda graph failed: HIP error: out of resources',
    'out of memory': 'RuntimeError: HIP out of memory. Tried to allocate 2.00 GiB',
    'OutOfMemoryError': 'torch.OutOfMemoryError: HIP OOM while allocating the kv cache',
    'HSA_STATUS_ERROR': ':0:rocdevice.cpp:2984: Callback: Queue aborting with error : HSA_STATUS_ERROR_EXCEPTION',
    'Memory access fault by GPU': 'Memory access fault by GPU node-2 (Agent handle: 0x55d0) on address 0x7f. Reason: Page not present',
    'HW Exception by GPU': 'HW Exception by GPU node-2 (Agent handle: 0x55d0) reason :GPU Hang',
    'scheduler died during initialization': 'RuntimeError: Rank 0 scheduler died during initialization (exit code: -6). '
                                            'If exit code is -9 (SIGKILL), a common cause is the OS OOM killer.',
    'Scheduler hit an exception': '[TP3] Scheduler hit an exception: Traceback (most recent call last):',
    'Received sigquit': 'Received sigquit from a child process. It usually means the child failed.',
    'unrecognized arguments': 'launch_server.py: error: unrecognized arguments: --attention-backnd dsv4',
}


# ---------------------------------------------------------------- helpers

def lines(*texts, delay=0.02):
    return [(delay, text + '\n') for text in texts]


def engine_writes(clock, path, items, exit_file=None, exit_code=1):
    """Plan (delay, text) items, each delay after the one before, appended to path the way the engine writes its log.

    With exit_file, the exit code is written there 0.1 s after the last, as the launch wrapper does. Returns
    {text: when it was written}, filled in as the clock reaches each.
    """
    written = {}

    def append(text):
        with open(path, 'a') as handle:
            handle.write(text)
        written[text] = clock.now

    at = 0.0
    for delay, text in items:
        at += delay
        clock.after(at, lambda text=text: append(text))
    if exit_file:
        clock.after(at + 0.1, lambda: write_file(exit_file, '%d\n' % exit_code))
    return written


def write_file(path, text):
    with open(path, 'w') as handle:
        handle.write(text)


@pytest.fixture
def clock(clock, monkeypatch):
    # _node_files waits for the code in an exit file that has just appeared on the time module: on this clock too.
    monkeypatch.setattr(_node_files, 'time', clock)
    return clock


@pytest.fixture
def node(tmp_path, clock):
    """Paths of one launch on a fake node, and the wait on the test's clock."""
    class Node:
        log = str(tmp_path / 'engine.log')
        exit_file = str(tmp_path / 'engine.exit')
        state = str(tmp_path / 'engine.log.ready-state.json')
        jit = str(tmp_path / 'jit')

        @staticmethod
        def params(**overrides):
            params = {name: spec.get('default') for name, spec in ARGUMENT_SPEC.items()}
            params.update(log_path=Node.log, exit_file=Node.exit_file, poll_interval=0.1, node='node7',
                          stall_timeout=30, deadline=60)
            params.update(overrides)
            return params

        @staticmethod
        def write(text):
            with open(Node.log, 'a') as handle:
                handle.write(text)

        @staticmethod
        def wait(params):
            return wait_until_ready(params, clock.time, clock.sleep)

        @staticmethod
        def failure(params):
            with pytest.raises(WaitError) as error:
                Node.wait(params)
            return str(error.value), error.value.details

    return Node


# ---------------------------------------------------------------- ready

def test_log_bytes_count_a_line_written_between_the_stat_and_the_read(node, monkeypatch):
    # The engine writes its ready line just after the poll's stat: the read sees it, and log_bytes counts it.
    node.write(''.join(text for _delay, text in lines(*LAUNCH[:-1])))
    real_stat = os.stat

    def stat_then_write(path, *args, **kwargs):
        info = real_stat(path, *args, **kwargs)
        if path == node.log:
            with open(node.log) as handle:
                written = READY in handle.read()
            if not written:
                node.write(LAUNCH[-1] + '\n')
        return info
    monkeypatch.setattr(_readiness.os, 'stat', stat_then_write)
    with HealthServer() as health:
        result = node.wait(node.params(health_url=health.url))
    assert result['ready'] is True
    assert result['log_tail'][-1].endswith(READY)
    assert result['log_bytes'] == os.path.getsize(node.log)


def test_a_line_read_past_the_stat_is_growth_once(node, monkeypatch):
    # The same race, one poll at a time: the size seen follows the read, so the next poll finds nothing new.
    node.write(LAUNCH[0] + '\n')
    options = _readiness._Options(node.params())
    state = _readiness._fresh_state(options, 0.0)
    real_stat = os.stat
    late = [LAUNCH[1] + '\n']

    def stat_then_write(path, *args, **kwargs):
        info = real_stat(path, *args, **kwargs)
        if path == node.log and late:
            node.write(late.pop())
        return info
    monkeypatch.setattr(_readiness.os, 'stat', stat_then_write)
    assert _readiness._read_log(options, state, 0.1) is True
    assert state['log_size_seen'] == state['read_offset'] == os.path.getsize(node.log)
    assert state['stage'] == 'loading_weights'
    assert _readiness._read_log(options, state, 0.2) is False


def test_progressive_launch_becomes_ready_with_phases(node, clock):
    engine_writes(clock, node.log, lines(*LAUNCH))
    with HealthServer() as health:
        result = node.wait(node.params(health_url=health.url))
    assert result['ready'] is True
    assert result['phase'] == 'ready'
    assert result['health_status'] == 200
    assert list(result['phases']) == ['launching', 'loading_weights', 'weights_loaded', 'capturing_cuda_graph',
                                      'graph_captured', 'ready']
    assert result['worker_id'] is None and result['router_workers'] is None
    times = [entry['at'] for entry in result['phases'].values()]
    assert times == sorted(times)
    assert all(entry['since_start'] >= 0 for entry in result['phases'].values())
    assert result['phases']['weights_loaded']['reported_elapsed'] == 176.93
    assert result['graph_progress'] == {'done': 3, 'total': 3, 'bs': 1}
    assert result['log_tail'][-1].endswith(READY)
    assert result['log_bytes'] == os.path.getsize(node.log)
    assert os.path.exists(node.state)


def test_ready_waits_for_health_200(node, clock):
    node.write('\n'.join(LAUNCH) + '\n')
    with HealthServer(status=503) as health:
        clock.after(0.4, lambda: setattr(health, 'status', 200))
        result = node.wait(node.params(health_url=health.url))
    assert result['ready'] is True
    assert clock.now == 0.4


def test_ready_line_without_health_answer_is_not_ready(node):
    node.write('\n'.join(LAUNCH) + '\n')
    result = node.wait(node.params(health_url='http://127.0.0.1:9/health', max_wait=0.3))
    assert result['ready'] is False
    assert result['phase'] == 'graph_captured'
    assert result['health_status'] is None


def test_ready_waits_until_the_router_lists_the_worker(node, clock):
    node.write('\n'.join(LAUNCH + [REGISTERED % '10.0.0.5:30000']) + '\n')
    with HealthServer(workers=['10.0.0.9:30000']) as server:
        params = node.params(health_url=server.url, workers_url=server.workers_url, worker_id='10.0.0.5:30000')
        waiting = node.wait(dict(params, max_wait=0.1))
        clock.after(0.1, lambda: setattr(server, 'workers', ['10.0.0.9:30000', '10.0.0.5:30000']))
        result = node.wait(params)
    assert waiting['ready'] is False
    assert waiting['phase'] == 'registering'
    assert waiting['router_workers'] == ['10.0.0.9:30000']
    assert result['ready'] is True
    assert result['worker_id'] == '10.0.0.5:30000'
    assert result['registration_line'] == REGISTERED % '10.0.0.5:30000'
    assert list(result['phases'])[-2:] == ['registering', 'ready']


def test_a_record_the_router_lists_before_this_launch_registered_is_not_ready(node, clock):
    # A wrapper killed with SIGKILL leaves its record (same host:port) until its 30 s lease runs out; the router lists
    # it while the new launch comes up. Ready on that record, the play moved on and the router dropped the worker
    # when the old lease ran out, before the new wrapper registered (CI at 1e22424: 20 accuracy-smoke requests 503).
    node.write('\n'.join(LAUNCH + [REGISTERED % '10.0.0.6:30000']) + '\n')
    with HealthServer(workers=['10.0.0.5:30000']) as server:
        params = node.params(health_url=server.url, workers_url=server.workers_url, worker_id='10.0.0.5:30000')
        waiting = node.wait(dict(params, max_wait=0.1))
        asked = [path for path in server.paths if path == '/v1/workers']
        node.write('INFO:__main__:using etcd registration: endpoint=http://10.0.0.1:2379 prefix=/infera/workers/\n')
        clock.after(0.1, lambda: node.write(REGISTERED % '10.0.0.5:30000' + '\n'))
        result = node.wait(params)
    assert waiting['ready'] is False
    assert waiting['phase'] == 'registering'
    assert waiting['registration_line'] is None, 'another worker\'s registration is not this launch\'s'
    assert asked == [] and waiting['router_workers'] is None, 'the router is not asked before the wrapper registered'
    assert result['ready'] is True
    assert result['registration_line'] == REGISTERED % '10.0.0.5:30000'
    assert result['router_workers'] == ['10.0.0.5:30000']


def test_a_wrapper_that_never_registers_stalls_with_the_wrapper_named(node):
    node.write('\n'.join(LAUNCH) + '\n')
    with HealthServer(workers=['10.0.0.5:30000']) as server:
        message, details = node.failure(node.params(health_url=server.url, workers_url=server.workers_url,
                                                    worker_id='10.0.0.5:30000', stall_timeout=0.2))
    assert details['phase'] == 'stalled'
    assert details['stage'] == 'registering'
    assert "Infera's wrapper has not logged its registration of worker 10.0.0.5:30000" in message
    assert 'that etcd answers at its --etcd-endpoint' in message


def test_a_worker_the_router_never_lists_stalls_with_the_router_named(node):
    node.write('\n'.join(LAUNCH + [REGISTERED % '10.0.0.5:30000']) + '\n')
    with HealthServer(workers=[]) as server:
        message, details = node.failure(node.params(health_url=server.url, workers_url=server.workers_url,
                                                    worker_id='10.0.0.5:30000', stall_timeout=0.2))
    assert details['phase'] == 'stalled'
    assert details['stage'] == 'registering'
    assert 'has not listed worker 10.0.0.5:30000' in message
    assert server.workers_url in message
    assert 'same etcd endpoint' in message


def test_tqdm_progress_bar_is_parsed_and_shown_once(node):
    progress_bar = 'Capturing batches (bs=%d avail_mem=12.3 GB):  %d%%|███▌      | %d/20 [00:05<00:10,  1.2it/s]'
    node.write('[TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1], avail mem=1.00 GB\n')
    node.write(''.join('\r' + progress_bar % (64 - k, k * 5, k) for k in range(1, 8)))
    result = node.wait(node.params(max_wait=0.2))
    assert result['ready'] is False
    assert result['phase'] == 'capturing_cuda_graph'
    assert result['graph_progress'] == {'done': 7, 'total': 20, 'bs': 57}
    assert result['log_tail'] == ['[TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1], '
                                  'avail mem=1.00 GB', progress_bar % (57, 35, 7)]

    node.write('\r' + progress_bar % (56, 40, 8) + '\n[TP0] Capture target decode CUDA graph end. elapsed=30.10 s, '
               'mem usage=1.20 GB, avail mem=0.50 GB.\n')
    result = node.wait(node.params(max_wait=0.2))
    assert result['phase'] == 'graph_captured'
    assert result['graph_progress'] == {'done': 20, 'total': 20, 'bs': 56}
    assert result['log_tail'][-2:] == [progress_bar % (56, 40, 8), '[TP0] Capture target decode CUDA graph end. '
                                       'elapsed=30.10 s, mem usage=1.20 GB, avail mem=0.50 GB.']


def test_old_ready_line_before_log_offset_is_ignored(node):
    node.write('\n'.join(LAUNCH) + '\n')
    offset = os.path.getsize(node.log)
    node.write(LAUNCH[0] + '\n' + LAUNCH[1] + '\n')
    result = node.wait(node.params(log_offset=offset, max_wait=0.3))
    assert result['ready'] is False
    assert result['phase'] == 'loading_weights'
    assert READY not in '\n'.join(result['log_tail'])

    node.write('\n'.join(LAUNCH[2:]) + '\n')
    result = node.wait(node.params(log_offset=offset))
    assert result['ready'] is True


# ---------------------------------------------------------------- failures

@pytest.mark.parametrize('pattern', DEFAULT_FATAL_PATTERNS)
def test_each_fatal_pattern_fails_fast_with_stage_and_tail(node, clock, pattern):
    line = FATAL_LINES[pattern]
    written = engine_writes(clock, node.log, lines(*LAUNCH[:5]) + [(0.3, line + '\n')] + lines('more output after the error'),
                            exit_file=node.exit_file)
    message, details = node.failure(node.params())
    assert clock.now - written[line + '\n'] < 5
    assert details['phase'] == 'failed'
    assert details['stage'] == 'capturing_cuda_graph'
    assert details['ready'] is False
    assert line in details['cause']
    assert details['log_tail'][-2:] == [line, 'more output after the error']
    assert details['exit_code'] == 1
    first = message.splitlines()[0]
    assert first.startswith('SGLang engine on node7')
    assert 'failed during stage capturing_cuda_graph (graph 1/3, bs=128)' in first
    assert 'Next step: ' in first
    assert 'Last %d lines of %s:' % (len(details['log_tail']), node.log) in message
    assert message.splitlines()[-len(details['log_tail']):] == details['log_tail']


@pytest.mark.parametrize('line, stage_lines, hint', [
    (FATAL_LINES['out of memory'], LAUNCH[:5], 'lower --cuda-graph-max-bs or --mem-fraction-static'),
    (FATAL_LINES['OutOfMemoryError'], LAUNCH[:2], 'lower --mem-fraction-static and check that nothing else holds'),
    (FATAL_LINES['unrecognized arguments'], LAUNCH[:1], 'check the flag against the recipe'),
    (FATAL_LINES['Memory access fault by GPU'], LAUNCH[:5], 'check the GPUs on node7'),
    (FATAL_LINES['Received sigquit'], LAUNCH[:5], 'a child process died: find the first error above this line'),
    (FATAL_LINES['Scheduler hit an exception'], LAUNCH[:2], 'read the traceback that follows this line'),
])
def test_fatal_next_step_fits_the_cause_and_stage(node, line, stage_lines, hint):
    node.write('\n'.join(stage_lines + [line]) + '\n')
    with open(node.exit_file, 'w') as handle:
        handle.write('1')
    message, _details = node.failure(node.params())
    assert hint in message.splitlines()[0]


def test_a_fatal_line_is_reported_at_the_stage_where_it_happened(node):
    # The engine logs on after the error and reaches a later stage; the failure is still the capture's.
    node.write('\n'.join(LAUNCH[:5] + [FATAL_LINES['out of memory']] + LAUNCH[7:]) + '\n')
    with open(node.exit_file, 'w') as handle:
        handle.write('1')
    message, details = node.failure(node.params())
    assert details['stage'] == 'capturing_cuda_graph'
    assert 'failed during stage capturing_cuda_graph' in message.splitlines()[0]


def test_a_fatal_line_waits_briefly_for_the_rest_of_the_error(node, clock):
    oom = ['Capture cuda graph failed: out of memory',
           'torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.',
           'Possible solutions:',
           '2. set --cuda-graph-max-bs to a smaller value (e.g., 16)']
    written = engine_writes(clock, node.log, lines(*LAUNCH[:5]) + [(0.2, oom[0] + '\n')] + lines(*oom[1:], delay=0.3))
    message, details = node.failure(node.params())
    assert clock.now - written[oom[0] + '\n'] < 5
    assert details['log_tail'][-4:] == oom
    assert details['cause'] == "log line matched 'Capture cuda graph failed': " + oom[0]
    assert message.endswith('\n'.join(oom))


def test_a_traceback_alone_is_not_fatal(node):
    node.write(LAUNCH[0] + '\nTraceback (most recent call last):\n  File "x.py", line 1\nValueError: retry\n')
    result = node.wait(node.params(max_wait=0.3))
    assert result['ready'] is False
    assert result['phase'] == 'launching'


def test_extra_fatal_pattern(node):
    node.write('RuntimeError: NCCL error in: broadcast\n')
    message, details = node.failure(node.params(extra_fatal_patterns=['NCCL error']))
    assert details['phase'] == 'failed'
    assert 'inspect %s' % node.log in message


def test_exit_file_fails_fast_with_code_and_hint(node, clock):
    engine_writes(clock, node.log, lines(*LAUNCH[:3]))
    clock.after(0.4, lambda: write_file(node.exit_file, '137\n'))
    message, details = node.failure(node.params())
    # At the first look after the exit file appeared.
    assert clock.now == 0.4
    assert details['phase'] == 'exited'
    assert details['exit_code'] == 137
    assert details['stage'] == 'weights_loaded'
    assert 'exited during stage weights_loaded' in message
    assert 'exit file %s appeared (code 137)' % node.exit_file in message
    assert ('Next step: code 137 is SIGKILL, often the kernel OOM killer: check dmesg on node7 and the container '
            'memory; inspect %s.' % node.log) in message


def test_exit_code_written_just_after_the_exit_file_appears_counts(node, clock):
    # The wrapper's `echo $? >FILE` creates the file a moment before the code is in it.
    node.write(LAUNCH[0] + '\n')
    with open(node.exit_file, 'w'):
        pass
    clock.after(0.3, lambda: write_file(node.exit_file, '137\n'))
    _message, details = node.failure(node.params())
    assert details['exit_code'] == 137


def test_fatal_line_written_just_before_exit_is_the_cause(node):
    node.write(LAUNCH[1] + '\n' + FATAL_LINES['OutOfMemoryError'] + '\n')
    with open(node.exit_file, 'w') as handle:
        handle.write('1')
    _message, details = node.failure(node.params())
    assert details['phase'] == 'failed'
    assert details['exit_code'] == 1
    assert 'then the engine exited' in details['cause']


def test_dead_pid_means_exited(node, tmp_path):
    process = subprocess.Popen([sys.executable, '-c', 'pass'])
    process.wait()
    pid_file = tmp_path / 'engine.pid'
    pid_file.write_text('%d\n' % process.pid)
    node.write(LAUNCH[0] + '\n')
    message, details = node.failure(node.params(exit_file=None, pid_file=str(pid_file)))
    assert details['phase'] == 'exited'
    assert 'process %d from %s is gone' % (process.pid, pid_file) in message


def test_zombie_pid_means_exited(node, tmp_path):
    process = subprocess.Popen([sys.executable, '-c', 'pass'])
    # Exited but not reaped (WNOWAIT): a zombie, /proc/<pid> still there, however loaded the machine.
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    pid_file = tmp_path / 'engine.pid'
    pid_file.write_text(str(process.pid))
    try:
        _message, details = node.failure(node.params(exit_file=None, pid_file=str(pid_file)))
    finally:
        process.wait()
    assert details['phase'] == 'exited'


def test_live_pid_and_missing_pid_file_are_not_exits(node, tmp_path):
    pid_file = tmp_path / 'engine.pid'
    node.write(LAUNCH[0] + '\n')
    assert node.wait(node.params(pid_file=str(pid_file), max_wait=0.2))['ready'] is False
    pid_file.write_text(str(os.getpid()))
    assert node.wait(node.params(pid_file=str(pid_file), max_wait=0.2))['phase'] == 'launching'


def test_an_unreadable_pid_file_is_not_an_exit(node, tmp_path):
    pid_file = tmp_path / 'engine.pid'
    pid_file.write_text('starting\n')
    node.write(LAUNCH[0] + '\n')
    assert node.wait(node.params(exit_file=None, pid_file=str(pid_file), max_wait=0.2))['phase'] == 'launching'


@pytest.mark.parametrize('answer', [
    (503, None, 'HTTP Error 503: Service Unavailable'),
    (None, None, 'timed out'),
    (200, {'workers': None}, None),
    (200, ['10.0.0.5:30000'], None),
], ids=['http-error', 'no-answer', 'workers-not-a-list', 'body-not-an-object'])
def test_a_router_answer_without_a_worker_list_lists_no_one(monkeypatch, answer):
    monkeypatch.setattr(_readiness._health, 'get_json', lambda url, timeout: answer)
    listed, why = _readiness.listed_workers('http://127.0.0.1:8000/v1/workers')
    assert listed is None
    expected = ('GET http://127.0.0.1:8000/v1/workers answered ' + answer[2] if answer[2]
                else 'GET http://127.0.0.1:8000/v1/workers answered HTTP 200 without a workers list: %r' % (answer[1],))
    assert why == expected


def test_the_router_listing_is_read_once_for_both_waits(monkeypatch):
    # One reading of GET /v1/workers: the readiness wait gets the ids, a sweep point the objects.
    body = {'workers': [{'worker_id': '10.0.0.5:30000', 'status': 'healthy'}, 'not-a-worker']}
    monkeypatch.setattr(_readiness._health, 'get_json', lambda url, timeout: (200, body, None))
    assert _readiness.listed_workers('http://r/v1/workers') == (['10.0.0.5:30000'], None)
    assert _readiness._health.router_workers('http://r/v1/workers', 3.0) == ([body['workers'][0]], None)


def test_asking_the_router_is_bounded_in_time(monkeypatch):
    asked = []
    monkeypatch.setattr(_readiness._health, 'get_json', lambda url, timeout: asked.append(timeout) or (None, None, 'timed out'))
    _readiness.listed_workers('http://127.0.0.1:8000/v1/workers')
    assert asked == [3.0]


def test_stall_fails_after_stall_timeout(node, clock):
    node.write('\n'.join(LAUNCH[:5]) + '\n')
    message, details = node.failure(node.params(stall_timeout=0.6))
    # The first look read the log; the look stall_timeout after it found nothing new.
    assert clock.now == 0.6
    assert details['phase'] == 'stalled'
    assert details['stage'] == 'capturing_cuda_graph'
    assert details['cause'].startswith('no new log output from the engine for 0.')
    assert ' s (stall_timeout 0.6 s; the wrapper' in details['cause']
    assert 'stalled during stage capturing_cuda_graph (graph 1/3, bs=128)' in message
    assert 'check for progress with du -sh' in message
    assert 'raise stall_timeout or lower --cuda-graph-max-bs' in message


HEARTBEAT = 'INFO:infera.engine.sglang.worker:waiting for SGLang HTTP on port 30000 ... (elapsed %ds)'


def test_the_wrappers_heartbeat_is_not_progress(node, clock):
    # Infera's wrapper logs a heartbeat every 30 s while the engine is silent: a hung engine must still stall.
    node.write('\n'.join(LAUNCH[:5]) + '\n')
    engine_writes(clock, node.log, [(0.1, HEARTBEAT % second + '\n') for second in range(30)])
    _message, details = node.failure(node.params(stall_timeout=0.8))
    assert details['phase'] == 'stalled'
    # Stalled on time, however many heartbeats came meanwhile.
    assert clock.now == 0.8
    assert HEARTBEAT % 0 in '\n'.join(details['log_tail'])


def test_engine_lines_between_heartbeats_are_progress(node, clock):
    node.write('\n'.join(LAUNCH[:5]) + '\n')
    # An engine line every 0.2 s, a stall timeout five times that: only the deadline may end the wait.
    bar_line = 'Capturing batches (bs=64 avail_mem=96.90 GB):  67%|██████▋   | 2/3 [10:00<05:00, 300.00s/it]'
    items = [(0.1, (HEARTBEAT % second if second % 2 else bar_line) + '\n')
             for second in range(60)]
    engine_writes(clock, node.log, items)
    message, details = node.failure(node.params(stall_timeout=1.0, deadline=2.0))
    assert details['phase'] == 'timed_out', message


def test_stall_while_loading_points_at_the_model_storage(node):
    node.write(LAUNCH[1] + '\n')
    message, _details = node.failure(node.params(stall_timeout=0.3))
    assert 'check that the model storage is mounted and being read on node7' in message.splitlines()[0]


def test_missing_log_stalls_with_its_own_cause(node):
    message, details = node.failure(node.params(stall_timeout=0.3))
    assert details['phase'] == 'stalled'
    assert 'the log %s has not appeared' % node.log in details['cause']
    assert '(no log lines from %s)' % node.log in message


def test_deadline_fails_even_while_the_log_grows(node, clock):
    # The log grows for 6 s, far past the 1 s deadline, and no stall can come first: the wait must end on the
    # deadline, not after the last line.
    engine_writes(clock, node.log, lines(*(['Load weight begin'] + ['still loading'] * 120), delay=0.05))
    message, details = node.failure(node.params(stall_timeout=2.0, deadline=1.0))
    assert details['phase'] == 'timed_out'
    assert details['elapsed'] == 1.0
    assert 'timed out during stage loading_weights' in message
    assert 'deadline 1 s' in details['cause']


def test_deadline_counts_from_started_at(node, clock):
    node.write(LAUNCH[0] + '\n')
    _message, details = node.failure(node.params(started_at=clock.time() - 100, deadline=50))
    assert details['phase'] == 'timed_out'
    assert details['elapsed'] == 100


def test_watch_dir_growth_postpones_the_stall(node, clock):
    os.makedirs(node.jit)
    node.write('\n'.join(LAUNCH[:4]) + '\n')
    # The JIT builds a kernel every 0.15 s for 1.8 s while the log says nothing.
    for index in range(12):
        kernel = os.path.join(node.jit, 'kernel_%d.so' % index)
        clock.after(0.15 * (index + 1), lambda kernel=kernel: write_file(kernel, 'x' * 100))
    result = node.wait(node.params(stall_timeout=1.0, max_wait=1.6, watch_dirs=[node.jit, node.jit + '-missing']))
    assert result['ready'] is False
    assert result['phase'] == 'capturing_cuda_graph'
    message, details = node.failure(node.params(stall_timeout=0.6, watch_dirs=[node.jit]))
    assert details['phase'] == 'stalled'
    assert 'no change in %s' % node.jit in details['cause']
    assert 'du -sh %s on node7' % node.jit in message


def test_max_wait_returns_progress_and_the_next_call_resumes(node):
    node.write('\n'.join(LAUNCH[:3]) + '\n')
    first = node.wait(node.params(max_wait=0.3))
    assert first['ready'] is False
    assert first['phase'] == 'weights_loaded'
    assert first['elapsed'] == 0.3

    node.write('\n'.join(LAUNCH[3:]) + '\n')
    second = node.wait(node.params())
    assert second['ready'] is True
    assert second['started_at'] == first['started_at']
    assert second['phases']['loading_weights'] == first['phases']['loading_weights']
    assert second['log_tail'] == LAUNCH  # nothing read twice, nothing lost


def test_waiting_again_on_a_ready_launch_returns_at_once_and_notices_a_later_exit(node, clock):
    node.write('\n'.join(LAUNCH) + '\n')
    with HealthServer() as health:
        first = node.wait(node.params(health_url=health.url))
        again = node.wait(node.params(health_url=health.url))
        # Neither call slept: the first look found the launch ready.
        assert clock.slept == []
    assert again['ready'] is True
    assert again['phases']['ready'] == first['phases']['ready']
    with open(node.exit_file, 'w') as handle:
        handle.write('0')
    message, details = node.failure(node.params())
    assert details['phase'] == 'exited'
    assert details['stage'] == 'graph_captured'
    assert ('Next step: code 0 is a clean shutdown, so something stopped it (docker stop, a SIGTERM, a second '
            'launch); inspect %s.' % node.log) in message


def test_a_fatal_line_read_by_an_earlier_call_still_fails_the_next(node):
    node.write(LAUNCH[0] + '\n' + FATAL_LINES['unrecognized arguments'] + '\n')
    node.failure(node.params())
    _message, details = node.failure(node.params())
    assert details['phase'] == 'failed'


def test_a_replaced_log_starts_a_new_launch(node):
    node.write('\n'.join(LAUNCH) + '\n')
    assert node.wait(node.params())['ready'] is True
    os.remove(node.log)
    node.write(LAUNCH[0] + '\n')
    result = node.wait(node.params(max_wait=0.2))
    assert result['ready'] is False
    assert result['phase'] == 'launching'
    assert result['log_tail'] == [LAUNCH[0]]
    # The next call goes on with the new launch instead of starting it again.
    node.write(LAUNCH[1] + '\n')
    again = node.wait(node.params(max_wait=0.2))
    assert again['started_at'] == result['started_at']
    assert again['phase'] == 'loading_weights'


def test_state_for_another_log_offset_is_ignored(node):
    node.write('\n'.join(LAUNCH) + '\n')
    assert node.wait(node.params())['ready'] is True
    size = os.path.getsize(node.log)
    result = node.wait(node.params(log_offset=size, max_wait=0.2))
    assert result['ready'] is False


# ---------------------------------------------------------------- options and formatting

@pytest.mark.parametrize('overrides, expected', [
    ({'poll_interval': 10}, 'poll_interval must be more than 0 and at most 5 seconds'),
    ({'stall_timeout': 0}, 'stall_timeout must be more than 0 seconds'),
    ({'max_wait': -1}, 'max_wait must be 0 (wait until done) or more seconds'),
    ({'log_offset': -5}, 'log_offset must be 0 or more bytes'),
    ({'fatal_patterns': ['(unclosed']}, "fatal pattern '(unclosed' is not a valid regular expression"),
    ({'health_url': '127.0.0.1:30000/health'}, 'health_url must be an http:// or https:// URL'),
    ({'workers_url': 'http://127.0.0.1:8000/v1/workers'}, 'workers_url and worker_id go together'),
    ({'worker_id': '10.0.0.5:30000'}, 'workers_url and worker_id go together'),
])
def test_bad_options_are_named(node, overrides, expected):
    with pytest.raises(WaitError) as error:
        node.wait(node.params(**overrides))
    assert expected in str(error.value)


def test_unwritable_state_file_is_named(node, tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('')
    with pytest.raises(WaitError) as error:
        node.wait(node.params(state_file=str(blocker / 'state.json'), max_wait=0.1))
    assert 'cannot write the state file' in str(error.value)


def test_progress_line_format():
    result = {'phase': 'capturing_cuda_graph', 'graph_progress': {'done': 7, 'total': 20, 'bs': 64}, 'elapsed': 751.9}
    assert progress_line('node1', result, 5120) == 'node1: capturing_cuda_graph graph 7/20 (bs=64) elapsed 12:31, log +5120'
    early = {'phase': 'launching', 'graph_progress': {'done': 0, 'total': 0, 'bs': None}, 'elapsed': 5}
    assert progress_line('node1', early, 0) == 'node1: launching graph 0/? (bs=-) elapsed 00:05, log +0'
    # A slice that failed before the module answered has none of these keys.
    assert progress_line('node1', {}, -3) == 'node1: unknown graph 0/? (bs=-) elapsed 00:00, log +0'
