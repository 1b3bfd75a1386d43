# SPDX-License-Identifier: Apache-2.0
"""The sglang_variant action plugin: the module's result, computed on the controller without a node call."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.infera.serving.plugins.action import sglang_variant as action_plugin
from ansible_collections.infera.serving.plugins.modules import sglang_variant as variant_module

from ..modules.utils import run_module
from . import harness


def run_action(args, check_mode=False):
    action = harness.make_action(action_plugin, 'infera.serving.sglang_variant', args, check_mode)
    connection = action._connection
    with mock.patch.object(action, '_execute_module', side_effect=AssertionError('the action ran a module')):
        result = action.run(task_vars={})
    # Nothing was sent to the node: no command, no file, no module.
    assert connection.exec_command.call_count == 0 and connection.put_file.call_count == 0
    return result


@pytest.mark.parametrize('args', [
    {'conc': 64},
    {'conc': '1024,32 256,64'},
    {'conc': 64, 'variant': 'dp', 'extra_args': {'--cuda-graph-max-bs': 32}, 'extra_env': {'SGLANG_DP_USE_GATHERV': None}},
])
def test_the_action_returns_what_the_module_returns(recipe, args):
    args = dict(args, recipe=recipe)
    kind, expected, _warnings = run_module(variant_module.main, dict(args))
    assert kind == 'exit'
    result = run_action(dict(args))
    assert {key: result[key] for key in expected if key != 'invocation'} == \
        {key: value for key, value in expected.items() if key != 'invocation'}
    assert action_plugin.ActionModule._requires_connection is False


def test_a_missing_lever_fails_with_the_modules_message(recipe):
    result = run_action({'conc': 512, 'recipe': recipe, 'extra_args': {'--attention-backend': 'aiter'}})
    assert result['failed'] is True
    assert result['msg'].startswith('recipe levers missing: --attention-backend dsv4 (found: aiter)')
    assert result['missing_levers'] == ['--attention-backend dsv4 (found: aiter)']


def test_an_allowed_missing_lever_is_a_warning(recipe):
    result = run_action({'conc': 64, 'recipe': recipe, 'extra_env': {'SGLANG_OPT_USE_FUSED_COMPRESS_TRITON': None},
                         'allow_missing_levers': True})
    assert 'failed' not in result
    assert len(result['warnings']) == 1 and 'sglang_worker_allow_missing_levers' in result['warnings'][0]


def test_bad_conc_fails_with_one_line(recipe):
    result = run_action({'conc': 'abc', 'recipe': recipe})
    assert result['failed'] is True
    assert "conc value 'abc' is not an integer" in result['msg']
