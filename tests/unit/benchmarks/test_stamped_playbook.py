# SPDX-License-Identifier: Apache-2.0
"""faults.stamped_playbook, which the fault matrix, benchmarks/vs_infera_kit and benchmarks/scale_model time every
playbook run with: each line stamped as it arrives, a hook at a line (the fault matrix's case 12 resumes a paused
client when the rerun says c4 is done), and a run that goes silent killed at its timeout with all it started. The
playbook is replaced by a small script here (playbook_process); the rest is the function the tests use."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO / 'tests' / 'integration')]

import faults  # noqa: E402  pylint: disable=wrong-import-position


def _script(monkeypatch, code):
    def process(_playbook, *_extra, limit, env=None):  # pylint: disable=unused-argument
        return subprocess.Popen([sys.executable, '-u', '-c', code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, start_new_session=True)
    monkeypatch.setattr(faults, 'playbook_process', process)


def test_each_line_is_stamped_and_the_hook_runs_once_at_its_line(monkeypatch):
    _script(monkeypatch, 'import sys, time\n'
                         'for word in ("start", "point 1/2 c4 nodp done", "point 1/2 c4 nodp done again", "end"):\n'
                         '    print(word); time.sleep(0.2)\n'
                         'sys.exit(3)\n')
    seen = []
    rc, lines = faults.stamped_playbook('sweep.yml', limit='node', when=('c4 nodp done', lambda: seen.append(time.time())))
    assert rc == 3
    assert [line for _stamp, line in lines] == ['start', 'point 1/2 c4 nodp done', 'point 1/2 c4 nodp done again', 'end']
    stamps = [stamp for stamp, _line in lines]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= 0.5, stamps
    # Once, at the first line that holds the text, and before the next line arrived.
    assert len(seen) == 1 and stamps[1] <= seen[0] < stamps[2], (seen, stamps)


def test_a_silent_run_is_killed_at_its_timeout_with_what_it_started(monkeypatch, tmp_path):
    child = tmp_path / 'child.pid'
    # Prints once, starts a child (as ansible-playbook forks workers), then says nothing for a minute.
    _script(monkeypatch, 'import subprocess, sys, time\n'
                         f'c = subprocess.Popen(["sleep", "60"]); open({str(child)!r}, "w").write(str(c.pid))\n'
                         'print("PLAY [deploy]"); time.sleep(60)\n')
    result = {}

    def run():
        result['out'] = faults.stamped_playbook('deploy_mixed.yml', limit='node', timeout=2)

    runner = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive(), 'a silent playbook run outlived its timeout'
    rc, lines = result['out']
    assert rc == -9 and [line for _stamp, line in lines] == ['PLAY [deploy]']
    assert time.monotonic() - started < 20
    pid = int(child.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the run's child was left running"


def _alive(pid):
    """The process exists and is not a zombie (killed, waiting to be reaped)."""
    try:
        return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError):
        return False
