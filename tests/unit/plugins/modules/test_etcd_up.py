# SPDX-License-Identifier: Apache-2.0
"""The whole etcd_up module: arguments in, exit_json out, against a local etcd /health and a fake Docker engine."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.modules import etcd_up

from ..module_utils.test__etcd_up import etcd_container
from ..module_utils.test__preflight import DockerEngine, HttpServer
from .utils import run_module


@pytest.mark.parametrize('check_mode', [False, True])
def test_reports_a_healthy_etcd_and_changes_nothing(check_mode):
    with DockerEngine() as docker, HttpServer(200, {'health': 'true'}) as etcd:
        etcd_container(docker)
        kind, result, _warnings = run_module(etcd_up.main, {'endpoint': 'http://%s' % etcd.address,
                                                            'container': 'infera-etcd', 'docker_socket': docker.socket},
                                             check_mode=check_mode)
    assert kind == 'exit'
    assert result['changed'] is False
    assert (result['healthy'], result['ended'], result['looks']) == (True, 'healthy', 1)


def test_an_etcd_that_is_gone_is_a_result_not_a_module_failure():
    with DockerEngine() as docker:
        kind, result, _warnings = run_module(etcd_up.main, {'endpoint': 'http://127.0.0.1:9', 'container': 'infera-etcd',
                                                            'docker_socket': docker.socket})
    assert kind == 'exit'
    assert (result['healthy'], result['ended']) == (False, 'gone')
    assert result['status'] is None and result['error']


def test_a_poll_of_zero_fails_the_module_naming_it():
    kind, result, _warnings = run_module(etcd_up.main, {'endpoint': 'http://127.0.0.1:9', 'container': 'infera-etcd',
                                                        'poll': 0})
    assert kind == 'fail'
    assert result['msg'] == 'poll must be more than 0 seconds and timeout 0 or more; got 0.0 and 60.0'
