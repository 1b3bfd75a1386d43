# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The bench-point wait: wait on a node for one sweep point of sglang.bench_serving, and stop it if its worker dies.

The bench client runs detached inside the worker container (``docker exec -d``) through a
wrapper that writes the client's jsonl, its log and, when it exits, an exit file with its exit
code into a host-mounted directory. The engine has an exit file of its own and a health URL.
Everything here looks at those files and that URL from the node, and when a point must be
aborted it finds the bench processes by their command line in /proc (the node sees the
container's processes there) and stops them. What a failure tells the user is written in
_remediation; the files are read through _node_files.

The wait can run in slices (max_wait) under the action plugin: a slice returns what the next
one needs in ``resume`` (the start time, the failed health checks in a row, how far the bench
log was read and the progress seen in it), and the action prints one progress line per slice.
"""

from __future__ import annotations

import os
import re
import threading
import time

from ansible_collections.infera.serving.plugins.module_utils import _health, _procs
from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._node_files import (
    count_lines,
    log_tail,
    new_reading,
    read_on,
    small_text,
    wait_for_exit_code,
)
from ansible_collections.infera.serving.plugins.module_utils._options import SLICE_OPTIONS, WaitOptions, check_url
from ansible_collections.infera.serving.plugins.module_utils._remediation import (
    WORKER_DEATHS,
    format_duration,
    point_cause,
    point_failure_message,
)

ARGUMENT_SPEC = dict(
    exit_file=dict(type='path', required=True),
    output_file=dict(type='path'),
    log_path=dict(type='path'),
    engine_exit_file=dict(type='path'),
    engine_log=dict(type='path', aliases=['engine_log_path']),
    engine_health_url=dict(type='str'),
    router_url=dict(type='str'),
    legs=dict(type='list', elements='dict', default=[]),
    health_failures=dict(type='int', default=3),
    health_interval=dict(type='float', default=5.0),
    deadline=dict(type='int', default=3600),
    kill_match=dict(type='str'),
    poll_interval=dict(type='float', default=1.0),
    node=dict(type='str'),
    conc=dict(type='int'),
    stage=dict(type='str', default='sweep'),
    max_wait=dict(type='float', default=0.0),
    resume=dict(type='dict'),
    label=dict(type='str'),
    estimate=dict(type='float'),
    return_files=dict(type='bool', default=False),
    **SLICE_OPTIONS
)
# Read by the action plugin only: how to slice and what its progress lines say.
ACTION_ONLY_OPTIONS = tuple(SLICE_OPTIONS) + ('label', 'estimate')

# SGLang's /health sends a one-token generation through the scheduler and gives up after 20 s (SGLANG_HEALTH_CHECK_TIMEOUT),
# so a loaded but live engine can take that long to answer.
HEALTH_TIMEOUT = 30.0
# The Infera router answers its listing and /health from memory: longer than this is a router in trouble.
ROUTER_TIMEOUT = 10.0
# ...or a router busy with the point's first requests (the warmup sends 2xC at once): a listing that timed out is read
# again, a second apart, until this long after the first reading. A router that refuses the connection is down: at once.
ROUTER_PATIENCE = 30.0
# A client whose requests all failed because the engine died often exits before the engine's exit marker is written:
# give the marker this long before blaming the client. The marker comes after Infera's wrapper has noticed the death
# (infera/engine/base.py polls its engine every 1 s), revoked its etcd lease and exited; on a loaded node that took
# over 1.5 s. An engine whose /health answers 200 meanwhile is alive: the client failed on its own, said at once.
_ENGINE_EXIT_GRACE = 5.0

# What sglang.bench_serving prints, in order: the warmup starts and ends on stdout, then the main run draws a tqdm bar
# on stderr (redrawn with carriage returns), then the results. The same lines in 0.4.10.post2 (the rehearsal's client:
# sglang/bench_serving.py:1346, :1385, :1403, :1467) and in 0.5.15.post1 (the image's: sglang/benchmark/serving.py:1326,
# :1391, :1451, :1547, behind the deprecated sglang/bench_serving.py shim); real logs of both in tests/unit/data/bench_client/.
BENCH_STAGES = ('starting', 'warmup', 'main', 'results')
_WARMUP_START = re.compile(r'Starting warmup with (\d+) sequences')
_WARMUP_DONE = re.compile(r'Warmup completed with \d+ sequences')
# tqdm: " 35%|###5      | 3584/10240 [12:01<22:20,  4.97it/s]"; elapsed is MM:SS or H:MM:SS.
_BAR = re.compile(r'\|\s*(\d+)/(\d+) \[(\d+(?::\d\d){1,2})<')
_RESULTS = re.compile(r' Serving Benchmark Result ')
# The engine as results report it when no health URL is checked.
_UNCHECKED_ENGINE = {'checked': False, 'alive': None, 'failures': 0, 'last': None}


# ---------------------------------------------------------------- options

class _Options(WaitOptions):
    """The module options, checked."""

    def __init__(self, params):
        super().__init__(params, ARGUMENT_SPEC)
        self.stage = params.get('stage') or 'sweep'
        self._check()

    def _check(self):
        if self.deadline <= 0:
            raise WaitError('deadline must be more than 0 seconds; got %s' % self.deadline)
        if self.health_failures < 1:
            raise WaitError('health_failures must be 1 or more; got %s' % self.health_failures)
        if self.health_interval <= 0:
            raise WaitError('health_interval must be more than 0 seconds; got %s' % self.health_interval)
        if not 0 < self.poll_interval <= 10:
            raise WaitError('poll_interval must be more than 0 and at most 10 seconds; got %s' % self.poll_interval)
        if self.max_wait < 0:
            raise WaitError('max_wait must be 0 (wait until the point ends) or more seconds; got %s' % self.max_wait)
        if self.conc is not None and self.conc < 1:
            raise WaitError('conc must be 1 or more; got %s' % self.conc)
        if self.kill_match is not None and not self.kill_match.strip():
            # An empty substring is in every command line: it would stop every process on the node.
            raise WaitError('kill_match must not be empty; use a text only the bench command line has, '
                            'such as its output file path')
        check_url('engine_health_url', self.engine_health_url)
        check_url('router_url', self.router_url)
        for leg in self.legs:
            check_url('legs health_url', leg.get('health_url'))

    @property
    def point(self):
        return 'point c%d' % self.conc if self.conc is not None else 'the point'


# ---------------------------------------------------------------- the client's progress

def new_progress():
    """What the bench log has shown so far: the stage, warmup requests, and the main run's bar."""
    return {'stage': 'starting', 'warmup_requests': None, 'completed': 0, 'total': None, 'bar_elapsed': None}


def _advance(progress, stage):
    if BENCH_STAGES.index(stage) > BENCH_STAGES.index(progress['stage']):
        progress['stage'] = stage


def _clock_seconds(text):
    """tqdm's MM:SS or H:MM:SS as seconds."""
    total = 0
    for part in text.split(':'):
        total = total * 60 + int(part)
    return total


def scan_bench_line(progress, text):
    """Update progress from one line of the bench log (or one carriage-return redraw of its bar)."""
    warmup = _WARMUP_START.search(text)
    if warmup:
        _advance(progress, 'warmup')
        progress['warmup_requests'] = int(warmup.group(1))
    if _WARMUP_DONE.search(text):
        _advance(progress, 'main')
    redraw = _BAR.search(text)
    if redraw:
        # Only the main run has a bar (the client draws none for the warmup).
        _advance(progress, 'main')
        progress['completed'], progress['total'] = int(redraw.group(1)), int(redraw.group(2))
        progress['bar_elapsed'] = _clock_seconds(redraw.group(3))
    if _RESULTS.search(text):
        _advance(progress, 'results')


def read_progress(path, reading, progress):
    """Read what the bench log gained since reading['read_offset'] into progress; a rewritten log starts over."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return
    if size < reading['read_offset']:
        reading.update(new_reading())
        progress.update(new_progress())
    read_on(path, reading, lambda text: scan_bench_line(progress, text))


def point_eta(progress, elapsed, estimate=None):
    """(seconds left, how it was found) for a point: from the bar's rate once requests complete, else the estimate.

    How: 'rate' (the main run's own pace so far), 'estimate' (the plan's estimate less the time
    spent), or None when there is nothing to go on.
    """
    completed, total = progress.get('completed') or 0, progress.get('total')
    if progress.get('stage') in ('main', 'results') and total and completed and progress.get('bar_elapsed'):
        return progress['bar_elapsed'] * (total - completed) / float(completed), 'rate'
    if estimate:
        return max(estimate - elapsed, 0.0), 'estimate'
    return None, None


def _requests_text(progress, num_prompts):
    stage = progress.get('stage', 'starting')
    if stage == 'starting':
        return 'client starting'
    if stage == 'warmup':
        warmup = progress.get('warmup_requests')
        return 'warmup (%s requests)' % (warmup if warmup is not None else '?')
    total = progress.get('total') or num_prompts or '?'
    return '%s %s/%s requests' % ('main' if stage == 'main' else 'results', progress.get('completed') or 0, total)


def _engine_text(engine):
    if not engine or engine.get('alive') is None:
        return 'engine not checked yet' if engine and engine.get('checked') else 'engine not checked'
    if engine['alive']:
        return 'engine alive'
    return 'engine not answering (%d failed checks in a row, last: %s)' % (engine['failures'], engine['last'])


def progress_line(host, result, label=None, estimate=None, num_prompts=None):
    """The action plugin's one line for a slice of a point: which point, requests done, elapsed, ETA, engine."""
    progress = result.get('progress') or new_progress()
    elapsed = result.get('elapsed') or 0
    eta, how = point_eta(progress, elapsed, estimate)
    eta_text = 'ETA ?' if eta is None else 'ETA %s%s' % ('~' if how == 'estimate' else '', format_duration(eta))
    return '%s: %s: %s, elapsed %s, %s, %s' % (
        host, label or 'the point', _requests_text(progress, num_prompts), format_duration(elapsed), eta_text,
        _engine_text(result.get('engine')))


# ---------------------------------------------------------------- health

def _in_a_thread(work):
    """Start work in a daemon thread and return the thread: a check that hangs never keeps the module from exiting."""
    thread = threading.Thread(target=work, name='engine-health', daemon=True)
    thread.start()
    return thread


class _HealthWatch:
    """Ask the health URL every interval, each check in the background, so a slow answer never delays seeing the exit file.

    The wait's polls start the checks: interval counts from one check's answer on the wait's clock.
    """

    def __init__(self, url, interval, consecutive_failures, clock, in_background):
        self.url = url
        self.interval = interval
        # Carried over from the previous slice: three failures in a row may span two slices.
        self.consecutive_failures = consecutive_failures
        self.last = None
        self._clock = clock
        self._in_background = in_background
        self._check = None
        self._next_check_at = clock()

    def look(self):
        """Start the next check if it is due and the last one has answered."""
        if not self._in_flight() and self._clock() >= self._next_check_at:
            self._check = self._in_background(self._ask)

    def seconds_to_next_check(self):
        """How long until the next check is due: interval at most while one waits for its answer, which may come soon."""
        if self._in_flight():
            return self.interval
        return max(self._next_check_at - self._clock(), 0.0)

    def finish_probe(self):
        """Let a check in flight answer: a slice as short as the check's timeout must still count it."""
        if self._in_flight():
            self._check.join(HEALTH_TIMEOUT + 1)

    @property
    def summary(self):
        answered = self.last is not None
        return {'checked': True, 'alive': (self.last == 200) if answered else None,
                'failures': self.consecutive_failures, 'last': self.last}

    def _in_flight(self):
        return self._check is not None and self._check.is_alive()

    def _ask(self):
        status, error = _health.probe_health(self.url, HEALTH_TIMEOUT)
        self.last = status if status is not None else error
        self.consecutive_failures = 0 if status == 200 else self.consecutive_failures + 1
        self._next_check_at = self._clock() + self.interval


# ---------------------------------------------------------------- the wait

class BenchPointWait:
    """Poll the bench exit file, the engine exit file, the health watch and the clock until an outcome.

    clock (seconds since the epoch: the start carries over between slices), sleep and in_background (how a health
    check runs beside the polls) are the real ones on a node; the unit tests pass a fake clock.
    """

    def __init__(self, params, clock=time.time, sleep=time.sleep, in_background=_in_a_thread):
        self.options = _Options(params)
        self.clock = clock
        self.sleep = sleep
        self.in_background = in_background
        resume = self.options.resume or {}
        self.started_at = resume.get('started_at')
        self.reading = new_reading(resume.get('read_offset') or 0)
        self.progress = dict(new_progress(), **(resume.get('progress') or {}))
        self.carried_failures = resume.get('health_failures') or 0
        # The router's workers, read by the first call; later slices carry them.
        self.router_workers = resume.get('router_workers')
        self.health = None

    def wait(self):
        """Return (result, warnings) for a point that finished with 0 or a slice that ran out; raise WaitError otherwise."""
        options = self.options
        slice_start = self.clock()
        first_call = self.started_at is None
        if first_call:
            self.started_at = slice_start
        if first_call and options.router_url:
            # The client was started a moment ago and is still starting Python: these are the workers it will
            # be served by. A router that cannot list them cannot serve the point either.
            self.router_workers, trouble = self._read_router_workers(options.router_url.rstrip('/') + '/v1/workers')
            if trouble:
                return self._finish('router', trouble)
        if options.engine_health_url:
            self.health = _HealthWatch(options.engine_health_url, options.health_interval, self.carried_failures,
                                       self.clock, self.in_background)
        # A PD pair's other legs, which serve the point's requests with this node's engine: each /health is watched.
        self.legs = [(leg, _HealthWatch(leg['health_url'], options.health_interval, 0, self.clock, self.in_background))
                     for leg in options.legs]
        outcome = self._poll_until_outcome(slice_start)
        if outcome is None:
            if self.health:
                self.health.finish_probe()
            return self._slice_result(), []
        return self._finish(*outcome)

    def _read_router_workers(self, url):
        """(workers, None) or (None, why not): the listing, read again while it only timed out (ROUTER_PATIENCE)."""
        give_up_at = self.clock() + ROUTER_PATIENCE
        while True:
            workers, trouble = _health.router_workers(url, ROUTER_TIMEOUT)
            # 'timed out' is how a socket timeout reads (socket.timeout, through urllib's URLError).
            if not trouble or 'timed out' not in trouble or self.clock() >= give_up_at:
                return workers, trouble
            self.sleep(1.0)

    def _poll_until_outcome(self, slice_start):
        """The outcome tuple, or None when the slice (max_wait) is over first."""
        options = self.options
        while True:
            for watch in self._watches():
                watch.look()
            if options.log_path:
                read_progress(options.log_path, self.reading, self.progress)
            # The bench exit file first: a point that finished counts even if the engine died just after.
            if os.path.exists(options.exit_file):
                code = wait_for_exit_code(options.exit_file)
                engine_code = self._engine_exit_within(_ENGINE_EXIT_GRACE) if code != 0 else False
                if engine_code is not False:
                    return 'engine_exited', engine_code
                # A leg that died fails the point's requests, and the client may end before three checks saw it.
                down = next((dict(leg, last=status) for leg, status in self._legs_now() if status != 200), None)
                if down:
                    return 'leg', down
                if code == 0 and options.router_url:
                    trouble = _router_down(options.router_url)
                    if trouble:
                        # A router that died during the point failed some of its requests.
                        return 'router', trouble
                return 'done', code
            engine_code = self._engine_exit()
            if engine_code is not False:
                return 'engine_exited', engine_code
            if self.health and self.health.consecutive_failures >= options.health_failures:
                return 'unhealthy', self.health.last
            down = next((dict(leg, last=watch.last) for leg, watch in self.legs
                         if watch.consecutive_failures >= options.health_failures), None)
            if down:
                return 'leg', down
            if self.clock() - self.started_at >= options.deadline:
                return 'deadline', None
            if options.max_wait and self.clock() - slice_start >= options.max_wait:
                return None
            self.sleep(self._pause())

    def _watches(self):
        return ([self.health] if self.health else []) + [watch for _leg, watch in self.legs]

    def _legs_now(self):
        return [(leg, _health.probe_health(leg['health_url'], HEALTH_TIMEOUT)[0]) for leg in self.options.legs]

    def _pause(self):
        """Until the next poll, or until the next health check is due if that comes first."""
        return min([self.options.poll_interval] + [watch.seconds_to_next_check() for watch in self._watches()])

    def _engine_exit_within(self, grace):
        """The engine's exit code once its marker appears within grace; False when it does not, or at once when the
        engine answers /health 200 (a live engine: the failure is the client's)."""
        give_up_at = self.clock() + grace
        engine_code = self._engine_exit()
        while engine_code is False and self.clock() < give_up_at:
            if self._engine_answers(give_up_at - self.clock()):
                return self._engine_exit()
            self.sleep(0.1)
            engine_code = self._engine_exit()
        return engine_code

    def _engine_answers(self, timeout):
        url = self.options.engine_health_url
        return bool(url) and _health.probe_health(url, max(0.1, timeout))[0] == 200

    def _engine_exit(self):
        """False while the engine exit file is absent, else the code in it (None if it holds none)."""
        path = self.options.engine_exit_file
        if not path or not os.path.exists(path):
            return False
        return wait_for_exit_code(path)

    def _common_result(self, elapsed):
        options = self.options
        return {
            'changed': False,
            'rc': None,
            'elapsed': round(elapsed, 1),
            'aborted': False,
            'finished': False,
            'output_lines': count_lines(options.output_file),
            'log_tail': log_tail(options.log_path),
            'killed_pids': [],
            'progress': dict(self.progress),
            'engine': self.health.summary if self.health else dict(_UNCHECKED_ENGINE),
            'router_workers': self.router_workers,
        }

    def _slice_result(self):
        result = self._common_result(self.clock() - self.started_at)
        result['resume'] = {
            'started_at': self.started_at,
            'health_failures': self.health.consecutive_failures if self.health else 0,
            'read_offset': self.reading['read_offset'],
            'progress': dict(self.progress),
            'router_workers': self.router_workers,
        }
        return result

    def _finish(self, kind, detail):
        options = self.options
        killed, denied = [], []
        if kind != 'done' and options.kill_match:
            killed, denied = _procs.stop_processes(options.kill_match, clock=self.clock, sleep=self.sleep)
        elapsed = self.clock() - self.started_at
        if options.log_path:
            # The client's last words (its results block) come after the last poll read the log.
            read_progress(options.log_path, self.reading, self.progress)
        result = self._common_result(elapsed)
        result.update({
            'changed': bool(killed),
            'rc': detail if kind == 'done' else None,
            'aborted': kind != 'done',
            'finished': True,
            'killed_pids': killed,
        })
        if kind == 'done' and detail == 0:
            if options.return_files:
                result['files'] = self._result_files()
            return result, self._success_warnings(result)
        result['cause'] = point_cause(options, kind, detail)
        # The engine's last words say why the worker died; the bench log only that it did.
        engine_tail = log_tail(options.engine_log) if kind in WORKER_DEATHS else None
        raise WaitError(point_failure_message(options, kind, detail, result, elapsed, denied, engine_tail), **result)

    def _result_files(self):
        """The point's jsonl and log by file name, each whose text can be returned (small_text); the rest stay to fetch."""
        files = {}
        for path in (self.options.output_file, self.options.log_path):
            text = small_text(path) if path else None
            if text is not None:
                files[os.path.basename(path)] = text
        return files

    def _success_warnings(self, result):
        options = self.options
        if options.output_file and not result['output_lines']:
            return ['the bench client on %s exited 0 for %s but %s has no result line; the point has no numbers, '
                    'see %s' % (options.node, options.point, options.output_file, options.log_path or 'its log')]
        return []


def _router_down(router_url):
    """None while the router's GET /health answers 200, else what it answered."""
    url = router_url.rstrip('/') + '/health'
    status, error = _health.probe_health(url, ROUTER_TIMEOUT)
    return None if status == 200 else 'GET %s answered %s' % (url, error or status)


def wait_for_point(params, clock=time.time, sleep=time.sleep, in_background=_in_a_thread):
    """Module entry point: (result, warnings), or WaitError (bad options or a failed point)."""
    return BenchPointWait(params, clock, sleep, in_background).wait()
