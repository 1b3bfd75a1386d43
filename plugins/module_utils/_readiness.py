# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The readiness watch: wait on a node until an SGLang engine launch is ready, has failed, or has stalled.

The engine runs in a container but writes its log and an exit marker into a host-mounted
directory, so everything here looks at plain files on the node plus two URLs: the engine's health
and, where given, the Infera router's worker list (the wrapper registers only after the engine is
up, so a worker is ready once this launch's wrapper has logged its registration and the router lists
it: a record a dead wrapper left under the same host:port lists it too, until its lease runs out). Progress
is persisted in a small JSON state file so that successive short calls (the action plugin's
slices) resume where the previous one stopped. What a failure tells the user is written in
_remediation; the files are read through _node_files.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time

from ansible_collections.infera.serving.plugins.module_utils import _health, _node_files, _procs
from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._options import SLICE_OPTIONS, WaitOptions, check_url
from ansible_collections.infera.serving.plugins.module_utils._remediation import (
    format_duration,
    readiness_cause,
    readiness_failure_message,
)


DEFAULT_READY_LINE = 'The server is fired up and ready to roll!'
# A Python traceback alone is not fatal: SGLang logs recoverable ones too. These are not. Each is a line SGLang
# 0.5.15.post1 and 0.5.17 (or the HIP runtime, PyTorch, argparse under them) really writes:
# tests/rehearsal/sim_tests/test_sglang_lines.py holds them to the lines extracted from those releases.
DEFAULT_FATAL_PATTERNS = [
    r'Capture cuda graph failed',       # decode_cuda_graph_runner.py, around any RuntimeError in capture
    r'out of memory',                   # PyTorch's allocator: "HIP out of memory. Tried to allocate ..."
    r'OutOfMemoryError',                # torch.OutOfMemoryError, the traceback's last line
    r'HSA_STATUS_ERROR',                # HIP (ROCm clr rocdevice.cpp callbackQueue): "Callback: Queue ... aborting with
                                        # error : HSA_STATUS_ERROR_...", then abort()
    r'Memory access fault by GPU',      # ROCr runtime.cpp VMFaultHandler, then abort()
    r'HW Exception by GPU',             # ROCr runtime.cpp HwExceptionHandler ("reason :GPU Hang"), then abort()
    r'Scheduler hit an exception',      # scheduler.py run_scheduler_process
    r'Received sigquit',                # engine.py launch_phase_sigquit_handler
    r'scheduler died during initialization',  # engine.py _scheduler_died_error (a scheduler killed by a signal)
    r'unrecognized arguments',          # argparse, SGLang's parser or Infera's
]

# Progress stages in the order a launch goes through them.
STAGES = ('launching', 'loading_weights', 'weights_loaded', 'capturing_cuda_graph', 'graph_captured', 'registering',
          'ready')
# Outcomes that end a wait without readiness.
FAILURES = ('failed', 'stalled', 'timed_out', 'exited')

ACTION_ONLY_OPTIONS = tuple(SLICE_OPTIONS)

ARGUMENT_SPEC = dict(
    log_path=dict(type='path', required=True),
    log_offset=dict(type='int', default=0),
    exit_file=dict(type='path'),
    pid_file=dict(type='path'),
    health_url=dict(type='str'),
    workers_url=dict(type='str'),
    worker_id=dict(type='str'),
    ready_line=dict(type='str', default=DEFAULT_READY_LINE),
    fatal_patterns=dict(type='list', elements='str', default=list(DEFAULT_FATAL_PATTERNS)),
    extra_fatal_patterns=dict(type='list', elements='str', default=[]),
    watch_dirs=dict(type='list', elements='path', default=[]),
    stall_timeout=dict(type='float', default=900.0),
    deadline=dict(type='float', default=2700.0),
    started_at=dict(type='float'),
    max_wait=dict(type='float', default=0.0),
    state_file=dict(type='path'),
    poll_interval=dict(type='float', default=0.25),
    node=dict(type='str'),
    **SLICE_OPTIONS
)

_STATE_VERSION = 3
_HEALTH_TIMEOUT = 3.0
_SAVE_EVERY = 5.0
# After a fatal line the engine usually prints the rest of its error (OOM advice, a traceback) in one burst.
_FATAL_GRACE = 1.0

