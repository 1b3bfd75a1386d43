# SPDX-License-Identifier: Apache-2.0
"""The worker role's variant plan (plugin_utils/_worker_plan.py): what it is made from, when the run's plan is kept,
and the capture-set warning."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.module_utils._variant import VariantError
from ansible_collections.infera.serving.plugins.plugin_utils import _worker_plan
from ansible_collections.infera.serving.plugins.plugin_utils._worker_plan import (
    capture_warning, combine, kept_plan, make_plan, missing_recipe_file, plan_inputs)

PLANE = {'--discovery-backend': 'etcd', '--request-transport': 'http', '--kv-event-transport': 'zmq'}


@pytest.fixture
def params(recipe):
    """The role's defaults, as select.yml passes them, with the shipped recipe loaded from its file."""
    return {'recipe': {}, 'recipe_file': '/roles/sglang_worker/recipes/dsv4.yml', 'recipe_dir': '', 'mode': 'mixed',
            'recipe_overrides': {}, 'conc': 64, 'variant': '', 'extra_args': {}, 'extra_env': {}, 'cuda_graph_max_bs': 0,
            'cuda_graph_bs': [], 'plane': 'dev', 'plane_args': dict(PLANE), 'allow_missing_levers': False, 'previous': {}}


@pytest.fixture
def load(recipe):
    """The recipe file's reader: the shipped recipe, whatever the path."""
    def read(_path):
        return combine(recipe, {})
    return read


def test_combine_merges_mappings_and_replaces_anything_else():
    assert combine({'args': {'--a': 1, '--b': [1, 2]}, 'name': 'x'}, {'args': {'--b': [3]}, 'name': 'y'}) == {
        'args': {'--a': 1, '--b': [3]}, 'name': 'y'}


def test_the_recipe_given_wins_over_the_file_and_drops_the_file_s_path(params, recipe, load):
    given = combine(recipe, {'name': 'mine'})
    inputs = plan_inputs({**params, 'recipe': given}, load)
    assert inputs['recipe']['name'] == 'mine' and inputs['recipe_file'] == ''
    assert plan_inputs(params, load)['recipe_file'] == params['recipe_file']


def test_a_recipe_given_reads_no_file(params, recipe):
    inputs = plan_inputs({**params, 'recipe': recipe, 'recipe_file': '/nowhere.yml'},
                         lambda path: pytest.fail('read %s' % path))
    assert inputs['recipe'] == recipe


def test_a_missing_recipe_file_is_said_in_one_line_with_the_role_s_variables():
    assert str(missing_recipe_file('/tmp/none.yml')) == (
        'sglang_worker_recipe_file "/tmp/none.yml" is not a file on the controller: give the path of a recipe, leave it '
        "empty for the role's recipe of sglang_worker_mode, or give the recipe itself as sglang_worker_recipe")


@pytest.mark.parametrize('mode, recipe_file, path', [
    ('mixed', '', '/r/dsv4-pro-mi355x-mixed.yml'),
    ('prefill', '', '/r/dsv4-pro-mi355x-pd.yml'),
    ('decode', '', '/r/dsv4-pro-mi355x-pd.yml'),
    # A recipe file given wins over the mode's.
    ('decode', '/mine.yml', '/mine.yml'),
])
def test_the_recipe_file_is_the_mode_s_unless_one_is_given(params, mode, recipe_file, path):
    read = []
    plan_inputs({**params, 'recipe_dir': '/r/', 'mode': mode, 'recipe_file': recipe_file,
                 'recipe': {}}, lambda given: read.append(given) or {'name': 'x'})
    assert read == [path]


def test_a_leg_runs_the_variant_of_its_mode(params, load):
    assert plan_inputs({**params, 'mode': 'prefill'}, load)['variant'] == 'prefill'
    assert plan_inputs({**params, 'mode': 'decode', 'variant': 'decode'}, load)['variant'] == 'decode'
    assert plan_inputs(params, load)['variant'] == ''


def test_the_capture_set_is_the_recipe_s_unless_one_is_given(params, load):
    assert '--cuda-graph-max-bs' not in plan_inputs(params, load)['extra_args']
    assert plan_inputs({**params, 'cuda_graph_max_bs': 32}, load)['extra_args']['--cuda-graph-max-bs'] == 32


def test_overrides_merge_into_the_recipe_in_force(params, load):
    inputs = plan_inputs({**params, 'recipe_overrides': {'args': {'--page-size': 64}}}, load)
    assert inputs['recipe']['args']['--page-size'] == 64
    assert inputs['recipe']['args']['--attention-backend'] == 'dsv4'


