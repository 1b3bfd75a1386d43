# SPDX-License-Identifier: Apache-2.0
"""A real child process standing in for the bench client, for the tests of the waits and of _procs."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import uuid

from ansible_collections.infera.serving.plugins.module_utils import _procs


class BenchProcess:
    """A real child process standing in for the bench client, recognisable by a unique argument.

    It runs until a signal ends it or its stdin closes, so one a failed test left behind ends with the tests.
    """

    def __init__(self, ignore_sigterm=False):
        self.mark = 'bench-wait-test-%s' % uuid.uuid4().hex
        body = 'import signal, sys\n'
        if ignore_sigterm:
            body += 'signal.signal(signal.SIGTERM, signal.SIG_IGN)\n'
        body += 'print("ready", flush=True)\nsys.stdin.read()\n'
        self.process = subprocess.Popen([sys.executable, '-c', body, '--output-file', '/results/%s.jsonl' % self.mark],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        # Signal handling is in place once it has printed.
        self.process.stdout.readline()

    @property
    def pid(self):
        return self.process.pid

    def ended_by(self):
        """The signal that ended it, waiting briefly."""
        return -self.process.wait(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.process.stdin.close()
        self.process.stdout.close()


def signals_take_effect_at_once(monkeypatch):
    """Make each signal _procs sends have ended its process before _procs looks again, as on a node within the grace.

    On a fake clock the grace passes in no time: without this, whether a SIGKILL followed a SIGTERM would depend on
    how fast the machine let the process die.
    """
    send = _procs._signal

    def send_and_wait(pids, signum):
        sent, denied = send(pids, signum)
        for pid in sent:
            gone = os.pidfd_open(pid)
            try:
                assert select.select([gone], [], [], 10)[0], 'process %d outlived signal %d' % (pid, signum)
            finally:
                os.close(gone)
        return sent, denied

    monkeypatch.setattr(_procs, '_signal', send_and_wait)
