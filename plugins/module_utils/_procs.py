# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""Process facts read on the node, shared by the readiness and bench-point waits."""

from __future__ import annotations

import os


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
