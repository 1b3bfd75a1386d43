# SPDX-License-Identifier: Apache-2.0
"""A real child process standing in for the bench client, for the tests of the waits and of _procs."""

from __future__ import annotations

import subprocess
import sys
import uuid


class BenchProcess:
    """A real child process standing in for the bench client, recognisable by a unique argument."""

    def __init__(self, ignore_sigterm=False):
        self.mark = 'bench-wait-test-%s' % uuid.uuid4().hex
        body = 'import signal, time\n'
        if ignore_sigterm:
            body += 'signal.signal(signal.SIGTERM, signal.SIG_IGN)\n'
        body += 'print("ready", flush=True)\ntime.sleep(60)\n'
        self.process = subprocess.Popen([sys.executable, '-c', body, '--output-file', '/results/%s.jsonl' % self.mark],
                                        stdout=subprocess.PIPE)
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
        self.process.stdout.close()
