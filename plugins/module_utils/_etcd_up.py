# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""etcd's start-up wait (roles/etcd/tasks/present.yml), in one call on the node.

etcd answers GET /health with {"health":"true"} once it serves (_etcd.ask_health). A port taken or another member's
data directory makes etcd exit at its start, and under the role's restart policy Docker restarts it again and again:
so each look also reads the container's state from the Docker engine, and the wait ends at the first sign that
etcd's process ended (the container stopped, is gone, or runs again under another pid or after more restarts), not
after the whole timeout. /health is asked first at each look, so another etcd answering on the port ends the wait
as healthy: the caller checks who answered.

Nothing here fails on what etcd or Docker answers: the result says how the wait ended and the caller words the failure.
"""

from __future__ import annotations

import time

from ansible_collections.infera.serving.plugins.module_utils._docker_socket import container_run_state
from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._etcd import ask_health, etcd_url
from ansible_collections.infera.serving.plugins.module_utils._health import wait_until

# Seconds the Docker engine may take to answer one inspect.
DOCKER_TIMEOUT = 5.0
# How much of the last /health body the result keeps: its end, where etcd puts its reason.
BODY_CHARS = 2000


def _answer(health):
    """The parts of an _etcd.ask_health answer the result keeps, as text."""
    body = health['body'].decode('utf-8', 'replace') if isinstance(health['body'], bytes) else health['body']
    return {'status': health['status'], 'body': body[-BODY_CHARS:],
            'error': None if health['error'] is None else str(health['error'])}


def how_it_ended(healthy, state, start):
    """'healthy', 'gone' (no such container), 'exited' (it no longer runs, or Docker waits to restart it),
    'restarted' (it runs under another pid than at the first look, or after more restarts than start['restart_count'])
    or '' (the wait goes on). The first look fills in start's pid, and its restart_count when the start's is unknown."""
    if healthy:
        ended = 'healthy'
    elif not state['exists']:
        ended = 'gone'
    elif not state['running']:
        ended = 'exited'
    elif ((start['pid'] is not None and state['pid'] != start['pid'])
          or (start['restart_count'] is not None and state['restart_count'] > start['restart_count'])):
        ended = 'restarted'
    else:
        ended = ''
    if start['pid'] is None:
        start['pid'] = state['pid']
        if start['restart_count'] is None:
            start['restart_count'] = state['restart_count']
    return ended


def wait_up(endpoint, container, timeout, poll=0.5, restart_count=None, docker_socket='/var/run/docker.sock',
            clock=time.monotonic, sleep=time.sleep):
    """Ask etcd at endpoint for /health every poll seconds until it answers healthy, or the process of `container`
    ended, or timeout seconds have passed.

    restart_count is the container's count when it was started; without it, the first look's count.

    Returns ended ('healthy', 'exited', 'restarted', 'gone' or 'timeout'), healthy, waited (s), looks, the last
    answer (status, body, error) and the container's last state (container: exists, running, pid, restart_count,
    status, exit_code).
    """
    url = etcd_url(endpoint) + '/health'
    started = clock()
    start = {'pid': None, 'restart_count': restart_count}
    looks = []

    def look():
        looks.append(1)
        health = ask_health(url, max(0.5, min(5.0, started + timeout - clock())))
        state = container_run_state(docker_socket, container, DOCKER_TIMEOUT)
        return dict(_answer(health), ended=how_it_ended(health['healthy'], state, start), container=state)

    result = wait_until(look, lambda result: result['ended'], timeout, poll, clock, sleep)
    result['ended'] = result['ended'] or 'timeout'
    result.update(healthy=result['ended'] == 'healthy', waited=round(clock() - started, 2), looks=len(looks))
    return result


def run(params, clock=time.monotonic, sleep=time.sleep):
    """The etcd_up module's wait from its parameters; WaitError for a poll or a timeout no wait can keep."""
    if not params['poll'] > 0 or params['timeout'] < 0:
        raise WaitError('poll must be more than 0 seconds and timeout 0 or more; got %r and %r'
                        % (params['poll'], params['timeout']))
    return wait_up(params['endpoint'], params['container'], params['timeout'], params['poll'],
                   params['restart_count'], params['docker_socket'], clock, sleep)
