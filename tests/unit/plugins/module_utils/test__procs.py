# SPDX-License-Identifier: Apache-2.0
"""Finding and stopping processes by command line, against real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

from ansible_collections.infera.serving.plugins.module_utils import _procs
from ansible_collections.infera.serving.plugins.module_utils._procs import find_processes, stop_processes

from .processes import BenchProcess


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored():
    with BenchProcess(ignore_sigterm=True) as bench:
        assert find_processes(bench.mark) == [bench.pid]
        started = time.time()
        assert stop_processes(bench.mark, grace=0.3) == ([bench.pid], [])
        assert bench.ended_by() == signal.SIGKILL
        assert time.time() - started < 10


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
    body = 'import time\nprint("ready", flush=True)\ntime.sleep(60)\n'
    process = subprocess.Popen([sys.executable, '-c', body, b'\xff\xfe', '--output-file', mark], stdout=subprocess.PIPE)
    try:
        process.stdout.readline()
        assert find_processes('--output-file %s' % mark) == [process.pid]
    finally:
        process.kill()
        process.wait()
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


def test_stop_lets_a_client_finish_on_sigterm_before_any_sigkill():
    body = ('import signal, sys, time\n'
            'signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.3), sys.exit(3)))\n'
            'print("ready", flush=True)\ntime.sleep(60)\n')
    mark = 'bench-wait-test-%s' % uuid.uuid4().hex
    process = subprocess.Popen([sys.executable, '-c', body, mark], stdout=subprocess.PIPE)
    try:
        process.stdout.readline()
        assert stop_processes(mark, grace=5) == ([process.pid], [])
        assert process.wait(timeout=10) == 3
    finally:
        process.stdout.close()


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