# Infera's wrapper logs this every 30 s while it waits for the engine's HTTP port (infera/engine/sglang/worker.py,
# "waiting for SGLang HTTP on port %d ... (elapsed %.0fs)"), into the same log: the wrapper's heartbeat, not the
# engine's progress. Counted as progress, it would keep a hung engine from ever stalling.
_WRAPPER_HEARTBEAT = re.compile(r'waiting for SGLang HTTP on port \d+ \.\.\. \(elapsed')
_LOAD_BEGIN = re.compile(r'Load weight begin')
_LOAD_END = re.compile(r'Load weight end')
_LOAD_ELAPSED = re.compile(r'elapsed=\s*([0-9]+(?:\.[0-9]+)?)\s*s')
# SGLang 0.5.15.post1 model_runner.py / 0.5.17 cuda_graph_setup.py: "Capture target decode CUDA graph begin.
# backend=full, num_tokens_per_bs=1, bs=[...], avail mem=... GB" (num_tokens_per_req in 0.5.17), "... end. elapsed=...
# s, mem usage=... GB, avail mem=... GB." ("target prefill" for a prefill graph, "HIP graph" on another device name).
_CAPTURE_BEGIN = re.compile(r'Capture (?:target|draft) \w+ \w+ graph begin\.')
_CAPTURE_END = re.compile(r'Capture (?:target|draft) \w+ \w+ graph end\.')
# tqdm's default bar over the batch sizes, largest first (decode_cuda_graph_runner.py _capture_one_stream):
# "Capturing batches (bs=64 avail_mem=12.30 GB):  35%|###5      | 7/20 [00:05<00:10,  1.2it/s]", \r between refreshes.
_CAPTURE_PROGRESS = re.compile(r'Capturing batches \(bs=(\d+)[^)]*\):.*?(\d+)/(\d+)')
# Infera's wrapper, once it has put this launch's record (infera/common/registration.py: "registered with etcd as
# worker %s (lease=%d, ..."; registration_k8s.py: "registered via k8s Pod annotation: pod=%s/%s worker=%s (...").
# Until then the router may list the worker_id from a record a wrapper that died left behind (same host:port, its
# lease alive up to 30 s): that record vanishes when its lease runs out, taking the worker out of the router.
_REGISTERED = re.compile(r'registered (?:with etcd as worker |via k8s Pod annotation: .*?\bworker=)(\S+)')


# ---------------------------------------------------------------- options

def default_state_file(log_path):
    return log_path + '.ready-state.json'


class _Options(WaitOptions):
    """The module options, checked, with regexes compiled."""

    def __init__(self, params):
        super().__init__(params, ARGUMENT_SPEC)
        self.watch_dirs = list(params.get('watch_dirs') or [])
        self.state_file = params.get('state_file') or default_state_file(self.log_path)
        self.fatal_patterns = [_compile(pattern) for pattern in
                               list(params['fatal_patterns']) + list(params.get('extra_fatal_patterns') or [])]
        self._check()

    def _check(self):
        if self.log_offset < 0:
            raise WaitError('log_offset must be 0 or more bytes; got %d' % self.log_offset)
        for name in ('stall_timeout', 'deadline'):
            if getattr(self, name) <= 0:
                raise WaitError('%s must be more than 0 seconds; got %s' % (name, getattr(self, name)))
        if self.max_wait < 0:
            raise WaitError('max_wait must be 0 (wait until done) or more seconds; got %s' % self.max_wait)
        if not 0 < self.poll_interval <= 5:
            raise WaitError('poll_interval must be more than 0 and at most 5 seconds (failures must surface '
                            'within 5 s); got %s' % self.poll_interval)
        if not self.ready_line:
            raise WaitError('ready_line must not be empty')
        for name in ('health_url', 'workers_url'):
            check_url(name, getattr(self, name))
        if bool(self.workers_url) != bool(self.worker_id):
            raise WaitError('workers_url and worker_id go together (the router\'s /v1/workers URL and the '
                            'worker_id it lists, host:port); got only %s'
                            % ('workers_url' if self.workers_url else 'worker_id'))

    @property
    def watch_interval(self):
        # Walking a JIT cache is not free: scan at most every 5 s, but often enough to beat a short stall_timeout.
        return min(5.0, max(self.poll_interval, self.stall_timeout / 10.0))


