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
    assert _select(recipe, [64, 200, 512])['reason'] == (
        'nodp for conc 64: within its range (<= 128); '
        'dp for conc 200: between nodp (max_conc 128) and dp (min_conc 256), where the recipe picks dp; '
        'nodp captures cuda graphs only up to --cuda-graph-max-bs 128, so a batch above 128 replays no graph there, '
        'while dp splits the batch across 8 DP-attention ranks (~25 per rank at conc 200); '
        'dp for conc 512: within its range (>= 256)')


@pytest.mark.parametrize('ranks, text', [
    ('4', ', while dp splits the batch across 4 DP-attention ranks (~50 per rank at conc 200)'),
    (1, ', while dp splits the batch across 1 DP-attention ranks (~200 per rank at conc 200)'),
    ('auto', ''),
])
def test_between_reason_counts_the_dp_ranks_it_can_read(recipe, ranks, text):
    recipe['variants']['dp']['args']['--dp'] = ranks
    assert _select(recipe, 200)['reason'].endswith('replays no graph there' + text)


def test_between_variant_comes_from_the_recipe(recipe):
    recipe['between'] = 'nodp'
    result = _select(recipe, 200)
    assert result['variant'] == 'nodp'
    assert 'where the recipe picks nodp' in result['reason']


def test_between_defaults_to_dp(recipe):
    del recipe['between']
    assert _select(recipe, 129)['variant'] == 'dp'


def test_a_recipe_whose_variants_have_no_range_needs_no_between_and_a_name(recipe):
    legs = {'name': 'legs', 'args': {'--a': 1}, 'variants': {'prefill': {'args': {'--p': None}}, 'decode': {}}}
    assert _select(legs, [64, 128], variant='decode')['phases'] == [
        {'variant': 'decode', 'concurrencies': [64, 128], 'argv': ['--a', '1'], 'env': {}}]
    with pytest.raises(VariantError, match=r'^recipe legs picks no variant by concurrency \(its variants prefill, '
                                           r'decode have no min_conc or max_conc\); name the variant$'):
        _select(legs, 64)
    with pytest.raises(VariantError, match="recipe.between names 'dp', which is not a variant"):
        _select({**legs, 'between': 'dp'}, 64, variant='decode')


def test_a_variant_without_bounds_is_only_chosen_by_name(recipe):
    recipe['variants']['debug'] = {'args': {'--log-requests': None}}
    recipe['variants']['nodp']['min_conc'] = 1
    assert _select(recipe, [1, 512])['variant'] == 'nodp'
    assert '--log-requests' in _select(recipe, 64, variant='debug')['argv']


def test_a_variant_may_cover_a_single_concurrency(recipe):
    recipe['variants']['nodp']['max_conc'] = 64
    recipe['variants']['c128'] = {'min_conc': 128, 'max_conc': 128, 'args': {'--cuda-graph-max-bs': 128}}
    assert [phase['variant'] for phase in _select(recipe, [64, 128, 200])['phases']] == ['nodp', 'c128', 'dp']


def test_the_reason_for_an_explicit_variant_names_concurrencies_no_range_covers(recipe):
    recipe['variants']['dp']['max_conc'] = 512
    assert _select(recipe, [64, 1024], variant='dp')['reason'] == (
        'dp: chosen by the variant option for every concurrency (by the ranges alone: 64->nodp, 1024->none)')


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
                    '--host', '0.0.0.0', '--port', '30000', '--advertise-host', '$HOST',
                    '--etcd-endpoint', 'http://10.0.0.1:2379', '--attention-backend', 'dsv4',
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


def test_removing_what_the_recipe_does_not_set_is_harmless(recipe):
    result = _select(recipe, 64, extra_args={'--not-in-recipe': False}, extra_env={'NOT_IN_RECIPE': None})
    assert result['argv'] == _select(recipe, 64)['argv']
    assert result['env'] == _select(recipe, 64)['env']


def test_true_is_a_bare_switch(recipe):
    assert _select(recipe, 64, extra_args={'--log-requests': True})['argv'][-1:] == ['--log-requests']


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


