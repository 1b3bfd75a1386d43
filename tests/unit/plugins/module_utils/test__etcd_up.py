# SPDX-License-Identifier: Apache-2.0
"""etcd's start-up wait (etcd_up): /health from a real local HTTP server, the container from a fake Docker engine on a
unix socket, on the fake clock: looks are counted, not timed."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _etcd_up
from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError

from .test__preflight import DockerEngine, HttpServer

REFUSED = 'http://127.0.0.1:9'
RUNNING = {'exists': True, 'running': True, 'pid': 4000, 'restart_count': 0, 'status': 'running', 'exit_code': 0}


@pytest.fixture
def docker():
    with DockerEngine() as engine:
        yield engine


def etcd_container(docker, pid=4000, running=True, restarting=False, restarts=0, status='running', exit_code=0):
    docker.containers['infera-etcd'] = {'Id': 'e1', 'Config': {'Image': 'etcd:3.4'}, 'RestartCount': restarts,
                                        'State': {'Running': running, 'Restarting': restarting, 'Pid': pid,
                                                  'Status': status, 'ExitCode': exit_code}}


def wait(docker, clock, endpoint=REFUSED, **options):
    options.setdefault('timeout', 60.0)
    return _etcd_up.wait_up(endpoint, 'infera-etcd', docker_socket=docker.socket, clock=clock.monotonic,
                            sleep=clock.sleep, **options)


@pytest.mark.parametrize('healthy, state, start, ended', [
    (True, dict(RUNNING, running=False), {'pid': None, 'restart_count': None}, 'healthy'),
    (False, dict(RUNNING, exists=False), {'pid': None, 'restart_count': None}, 'gone'),
    (False, dict(RUNNING, running=False), {'pid': 4000, 'restart_count': 0}, 'exited'),
    (False, dict(RUNNING, pid=4100), {'pid': 4000, 'restart_count': 0}, 'restarted'),
    (False, dict(RUNNING, restart_count=2), {'pid': None, 'restart_count': 1}, 'restarted'),
    (False, RUNNING, {'pid': None, 'restart_count': None}, ''),
    (False, RUNNING, {'pid': 4000, 'restart_count': 0}, ''),
])
def test_how_a_look_ends_the_wait(healthy, state, start, ended):
    assert _etcd_up.how_it_ended(healthy, state, start) == ended


def test_the_first_look_sets_the_pid_and_the_restart_count_later_looks_compare_with():
    start = {'pid': None, 'restart_count': None}
    _etcd_up.how_it_ended(False, dict(RUNNING, restart_count=3), start)
    assert start == {'pid': 4000, 'restart_count': 3}
    # The count from the container's start is kept: a restart before the first look still counts.
    start = {'pid': None, 'restart_count': 1}
    _etcd_up.how_it_ended(False, dict(RUNNING, restart_count=1), start)
    assert start == {'pid': 4000, 'restart_count': 1}


def test_a_healthy_answer_ends_the_wait_at_the_first_look(docker, clock):
    etcd_container(docker)
    with HttpServer(200, {'health': 'true'}) as etcd:
        health = wait(docker, clock, 'http://%s' % etcd.address)
        assert etcd.paths == ['/health']
    assert (health['ended'], health['healthy'], health['looks'], health['waited'], clock.slept) == ('healthy', True, 1, 0, [])
    assert health['status'] == 200 and '"health": "true"' in health['body'] and health['error'] is None
    assert health['container'] == RUNNING


def test_an_unhealthy_answer_is_asked_again_until_healthy_and_its_body_is_kept(docker, clock):
    etcd_container(docker)
    # An etcd without a leader yet answers 503 with its reason: the reason is the last answer the role quotes.
    with HttpServer(503, {'health': 'false', 'reason': 'RAFT NO LEADER'}) as etcd:
        unhealthy = wait(docker, clock, 'http://%s' % etcd.address, timeout=0)
        assert (unhealthy['ended'], unhealthy['status'], unhealthy['error']) == ('timeout', 503, None)
        assert 'RAFT NO LEADER' in unhealthy['body']

        clock.after(1.5, lambda: setattr(etcd, 'status', 200))
        clock.after(1.5, lambda: setattr(etcd, 'body', {'health': 'true'}))
        health = wait(docker, clock, 'http://%s' % etcd.address)
    assert (health['ended'], health['looks'], health['waited'], clock.slept) == ('healthy', 4, 1.5, [0.5, 0.5, 0.5])


def test_a_200_that_does_not_say_healthy_is_not_healthy(docker, clock):
    etcd_container(docker)
    with HttpServer(200, {'health': 'false', 'reason': 'RAFT NO LEADER'}) as etcd:
        health = wait(docker, clock, 'http://%s' % etcd.address, timeout=1.0)
    assert (health['ended'], health['healthy'], health['looks']) == ('timeout', False, 3)


def test_a_container_that_stopped_ends_the_wait_at_once_with_its_state(docker, clock):
    # Nothing listens on the port: etcd exited at its start; Docker waits to restart it.
    etcd_container(docker, pid=0, running=True, restarting=True, restarts=1, status='restarting', exit_code=1)
    health = wait(docker, clock)
    assert (health['ended'], health['healthy'], health['looks'], health['status']) == ('exited', False, 1, None)
    assert health['error'] and health['body'] == ''
    assert health['container'] == {'exists': True, 'running': False, 'pid': 0, 'restart_count': 1, 'status': 'restarting',
                                   'exit_code': 1}


def test_a_container_that_runs_again_under_another_pid_has_restarted(docker, clock):
    etcd_container(docker, pid=4000)
    clock.after(1.0, lambda: etcd_container(docker, pid=4100, restarts=1))
    health = wait(docker, clock)
    assert (health['ended'], health['looks'], health['waited']) == ('restarted', 3, 1.0)
    assert health['container']['pid'] == 4100


def test_more_restarts_than_at_its_start_is_a_restart_even_at_the_first_look(docker, clock):
    # It crashed and came back before the first look: the pid is new to the wait, but its count is not the start's.
    etcd_container(docker, pid=4100, restarts=2)
    health = wait(docker, clock, restart_count=1)
    assert (health['ended'], health['looks']) == ('restarted', 1)
    # Without the count from its start, the first look's count is the baseline: the same state is waited on.
    health = wait(docker, clock, timeout=2.0)
    assert (health['ended'], health['looks']) == ('timeout', 5)


def test_a_running_container_that_never_answers_is_waited_for_until_the_timeout(docker, clock):
    etcd_container(docker, restarts=3)
    health = wait(docker, clock, timeout=3.0, poll=1.0, restart_count=3)
    assert (health['ended'], health['healthy'], health['looks'], health['waited']) == ('timeout', False, 4, 3.0)


def test_a_missing_container_is_gone_and_another_etcd_answering_healthy_still_counts(docker, clock):
    health = wait(docker, clock)
    assert (health['ended'], health['container']['exists'], health['container']['status']) == ('gone', False, 'gone')
    # Another etcd on the port answers while this container is down: healthy, and the caller asks who answered.
    etcd_container(docker, pid=0, running=False, status='exited', exit_code=1)
    with HttpServer(200, {'health': 'true'}) as other:
        health = wait(docker, clock, 'http://%s' % other.address)
    assert (health['ended'], health['container']['status']) == ('healthy', 'exited')


def test_run_reads_an_endpoint_as_infera_does_and_asks_its_health(docker, clock):
    etcd_container(docker)
    with HttpServer(200, {'health': 'true'}) as etcd:
        params = dict(endpoint=etcd.address, container='infera-etcd', timeout=5.0, poll=0.5, restart_count=0,
                      docker_socket=docker.socket)
        health = _etcd_up.run(params, clock.monotonic, clock.sleep)
        assert etcd.paths == ['/health']
    assert health['healthy'] is True


@pytest.mark.parametrize('poll, timeout', [(0, 60.0), (-1, 60.0), (0.5, -1)])
def test_a_poll_or_timeout_no_wait_can_keep_is_refused(poll, timeout):
    params = dict(endpoint=REFUSED, container='infera-etcd', timeout=timeout, poll=poll, restart_count=None,
                  docker_socket='/nonexistent/docker.sock')
    with pytest.raises(WaitError, match=r'poll must be more than 0 seconds and timeout 0 or more; got %r and %r'
                       % (poll, timeout)):
        _etcd_up.run(params)