def _compile(pattern):
    try:
        return re.compile(pattern)
    except re.error as error:
        raise WaitError('fatal pattern %r is not a valid regular expression: %s' % (pattern, error))


# ---------------------------------------------------------------- probes

def listed_workers(url, timeout=_HEALTH_TIMEOUT):
    """The worker_ids Infera's router lists at url (GET /v1/workers), or (None, why not)."""
    workers, why = _health.router_workers(url, timeout)
    return (None, why) if workers is None else ([worker.get('worker_id') for worker in workers], None)


def _process_exit(exit_file, pid_file):
    """Return None while the engine may be running, else {'code': int or None, 'how': text}."""
    if exit_file and os.path.exists(exit_file):
        code = _node_files.wait_for_exit_code(exit_file)
        detail = 'code %d' % code if code is not None else 'no code in it'
        return {'code': code, 'how': 'exit file %s appeared (%s)' % (exit_file, detail)}
    if pid_file:
        pid = _node_files.read_pid(pid_file)
        if pid is not None and not _procs.pid_alive(pid):
            return {'code': None, 'how': 'process %d from %s is gone' % (pid, pid_file)}
    return None


# ---------------------------------------------------------------- state

def _fresh_state(options, now):
    started_at = options.started_at if options.started_at is not None else now
    state = _node_files.new_reading(options.log_offset)
    state.update({
        'version': _STATE_VERSION,
        'identity': {'log_path': options.log_path, 'log_offset': options.log_offset},
        'started_at': started_at,
        'log_inode': None,
        'log_size_seen': None,
        'last_progress_at': now,
        'watch_signature': None,
        'watch_scanned_at': None,
        'stage': 'launching',
        'phases': {'launching': started_at},
        'weights_elapsed': None,
        'graph': {'done': 0, 'total': 0, 'bs': None},
        'ready_line_seen': False,
        'fatal': None,
        'health': {'status': None, 'error': None},
        'registration': {'listed': None, 'error': None, 'logged': None},
    })
    return state


def _load_state(options, now):
    try:
        with open(options.state_file, 'r') as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        state = None
    wanted = {'log_path': options.log_path, 'log_offset': options.log_offset}
    if not isinstance(state, dict) or state.get('version') != _STATE_VERSION or state.get('identity') != wanted:
        state = _fresh_state(options, now)
    if options.started_at is not None:
        state['started_at'] = options.started_at
        state['phases']['launching'] = options.started_at
    return state


def _save_state(options, state):
    directory = os.path.dirname(os.path.abspath(options.state_file))
    try:
        os.makedirs(directory, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix='.sglang-ready-', dir=directory)
        with os.fdopen(handle, 'w') as stream:
            json.dump(state, stream)
        # Atomic: a slice cut off by a dropped connection never leaves half a state file.
        os.replace(temporary, options.state_file)
    except OSError as error:
        raise WaitError('cannot write the state file %s: %s; set state_file to a writable path'
                        % (options.state_file, error))


# ---------------------------------------------------------------- log parsing

def _advance(state, stage, now):
    if STAGES.index(stage) > STAGES.index(state['stage']):
        state['stage'] = stage
    state['phases'].setdefault(stage, now)


