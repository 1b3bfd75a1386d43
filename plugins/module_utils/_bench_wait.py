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
"""

from __future__ import annotations

import os
import threading
import time

from ansible_collections.infera.serving.plugins.module_utils import _health, _procs
from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._node_files import count_lines, log_tail, wait_for_exit_code
from ansible_collections.infera.serving.plugins.module_utils._options import WaitOptions, check_url
from ansible_collections.infera.serving.plugins.module_utils._remediation import (
    WORKER_DEATHS,
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
        if self.conc is not None and self.conc < 1:
            raise WaitError('conc must be 1 or more; got %s' % self.conc)
        if self.kill_match is not None and not self.kill_match.strip():
            # An empty substring is in every command line: it would stop every process on the node.
            raise WaitError('kill_match must not be empty; use a text only the bench command line has, '
                            'such as its output file path')
        check_url('engine_health_url', self.engine_health_url)

    @property
    def point(self):
        return 'point c%d' % self.conc if self.conc is not None else 'the point'


# ---------------------------------------------------------------- health

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
            status, error = _health.probe_health(self.url, HEALTH_TIMEOUT)
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
        """Return (result, warnings) for a point that finished with 0; raise WaitError otherwise."""
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
                code = wait_for_exit_code(options.exit_file)
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
        return wait_for_exit_code(path)

    def _finish(self, kind, detail):
        options = self.options
        killed, denied = [], []
        if kind != 'done' and options.kill_match:
            killed, denied = _procs.stop_processes(options.kill_match)
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
        result['cause'] = point_cause(options, kind, detail)
        # The engine's last words say why the worker died; the bench log only that it did.
        engine_tail = log_tail(options.engine_log) if kind in WORKER_DEATHS else None
        raise WaitError(point_failure_message(options, kind, detail, result, elapsed, denied, engine_tail), **result)

    def _success_warnings(self, result):
        options = self.options
        if options.output_file and not result['output_lines']:
            return ['the bench client on %s exited 0 for %s but %s has no result line; the point has no numbers, '
                    'see %s' % (options.node, options.point, options.output_file, options.log_path or 'its log')]
        return []


def wait_for_point(params):
    """Module entry point: (result, warnings), or WaitError (bad options or a failed point)."""
    return BenchPointWait(params).wait()
