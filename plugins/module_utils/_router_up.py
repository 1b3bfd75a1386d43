# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The router's start-up wait (roles/router/tasks/start.yml), in one call on the node.

Infera's router answers GET /health with {"status": "ok", "active_workers": N} once it serves; a router just started
has no worker yet, so the status alone counts. When `process_pattern` and `container_pid` are given, each look that
does not pass also looks for the router's process in that container: a router that exits at its start (a bad
tokenizer path, a port taken) ends the wait then (`exited`), not after the whole timeout.

Nothing here fails: the result says what the wait saw and the caller words the failure.
"""

from __future__ import annotations

import time

from ansible_collections.infera.serving.plugins.module_utils._container_status import processes_in
from ansible_collections.infera.serving.plugins.module_utils._health import get_json, wait_until


def process_alive(container_pid, pattern):
    """alive() for wait_up: whether a process in container_pid's pid namespace matches pattern."""
    return lambda: bool(processes_in(container_pid, {'router': pattern})['router'])


def wait_up(router, timeout, poll=0.2, request_timeout=5, clock=time.monotonic, sleep=time.sleep, alive=None):
    """Wait until the router at base URL `router` answers /health with status ok.

    alive, when given, is asked after each look that did not pass; once it answers False (the router's process is
    gone) the wait ends there.

    Returns a dict: up, health (the /health body or None), health_error, exited (the wait ended because alive() said
    the process was gone) and waited (seconds).
    """
    url = router.rstrip('/') + '/health'
    started = clock()
    state = {'exited': False}

    def probe():
        status, health, error = get_json(url, request_timeout)
        state.update(health=health if isinstance(health, dict) else None,
                     health_error=error or (None if status == 200 else 'HTTP %s' % status))
        state['up'] = (state['health'] or {}).get('status') == 'ok'
        if not state['up'] and alive is not None:
            state['exited'] = not alive()
        return state

    result = wait_until(probe, lambda result: result['up'] or result['exited'], timeout, poll, clock, sleep)
    result['waited'] = round(clock() - started, 2)
    return result


def run(params, clock=time.monotonic, sleep=time.sleep):
    """The router_up module's wait, with the process look when both process_pattern and container_pid are given."""
    alive = None
    if params['process_pattern'] and params['container_pid']:
        alive = process_alive(params['container_pid'], params['process_pattern'])
    return wait_up(params['router'], params['timeout'], params['poll'], clock=clock, sleep=sleep, alive=alive)
