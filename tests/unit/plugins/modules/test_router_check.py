# SPDX-License-Identifier: Apache-2.0
"""The whole router_check module: arguments in, exit_json out, against a local router."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.modules import router_check

from ..module_utils.test__router_check import Router
from .utils import run_module


@pytest.mark.parametrize('check_mode', [False, True])
def test_reports_what_the_routers_answered_and_changes_nothing(check_mode):
    with Router(['10.0.0.1:30000']) as router:
        kind, result, _warnings = run_module(router_check.main, {
            'router': router.url, 'worker_id': '10.0.0.1:30000', 'model': '/models/dsv4',
            'fleet_routers': {'node-9': 'http://127.0.0.1:9'}, 'expected_hosts': ['node-1', 'node-9']},
            check_mode=check_mode)
    assert kind == 'exit'
    assert result['changed'] is False
    assert result['router_ok'] is True
    assert result['lost'] == ['node-9']
    assert result['expected_workers'] == 1
    assert result['completion'] == '1 + 1 = 2.'


def test_a_failed_check_is_a_result_not_a_module_failure():
    kind, result, _warnings = run_module(router_check.main, {'router': 'http://127.0.0.1:9', 'timeout': 0.2})
    assert kind == 'exit'
    assert result['router_ok'] is False
    assert result['completion'] is None