def test_switch_levers_and_switched_value_levers_are_named_in_one_line(recipe):
    recipe['levers']['args']['--disable-radix-cache'] = None
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, extra_args={'--disable-radix-cache': False, '--attention-backend': None})
    assert str(error.value) == (
        'recipe levers missing: --attention-backend dsv4 (found: bare switch); --disable-radix-cache; '
        'throughput drops to ~50% without them. Restore them, or set sglang_worker_allow_missing_levers: true '
        'to run anyway')


def test_the_warning_names_every_value_found(recipe):
    result = _select(recipe, 64, extra_args={'--attention-backend': ['dsv4', 'x']},
                     extra_env={'SGLANG_USE_AITER': None}, allow_missing_levers=True)
    assert result['warnings'] == [
        'running without the recipe levers --attention-backend dsv4 (found: dsv4 x); env SGLANG_USE_AITER=1 '
        '(allowed by sglang_worker_allow_missing_levers): throughput drops to ~50% without them']


def test_allowed_missing_levers_are_returned_with_a_warning(recipe):
    result = _select(recipe, 64, extra_args={'--attention-backend': 'triton'}, allow_missing_levers=True)
    assert result['missing_levers'] == ['--attention-backend dsv4 (found: triton)']
    assert len(result['warnings']) == 1
    assert 'throughput drops to ~50%' in result['warnings'][0]
    assert OVERRIDE_VARIABLE in result['warnings'][0]


# ---------------------------------------------------------------- bad input

ACCEPTED = "a positive integer, a list of positive integers, or a comma/space-separated string such as '32,64,128'"