def test_the_role_s_flags_go_over_the_recipe_s_in_order(params, load):
    extra = plan_inputs({**params, 'cuda_graph_max_bs': 128, 'cuda_graph_bs': [1, 2],
                         'extra_args': {'--cuda-graph-max-bs': 64}}, load)['extra_args']
    assert list(extra) == ['--cuda-graph-max-bs', '--cuda-graph-bs', *PLANE]
    assert extra['--cuda-graph-max-bs'] == 64 and extra['--cuda-graph-bs'] == [1, 2]
    assert '--cuda-graph-bs' not in plan_inputs(params, load)['extra_args']


def test_the_production_plane_removes_the_plane_s_flags(params, load):
    assert {flag: plan_inputs({**params, 'plane': 'production'}, load)['extra_args'][flag] for flag in PLANE} == \
        dict.fromkeys(PLANE, False)


def test_a_plan_made_from_the_same_inputs_is_kept_without_selecting_again(params, monkeypatch, load):
    first = make_plan(params, 'n1', load)
    assert first['made'] and first['plan']['variant'] == 'nodp'
    monkeypatch.setattr(_worker_plan, 'select', lambda _params: pytest.fail('selected again'))
    again = make_plan({**params, 'previous': first['plan']}, 'n1', load)
    assert not again['made'] and again['plan'] == first['plan']


def test_a_sweep_phase_keeps_the_sweep_s_plan_and_runs_the_phase(params, load):
    sweep = make_plan({**params, 'conc': [64, 256]}, 'n1', load)['plan']
    assert [phase['variant'] for phase in sweep['phases']] == ['nodp', 'dp']
    phase = make_plan({**params, 'conc': [256], 'variant': 'dp', 'previous': sweep}, 'n1', load)
    assert not phase['made'] and phase['phase']
    assert not make_plan({**params, 'conc': [64, 256], 'previous': sweep}, 'n1', load)['phase']
    assert phase['plan']['variant'] == 'dp' and phase['plan']['argv'] == sweep['phases'][1]['argv']
    assert phase['plan']['inputs'] == sweep['inputs'] and phase['plan']['phases'] == sweep['phases']


@pytest.mark.parametrize('change', [{'conc': 256}, {'extra_args': {'--page-size': 64}}, {'plane': 'production'},
                                    {'recipe_file': '/elsewhere.yml'}, {'variant': 'dp'}])
def test_a_plan_made_from_other_inputs_is_made_again(params, change, load):
    first = make_plan(params, 'n1', load)['plan']
    assert kept_plan(first, plan_inputs({**params, **change}, load)) is None
    assert make_plan({**params, **change, 'previous': first}, 'n1', load)['made']


def test_no_plan_earlier_in_the_run_makes_one(params, load):
    assert kept_plan({}, plan_inputs(params, load)) is None


def test_a_larger_capture_set_at_the_recipe_s_memory_fraction_is_warned_once(params, load):
    raised = {**params, 'cuda_graph_max_bs': 256}
    made = make_plan(raised, 'infera-node-1', load)
    assert made['warning'] == (
        "WARNING infera-node-1: --cuda-graph-max-bs 256 raises the capture set above the recipe's 128 while "
        "--mem-fraction-static stays at 0.90: raising --cuda-graph-max-bs costs memory, drop --mem-fraction-static to "
        "match (sglang_worker_extra_args).")
    assert make_plan({**raised, 'previous': made['plan']}, 'infera-node-1', load)['warning'] == ''


def test_no_capture_warning_when_memory_is_lowered_or_the_recipe_names_no_figures(params, recipe):
    assert capture_warning({**params, 'cuda_graph_max_bs': 256, 'extra_args': {'--mem-fraction-static': 0.85}},
                           recipe, 'n1') == ''
    assert capture_warning(params, recipe, 'n1') == ''
    bare = combine(recipe, {'args': {'--mem-fraction-static': None}})
    del bare['args']['--mem-fraction-static']
    assert capture_warning({**params, 'cuda_graph_max_bs': 256}, bare, 'n1') == ''


def test_bad_input_fails_in_one_line(params, load):
    with pytest.raises(VariantError, match="variant 'fast' is not in recipe"):
        make_plan({**params, 'variant': 'fast'}, 'n1', load)


def test_the_plan_runs_with_the_node_s_address_and_the_stack_s_flags():
    plan = {'argv': ['--model-path', '/m', '--host', '$HOST', '--tool-call-parser', 'x$HOST']}
    run = _worker_plan.worker_run(plan, '10.0.0.7', {'stack': {'engine_flags': ['--enable-metrics']}})
    assert run == {'argv': ['--model-path', '/m', '--host', '10.0.0.7', '--tool-call-parser', 'x$HOST'],
                   'engine_flags': ['--enable-metrics'],
                   'command': ['--model-path', '/m', '--host', '10.0.0.7', '--tool-call-parser', 'x$HOST',
                               '--enable-metrics']}
    # Before stack_info read the image (or with none to read), nothing is added.
    assert _worker_plan.worker_run(plan, '10.0.0.7')['engine_flags'] == []
    assert _worker_plan.worker_run(plan, '10.0.0.7', {'skipped': True})['command'] == run['argv']
