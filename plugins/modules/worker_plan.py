#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# The work is done by the action plugin of the same name on the controller; this file only documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: worker_plan
short_description: Make or keep the SGLang worker's variant plan from a recipe and the worker role's settings
version_added: 0.2.0
description:
  - The plan step of the P(infera.serving.sglang_worker#role) role. It puts together what the plan is made from
    (the recipe, the engine flags the role adds over it, the concurrency and variant asked for), keeps the plan made
    earlier in the run when that plan serves them, and otherwise makes a new one with the selection of
    M(infera.serving.sglang_variant).
  - "The recipe in force is O(recipe) when it is not empty, else the file O(recipe_file) (or O(mode)'s recipe in
    O(recipe_dir)), with O(recipe_overrides) merged over it key by key. The flags added over the recipe's are, in this
    order: C(--cuda-graph-max-bs) O(cuda_graph_max_bs) and C(--cuda-graph-bs) O(cuda_graph_bs) when given, the
    plane's O(plane_args) (added when O(plane=dev), removed from the recipe when O(plane=production)), then
    O(extra_args)."
  - A plan made earlier in the run (O(previous)) is kept when it was made from the same recipe and settings and either
    from the same concurrency and variant, or it holds the phase asked for (a sweep phase's worker asks for one of the
    sweep's phases, that variant and exactly those concurrencies); the worker then runs that phase's variant, argv
    and env.
  - A new plan's warning and the selection's warnings are printed; errors name the role's variables, as the role's
    step.
  - The node's address is not an input. The recipe names it C($HOST), as the walkthrough does, so every node's plan
    is the same and a plan made before the node's address is known is kept.
  - A new plan whose C(--cuda-graph-max-bs) is above the recipe's while C(--mem-fraction-static) stays at the
    recipe's earns RV(warning), since a larger capture set costs memory.
  - A kept plan is reported as a skipped task (nothing was selected); its result holds the plan all the same.
  - Runs on the controller only and changes nothing.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
  - infera.serving._attributes.controller
options:
  recipe:
    description:
      - The engine recipe as a mapping (its keys as M(infera.serving.sglang_variant) reads them). Empty to use
        O(recipe_file).
    type: dict
    default: {}
  recipe_file:
    description:
      - A recipe file on the controller, read when O(recipe) is empty, as P(ansible.builtin.include_vars#module) reads
        a file (its values may be templates of the play's variables). Part of the plan's inputs when the recipe came
        from it.
      - A path that is not a file fails the task in one line naming the role's C(sglang_worker_recipe_file).
    type: str
    default: ''
  recipe_dir:
    description:
      - The directory of the role's recipes. When O(recipe) and O(recipe_file) are both empty, the recipe file is the
        one of O(mode) there (C(dsv4-pro-mi355x-mixed.yml), or C(dsv4-pro-mi355x-pd.yml) for a PD leg).
    type: str
    default: ''
  mode:
    description:
      - V(mixed) selects the variant by O(conc) (or takes O(variant)). V(prefill) and V(decode) are the legs of a
        PD-disaggregated pair; the leg runs the recipe's variant of that name, and a different O(variant) fails.
    type: str
    default: mixed
    choices: [mixed, prefill, decode]
  recipe_overrides:
    description:
      - Merged over the recipe in force, mapping by mapping (C(args), C(env), C(variants.<name>)); any other value
        replaces the recipe's.
    type: dict
    default: {}
  conc:
    description:
      - The concurrency to serve, or the concurrencies of a sweep, as M(infera.serving.sglang_variant) accepts them.
    type: raw
    required: true
  variant:
    description:
      - The variant asked for, or empty to select it by O(conc).
    type: str
    default: ''
  extra_args:
    description:
      - Engine flags over everything else (a value of V(false) removes a flag).
    type: dict
    default: {}
  extra_env:
    description:
      - Engine environment over the recipe's.
    type: dict
    default: {}
  cuda_graph_max_bs:
    description:
      - The largest batch size captured in a cuda graph, passed as C(--cuda-graph-max-bs); V(0) keeps the recipe's.
    type: int
    default: 0
  cuda_graph_bs:
    description:
      - The batch sizes to capture, passed as C(--cuda-graph-bs) when not empty.
    type: list
    elements: raw
    default: []
  plane:
    description:
      - The serving plane. V(dev) adds O(plane_args) to the engine's flags; V(production) removes them, also from a
        recipe that spells them out.
    type: str
    required: true
    choices: [dev, production]
  plane_args:
    description:
      - The plane's flags, as the P(infera.serving.infera#role) role's C(infera_plane_args) gives them.
    type: dict
    required: true
  allow_missing_levers:
    description:
      - Run without a lever of the recipe, with a warning, instead of failing.
    type: bool
    default: false
  previous:
    description:
      - The plan published earlier in the run (the role's C(sglang_worker_plan)), or empty.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: SGLang worker | Make the variant plan, or keep the one made earlier in the run
  infera.serving.worker_plan:
    recipe:
      name: my-recipe
      args: {--model-path: /models/DeepSeek-V4-Pro, --tp-size: 8}
      variants:
        nodp: {max_conc: 128, args: {--chunked-prefill-size: 8192}}
        dp: {min_conc: 256, args: {--dp: 8, --enable-dp-attention: null}}
    conc: 256
    cuda_graph_max_bs: 128
    plane: dev
    plane_args: "{{ infera_plane_args }}"
  register: planned

- name: SGLang worker | A later play keeps that plan while the inputs are the same
  infera.serving.worker_plan:
    recipe: "{{ planned.plan.inputs.recipe }}"
    conc: 256
    cuda_graph_max_bs: 128
    plane: dev
    plane_args: "{{ infera_plane_args }}"
    previous: "{{ planned.plan }}"
  register: kept

- name: SGLang worker | The decode leg of a PD pair, from the PD recipe's decode variant
  infera.serving.worker_plan:
    recipe_file: /path/to/recipes/dsv4-pro-mi355x-pd.yml
    mode: decode
    conc: 64
    plane: dev
    plane_args: "{{ infera_plane_args }}"
  register: decode_leg
"""

RETURN = r"""
plan:
  description:
    - The plan this worker runs. C(recipe) is the recipe's name, C(variant), C(argv), C(env) and C(reason) are the
      variant's (the phase's when a phase was asked for), C(phases) every phase of the plan, C(inputs) what it was
      made from.
  returned: success
  type: dict
  sample:
    recipe: dsv4-pro-mi355x-mixed
    variant: dp
    reason: "dp for conc 256: within its range (>= 256)"
    argv: [--model-path, /models/DeepSeek-V4-Pro, --tp-size, "8", --dp, "8", --enable-dp-attention]
    env: {SGLANG_USE_AITER: "1"}
    phases:
      - {variant: dp, concurrencies: [256], argv: [--model-path, /models/DeepSeek-V4-Pro], env: {SGLANG_USE_AITER: "1"}}
    inputs: {conc: 256, variant: '', recipe_file: /path/to/recipe.yml}
ansible_facts:
  description: A plan made now is published as the fact C(sglang_worker_plan), the role's plan that other roles and
    playbooks read.
  returned: when RV(made)
  type: dict
  contains:
    sglang_worker_plan:
      description: RV(plan).
      type: dict
made:
  description: Whether the plan was made now (V(false) when the one made earlier in the run was kept).
  returned: success
  type: bool
  sample: true
phase:
  description: Whether the worker runs one of the plan's phases (RV(plan)'s C(variant), C(argv) and C(env) are the phase's).
  returned: success
  type: bool
  sample: false
warning:
  description:
    - A one-line warning naming the node when a new plan raises the capture set above the recipe's without lowering
      C(--mem-fraction-static), else empty.
  returned: success
  type: str
  sample: ''
"""
