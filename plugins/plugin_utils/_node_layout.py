# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The one owner of the node's work directory layout: the folders the container role makes under the work directory
(mounted at the same path in the container) and the file each role writes or reads there.

The worker's launch files are per launch (engine-<launch id>.log, .pid, .exit and ready-<launch id>.json), so an old
ready line can never count for a new launch; its launch script points two "current" links (logs/engine.log,
run/engine.exit) at the newest launch's log and exit file, which the sweep and the summary read."""

from __future__ import annotations

import posixpath

# The folders under the work directory: launch scripts, logs, run files (pids, exits, states, the token file) and
# the sweep's results.
WORK_DIRS = ('scripts', 'logs', 'run', 'results')


def _under(work_dir, *parts):
    return posixpath.join(work_dir, *parts)


def work_dirs(work_dir):
    """The folders the container role makes under `work_dir`."""
    return [_under(work_dir, name) for name in WORK_DIRS]


def router_files(work_dir):
    """The router's launch script and its log."""
    return {'script': _under(work_dir, 'scripts', 'router.sh'), 'log': _under(work_dir, 'logs', 'router.log')}


def worker_files(work_dir, launch_id=None):
    """The worker's files that outlive a launch (launch script, token file, the two current links), or with a
    `launch_id` that launch's own log, pid, exit and readiness-state file (and the id itself)."""
    if launch_id is None:
        return {'script': _under(work_dir, 'scripts', 'engine.sh'), 'secrets': _under(work_dir, 'run', 'secrets.env'),
                'log': _under(work_dir, 'logs', 'engine.log'), 'exit_file': _under(work_dir, 'run', 'engine.exit')}
    return {'id': launch_id, 'log': _under(work_dir, 'logs', 'engine-%s.log' % launch_id),
            'pid_file': _under(work_dir, 'run', 'engine-%s.pid' % launch_id),
            'exit_file': _under(work_dir, 'run', 'engine-%s.exit' % launch_id),
            'state_file': _under(work_dir, 'run', 'ready-%s.json' % launch_id)}


def sweep_results_dir(work_dir, run_id):
    """Where a sweep run's points write their files on the node."""
    return _under(work_dir, 'results', run_id)
