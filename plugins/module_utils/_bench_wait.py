# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""Wait on a node for one sweep point of sglang.bench_serving, and stop it if its worker dies.

The bench client runs detached inside the worker container (``docker exec -d``) through a
wrapper that writes the client's jsonl, its log and, when it exits, an exit file with its exit
code into a host-mounted directory. The engine has an exit file of its own and a health URL.
Everything here looks at those files and that URL from the node, and when a point must be
aborted it finds the bench processes by their command line in /proc (the node sees the
container's processes there) and stops them.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time

from ansible_collections.infera.serving.plugins.module_utils import _health, _procs
from ansible_collections.infera.serving.plugins.module_utils._readiness import format_duration

TAIL_LINES = 30

ARGUMENT_SPEC = dict(
    exit_file=dict(type='path', required=True),
    output_file=dict(type='path'),
    log_path=dict(type='path'),
    engine_exit_file=dict(type='path'),
    engine_log_path=dict(type='path'),
    engine_health_url=dict(type='str'),
    health_failures=dict(type='int', default=3),
    health_interval=dict(type='float', default=5.0),
    deadline=dict(type='int', default=3600),
    kill_match=dict(type='str'),
    poll_interval=dict(type='float', default=1.0),
    node=dict(type='str'),
    conc=dict(type='int'),
    stage=dict(type='str', default='sweep'),
)

# SGLang's /health sends a one-token generation through the scheduler and gives up after 20 s
# (SGLANG_HEALTH_CHECK_TIMEOUT), so a loaded but live engine can take that long to answer.
HEALTH_TIMEOUT = 30.0
# A client whose requests all failed because the engine died often exits before the
# engine's exit marker is written: give the marker this long before blaming the client.
_ENGINE_EXIT_GRACE = 1.5
_TERM_GRACE = 5.0
_TAIL_BYTES = 256 * 1024
_MAX_LINE_CHARS = 1000
# The sglang_worker layout: <work>/run/engine-<launch>.exit beside <work>/logs/engine-<launch>.log.
_ENGINE_EXIT_LAYOUT = re.compile(r'^(?P<work>.*)/run/engine-(?P<launch>[^/]+)\.exit$')


class BenchWaitError(Exception):
    """A failed point or bad options; ``details`` are the module's other return values."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.details = details


# ---------------------------------------------------------------- options

class _Options:
    """The module options, checked."""

    def __init__(self, params):
        self.exit_file = params['exit_file']
        self.output_file = params.get('output_file')
        self.log_path = params.get('log_path')
        self.engine_exit_file = params.get('engine_exit_file')
        self.engine_log_path = params.get('engine_log_path') or default_engine_log(self.engine_exit_file)
        self.engine_health_url = params.get('engine_health_url')
        self.health_failures = params['health_failures']
        self.health_interval = params['health_interval']
        self.deadline = params['deadline']
        self.kill_match = params.get('kill_match')
        self.poll_interval = params['poll_interval']
        self.hostname = socket.gethostname()
        self.node = params.get('node') or self.hostname
        self.conc = params.get('conc')
        self.stage = params.get('stage') or 'sweep'
        self._check()

    def _check(self):
        if self.deadline <= 0:
            raise BenchWaitError('deadline must be more than 0 seconds; got %s' % self.deadline)
        if self.health_failures < 1:
            raise BenchWaitError('health_failures must be 1 or more; got %s' % self.health_failures)
        if self.health_interval <= 0:
            raise BenchWaitError('health_interval must be more than 0 seconds; got %s' % self.health_interval)
        if not 0 < self.poll_interval <= 10:
            raise BenchWaitError('poll_interval must be more than 0 and at most 10 seconds; got %s' % self.poll_interval)
        if self.conc is not None and self.conc < 1:
            raise BenchWaitError('conc must be 1 or more; got %s' % self.conc)
        if self.kill_match is not None and not self.kill_match.strip():
            # An empty substring is in every command line: it would stop every process on the node.
            raise BenchWaitError('kill_match must not be empty; use a text only the bench command line has, '
                                 'such as its output file path')
        if self.engine_health_url and not re.match(r'^https?://', self.engine_health_url):
            raise BenchWaitError('engine_health_url must be an http:// or https:// URL; got %r' % self.engine_health_url)

    @property
    def point(self):
        return 'point c%d' % self.conc if self.conc is not None else 'the point'


def default_engine_log(engine_exit_file):
    """The engine log beside an engine exit file in the sglang_worker layout, or None."""
    match = _ENGINE_EXIT_LAYOUT.match(engine_exit_file or '')
    if not match:
        return None
    return '%s/logs/engine-%s.log' % (match.group('work'), match.group('launch'))


# ---------------------------------------------------------------- files

def count_lines(path):
    """Non-blank lines in path (one jsonl record each); 0 when there is no such file."""
    if not path:
        return 0
    try:
        with open(path, 'rb') as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0


def log_tail(path, lines=TAIL_LINES):
    """The last lines of path as a terminal shows them: a tqdm bar redrawn with \\r is its last redraw."""
    if not path:
        return []
    try:
        with open(path, 'rb') as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(size - _TAIL_BYTES, 0)
            handle.seek(start)
            data = handle.read()
    except OSError:
        return []
    pieces = data.split(b'\n')
    if start > 0:
        # The first piece is the cut-off end of a longer line.
        pieces = pieces[1:]
    shown = []
    for piece in pieces:
        segments = [segment.decode('utf-8', 'replace').rstrip() for segment in piece.split(b'\r')]
        visible = [segment for segment in segments if segment]
        if visible:
            shown.append(visible[-1][:_MAX_LINE_CHARS])
    return shown[-lines:]


# ---------------------------------------------------------------- processes

def _proc_cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            raw = handle.read()
    except OSError:
        return ''
    return raw.replace(b'\0', b' ').decode('utf-8', 'replace').strip()


def _own_lineage():
    """This process and its ancestors, which may carry the match text in their own command lines."""
    lineage = set()
    pid = os.getpid()
    while pid and pid not in lineage:
        lineage.add(pid)
        pid = _procs.parent_pid(pid)
    return lineage


def find_processes(match):
    """Pids whose command line contains match, leaving out this module and its ancestors."""
    skip = _own_lineage()
    found = []
    try:
        entries = os.listdir('/proc')
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) in skip:
            continue
        # Kernel threads have an empty command line and never match.
        if match in _proc_cmdline(int(entry)):
            found.append(int(entry))
    return sorted(found)


def _signal(pids, signum):
    """Send signum to pids; return (pids signalled, pids it was not allowed to signal)."""
    sent, denied = [], []
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue
        except PermissionError:
            denied.append(pid)
            continue
        sent.append(pid)
    return sent, denied


def stop_processes(match, grace=_TERM_GRACE):
    """SIGTERM every process matching, SIGKILL those still running after grace seconds.

    Return (pids signalled, pids this user may not signal).
    """
    terminated, denied = _signal(find_processes(match), signal.SIGTERM)
    give_up_at = time.time() + grace
    while any(_procs.pid_alive(pid) for pid in terminated) and time.time() < give_up_at:
        time.sleep(0.1)
    _signal([pid for pid in terminated if _procs.pid_alive(pid)], signal.SIGKILL)
    return terminated, denied


# ---------------------------------------------------------------- health

def probe_health(url, timeout=HEALTH_TIMEOUT):
    """Probe the engine's health (see _health.probe_health)."""
    return _health.probe_health(url, timeout)


class _HealthWatch:
    """Ask the health URL every interval in a thread, so a slow answer never delays seeing the exit file."""

    def __init__(self, url, interval):
        self.url = url
        self.interval = interval
        self.consecutive_failures = 0
        self.last = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='engine-health', daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()

    def _run(self):
        while not self._stop.is_set():
            status, error = probe_health(self.url)
            if self._stop.is_set():
                return
            self.last = status if status is not None else error
            self.consecutive_failures = 0 if status == 200 else self.consecutive_failures + 1
            self._stop.wait(self.interval)


# ---------------------------------------------------------------- the wait

class BenchPointWait:
    """Poll the bench exit file, the engine exit file, the health watch and the clock until an outcome."""

    def __init__(self, params):
        self.options = _Options(params)
        self.started_at = None
        self.health = None

    def wait(self):
        """Return (result, warnings) for a point that finished with 0; raise BenchWaitError otherwise."""
        options = self.options
        self.started_at = time.time()
        if options.engine_health_url:
            self.health = _HealthWatch(options.engine_health_url, options.health_interval)
            self.health.start()
        try:
            outcome = self._poll_until_outcome()
        finally:
            if self.health:
                self.health.stop()
        return self._finish(*outcome)

    def _poll_until_outcome(self):
        options = self.options
        while True:
            # The bench exit file first: a point that finished counts even if the engine died just after.
            if os.path.exists(options.exit_file):
                code = _procs.wait_for_exit_code(options.exit_file)
                engine_code = self._engine_exit_within(_ENGINE_EXIT_GRACE) if code != 0 else False
                if engine_code is not False:
                    return 'engine_exited', engine_code
                return 'done', code
            engine_code = self._engine_exit()
            if engine_code is not False:
                return 'engine_exited', engine_code
            if self.health and self.health.consecutive_failures >= options.health_failures:
                return 'unhealthy', self.health.last
            if time.time() - self.started_at >= options.deadline:
                return 'deadline', None
            time.sleep(options.poll_interval)

    def _engine_exit_within(self, grace):
        give_up_at = time.time() + grace
        engine_code = self._engine_exit()
        while engine_code is False and time.time() < give_up_at:
            time.sleep(0.1)
            engine_code = self._engine_exit()
        return engine_code

    def _engine_exit(self):
        """False while the engine exit file is absent, else the code in it (None if it holds none)."""
        path = self.options.engine_exit_file
        if not path or not os.path.exists(path):
            return False
        return _procs.wait_for_exit_code(path)

    def _finish(self, kind, detail):
        options = self.options
        killed, denied = [], []
        if kind != 'done' and options.kill_match:
            killed, denied = stop_processes(options.kill_match)
        elapsed = time.time() - self.started_at
        result = {
            'changed': bool(killed),
            'rc': detail if kind == 'done' else None,
            'elapsed': round(elapsed, 1),
            'aborted': kind != 'done',
            'output_lines': count_lines(options.output_file),
            'log_tail': log_tail(options.log_path),
            'killed_pids': killed,
        }
        if kind == 'done' and detail == 0:
            return result, self._success_warnings(result)
        result['cause'] = _cause(options, kind, detail)
        raise BenchWaitError(_failure_message(options, kind, detail, result, elapsed, denied), **result)

    def _success_warnings(self, result):
        options = self.options
        if options.output_file and not result['output_lines']:
            return ['the bench client on %s exited 0 for %s but %s has no result line; the point has no numbers, '
                    'see %s' % (options.node, options.point, options.output_file, options.log_path or 'its log')]
        return []


def wait_for_point(params):
    """Module entry point: (result, warnings), or BenchWaitError (bad options or a failed point)."""
    return BenchPointWait(params).wait()


# ---------------------------------------------------------------- messages

def _cause(options, kind, detail):
    if kind == 'done':
        if detail is None:
            return 'the exit file %s appeared but holds no exit code' % options.exit_file
        return 'the bench client exited %d: when every request fails the client writes no result line' % detail
    if kind == 'engine_exited':
        code = 'code %d' % detail if detail is not None else 'no code in it'
        return 'the engine exit file %s appeared (%s)' % (options.engine_exit_file, code)
    if kind == 'unhealthy':
        return ('the engine health URL %s failed %d checks in a row, %s s apart (last: %s)'
                % (options.engine_health_url, options.health_failures, _seconds(options.health_interval), detail))
    return 'the bench exit file %s did not appear within %d s' % (options.exit_file, options.deadline)


def _headline(options, kind, detail):
    if kind in ('engine_exited', 'unhealthy'):
        return 'worker died during %s' % options.point
    if kind == 'deadline':
        return '%s exceeded its deadline of %d s' % (options.point, options.deadline)
    if detail is None:
        return 'the bench client of %s left no exit code' % options.point
    return 'the bench client exited %d during %s' % (detail, options.point)


def _next_step(options, kind, detail, killed, denied):
    log = options.log_path or 'the bench log'
    engine_log = 'the engine log %s' % options.engine_log_path if options.engine_log_path else (
        'the engine log (engine.log in the sglang_worker log dir)')
    if kind == 'done' and detail is None:
        return ('make the wrapper write the exit code into its exit file in one step (a temporary file, then a '
                'rename), and see %s for how the client ended' % log)
    if kind == 'done':
        return ('see %s for the first error of the client (the tail is below), then check that the router and the '
                'engine answer, and read %s' % (log, engine_log))
    stopped = _stopped(options, killed, denied)
    if kind in ('engine_exited', 'unhealthy'):
        return 'the engine died: read %s and redeploy; %s' % (engine_log, stopped)
    return ('check in %s that the engine still makes progress, then raise deadline or lower --num-prompts for this '
            'concurrency; %s' % (engine_log, stopped))


def _stopped(options, killed, denied):
    if denied:
        return ('the bench processes %s could not be stopped (permission denied): run this task with become, and '
                'stop them by hand before the next point; the partial point was discarded'
                % ', '.join(str(pid) for pid in denied))
    if killed:
        return 'the bench client was stopped (pids %s) and the partial point was discarded' % ', '.join(
            str(pid) for pid in killed)
    if options.kill_match:
        return 'no bench process matched %r, so none was stopped; the partial point was discarded' % options.kill_match
    return ('the bench client was not stopped (no kill_match given), so stop it by hand before the next point; '
            'the partial point was discarded')


def _failure_message(options, kind, detail, result, elapsed, denied):
    who = options.node if options.node == options.hostname else '%s (host %s)' % (options.node, options.hostname)
    head = ('%s on %s, stage %s, %s after the start. Cause: %s. Next step: %s.'
            % (_headline(options, kind, detail), who, options.stage, format_duration(elapsed),
               result['cause'], _next_step(options, kind, detail, result['killed_pids'], denied)))
    tail = result['log_tail']
    if not options.log_path:
        return head
    if not tail:
        return head + '\n(no lines in %s)' % options.log_path
    lines = 'line' if len(tail) == 1 else '%d lines' % len(tail)
    return head + '\nLast %s of %s:\n%s' % (lines, options.log_path, '\n'.join(tail))


def _seconds(value):
    return '%d' % value if value == int(value) else '%.1f' % value
