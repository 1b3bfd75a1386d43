# SPDX-License-Identifier: Apache-2.0
"""Variant selection, argv/env merging and the lever guard, without Ansible."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.module_utils._variant import (
    OVERRIDE_VARIABLE,
    VariantError,
    parse_concurrencies,
    select,
)


def _select(recipe, conc, **options):
    return select(dict(conc=conc, recipe=recipe, **options))


def _pairs(argv):
    """Flag -> following values, to assert on argv without caring about unrelated flags."""
    pairs = {}
    flag = None
    for token in argv:
        if token.startswith('--'):
            flag = token
            pairs[flag] = []
        else:
            pairs[flag].append(token)
    return pairs


# ---------------------------------------------------------------- selection

@pytest.mark.parametrize('conc, variant, rule', [
    (1, 'nodp', 'within its range (<= 128)'),
    (128, 'nodp', 'within its range (<= 128)'),
    (129, 'dp', 'between nodp (max_conc 128) and dp (min_conc 256)'),
    (200, 'dp', 'between nodp (max_conc 128) and dp (min_conc 256)'),
    (255, 'dp', 'between nodp (max_conc 128) and dp (min_conc 256)'),
    (256, 'dp', 'within its range (>= 256)'),
    (1024, 'dp', 'within its range (>= 256)'),
])
def test_variant_by_concurrency_boundaries(recipe, conc, variant, rule):
    result = _select(recipe, conc)
    assert result['variant'] == variant
    assert result['phases'] == [{'variant': variant, 'concurrencies': [conc],
                                 'argv': result['argv'], 'env': result['env']}]
    assert result['reason'].startswith('%s for conc %d: ' % (variant, conc))
    assert rule in result['reason']


def test_between_reason_explains_cuda_graphs_and_dp_ranks(recipe):
    reason = _select(recipe, 200)['reason']
    assert 'nodp captures cuda graphs only up to --cuda-graph-max-bs 128' in reason
    assert 'a batch above 128 replays no graph there' in reason
    assert 'dp splits the batch across 8 DP-attention ranks (~25 per rank at conc 200)' in reason


def test_between_variant_comes_from_the_recipe(recipe):
    recipe['between'] = 'nodp'
    result = _select(recipe, 200)
    assert result['variant'] == 'nodp'
    assert 'where the recipe picks nodp' in result['reason']


def test_between_defaults_to_dp(recipe):
    del recipe['between']
    assert _select(recipe, 129)['variant'] == 'dp'


def test_list_is_grouped_by_variant_ascending_for_fewest_restarts(recipe):
    result = _select(recipe, [1024, 32, 256, 64])
    assert [(phase['variant'], phase['concurrencies']) for phase in result['phases']] == [
        ('nodp', [32, 64]), ('dp', [256, 1024])]
    assert result['variant'] == 'nodp'
    assert result['argv'] == result['phases'][0]['argv']
    assert result['concurrencies'] == [32, 64, 256, 1024]
    assert result['reason'] == ('nodp for conc 32, 64: within its range (<= 128); '
                                'dp for conc 256, 1024: within its range (>= 256)')


def test_list_with_a_gap_concurrency_joins_the_dp_phase(recipe):
    result = _select(recipe, '512 200,32')
    assert [(phase['variant'], phase['concurrencies']) for phase in result['phases']] == [
        ('nodp', [32]), ('dp', [200, 512])]
    assert 'dp for conc 200: between' in result['reason']
    assert 'dp for conc 512: within its range (>= 256)' in result['reason']


def test_only_dp_concurrencies_give_one_dp_phase(recipe):
    result = _select(recipe, [512, 256])
    assert result['variant'] == 'dp'
    assert [phase['variant'] for phase in result['phases']] == ['dp']


def test_explicit_variant_wins_for_every_concurrency(recipe):
    result = _select(recipe, [32, 512], variant='dp')
    assert result['variant'] == 'dp'
    assert result['phases'][0]['concurrencies'] == [32, 512]
    assert len(result['phases']) == 1
    assert result['reason'] == ('dp: chosen by the variant option for every concurrency '
                                '(by the ranges alone: 32->nodp, 512->dp)')


# ---------------------------------------------------------------- argv and env

def test_nodp_argv_is_common_flags_then_variant_flags_in_order(recipe):
    argv = _select(recipe, 64)['argv']
    assert argv == ['--model-path', '/data/hf-cache/DeepSeek-V4-Pro', '--tp-size', '8', '--trust-remote-code',
                    '--host', '0.0.0.0', '--port', '30000', '--advertise-host', '10.0.0.5',
                    '--etcd-endpoint', 'http://10.0.0.1:2379', '--discovery-backend', 'etcd',
                    '--request-transport', 'http', '--kv-event-transport', 'zmq', '--attention-backend', 'dsv4',
                    '--disable-radix-cache', '--page-size', '256', '--cuda-graph-max-bs', '128',
                    '--swa-full-tokens-ratio', '0.15', '--disable-shared-experts-fusion',
                    '--mem-fraction-static', '0.90', '--chunked-prefill-size', '8192']
    assert all(isinstance(token, str) for token in argv)


def test_dp_argv_and_env_add_the_dp_attention_block(recipe):
    result = _select(recipe, 512)
    pairs = _pairs(result['argv'])
    assert pairs['--dp'] == ['8']
    assert pairs['--enable-dp-attention'] == []
    assert pairs['--chunked-prefill-size'] == ['65536']
    assert pairs['--max-running-requests'] == ['256']
    assert result['env']['SGLANG_DP_USE_GATHERV'] == '1'
    assert result['env']['SGLANG_OPT_USE_FUSED_COMPRESS'] == 'true'


def test_variant_value_overrides_common_in_place_and_extra_args_override_last(recipe):
    recipe['variants']['nodp']['args']['--page-size'] = 64
    result = _select(recipe, 64, extra_args={'--page-size': 32, '--cuda-graph-bs': [1, 2, 4], '--log-requests': None})
    argv = result['argv']
    assert argv[argv.index('--page-size') + 1] == '32'
    # An overridden flag keeps its place; new flags come last, in the order given.
    assert argv.index('--page-size') < argv.index('--cuda-graph-max-bs')
    assert argv[-5:] == ['--cuda-graph-bs', '1', '2', '4', '--log-requests']


def test_false_removes_a_flag_and_null_removes_a_variable(recipe):
    result = _select(recipe, 512, extra_args={'--enable-prefill-delayer': False,
                                              '--prefill-delayer-max-delay-ms': False},
                     extra_env={'SGLANG_DP_USE_GATHERV': None})
    assert '--enable-prefill-delayer' not in result['argv']
    assert '--prefill-delayer-max-delay-ms' not in result['argv']
    assert 'SGLANG_DP_USE_GATHERV' not in result['env']


def test_variant_false_removes_a_common_flag(recipe):
    recipe['variants']['dp']['args']['--disable-radix-cache'] = False
    assert '--disable-radix-cache' not in _select(recipe, 512)['argv']
    assert '--disable-radix-cache' in _select(recipe, 64)['argv']


def test_env_layers_and_yaml_booleans_become_shell_words(recipe):
    recipe['variants']['nodp']['env'] = {'SGLANG_USE_AITER': 1, 'NODP_ONLY': True}
    result = _select(recipe, 64, extra_env={'EXTRA': False, 'SGLANG_USE_AITER': '1'})
    assert result['env']['NODP_ONLY'] == 'true'
    assert result['env']['EXTRA'] == 'false'
    assert result['env']['SGLANG_USE_AITER'] == '1'
    assert list(result['env'])[:2] == ['SGLANG_USE_AITER', 'AITER_BF16_FP8_MOE_BOUND']


def test_phases_carry_their_own_argv_and_env(recipe):
    nodp, dp = _select(recipe, [64, 512])['phases']
    assert '--dp' not in nodp['argv'] and '--dp' in dp['argv']
    assert 'SGLANG_DP_USE_GATHERV' not in nodp['env'] and dp['env']['SGLANG_DP_USE_GATHERV'] == '1'


# ---------------------------------------------------------------- lever guard

def test_full_recipe_has_no_missing_levers(recipe):
    result = _select(recipe, [64, 512])
    assert result['missing_levers'] == []
    assert result['warnings'] == []


def test_missing_attention_backend_fails_naming_the_lever_and_the_override(recipe):
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, extra_args={'--attention-backend': False})
    message = str(error.value)
    assert '--attention-backend dsv4' in message
    assert OVERRIDE_VARIABLE in message
    assert 'throughput drops to ~50%' in message
    assert '\n' not in message
    assert error.value.details == {'missing_levers': ['--attention-backend dsv4']}


def test_wrong_attention_backend_value_is_a_missing_lever(recipe):
    with pytest.raises(VariantError) as error:
        _select(recipe, 512, extra_args={'--attention-backend': 'triton'})
    assert error.value.details['missing_levers'] == ['--attention-backend dsv4 (found: triton)']


def test_one_missing_env_lever(recipe):
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, extra_env={'SGLANG_OPT_USE_FUSED_COMPRESS': None})
    assert error.value.details['missing_levers'] == ['env SGLANG_OPT_USE_FUSED_COMPRESS=true']
    assert 'env SGLANG_OPT_USE_FUSED_COMPRESS=true' in str(error.value)


def test_env_lever_with_another_value(recipe):
    recipe['variants']['dp']['env']['SGLANG_USE_AITER'] = '0'
    with pytest.raises(VariantError) as error:
        _select(recipe, [64, 512])
    assert error.value.details['missing_levers'] == ['env SGLANG_USE_AITER=1 (found: 0)']


def test_every_missing_lever_is_named(recipe):
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, extra_args={'--attention-backend': False},
                extra_env={'SGLANG_USE_AITER': None, 'SGLANG_ROCM_USE_MULTI_STREAM': 'true'})
    assert error.value.details['missing_levers'] == [
        '--attention-backend dsv4', 'env SGLANG_USE_AITER=1', 'env SGLANG_ROCM_USE_MULTI_STREAM=false (found: true)']


def test_allowed_missing_levers_are_returned_with_a_warning(recipe):
    result = _select(recipe, 64, extra_args={'--attention-backend': 'triton'}, allow_missing_levers=True)
    assert result['missing_levers'] == ['--attention-backend dsv4 (found: triton)']
    assert len(result['warnings']) == 1
    assert 'throughput drops to ~50%' in result['warnings'][0]
    assert OVERRIDE_VARIABLE in result['warnings'][0]


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize('raw, expected', [
    (0, 'conc value 0 must be greater than 0'),
    (-8, 'conc value -8 must be greater than 0'),
    ('0', 'conc value 0 must be greater than 0'),
    ([32, 0], 'conc value 0 in conc [32, 0] must be greater than 0'),
    (12.5, 'conc value 12.5 (float) is not an integer'),
    ('12.5', "conc value '12.5' is not an integer"),
    ('abc', "conc value 'abc' is not an integer"),
    ('32,abc', "conc value 'abc' in conc '32,abc' is not an integer"),
    (True, 'conc value True (bool) is not an integer'),
    ([64, True], 'conc value True (bool) in conc [64, True] is not an integer'),
    (None, 'conc value None (NoneType) is not an integer'),
    ({'a': 1}, "conc value {'a': 1} (dict) is not an integer"),
    ([], 'conc is an empty list'),
    ('', 'conc is an empty string'),
    (' , ', 'conc is an empty string'),
    ([64, 32, 64], 'conc lists 64 more than once'),
    ('64, 64', 'conc lists 64 more than once'),
])
def test_bad_concurrency_fails_on_one_line_naming_value_and_accepted_forms(recipe, raw, expected):
    with pytest.raises(VariantError) as error:
        _select(recipe, raw)
    message = str(error.value)
    assert expected in message
    assert '\n' not in message
    if 'more than once' not in message:
        assert 'positive integer' in message


def test_unknown_variant_names_the_choices(recipe):
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, variant='tp4')
    assert str(error.value) == "variant 'tp4' is not in recipe dsv4-pro-mi355x-mixed; choose one of: nodp, dp"


@pytest.mark.parametrize('raw, expected', [
    (64, [64]),
    ('64', [64]),
    (' 32,64  128 ', [32, 64, 128]),
    ('32 64\t128', [32, 64, 128]),
    (['256', 32], [256, 32]),
    ('+16', [16]),
])
def test_accepted_concurrency_forms(raw, expected):
    assert parse_concurrencies(raw) == expected


@pytest.mark.parametrize('mutate, expected', [
    (lambda r: r['variants']['dp'].update(min_conc=128), 'recipe variants nodp and dp both cover concurrency 128'),
    (lambda r: r['args'].update({'attention-backend': 'dsv4'}), "recipe.args key 'attention-backend' is not a flag"),
    (lambda r: r['levers']['env'].append('NOT_IN_ENV'), 'recipe.levers.env names NOT_IN_ENV'),
    (lambda r: r.update(between='tp4'), "recipe.between names 'tp4', which is not a variant"),
    (lambda r: r['variants']['nodp'].update(max_conc='128'), "recipe.variants.nodp.max_conc must be a positive integer"),
    (lambda r: r.update(variants={}), 'recipe.variants must be a non-empty mapping'),
    (lambda r: r['env'].update(BAD=[1]), 'recipe.env.BAD must be a scalar'),
])
def test_bad_recipe_is_named(recipe, mutate, expected):
    mutate(recipe)
    with pytest.raises(VariantError) as error:
        _select(recipe, 64)
    assert expected in str(error.value)


def test_bad_extra_args_key_is_named(recipe):
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, extra_args={'dp': 8})
    assert "extra_args key 'dp' is not a flag" in str(error.value)


def test_concurrency_outside_every_range_is_rejected(recipe):
    recipe['variants']['dp']['max_conc'] = 512
    with pytest.raises(VariantError) as error:
        _select(recipe, 1024)
    assert 'no variant of dsv4-pro-mi355x-mixed covers conc 1024; ranges: nodp <= 128, dp 256..512' in str(error.value)
