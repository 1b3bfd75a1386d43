# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The worker role's variant plan: what it is made from, when a plan made earlier in the run is kept, and the
warning a larger capture set earns. The selection itself (variant, argv, env, phases) is module_utils/_variant.py's.

A plan is made once per run: deploy_mixed.yml's first play plans before any node call, and every later play on the
host keeps that plan while its inputs are the same. The node's address is not an input (the recipe names it $HOST and
the launch script puts the address in), so every node's plan is the same. A sweep phase's worker keeps the sweep's
plan too: it asks for one of the plan's phases (that variant, those concurrencies) and runs it.
"""

from __future__ import annotations

import json

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.module_utils._variant import select

# The worker's modes and the role's recipe for each (in the role's recipes/ directory): a mixed worker picks its
# variant by concurrency; a PD leg runs the variant of its name in the PD recipe (Infera's sglang_1p1d_dsv4.md page).
MODES = {
    'mixed': 'dsv4-pro-mi355x-mixed.yml',
    'prefill': 'dsv4-pro-mi355x-pd.yml',
    'decode': 'dsv4-pro-mi355x-pd.yml',
}

ARGUMENT_SPEC = {
    'recipe': {'type': 'dict', 'default': {}},
    'recipe_file': {'type': 'str', 'default': ''},
    'recipe_overrides': {'type': 'dict', 'default': {}},
    'conc': {'type': 'raw', 'required': True},
    'variant': {'type': 'str', 'default': ''},
    'extra_args': {'type': 'dict', 'default': {}},
    'extra_env': {'type': 'dict', 'default': {}},
    'mode': {'type': 'str', 'default': 'mixed', 'choices': list(MODES)},
    'recipe_dir': {'type': 'str', 'default': ''},
    'cuda_graph_max_bs': {'type': 'int', 'default': 0},
    'cuda_graph_bs': {'type': 'list', 'elements': 'raw', 'default': []},
    'plane': {'type': 'str', 'required': True, 'choices': ['dev', 'production']},
    'plane_args': {'type': 'dict', 'required': True},
    'allow_missing_levers': {'type': 'bool', 'default': False},
    'previous': {'type': 'dict', 'default': {}},
}

# What a plan's phase replaces in the plan when a worker runs that phase.
PHASE_KEYS = ('variant', 'argv', 'env')


def combine(base, over):
    """Ansible's combine(recursive=True): mappings merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in over.items():
        merged[key] = combine(merged[key], value) if isinstance(merged.get(key), dict) and isinstance(value, dict) \
            else value
    return merged


def plan_inputs(params, load_recipe):
    """What the plan is made from: the recipe in force (the mapping given, else the recipe file's as
    load_recipe(path) reads it, with the overrides over it) and the engine flags the role adds over the recipe's: the
    cold-start knobs, then the plane's (the infera role owns them; dev adds them, production removes them, false
    removing a flag, also from a recipe that spells them out), then sglang_worker_extra_args. The recipe file's path is
    an input only when the recipe came from it."""
    from_file = not params['recipe']
    recipe_file = recipe_path(params) if from_file else ''
    recipe = combine(load_recipe(recipe_file) if from_file else params['recipe'], params['recipe_overrides'])
    cold_start = {'--cuda-graph-max-bs': params['cuda_graph_max_bs']} if params['cuda_graph_max_bs'] else {}
    if params['cuda_graph_bs']:
        cold_start['--cuda-graph-bs'] = params['cuda_graph_bs']
    plane = dict(params['plane_args']) if params['plane'] == 'dev' else dict.fromkeys(params['plane_args'], False)
    return {
        'recipe_file': recipe_file,
        'conc': params['conc'],
        'recipe': recipe,
        'variant': leg_variant(params),
        'extra_args': {**cold_start, **plane, **params['extra_args']},
        'extra_env': params['extra_env'],
        'allow_missing_levers': params['allow_missing_levers'],
    }


def recipe_path(params):
    """The recipe file in force: recipe_file when given, else the role's recipe for the worker's mode."""
    if params['recipe_file'] or not params['recipe_dir']:
        return params['recipe_file']
    return '%s/%s' % (params['recipe_dir'].rstrip('/'), MODES[params['mode']])


def leg_variant(params):
    """The variant asked for: a PD leg's is its mode (the PD recipe's variants are its legs); a mixed worker's is
    the variant option ('' to pick by concurrency)."""
    mode, variant = params['mode'], params['variant']
    if mode == 'mixed':
        return variant
    if variant and variant != mode:
        raise InferaServingError(
            'sglang_worker_variant %s does not fit sglang_worker_mode %s: a %s leg runs the recipe\'s %s variant; '
            'leave sglang_worker_variant empty (it chooses between the mixed recipe\'s variants)'
            % (json.dumps(variant), mode, mode, mode))
    return mode


