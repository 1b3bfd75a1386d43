#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_variant
short_description: Pick the SGLang engine variant of a recipe by concurrency and build its command line
version_added: 0.1.0
description:
  - Chooses which variant of an engine recipe to run for one concurrency or a list of concurrencies,
    and returns the engine's argument vector and environment for it. It changes nothing.
  - The recipe is data (the role keeps it in YAML). Each variant declares the concurrencies it serves
    with O(recipe) C(variants.<name>.min_conc) and/or C(max_conc). For the shipped DeepSeek-V4-Pro
    recipe on 8xMI355X, C(nodp) (pure TP8) serves concurrency up to 128 and C(dp) (DP-attention)
    serves 256 and above.
  - A concurrency strictly between two ranges (129 to 255 in the shipped recipe) gets the recipe's
    C(between) variant, C(dp) unless the recipe says otherwise. The reason is cuda graphs.
    C(nodp) captures cuda graphs only up to C(--cuda-graph-max-bs 128), so in C(nodp) a batch above 128 replays no graph.
    C(dp) splits the batch across 8 DP-attention ranks, so each rank's batch stays inside the captured range.
    The returned RV(reason) spells this out for the concurrency at hand.
  - For a list of concurrencies the result groups them into RV(phases), one per variant, ascending,
    lowest variant first, so a sweep restarts the engine the fewest times.
  - The argument vector is the recipe's common C(args), overridden by the variant's C(args),
    overridden by O(extra_args); the environment is built the same way from C(env), the variant's
    C(env) and O(extra_env).
  - "Lever guard: the recipe's C(levers) name the settings without which throughput drops to about
    half (C(--attention-backend dsv4) and the whole fused-compress environment set). If the final
    arguments or environment lack one of them, or give it another value, the module fails naming
    each missing lever, unless O(allow_missing_levers=true)."
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
options:
  conc:
    description:
      - The concurrency to serve, or the concurrencies of a sweep.
      - A positive integer, a numeric string, a list of positive integers, or a string of them
        separated by commas and/or spaces such as V(32,64,128).
      - Zero, negative numbers, non-integers (V(12.5), V(abc), V(true)), an empty list and a
        concurrency listed twice are rejected.
    type: raw
    required: true
  recipe:
    description:
      - The engine recipe, a mapping with these keys.
      - C(name) (str), used in messages.
      - C(env), the common environment, an ordered mapping of variable name to value.
      - C(args), the common engine flags, an ordered mapping of flag to value. A value of V(null)
        (or V(true)) is a bare switch, a list gives several values (C(--cuda-graph-bs 1 2 4)),
        V(false) removes a flag set by an earlier layer.
      - C(variants), a mapping of variant name to C(min_conc), C(max_conc) (both optional, inclusive),
        C(env) and C(args), which override the common ones. Ranges must not overlap. A variant with
        neither bound is only used when chosen with O(variant).
      - C(between), the variant for a concurrency in a gap between two ranges (default V(dp)).
      - C(levers), with C(args) (flag to the value it must have; V(null) means the switch must be
        present) and C(env) (names of variables that must keep the value C(env) gives them).
    type: dict
    required: true
  variant:
    description:
      - Use this variant for every concurrency instead of choosing by range. Must be a key of the
        recipe's C(variants).
    type: str
  extra_args:
    description:
      - Flags merged last, over the common and the variant flags. V(null) is a bare switch,
        V(false) removes the flag.
    type: dict
    default: {}
  extra_env:
    description:
      - Environment merged last, over the common and the variant environment. V(null) removes the variable.
    type: dict
    default: {}
  allow_missing_levers:
    description:
      - Return the result even if a lever is missing or has another value, with a warning, instead
        of failing. Roles expose this as C(sglang_worker_allow_missing_levers).
    type: bool
    default: false
notes:
  - All values reach the engine as text. A YAML boolean in the environment becomes the word C(true) or C(false),
    as the walkthrough's C(export) line spells it, not Python's C(True).