def _scan_segment(options, state, text, now):
    """Update the state from one line (or one carriage-return segment of a tqdm line)."""
    if _LOAD_BEGIN.search(text):
        _advance(state, 'loading_weights', now)
    if _LOAD_END.search(text):
        _advance(state, 'weights_loaded', now)
        elapsed = _LOAD_ELAPSED.search(text)
        if elapsed and state['weights_elapsed'] is None:
            state['weights_elapsed'] = float(elapsed.group(1))
    if _CAPTURE_BEGIN.search(text):
        _advance(state, 'capturing_cuda_graph', now)
    progress = _CAPTURE_PROGRESS.search(text)
    if progress:
        _advance(state, 'capturing_cuda_graph', now)
        state['graph'] = {'bs': int(progress.group(1)), 'done': int(progress.group(2)),
                          'total': int(progress.group(3))}
    if _CAPTURE_END.search(text):
        _advance(state, 'graph_captured', now)
        if state['graph']['total']:
            state['graph']['done'] = state['graph']['total']
    if options.ready_line in text:
        state['ready_line_seen'] = True
    registered = _REGISTERED.search(text)
    if registered and registered.group(1) == options.worker_id:
        state['registration']['logged'] = text.strip()[:_node_files.MAX_LINE_CHARS]
    if state['fatal'] is None:
        for pattern in options.fatal_patterns:
            if pattern.search(text):
                state['fatal'] = {'pattern': pattern.pattern, 'line': text.strip()[:_node_files.MAX_LINE_CHARS],
                                  'stage': state['stage'], 'seen_at': now}
                break


def _read_log(options, state, now):
    """Read what the log gained since the last poll; return True if it grew."""
    try:
        info = os.stat(options.log_path)
    except OSError:
        if state['log_inode'] is not None:
            # The log we were reading is gone: a new launch will write a new one.
            _restart_launch(options, state, now)
        return False
    replaced = state['log_inode'] not in (None, info.st_ino) or info.st_size < state['read_offset']
    if replaced and state['log_inode'] is not None:
        _restart_launch(options, state, now)
        state['read_offset'] = 0
    state['log_inode'] = info.st_ino
    grew = info.st_size != state['log_size_seen'] and info.st_size > 0
    state['log_size_seen'] = info.st_size
    if info.st_size > state['read_offset']:
        progressed = []

        def on_text(text):
            if text.strip() and not _WRAPPER_HEARTBEAT.search(text):
                progressed.append(True)
            _scan_segment(options, state, text, now)

        # The state is also the reading: its tail and offset go into the state file with the rest.
        _node_files.read_on(options.log_path, state, on_text)
        # A line written between the stat and the read was read: the size seen is at least the offset read, so
        # the result's log_bytes counts it and the next poll does not take it for growth again.
        state['log_size_seen'] = max(state['log_size_seen'], state['read_offset'])
        grew = grew and bool(progressed)
    return grew


def _restart_launch(options, state, now):
    fresh = _fresh_state(options, now)
    fresh['identity'] = state['identity']
    state.clear()
    state.update(fresh)


# ---------------------------------------------------------------- the wait

