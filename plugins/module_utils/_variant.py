# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""Pick the engine variant of a recipe for a concurrency and build its argv and env.

The recipe is data (the role keeps it in YAML); this file only interprets it, so the
rules live in one place where unit tests reach them without Ansible.
"""

from __future__ import annotations

import math
import re

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError

DEFAULT_BETWEEN = 'dp'
OVERRIDE_VARIABLE = 'sglang_worker_allow_missing_levers'

_INTEGER_TEXT = re.compile(r'^[+-]?\d+$')
_SEPARATORS = re.compile(r'[\s,]+')
_ACCEPTED_CONC = ("a positive integer, a list of positive integers, "
                  "or a comma/space-separated string such as '32,64,128'")


ARGUMENT_SPEC = dict(
    conc=dict(type='raw', required=True),
    recipe=dict(type='dict', required=True),
    variant=dict(type='str'),
    extra_args=dict(type='dict', default={}),
    extra_env=dict(type='dict', default={}),
    allow_missing_levers=dict(type='bool', default=False),
)


class VariantError(InferaServingError):
    """Bad input: the message is one line naming the bad value and what is accepted."""


# ---------------------------------------------------------------- concurrencies

def parse_concurrencies(raw):
    """Return the concurrencies (in the given order) from an int, a numeric string, a list or a CSV string."""
    if isinstance(raw, (list, tuple)):
        if not raw:
            raise VariantError('conc is an empty list; give at least one concurrency (%s)' % _ACCEPTED_CONC)
        values = [_one_concurrency(item, raw) for item in raw]
    elif isinstance(raw, str):
        tokens = [token for token in _SEPARATORS.split(raw.strip()) if token]
        if not tokens:
            raise VariantError('conc is an empty string; expected %s' % _ACCEPTED_CONC)
        values = [_one_concurrency(token, raw if len(tokens) > 1 else None) for token in tokens]
    else:
        values = [_one_concurrency(raw)]
    _reject_duplicates(values)
    return values


def _one_concurrency(value, whole=None):
    """One concurrency as an int; ``whole`` is the list or string it came from, named in messages."""
    context = '' if whole is None else ' in conc %r' % (whole,)
    # bool is an int subclass: `true` must not silently mean concurrency 1.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise VariantError('conc value %r (%s)%s is not an integer; expected %s'
                           % (value, type(value).__name__, context, _ACCEPTED_CONC))
    if isinstance(value, str):
        if not _INTEGER_TEXT.match(value.strip()):
            raise VariantError('conc value %r%s is not an integer; expected %s' % (value, context, _ACCEPTED_CONC))
        value = int(value.strip())
    if value <= 0:
        raise VariantError('conc value %d%s must be greater than 0; expected %s' % (value, context, _ACCEPTED_CONC))
    return value


def _reject_duplicates(values):
    seen = set()
    for value in values:
        if value in seen:
            raise VariantError('conc lists %d more than once; each concurrency may appear only once' % value)
        seen.add(value)


# ---------------------------------------------------------------- recipe

# What a recipe and its parts may hold; any other key is a typo or a setting nothing reads.
RECIPE_KEYS = ('name', 'description', 'env', 'args', 'variants', 'between', 'levers')
VARIANT_KEYS = ('min_conc', 'max_conc', 'env', 'args')
LEVER_KEYS = ('args', 'env')


def _reject_unknown_keys(data, allowed, where):
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        raise VariantError('%s has unknown key(s) %s; allowed: %s' % (where, ', '.join(unknown), ', '.join(allowed)))


class Recipe:
    """A validated recipe: common env/args, variants with concurrency ranges, levers."""

    def __init__(self, data):
        if not isinstance(data, dict):
            raise VariantError('recipe must be a mapping; got %s' % type(data).__name__)
        _reject_unknown_keys(data, RECIPE_KEYS, 'recipe')
        self.name = str(data.get('name') or 'recipe')
        self.env = _env_mapping(data.get('env') or {}, 'recipe.env')
        self.args = _args_mapping(data.get('args') or {}, 'recipe.args')
        self.variants = _variants(data.get('variants'))
        # A recipe whose variants have no concurrency range (the PD recipe's legs) is chosen from by name only, and
        # has no gap between ranges to fill.
        self.between = data.get('between', DEFAULT_BETWEEN if self.ranges() else None)
        if self.between is not None and self.between not in self.variants:
            raise VariantError('recipe.between names %r, which is not a variant; known variants: %s'
                               % (self.between, ', '.join(self.variants)))
        self.levers = _levers(data.get('levers') or {}, self.env)

    def ranges(self):
        """Variants that are chosen automatically, as (low, high, name) sorted by low."""
        return _ranged(self.variants)


def _env_mapping(value, where):
    if not isinstance(value, dict):
        raise VariantError('%s must be a mapping of NAME: value; got %s' % (where, type(value).__name__))
    for name, item in value.items():
        if not isinstance(name, str) or not name:
            raise VariantError('%s has a non-string variable name %r' % (where, name))
        if isinstance(item, (dict, list)):
            raise VariantError('%s.%s must be a scalar (or null to remove it); got %s'
                               % (where, name, type(item).__name__))
    return dict(value)


def _args_mapping(value, where):
    if not isinstance(value, dict):
        raise VariantError('%s must be a mapping of --flag: value; got %s' % (where, type(value).__name__))
    for flag, item in value.items():
        if not isinstance(flag, str) or not flag.startswith('-'):
            raise VariantError("%s key %r is not a flag; flags start with '-' such as '--tp-size'" % (where, flag))
        if isinstance(item, dict):
            raise VariantError('%s %s must be a scalar, a list, null (bare switch) or false (remove); got a mapping'
                               % (where, flag))
    return dict(value)


def _variants(value):
    if not isinstance(value, dict) or not value:
        raise VariantError('recipe.variants must be a non-empty mapping of variant name to settings')
    variants = {}
    for name, spec in value.items():
        where = 'recipe.variants.%s' % name
        spec = spec or {}
        if not isinstance(spec, dict):
            raise VariantError('%s must be a mapping; got %s' % (where, type(spec).__name__))
        _reject_unknown_keys(spec, VARIANT_KEYS, where)
        variants[str(name)] = {
            'min_conc': _bound(spec.get('min_conc'), where + '.min_conc', 1),
            'max_conc': _bound(spec.get('max_conc'), where + '.max_conc', math.inf),
            'env': _env_mapping(spec.get('env') or {}, where + '.env'),
            'args': _args_mapping(spec.get('args') or {}, where + '.args'),
        }
        if variants[name]['min_conc'] > variants[name]['max_conc']:
            raise VariantError('%s has min_conc above max_conc' % where)
    _reject_overlaps(variants)
    return variants


def _bound(value, where, default):
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise VariantError('%s must be a positive integer; got %r' % (where, value))
    return value


def _ranged(variants):
    # A variant with neither bound is never picked automatically, only by the variant option.
    return sorted((v['min_conc'], v['max_conc'], name) for name, v in variants.items()
                  if v['min_conc'] != 1 or v['max_conc'] != math.inf)


def _reject_overlaps(variants):
    ranged = _ranged(variants)
    for (_low, high, name), (next_low, _high, next_name) in zip(ranged, ranged[1:]):
        if next_low <= high:
            raise VariantError('recipe variants %s and %s both cover concurrency %d; their ranges must not overlap'
                               % (name, next_name, next_low))


def _levers(value, common_env):
    if not isinstance(value, dict):
        raise VariantError('recipe.levers must be a mapping with args and env; got %s' % type(value).__name__)
    _reject_unknown_keys(value, LEVER_KEYS, 'recipe.levers')
    args = _args_mapping(value.get('args') or {}, 'recipe.levers.args')
    env_names = value.get('env') or []
    if not isinstance(env_names, list) or not all(isinstance(name, str) for name in env_names):
        raise VariantError('recipe.levers.env must be a list of variable names')
    for name in env_names:
        if common_env.get(name) is None:
            raise VariantError('recipe.levers.env names %s, but recipe.env does not set it; '
                               'the lever value comes from recipe.env' % name)
    return {'args': args, 'env': list(env_names)}


# ---------------------------------------------------------------- selection

def choose_variant(recipe, conc):
    """Return (variant, rule) for one concurrency.

    ``rule`` is ('range', variant) when a variant's range holds the concurrency, or
    ('between', lower, upper) when it falls in the gap between two ranges.
    """
    ranges = recipe.ranges()
    if not ranges:
        raise VariantError('recipe %s picks no variant by concurrency (its variants %s have no min_conc or max_conc); '
                           'name the variant' % (recipe.name, ', '.join(recipe.variants)))
    for low, high, name in ranges:
        if low <= conc <= high:
            return name, ('range', name)
    below = [name for _low, high, name in ranges if high < conc]
    above = [name for low, _high, name in ranges if low > conc]
    if not below or not above:
        described = ', '.join('%s %s' % (name, _describe_range(low, high)) for low, high, name in ranges)
        raise VariantError('no variant of %s covers conc %d; ranges: %s' % (recipe.name, conc, described))
    return recipe.between, ('between', below[-1], above[0])


def _describe_range(low, high):
    if high == math.inf:
        return '>= %d' % low
    if low == 1:
        return '<= %d' % high
    return '%d..%d' % (low, high)


def _rule_text(recipe, rule, concurrencies):
    """Explain one rule for the concurrencies it chose."""
    listed = ', '.join(str(conc) for conc in concurrencies)
    if rule[0] == 'range':
        variant = recipe.variants[rule[1]]
        return 'conc %s: within its range (%s)' % (listed, _describe_range(variant['min_conc'], variant['max_conc']))
    lower, upper = rule[1], rule[2]
    text = ('conc %s: between %s (max_conc %d) and %s (min_conc %d), where the recipe picks %s'
            % (listed, lower, recipe.variants[lower]['max_conc'], upper, recipe.variants[upper]['min_conc'],
               recipe.between))
    graph_max = _effective_value(recipe, lower, '--cuda-graph-max-bs')
    if graph_max is None:
        return text
    text += ('; %s captures cuda graphs only up to --cuda-graph-max-bs %s, so a batch above %s replays no graph there'
             % (lower, graph_max, graph_max))
    ranks = _effective_value(recipe, upper, '--dp')
    if isinstance(ranks, int) or (isinstance(ranks, str) and ranks.isdigit()):
        largest = max(concurrencies)
        text += (', while %s splits the batch across %s DP-attention ranks (~%d per rank at conc %d)'
                 % (upper, ranks, math.ceil(largest / max(int(ranks), 1)), largest))
    return text


def _effective_value(recipe, variant, flag):
    return _merge_args(recipe.args, recipe.variants[variant]['args']).get(flag)


# ---------------------------------------------------------------- argv / env

def _merge_args(*layers):
    """Later layers override earlier ones in place; false removes a flag."""
    merged = {}
    for layer in layers:
        for flag, value in layer.items():
            if value is False:
                merged.pop(flag, None)
            else:
                merged[flag] = value
    return merged


def _merge_env(*layers):
    """Later layers override earlier ones; null removes a variable."""
    merged = {}
    for layer in layers:
        for name, value in layer.items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = _text(value)
    return merged


def _text(value):
    # YAML `true` must reach the engine as the shell would spell it, not as Python's 'True'.
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return str(value)


def _argv(args):
    argv = []
    for flag, value in args.items():
        argv.append(flag)
        if value is None or value is True:
            continue
        if isinstance(value, (list, tuple)):
            argv.extend(_text(item) for item in value)
        else:
            argv.append(_text(value))
    return argv


def _missing_levers(recipe, args, env):
    missing = []
    for flag, wanted in recipe.levers['args'].items():
        wanted_text = flag if wanted is None else '%s %s' % (flag, _text(wanted))
        if flag not in args:
            missing.append(wanted_text)
        elif wanted is not None and _argv({flag: args[flag]})[1:] != _argv({flag: wanted})[1:]:
            missing.append('%s (found: %s)' % (wanted_text, ' '.join(_argv({flag: args[flag]})[1:]) or 'bare switch'))
    for name in recipe.levers['env']:
        wanted = _text(recipe.env[name])
        if name not in env:
            missing.append('env %s=%s' % (name, wanted))
        elif env[name] != wanted:
            missing.append('env %s=%s (found: %s)' % (name, wanted, env[name]))
    return missing


# ---------------------------------------------------------------- entry point

def _check_overrides(extra_args, extra_env):
    _args_mapping(extra_args or {}, 'extra_args')
    _env_mapping(extra_env or {}, 'extra_env')


def _plan(recipe, concurrencies, explicit):
    """Group the concurrencies into one phase per variant, each ascending, lowest variant first.

    Returns ({variant: [conc, ...]}, {variant: {rule: [conc, ...]}}) in phase order.
    """
    chosen = {}
    rules = {}
    for conc in sorted(concurrencies):
        name, rule = (explicit, ('explicit',)) if explicit else choose_variant(recipe, conc)
        chosen.setdefault(name, []).append(conc)
        rules.setdefault(name, {}).setdefault(rule, []).append(conc)
    return chosen, rules


def _reason(recipe, explicit, concurrencies, rules):
    if explicit is not None:
        automatic = []
        for conc in sorted(concurrencies):
            try:
                automatic.append('%d->%s' % (conc, choose_variant(recipe, conc)[0]))
            except VariantError:
                automatic.append('%d->none' % conc)
        return ('%s: chosen by the variant option for every concurrency (by the ranges alone: %s)'
                % (explicit, ', '.join(automatic)))
    return '; '.join('%s for %s' % (name, _rule_text(recipe, rule, points))
                     for name, by_rule in rules.items() for rule, points in by_rule.items())


def select(params):
    """Validate the options and return the module result (without changed) or raise VariantError.

    The result's ``warnings`` list is for the caller to emit; it is not a return value.
    """
    recipe = Recipe(params['recipe'])
    concurrencies = parse_concurrencies(params['conc'])
    explicit = params.get('variant')
    if explicit is not None and explicit not in recipe.variants:
        raise VariantError('variant %r is not in recipe %s; choose one of: %s'
                           % (explicit, recipe.name, ', '.join(recipe.variants)))
    extra_args = params.get('extra_args') or {}
    extra_env = params.get('extra_env') or {}
    _check_overrides(extra_args, extra_env)

    chosen, rules = _plan(recipe, concurrencies, explicit)
    phases = []
    missing = []
    for name, points in chosen.items():
        variant = recipe.variants[name]
        args = _merge_args(recipe.args, variant['args'], extra_args)
        env = _merge_env(recipe.env, variant['env'], extra_env)
        phases.append({'variant': name, 'concurrencies': points, 'argv': _argv(args), 'env': env})
        missing.extend(lever for lever in _missing_levers(recipe, args, env) if lever not in missing)

    warnings = []
    if missing and not params.get('allow_missing_levers'):
        raise VariantError(_lever_failure(missing), missing_levers=missing)
    if missing:
        warnings.append(_lever_warning(missing))

    first = phases[0]
    return {
        'concurrencies': sorted(concurrencies),
        'variant': first['variant'],
        'argv': first['argv'],
        'env': first['env'],
        'phases': phases,
        'reason': _reason(recipe, explicit, concurrencies, rules),
        'missing_levers': missing,
        'warnings': warnings,
    }


def _lever_failure(missing):
    """One-line message for the lever guard."""
    return ('recipe levers missing: %s; throughput drops to ~50%% without them. Restore them, '
            'or set %s: true to run anyway' % ('; '.join(missing), OVERRIDE_VARIABLE))


def _lever_warning(missing):
    return ('running without the recipe levers %s (allowed by %s): throughput drops to ~50%% without them'
            % ('; '.join(missing), OVERRIDE_VARIABLE))
