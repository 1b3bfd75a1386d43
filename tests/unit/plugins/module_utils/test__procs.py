# SPDX-License-Identifier: Apache-2.0
"""Finding and stopping processes by command line, against real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

from ansible_collections.infera.serving.plugins.module_utils import _procs
from ansible_collections.infera.serving.plugins.module_utils._procs import find_processes, stop_processes

from .processes import BenchProcess


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(clock):
    with BenchProcess(ignore_sigterm=True) as bench:
        assert find_processes(bench.mark) == [bench.pid]
        assert stop_processes(bench.mark, grace=0.3, clock=clock.time, sleep=clock.sleep) == ([bench.pid], [])
        assert bench.ended_by() == signal.SIGKILL
    # It waited out the grace, and no longer.
    assert clock.now == 0.3


def test_find_processes_never_returns_this_process():
    own_command_line = open('/proc/self/cmdline', 'rb').read().split(b'\0')[0].decode()
    assert os.getpid() not in find_processes(own_command_line)


def test_find_processes_never_returns_an_ancestor(monkeypatch):
    # The module runs under a shell whose command line holds the match: that shell must survive.
    with BenchProcess() as parent:
        real_parent_pid = _procs.parent_pid
        monkeypatch.setattr(_procs, 'parent_pid',
                            lambda pid: parent.pid if pid == os.getpid() else None if pid == parent.pid else real_parent_pid(pid))
        assert find_processes(parent.mark) == []


def test_a_match_may_span_arguments_and_undecodable_bytes_are_no_obstacle():
    mark = 'bench-wait-test-%s' % uuid.uuid4().hex
    body = 'import sys\nprint("ready", flush=True)\nsys.stdin.read()\n'
    process = subprocess.Popen([sys.executable, '-c', body, b'\xff\xfe', '--output-file', mark],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        process.stdout.readline()
        assert find_processes('--output-file %s' % mark) == [process.pid]
    finally:
        process.kill()
        process.wait()
        process.stdin.close()
        process.stdout.close()


def test_a_pid_already_gone_or_not_ours_does_not_stop_the_others(monkeypatch):
    gone = subprocess.Popen([sys.executable, '-c', 'pass'])
    gone.wait()
    with BenchProcess() as denied, BenchProcess() as bench:
        real_kill = os.kill

        def kill(pid, signum):
            if pid == denied.pid:
                raise PermissionError(1, 'Operation not permitted')
            real_kill(pid, signum)
        monkeypatch.setattr(_procs.os, 'kill', kill)
        assert _procs._signal([gone.pid, denied.pid, bench.pid], signal.SIGTERM) == ([bench.pid], [denied.pid])
        monkeypatch.undo()
        assert bench.ended_by() == signal.SIGTERM


def test_stop_lets_a_client_finish_on_sigterm_before_any_sigkill(clock):
    # On SIGTERM the client finishes its work (a line on its stdin says it is done), then exits 3.
    body = ('import signal, sys\n'
            'signal.signal(signal.SIGTERM, lambda *_: (sys.stdin.readline(), sys.exit(3)))\n'
            'print("ready", flush=True)\nsignal.pause()\n')
    mark = 'bench-wait-test-%s' % uuid.uuid4().hex
    process = subprocess.Popen([sys.executable, '-c', body, mark], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def work_done():
        process.stdin.write(b'done\n')
        process.stdin.flush()
        process.wait(timeout=10)

    try:
        process.stdout.readline()
        clock.after(0.3, work_done)
        assert stop_processes(mark, grace=5, clock=clock.time, sleep=clock.sleep) == ([process.pid], [])
        assert process.wait(timeout=10) == 3
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdin.close()
        process.stdout.close()
    # The stop waited for the client to finish, and no longer.
    assert clock.now == 0.3


def test_a_zombie_is_not_alive_and_a_running_process_is():
    process = subprocess.Popen([sys.executable, '-c', 'pass'])
    # Block until it has exited, without reaping it (WNOWAIT): a zombie however long a loaded machine took.
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    try:
        assert _procs.pid_alive(process.pid) is False
        assert _procs.pid_alive(os.getpid()) is True
        assert _procs.parent_pid(os.getpid()) == os.getppid()
    finally:
        process.wait()