class ReadinessWatch:
    """Poll the log, the exit markers, the watch dirs and the health URL until an outcome.

    clock (seconds since the epoch: started_at and the state file carry them between calls) and sleep are the real
    ones on a node; the unit tests pass a fake clock.
    """

    def __init__(self, params, clock=time.time, sleep=time.sleep):
        self.options = _Options(params)
        self.clock = clock
        self.sleep = sleep

    def wait(self):
        """Return the result when ready or out of max_wait; raise WaitError on failure."""
        options = self.options
        call_start = self.clock()
        state = _load_state(options, call_start)
        _save_state(options, state)
        saved_at = call_start
        while True:
            now = self.clock()
            out_of_time = bool(options.max_wait) and now - call_start >= options.max_wait
            outcome = self._poll(state, now, out_of_time)
            if outcome or out_of_time or now - saved_at >= _SAVE_EVERY:
                _save_state(options, state)
                saved_at = now
            if outcome or out_of_time:
                return self._finish(state, now, outcome)
            self.sleep(options.poll_interval)

    def _poll(self, state, now, last_look):
        """One look at everything; return None to keep waiting, or the outcome tuple."""
        options = self.options
        # Exit first, then the log: whatever the engine wrote before it exited is read in this same poll.
        exited = _process_exit(options.exit_file, options.pid_file)
        grew = _read_log(options, state, now)
        if state['fatal']:
            # Wait out the rest of the error burst for the log tail, unless there is nothing more to come.
            if exited or last_look or now - state['fatal']['seen_at'] >= _FATAL_GRACE:
                return 'failed', exited
            return None
        if exited:
            return 'exited', exited
        if state['ready_line_seen'] and self._healthy(state):
            if self._registered(state):
                # Not a stage kept in the state: readiness is checked afresh by every call.
                state['phases'].setdefault('ready', now)
                return 'ready', None
            _advance(state, 'registering', now)
        grew = self._watch_dirs_changed(state, now) or grew
        if grew:
            state['last_progress_at'] = now
        if now - state['started_at'] >= options.deadline:
            return 'timed_out', None
        if now - state['last_progress_at'] >= options.stall_timeout:
            return 'stalled', None
        return None

    def _healthy(self, state):
        if not self.options.health_url:
            return True
        status, error = _health.probe_health(self.options.health_url, _HEALTH_TIMEOUT)
        state['health'] = {'status': status, 'error': error}
        return status == 200

    def _registered(self, state):
        if not self.options.workers_url:
            return True
        registration = state['registration']
        if not registration['logged']:
            # The router is not asked yet: what it lists now may be a dead wrapper's record.
            return False
        registration['listed'], registration['error'] = listed_workers(self.options.workers_url)
        return registration['listed'] is not None and self.options.worker_id in registration['listed']

    def _watch_dirs_changed(self, state, now):
        options = self.options
        if not options.watch_dirs:
            return False
        scanned_at = state['watch_scanned_at']
        if scanned_at is not None and now - scanned_at < options.watch_interval:
            return False
        signature = _node_files.dir_signature(options.watch_dirs)
        state['watch_scanned_at'] = now
        changed = state['watch_signature'] is not None and signature != state['watch_signature']
        state['watch_signature'] = signature
        return changed

    def _finish(self, state, now, outcome):
        kind, exited = outcome if outcome else (None, None)
        result = _result(self.options, state, now, kind, exited)
        if kind in FAILURES:
            raise WaitError(readiness_failure_message(self.options, state, now, kind, exited, result), **result)
        return result


def wait_until_ready(params, clock=time.time, sleep=time.sleep):
    """Module entry point: the result dict, or WaitError (bad options or a failed launch)."""
    return ReadinessWatch(params, clock, sleep).wait()


# ---------------------------------------------------------------- results

def _stage_reached(state, kind):
    if kind == 'ready':
        return 'ready'
    # After a fatal line the engine may log a little more; the stage that failed is the one at that line.
    return state['fatal']['stage'] if kind == 'failed' else state['stage']


def _phases(state):
    phases = {}
    for stage in STAGES:
        if stage in state['phases']:
            at = state['phases'][stage]
            phases[stage] = {'at': at, 'since_start': round(at - state['started_at'], 1)}
    if state['weights_elapsed'] is not None and 'weights_loaded' in phases:
        phases['weights_loaded']['reported_elapsed'] = state['weights_elapsed']
    return phases


def _result(options, state, now, kind, exited):
    ready = kind == 'ready'
    result = {
        'ready': ready,
        'phase': kind if kind in FAILURES else _stage_reached(state, kind),
        'stage': _stage_reached(state, kind),
        'phases': _phases(state),
        'graph_progress': dict(state['graph']),
        'elapsed': round(now - state['started_at'], 1),
        'started_at': state['started_at'],
        'log_tail': _node_files.tail_lines(state),
        # At least what was read: a line written between the poll's stat and its read is in the tail already.
        'log_bytes': max((state['log_size_seen'] or 0) - options.log_offset, 0),
        'health_status': state['health']['status'],
        'worker_id': options.worker_id,
        'router_workers': state['registration']['listed'],
        'registration_line': state['registration']['logged'],
        'exit_code': exited['code'] if exited else None,
        'node': options.node,
        'state_file': options.state_file,
    }
    if kind in FAILURES:
        result['cause'] = readiness_cause(options, state, now, kind, exited, result['log_tail'])
    return result


def progress_line(host, result, log_delta):
    """The action plugin's one-line progress report for a slice."""
    graph = result.get('graph_progress') or {}
    return '%s: %s graph %s/%s (bs=%s) elapsed %s, log +%d' % (
        host, result.get('phase', 'unknown'), graph.get('done', 0), graph.get('total') or '?',
        graph.get('bs') if graph.get('bs') is not None else '-', format_duration(result.get('elapsed', 0)),
        max(log_delta, 0))
