# SPDX-License-Identifier: Apache-2.0
"""The router's start-up wait (router_up), against a real local HTTP server shaped like infera.server, on the fake
clock: looks are counted, not timed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _router_up

from .test__router_check import Router

REFUSED = 'http://127.0.0.1:9'


def _params(router, **overrides):
    params = dict(router=router, timeout=10.0, poll=0.2, process_pattern='', container_pid=0)
    params.update(overrides)
    return params


def test_a_router_answering_status_ok_is_up_at_the_first_look_without_asking_for_workers(clock):
    looks = []
    with Router([]) as router:
        result = _router_up.wait_up(router.url, timeout=10, clock=clock.monotonic, sleep=clock.sleep,
                                    alive=lambda: looks.append(1) or True)
    assert result == {'up': True, 'exited': False, 'waited': 0, 'health': {'status': 'ok', 'active_workers': 0},
                      'health_error': None}
    # A just-started router lists no worker: only its /health counts, and a router that is up is not looked for.
    assert [request[1] for request in router.requests] == ['/health']
    assert looks == []


def test_a_router_that_becomes_ok_during_the_wait_is_up_at_that_look(clock):
    with Router([], status='starting') as router:
        clock.after(0.6, lambda: setattr(router, 'status', 'ok'))
        result = _router_up.wait_up(router.url, timeout=10, poll=0.2, clock=clock.monotonic, sleep=clock.sleep)
    assert result['up'] is True and result['exited'] is False
    assert result['waited'] == 0.6
    # Looked at 0, 0.2, 0.4 and 0.6 s of the fake clock.
    assert len(router.requests) == 4


def test_a_router_that_never_answers_is_not_up_after_the_timeout_with_its_error(clock):
    result = _router_up.wait_up(REFUSED, timeout=1.0, poll=0.25, clock=clock.monotonic, sleep=clock.sleep)
    assert result['up'] is False and result['exited'] is False
    assert result['health'] is None and result['health_error']
    assert result['waited'] == 1.0


def test_an_unhealthy_status_is_not_up_and_keeps_the_body(clock):
    with Router([], status='starting') as router:
        result = _router_up.wait_up(router.url, timeout=0.4, poll=0.2, clock=clock.monotonic, sleep=clock.sleep)
    assert result['up'] is False
    assert result['health'] == {'status': 'starting', 'active_workers': 0} and result['health_error'] is None


def test_a_router_process_that_is_gone_ends_the_wait_at_that_look(clock):
    # A router that exits at its start: the wait stops at the first look that finds no process, not at the timeout.
    answers = iter([True, True, False])
    looks = []

    def alive():
        looks.append(1)
        return next(answers)

    result = _router_up.wait_up(REFUSED, timeout=30, poll=0.01, clock=clock.monotonic, sleep=clock.sleep, alive=alive)
    assert result['exited'] is True and result['up'] is False
    assert len(looks) == 3
    assert result['health'] is None and result['health_error']
    assert result['waited'] == 0.02


def test_a_running_router_process_is_waited_out(clock):
    looks = []
    result = _router_up.wait_up(REFUSED, timeout=1.0, poll=0.25, clock=clock.monotonic, sleep=clock.sleep,
                                alive=lambda: looks.append(1) or True)
    assert result['exited'] is False and result['up'] is False
    # Looked at 0, 0.25, 0.5, 0.75 and 1.0 s of the fake clock: the running process was asked each time.
    assert len(looks) == 5 and result['waited'] == 1.0


def test_the_router_process_is_looked_for_in_the_containers_pid_namespace_on_the_real_proc(clock):
    # Runs until killed, or until its stdin closes with the tests.
    child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()', 'router-up-probe'],
                             stdin=subprocess.PIPE)

    def router_exits():
        child.kill()
        child.wait()

    try:
        params = _params(REFUSED, poll=0.1, container_pid=os.getpid(),
                         process_pattern=r'-c import sys.* router-up-probe$|no-such-script[.]sh')
        # The probe runs: the wait goes on while the router does not answer, until the probe is gone.
        clock.after(0.3, router_exits)
        result = _router_up.run(params, clock.monotonic, clock.sleep)
    finally:
        router_exits()
        child.stdin.close()
    assert result['exited'] is True and result['up'] is False
    assert result['waited'] == 0.3


@pytest.mark.parametrize('look', [{}, {'container_pid': os.getpid()}, {'process_pattern': 'no-such-process-at-all'}])
def test_without_a_pattern_or_a_container_the_process_is_not_looked_for(clock, look):
    result = _router_up.run(_params(REFUSED, timeout=0.2, **look), clock.monotonic, clock.sleep)
    assert result['exited'] is False and result['waited'] == 0.2
