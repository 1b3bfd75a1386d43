# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: sweep_search
short_description: The next point of a search within limits, or its answer, from a run's results folder
version_added: 0.2.0
author:
  - Infera serving maintainers (@infera)
description:
  - Reads what a run has measured so far on the controller (the host's C(manifest.json) and jsonl files, as the report
    reads them) and says which concurrency the search runs next, or, once it is done, its answer.
  - Each concurrency of the band runs in the variant the recipe picks for it, so each variant is searched over its own
    part of the band. Within it the search starts at the geometric middle, brackets by steps of x4, then bisects on a
    log scale between the highest concurrency that meets the limits and the lowest above it that does not, until they
    are at most 1.5x apart. Every valid point of the run counts, also one measured by an earlier sweep of the run.
  - "The answer is one line per variant and one overall, C(best within limits: c<C> <variant> <tok/s/GPU> tok/s/GPU at
    <tok/s/user> tok/s/user (TPOT p99 <ms>, TTFT p99 <ms>\\), <n> points, <duration>), or which limit no point met."
  - Paths are on the controller.
options:
  _terms:
    description: The run's results folder, C(results/<run_id>).
    type: list
    elements: path
    required: true
  host:
    description: The node whose folder of the run holds the points (the node the points are run from).
    type: str
    required: true
  recipe:
    description: The recipe in force (C(sglang_worker_plan.inputs.recipe)), whose variants split the band.
    type: dict
    required: true
  limits:
    description: Any of C(tpot_p99_ms), C(ttft_p99_ms) (ceilings) and C(tok_s_user_min) (a floor on the median tok/s/user).
    type: dict
    required: true
  band:
    description: The concurrencies the search may run, C([low, high]).
    type: list
    elements: int
    default: [4, 1024]
notes:
  - Returns one dict; use it with C(lookup), not C(query).
seealso:
  - module: infera.serving.sweep_report
"""

EXAMPLES = r"""
- name: Find the next point of the search
  ansible.builtin.set_fact:
    _next: "{{ lookup('infera.serving.sweep_search', 'results/run1', host=inventory_hostname,
                      recipe=sglang_worker_plan.inputs.recipe, limits={'tpot_p99_ms': 30}) }}"
"""

RETURN = r"""
_raw:
  description: The search's state.
  type: dict
  contains:
    next:
      description: The concurrency to run next (per node), or null when the search is done.
      type: int
    variant:
      description: The variant that concurrency runs in, or null.
      type: str
    lines:
      description: Once the search is done, one line per variant and one overall; empty before.
      type: list
      elements: str
    kept:
      description: The run's valid points, by concurrency (per node); a round sweeps them with the next point, so that
        the manifest keeps them.
      type: list
      elements: int
    points:
      description: The points of the run the search counts.
      type: int
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_search_run import search_step


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            return [search_step(self._loader.path_dwim(str(term)), self.get_option('host'), self.get_option('recipe'),
                                self.get_option('band'), self.get_option('limits')) for term in terms]
        except InferaServingError as error:
            raise AnsibleLookupError(str(error)) from error
