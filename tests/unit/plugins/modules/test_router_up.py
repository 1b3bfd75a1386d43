# SPDX-License-Identifier: Apache-2.0
"""The whole router_up module: arguments in, exit_json out, against a local router."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.modules import router_up

from ..module_utils.test__router_check import Router
from .utils import run_module


@pytest.mark.parametrize('check_mode', [False, True])
def test_reports_a_healthy_router_up_and_changes_nothing(check_mode):
    with Router([]) as router:
        kind, result, _warnings = run_module(router_up.main, {'router': router.url}, check_mode=check_mode)
    assert kind == 'exit'
    assert result['changed'] is False
    assert result['up'] is True and result['exited'] is False
    assert result['health'] == {'status': 'ok', 'active_workers': 0}


def test_a_router_that_does_not_answer_is_a_result_not_a_module_failure():
    # timeout 0: one look, no wait.
    kind, result, _warnings = run_module(router_up.main, {'router': 'http://127.0.0.1:9', 'timeout': 0})
    assert kind == 'exit'
    assert result['up'] is False and result['exited'] is False
    assert result['health'] is None and result['health_error']