@pytest.mark.parametrize('raw, expected', [
    (0, 'conc value 0 must be greater than 0; expected ' + ACCEPTED),
    (-8, 'conc value -8 must be greater than 0; expected ' + ACCEPTED),
    ('0', 'conc value 0 must be greater than 0; expected ' + ACCEPTED),
    ([32, 0], 'conc value 0 in conc [32, 0] must be greater than 0; expected ' + ACCEPTED),
    (12.5, 'conc value 12.5 (float) is not an integer; expected ' + ACCEPTED),
    ('12.5', "conc value '12.5' is not an integer; expected " + ACCEPTED),
    ('abc', "conc value 'abc' is not an integer; expected " + ACCEPTED),
    ('32,abc', "conc value 'abc' in conc '32,abc' is not an integer; expected " + ACCEPTED),
    (True, 'conc value True (bool) is not an integer; expected ' + ACCEPTED),
    ([64, True], 'conc value True (bool) in conc [64, True] is not an integer; expected ' + ACCEPTED),
    (None, 'conc value None (NoneType) is not an integer; expected ' + ACCEPTED),
    ({'a': 1}, "conc value {'a': 1} (dict) is not an integer; expected " + ACCEPTED),
    ([], 'conc is an empty list; give at least one concurrency (%s)' % ACCEPTED),
    ('', 'conc is an empty string; expected ' + ACCEPTED),
    (' , ', 'conc is an empty string; expected ' + ACCEPTED),
    ([64, 32, 64], 'conc lists 64 more than once; each concurrency may appear only once'),
    ('64, 64', 'conc lists 64 more than once; each concurrency may appear only once'),
])
def test_bad_concurrency_fails_on_one_line_naming_value_and_accepted_forms(recipe, raw, expected):
    with pytest.raises(VariantError) as error:
        _select(recipe, raw)
    assert str(error.value) == expected


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
    (lambda r: r['variants']['dp'].update(min_conc=128),
     'recipe variants nodp and dp both cover concurrency 128; their ranges must not overlap'),
    (lambda r: r['args'].update({'attention-backend': 'dsv4'}),
     "recipe.args key 'attention-backend' is not a flag; flags start with '-' such as '--tp-size'"),
    (lambda r: r['args'].update({'--dp': {'size': 8}}),
     'recipe.args --dp must be a scalar, a list, null (bare switch) or false (remove); got a mapping'),
    (lambda r: r.update(args=['--tp-size']), 'recipe.args must be a mapping of --flag: value; got list'),
    (lambda r: r['levers']['env'].append('NOT_IN_ENV'),
     'recipe.levers.env names NOT_IN_ENV, but recipe.env does not set it; the lever value comes from recipe.env'),
    (lambda r: r['levers'].update(env='SGLANG_USE_AITER'), 'recipe.levers.env must be a list of variable names'),
    (lambda r: r['levers'].update(env=[1]), 'recipe.levers.env must be a list of variable names'),
    (lambda r: r.update(levers=['--attention-backend']),
     'recipe.levers must be a mapping with args and env; got list'),
    (lambda r: r['levers'].update(args={'attention-backend': 'dsv4'}),
     "recipe.levers.args key 'attention-backend' is not a flag; flags start with '-' such as '--tp-size'"),
    (lambda r: r.update(between='tp4'), "recipe.between names 'tp4', which is not a variant; known variants: nodp, dp"),
    (lambda r: r['variants']['nodp'].update(max_conc='128'),
     "recipe.variants.nodp.max_conc must be a positive integer; got '128'"),
    (lambda r: r['variants']['dp'].update(min_conc=0), 'recipe.variants.dp.min_conc must be a positive integer; got 0'),
    (lambda r: r['variants']['dp'].update(min_conc=True),
     'recipe.variants.dp.min_conc must be a positive integer; got True'),
    (lambda r: r['variants']['dp'].update(min_conc=600, max_conc=512), 'recipe.variants.dp has min_conc above max_conc'),
    (lambda r: r['variants'].update(dp=['--dp']), 'recipe.variants.dp must be a mapping; got list'),
    (lambda r: r['variants']['dp'].update(env={'X': [1]}), 'recipe.variants.dp.env.X must be a scalar (or null to remove it); got list'),
    (lambda r: r['variants']['dp'].update(args={'dp': 8}),
     "recipe.variants.dp.args key 'dp' is not a flag; flags start with '-' such as '--tp-size'"),
    (lambda r: r.update(variants={}), 'recipe.variants must be a non-empty mapping of variant name to settings'),
    (lambda r: r['env'].update(BAD=[1]), 'recipe.env.BAD must be a scalar (or null to remove it); got list'),
    (lambda r: r['env'].update({1: 'x'}), 'recipe.env has a non-string variable name 1'),
    (lambda r: r['env'].update({'': 'x'}), "recipe.env has a non-string variable name ''"),
    (lambda r: r.update(env=['SGLANG_USE_AITER=1']), 'recipe.env must be a mapping of NAME: value; got list'),
    # A key nothing reads is a typo (levrs, arg) or a setting that silently does nothing.
    (lambda r: r.update(levrs={}), 'recipe has unknown key(s) levrs; allowed: name, description, env, args, variants, '
                                   'between, levers'),
    (lambda r: r['variants']['dp'].update(max_concurrency=1024, arg={}),
     'recipe.variants.dp has unknown key(s) arg, max_concurrency; allowed: min_conc, max_conc, env, args'),
    (lambda r: r['levers'].update(environment=[]), 'recipe.levers has unknown key(s) environment; allowed: args, env'),
])
def test_bad_recipe_is_named(recipe, mutate, expected):
    mutate(recipe)
    with pytest.raises(VariantError) as error:
        _select(recipe, 64)
    assert str(error.value) == expected


def test_a_recipe_that_is_not_a_mapping_is_named():
    with pytest.raises(VariantError) as error:
        _select(['nodp'], 64)
    assert str(error.value) == 'recipe must be a mapping; got list'


@pytest.mark.parametrize('options, expected', [
    ({'extra_args': {'dp': 8}}, "extra_args key 'dp' is not a flag; flags start with '-' such as '--tp-size'"),
    ({'extra_env': {'X': [1]}}, 'extra_env.X must be a scalar (or null to remove it); got list'),
    ({'extra_env': ['X=1']}, 'extra_env must be a mapping of NAME: value; got list'),
])
def test_bad_overrides_are_named(recipe, options, expected):
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, **options)
    assert str(error.value) == expected


def test_concurrency_outside_every_range_is_rejected(recipe):
    recipe['variants']['dp']['max_conc'] = 512
    with pytest.raises(VariantError) as error:
        _select(recipe, 1024)
    assert str(error.value) == 'no variant of dsv4-pro-mi355x-mixed covers conc 1024; ranges: nodp <= 128, dp 256..512'


def test_a_recipe_without_a_name_is_called_recipe(recipe):
    del recipe['name']
    with pytest.raises(VariantError) as error:
        _select(recipe, 64, variant='tp4')
    assert str(error.value) == "variant 'tp4' is not in recipe recipe; choose one of: nodp, dp"
