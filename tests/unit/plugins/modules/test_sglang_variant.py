# SPDX-License-Identifier: Apache-2.0
"""The whole sglang_variant module: arguments in, exit_json/fail_json out."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.modules import sglang_variant

from .utils import run_module


@pytest.mark.parametrize('check_mode', [False, True])
def test_picks_nodp_and_changes_nothing(recipe, check_mode):
    kind, result, warnings = run_module(sglang_variant.main, {'conc': 64, 'recipe': recipe}, check_mode=check_mode)
    assert kind == 'exit'
    assert result['changed'] is False
    assert result['variant'] == 'nodp'
    assert '--chunked-prefill-size' in result['argv']
    assert result['missing_levers'] == []
    assert 'warnings' not in result
    assert warnings == []


def test_sweep_string_gives_phases(recipe):
    kind, result, _warnings = run_module(sglang_variant.main, {'conc': '1024,32 256,64', 'recipe': recipe})
    assert kind == 'exit'
    assert [(p['variant'], p['concurrencies']) for p in result['phases']] == [('nodp', [32, 64]), ('dp', [256, 1024])]


def test_explicit_variant_and_overrides(recipe):
    kind, result, _warnings = run_module(sglang_variant.main, {
        'conc': 64, 'recipe': recipe, 'variant': 'dp',
        'extra_args': {'--cuda-graph-max-bs': 32, '--enable-prefill-delayer': False},
        'extra_env': {'SGLANG_DP_USE_GATHERV': None},
    })
    assert kind == 'exit'
    assert result['variant'] == 'dp'
    argv = result['argv']
    assert argv[argv.index('--cuda-graph-max-bs') + 1] == '32'
    assert '--enable-prefill-delayer' not in argv
    assert 'SGLANG_DP_USE_GATHERV' not in result['env']
    assert 'chosen by the variant option' in result['reason']


def test_missing_lever_fails_with_one_line(recipe):
    kind, result, _warnings = run_module(sglang_variant.main, {
        'conc': 512, 'recipe': recipe, 'extra_args': {'--attention-backend': 'aiter'}})
    assert kind == 'fail'
    assert result['msg'] == (
        'recipe levers missing: --attention-backend dsv4 (found: aiter); throughput drops to ~50% without them. '
        'Restore them, or set sglang_worker_allow_missing_levers: true to run anyway')
    assert result['missing_levers'] == ['--attention-backend dsv4 (found: aiter)']


def test_allowed_missing_lever_warns(recipe):
    kind, result, warnings = run_module(sglang_variant.main, {
        'conc': 64, 'recipe': recipe, 'extra_env': {'SGLANG_OPT_USE_FUSED_COMPRESS_TRITON': None},
        'allow_missing_levers': True})
    assert kind == 'exit'
    assert result['changed'] is False
    assert result['missing_levers'] == ['env SGLANG_OPT_USE_FUSED_COMPRESS_TRITON=true']
    assert len(warnings) == 1 and 'sglang_worker_allow_missing_levers' in warnings[0]


@pytest.mark.parametrize('conc, expected', [
    (0, 'conc value 0 must be greater than 0'),
    (12.5, 'conc value 12.5 (float) is not an integer'),
    ('abc', "conc value 'abc' is not an integer"),
    (True, 'conc value True (bool) is not an integer'),
    ([], 'conc is an empty list'),
    ([32, 32], 'conc lists 32 more than once'),
])
def test_bad_conc_fails_with_one_line(recipe, conc, expected):
    kind, result, _warnings = run_module(sglang_variant.main, {'conc': conc, 'recipe': recipe})
    assert kind == 'fail'
    assert expected in result['msg']
    assert '\n' not in result['msg']


def test_unknown_variant_fails(recipe):
    kind, result, _warnings = run_module(sglang_variant.main, {'conc': 64, 'recipe': recipe, 'variant': 'nope'})
    assert kind == 'fail'
    assert result['msg'] == "variant 'nope' is not in recipe dsv4-pro-mi355x-mixed; choose one of: nodp, dp"


def test_recipe_is_required():
    kind, result, _warnings = run_module(sglang_variant.main, {'conc': 64})
    assert kind == 'fail'
    assert 'recipe' in result['msg']
