# SPDX-License-Identifier: Apache-2.0
"""faults.stamped_playbook, which the fault matrix, benchmarks/vs_infera_kit and benchmarks/scale_model time every
playbook run with: each line stamped as it arrives, a hook at a line (the fault matrix's case 12 resumes a paused
client when the rerun says c4 is done), and a run that goes silent killed at its timeout with all it started. The
playbook is replaced by a small script here (playbook_process); the rest is the function the tests use."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO / 'tests' / 'integration')]

import faults  # noqa: E402  pylint: disable=wrong-import-position


def _script(monkeypatch, code):
    """Run code in place of the playbook; returns the list its process goes into once started."""
    started = []

    def process(_playbook, *_extra, limit, env=None):  # pylint: disable=unused-argument
        started.append(subprocess.Popen([sys.executable, '-u', '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True))
        return started[-1]
    monkeypatch.setattr(faults, 'playbook_process', process)
    return started


class _Stamps:
    """faults' clock during one run: each stamp reads the next whole second and lets the playbook print its next line."""

    def __init__(self, run):
        self.run = run
        self.taken = 0

    def time(self):
        self.taken += 1
        self.run[0].stdin.write('stamped\n')
        self.run[0].stdin.flush()
        return float(self.taken)


def test_each_line_is_stamped_and_the_hook_runs_once_at_its_line(monkeypatch):
    # The playbook prints each line only once the one before was stamped: stamped only after the next line came, or
    # once the run ended, the run would never end (killed at its timeout instead of exiting 3).
    run = _script(monkeypatch, 'import sys\n'
                               'for word in ("start", "point 1/2 c4 nodp done", "point 1/2 c4 nodp done again", "end"):\n'
                               '    print(word); sys.stdin.readline()\n'
                               'sys.exit(3)\n')
    stamps = _Stamps(run)
    monkeypatch.setattr(faults, 'time', stamps)
    seen = []
    rc, lines = faults.stamped_playbook('sweep.yml', limit='node', timeout=30,
                                        when=('c4 nodp done', lambda: seen.append(stamps.taken)))
    assert rc == 3
    assert [line for _stamp, line in lines] == ['start', 'point 1/2 c4 nodp done', 'point 1/2 c4 nodp done again', 'end']
    assert [stamp for stamp, _line in lines] == [1.0, 2.0, 3.0, 4.0]
    # Once, at the first line that holds the text: after that line's stamp, before the next line's.
    assert seen == [2]


def test_a_silent_run_is_killed_at_its_timeout_with_what_it_started(monkeypatch, tmp_path):
    child = tmp_path / 'child.pid'
    # Prints once, starts a child (as ansible-playbook forks workers), then says nothing until it is killed.
    _script(monkeypatch, 'import subprocess, sys\n'
                         f'c = subprocess.Popen(["sleep", "60"]); open({str(child)!r}, "w").write(str(c.pid))\n'
                         'print("PLAY [deploy]"); sys.stdin.read()\n')
    result = {}

    def run():
        result['out'] = faults.stamped_playbook('deploy_mixed.yml', limit='node', timeout=1)

    # In a thread, so that a run the timeout fails to end fails the test instead of hanging it.
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive(), 'a silent playbook run outlived its timeout'
    rc, lines = result['out']
    # Killed (it would never exit by itself), with what it printed.
    assert rc == -9 and [line for _stamp, line in lines] == ['PLAY [deploy]']
    assert _gone(int(child.read_text())), "the run's child was left running"


def _gone(pid, timeout=10):
    """Whether pid ends (or has ended) within timeout seconds: a killed child may take a moment to die."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([handle], [], [], timeout)[0])
    finally:
        os.close(handle)
