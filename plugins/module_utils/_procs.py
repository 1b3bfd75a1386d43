# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""Processes on the node: whether one runs, its parent, and finding and stopping them by command line."""

from __future__ import annotations

import os
import signal
import time

TERM_GRACE = 5.0


def _stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (state first), or None if gone."""
    try:
        with open('/proc/%d/stat' % pid, 'r') as handle:
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
    if os.path.isdir('/proc/self'):
        fields = _stat_fields(pid)
        return fields is not None and fields[:1] != ['Z']
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        pid = parent_pid(pid)
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


def stop_processes(match, grace=TERM_GRACE):
    """SIGTERM every process matching, SIGKILL those still running after grace seconds.

    Return (pids signalled, pids this user may not signal).
    """
    terminated, denied = _signal(find_processes(match), signal.SIGTERM)
    give_up_at = time.time() + grace
    while any(pid_alive(pid) for pid in terminated) and time.time() < give_up_at:
        time.sleep(0.1)
    _signal([pid for pid in terminated if pid_alive(pid)], signal.SIGKILL)
    return terminated, denied