seealso:
  - module: infera.serving.sglang_ready
"""

EXAMPLES = r"""
- name: sglang_worker | Pick the variant for concurrency 64
  infera.serving.sglang_variant:
    conc: 64
    recipe: "{{ sglang_worker_recipe }}"
  register: _sglang_worker_variant

- name: sglang_worker | Plan a sweep (nodp first, then dp)
  infera.serving.sglang_variant:
    conc: "32,64,128,256,512,1024"
    recipe: "{{ sglang_worker_recipe }}"
  register: _sglang_sweep_plan

- name: sglang_worker | Force the dp variant and cut the cuda-graph capture time
  infera.serving.sglang_variant:
    conc: 128
    variant: dp
    recipe: "{{ sglang_worker_recipe }}"
    extra_args:
      --cuda-graph-max-bs: 32
      --enable-prefill-delayer: false
    extra_env:
      SGLANG_DP_USE_GATHERV: null

- name: sglang_worker | Experiment without the attention lever (warns instead of failing)
  infera.serving.sglang_variant:
    conc: 256
    recipe: "{{ sglang_worker_recipe }}"
    extra_args:
      --attention-backend: triton
    allow_missing_levers: true
"""

RETURN = r"""
variant:
  description: The chosen variant; for a list of concurrencies, the variant of the first phase.
  returned: success
  type: str
  sample: nodp
argv:
  description:
    - Engine arguments of that variant, flag then value(s), in recipe order, all strings.
    - Bare switches stand alone.
  returned: success
  type: list
  elements: str
  sample: [--trust-remote-code, --attention-backend, dsv4, --chunked-prefill-size, "8192"]
env:
  description: Environment of that variant (common, then variant, then O(extra_env)), values as strings.
  returned: success
  type: dict
  sample: {SGLANG_USE_AITER: "1", SGLANG_OPT_USE_FUSED_COMPRESS: "true"}
concurrencies:
  description: The concurrencies asked for, ascending.
  returned: success
  type: list
  elements: int
  sample: [32, 64, 256, 1024]
phases:
  description:
    - One entry per variant in the order to run them. All concurrencies of the lowest variant come first, ascending.
    - Each entry carries the variant's own C(argv) and C(env), so a sweep can restart the engine once per phase.
  returned: success
  type: list
  elements: dict
  contains:
    variant:
      description: Variant name.
      type: str
    concurrencies:
      description: Concurrencies served by this phase, ascending.
      type: list
      elements: int
    argv:
      description: Engine arguments for this phase, as RV(argv).
      type: list
      elements: str
    env:
      description: Environment for this phase, as RV(env).
      type: dict
  sample:
    - {variant: nodp, concurrencies: [32, 64], argv: [--chunked-prefill-size, "8192"], env: {}}
    - {variant: dp, concurrencies: [256, 1024], argv: [--dp, "8", --enable-dp-attention], env: {SGLANG_DP_USE_GATHERV: "1"}}
reason:
  description: Why each variant was chosen, one sentence per phase.
  returned: success
  type: str
  sample: >-
    dp for conc 200: between nodp (max_conc 128) and dp (min_conc 256), where the recipe picks dp;
    nodp captures cuda graphs only up to --cuda-graph-max-bs 128, so a batch above 128 replays no graph there,
    while dp splits the batch across 8 DP-attention ranks (~25 per rank at conc 200)
missing_levers:
  description:
    - Levers absent from the final arguments or environment, or present with another value
      (then the entry ends with the value found, in parentheses).
    - Empty unless O(allow_missing_levers=true), since otherwise the module fails.
  returned: success
  type: list
  elements: str
  sample: ["--attention-backend dsv4 (found: triton)", "env SGLANG_OPT_USE_FUSED_COMPRESS=true"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail
from ansible_collections.infera.serving.plugins.module_utils._variant import ARGUMENT_SPEC, select


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    result = run_or_fail(module, select)

    for warning in result.pop('warnings'):
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
