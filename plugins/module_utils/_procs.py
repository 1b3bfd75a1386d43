# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""Processes on the node, from /proc: one process (alive, parent, command line, pid namespace, root), finding and
stopping them by command line, and which of them hold a listening TCP port or a GPU device."""

from __future__ import annotations

import os
import signal
import time

# The unit tests point this at a fake tree.
PROC = '/proc'
TERM_GRACE = 5.0
# The TCP state LISTEN in /proc/net/tcp{,6}.
_TCP_LISTEN = '0A'


# ---------------------------------------------------------------- one process

def all_pids():
    """The pids of every process /proc lists, in order; OSError when it cannot be listed."""
    return sorted(int(entry) for entry in os.listdir(PROC) if entry.isdigit())


def _stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (state first), or None if gone."""
    try:
        with open(os.path.join(PROC, str(pid), 'stat'), 'r') as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after its last ')'.
    return stat.rsplit(')', 1)[-1].split()


def parent_pid(pid):
    """The parent's pid, or None when pid is gone."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


def pid_alive(pid):
    """True while pid runs; a zombie has exited, only its parent has not reaped it yet."""
    if os.path.isdir(os.path.join(PROC, 'self')):
        fields = _stat_fields(pid)
        return fields is not None and fields[:1] != ['Z']
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_command_line(pid):
    """The command line of pid as pgrep -f matches it (its arguments joined by spaces); '' when it is gone, a
    kernel thread or a zombie."""
    try:
        with open(os.path.join(PROC, str(pid), 'cmdline'), 'rb') as handle:
            raw = handle.read()
    except OSError:
        return ''
    return raw.rstrip(b'\0').replace(b'\0', b' ').decode('utf-8', 'replace')


def command_line(pid):
    """The command line of pid as one string, or '?' when it is gone or unreadable."""
    return read_command_line(pid).strip() or '?'


def pid_namespace(pid):
    """The pid namespace of pid (the link /proc/<pid>/ns/pid reads, e.g. pid:[4026532577]), or None."""
    try:
        return os.readlink(os.path.join(PROC, str(pid), 'ns', 'pid'))
    except OSError:
        return None


def pid_in_namespace(pid):
    """The pid that pid has in its own (innermost) pid namespace: the last field of NSpid in /proc/<pid>/status."""
    try:
        with open(os.path.join(PROC, str(pid), 'status')) as handle:
            for line in handle:
                if line.startswith('NSpid:'):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return pid


def process_root(pid):
    """Where the node sees the files of pid's mount namespace (/proc/<pid>/root; readable by root only)."""
    return os.path.join(PROC, str(pid), 'root')


# ---------------------------------------------------------------- finding and stopping by command line

def _own_lineage():
    """This process and its ancestors, which may carry the match text in their own command lines."""
    lineage = set()
    pid = os.getpid()
    while pid and pid not in lineage:
        lineage.add(pid)
        pid = parent_pid(pid)
    return lineage


def find_processes(match):
    """Pids whose command line contains match, leaving out this module and its ancestors."""
    skip = _own_lineage()
    try:
        pids = all_pids()
    except OSError:
        return []
    # Kernel threads have an empty command line and never match.
    return [pid for pid in pids if pid not in skip and match in read_command_line(pid)]


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


def stop_processes(match, grace=TERM_GRACE, clock=time.time, sleep=time.sleep):
    """SIGTERM every process matching, SIGKILL those still running after grace seconds (on clock, waited with sleep).

    Return (pids signalled, pids this user may not signal).
    """
    terminated, denied = _signal(find_processes(match), signal.SIGTERM)
    give_up_at = clock() + grace
    while any(pid_alive(pid) for pid in terminated) and clock() < give_up_at:
        sleep(0.1)
    _signal([pid for pid in terminated if pid_alive(pid)], signal.SIGKILL)
    return terminated, denied


# ---------------------------------------------------------------- listening ports, and who holds them or a GPU

def listening_ports(table):
    """{port: set of socket inodes} of the LISTEN sockets in the text of /proc/net/tcp or /proc/net/tcp6."""
    found = {}
    for line in table.splitlines()[1:]:
        # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN or fields[9] == '0':
            continue
        port = int(fields[1].rsplit(':', 1)[1], 16)
        found.setdefault(port, set()).add(fields[9])
    return found


def node_listening_ports():
    """{port: socket inodes} of every TCP LISTEN socket in this network namespace, IPv4 and IPv6."""
    found = {}
    for table in ('tcp', 'tcp6'):
        try:
            with open(os.path.join(PROC, 'net', table), 'r', encoding='utf-8', errors='replace') as handle:
                text = handle.read()
        except OSError:
            continue  # a kernel without IPv6 has no tcp6
        for port, inodes in listening_ports(text).items():
            found.setdefault(port, set()).update(inodes)
    return found


def _is_gpu_device(target):
    return target == '/dev/kfd' or target.startswith('/dev/dri/renderD')


class ProcessTable:
    """Who holds what on the node, from one pass over /proc/<pid>/fd: socket inodes and the GPU device nodes.

    Every ROCm process opens /dev/kfd, so its holders are the processes using a GPU. Another user's fds are
    readable only by root; those processes are counted in ``unreadable``.
    """

    def __init__(self):
        self.socket_holders = {}
        self.gpu_holders = []
        self.unreadable = 0
        try:
            pids = all_pids()
        except OSError:
            pids = []
        for pid in pids:
            self._scan(pid)

    def _scan(self, pid):
        fd_dir = os.path.join(PROC, str(pid), 'fd')
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            self.unreadable += 1
            return
        except OSError:
            return  # exited meanwhile
        holds_gpu = False
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith('socket:[') and target.endswith(']'):
                self.socket_holders.setdefault(target[len('socket:['):-1], []).append(pid)
            elif _is_gpu_device(target):
                holds_gpu = True
        if holds_gpu:
            self.gpu_holders.append(pid)

    def holders_of(self, inodes):
        """The pids holding any of these socket inodes, each once, in order."""
        return sorted({pid for inode in inodes for pid in self.socket_holders.get(inode, ())})
