# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""Process facts read on the node, shared by the readiness and bench-point waits."""

from __future__ import annotations

import os
import re
import time

# The launch wrappers write `echo $? >FILE`: the shell creates the file a moment before the code is in it.
EXIT_CODE_GRACE = 2.0


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


def read_exit_code(path):
    """Return the int in an exit file, or None when it is missing or holds no code (yet)."""
    try:
        with open(path, 'r', errors='replace') as handle:
            text = handle.read(100).strip()
    except OSError:
        return None
    return int(text) if re.match(r'^-?\d+$', text) else None


def wait_for_exit_code(path, grace=EXIT_CODE_GRACE):
    """The code in an exit file that has appeared, waiting up to grace seconds for it; None if none comes."""
    give_up_at = time.time() + grace
    code = read_exit_code(path)
    while code is None and time.time() < give_up_at:
        time.sleep(0.1)
        code = read_exit_code(path)
    return code