def _aside_phase(inputs):
    return {**inputs, 'conc': None, 'variant': None}


def phase_asked(plan, inputs):
    """The phase of `plan` that `inputs` ask for (its variant and exactly its concurrencies), or None."""
    return next((phase for phase in plan.get('phases') or () if phase.get('variant') == inputs['variant']
                 and phase.get('concurrencies') == inputs['conc']), None)


def kept_plan(previous, inputs):
    """The plan made earlier in the run, when it serves `inputs`: made from the same recipe and settings, and either
    from the same concurrency and variant or holding the phase asked for. None when a new plan is needed."""
    earlier = previous.get('inputs')
    if not isinstance(earlier, dict) or earlier.get('recipe_file') != inputs['recipe_file'] \
            or _aside_phase(earlier) != _aside_phase(inputs):
        return None
    return previous if earlier == inputs or phase_asked(previous, inputs) else None


def capture_warning(params, recipe, node):
    """The warning for a capture set raised above the recipe's while --mem-fraction-static stays at the recipe's (a
    larger capture set costs memory), or ''. Both figures are the recipe's own; a recipe without them earns none."""
    args = recipe.get('args') or {}
    recipe_bs, recipe_fraction = args.get('--cuda-graph-max-bs'), args.get('--mem-fraction-static')
    if recipe_bs is None or recipe_fraction is None:
        return ''
    fraction = params['extra_args'].get('--mem-fraction-static', recipe_fraction)
    raised = params['cuda_graph_max_bs'] and int(params['cuda_graph_max_bs']) > int(recipe_bs)
    if not raised or float(fraction) < float(recipe_fraction):
        return ''
    return ("WARNING %s: --cuda-graph-max-bs %s raises the capture set above the recipe's %s while "
            "--mem-fraction-static stays at %s: raising --cuda-graph-max-bs costs memory, drop --mem-fraction-static "
            "to match (sglang_worker_extra_args)." % (node, params['cuda_graph_max_bs'], recipe_bs, fraction))


def make_plan(params, node, load_recipe):
    """{'plan': the plan this worker runs, 'made': whether it was made now, 'phase': whether it runs a phase of the
    plan (its variant, argv and env are the phase's), 'warning': text or '', 'warnings': the selection's own}.
    load_recipe(path) reads the recipe file when no recipe is given. Raises VariantError (module_utils/_variant.py) on
    bad input, and what load_recipe raises."""
    inputs = plan_inputs(params, load_recipe)
    plan = kept_plan(params['previous'], inputs)
    made = plan is None
    warnings = []
    if made:
        selected = select({'conc': inputs['conc'], 'recipe': inputs['recipe'], 'variant': inputs['variant'] or None,
                           'extra_args': inputs['extra_args'], 'extra_env': inputs['extra_env'],
                           'allow_missing_levers': inputs['allow_missing_levers']})
        warnings = selected['warnings']
        plan = {'recipe': inputs['recipe'].get('name', 'custom'), 'variant': selected['variant'],
                'reason': selected['reason'], 'argv': selected['argv'], 'env': selected['env'],
                'phases': selected['phases'], 'inputs': inputs}
    phase = phase_asked(plan, inputs)
    if phase:
        plan = {**plan, **{key: phase[key] for key in PHASE_KEYS}}
    return {'plan': plan, 'made': made, 'phase': bool(phase),
            'warning': capture_warning(params, inputs['recipe'], node) if made else '', 'warnings': warnings}


def missing_recipe_file(path):
    """The one line for a recipe file that is not there (the role's variables named: this is the role's step)."""
    return InferaServingError(
        'sglang_worker_recipe_file %s is not a file on the controller: give the path of a recipe, leave it empty for '
        'the role\'s recipe of sglang_worker_mode, or give the recipe itself as sglang_worker_recipe'
        % json.dumps(path))


def worker_run(plan, advertise_host, stack_info=None):
    """The plan as it runs on this node: `argv`, the plan's with the node's address in place of a value that is exactly
    $HOST (the recipe names the address as the walkthrough does); `engine_flags`, what the collection adds for the
    image's stack (module_utils/_stack.py engine_flags, none until stack_info read it); `command`, both in order."""
    argv = [advertise_host if token == '$HOST' else token for token in (plan or {}).get('argv') or []]
    flags = list(((stack_info or {}).get('stack') or {}).get('engine_flags') or [])
    return {'argv': argv, 'engine_flags': flags, 'command': argv + flags}
