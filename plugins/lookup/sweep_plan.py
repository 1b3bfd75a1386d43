# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: sweep_plan
short_description: Plan a sweep once, before its first point, with an estimated duration per point
version_added: 0.1.0
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._sweep_plan
description:
  - Orders the points of the variant plan's phases, numbers them (C(point k/N c<C> <variant>)), finds the ones already
    valid on the controller (resume, with the same check as P(infera.serving.bench_point#lookup), and with the workers
    the earlier C(manifest.json) recorded for the point, when it did), names the engine restarts between the phases that
    run, and estimates each point's duration.
  - "A fleet sweep (O(fleet_workers) N > 1) goes through one router of N serving workers: each concurrency C of the
    phases becomes a point of C x N concurrent requests (C per worker), on N workers' GPUs, held to C's target."
  - A point's estimate is its tokens divided by its per-GPU throughput target times its GPUs. The tokens are
    C(num_prompts) times the tokens the target's metric counts (input plus output for C(Throughput/GPU), output for
    C(Output Throughput/GPU), input for C(Input Throughput/GPU)); the GPUs are the variant's TP x PP as the results
    count them, times the serving workers of a fleet sweep. Without a targets file, a throughput target or a target for
    the concurrency there is no estimate.
  - Returns the lines the sweep prints before its first point, too.
options:
  _terms:
    description: The variant plan's phases (C(sglang_worker_plan.phases)), each with C(variant), C(concurrencies), C(argv).
    type: list
    elements: dict
    required: true
  results_dir:
    description: The host's results folder on the controller, where valid points are found (resume); relative to the playbook.
    type: str
    required: true
  host:
    description: The node, as the lines name it.
    type: str
    required: true
  fleet_workers:
    description:
      - The serving workers one router spreads the sweep over. V(1) is a node sweep; N > 1 a fleet sweep, whose points
        send each concurrency times N.
    type: int
    default: 1
notes:
  - Returns one dict; use it with C(lookup), not C(query).
seealso:
  - module: infera.serving.sweep_report
"""

EXAMPLES = r"""
- name: sweep | Plan the sweep and say how long it should take
  ansible.builtin.set_fact:
    _sweep_plan: "{{ lookup('infera.serving.sweep_plan', sglang_worker_plan.phases, results_dir=_sweep_local_dir,
                            host=inventory_hostname, prompts_per_conc=10, random_input_len=8192,
                            random_output_len=1024, targets_file='targets.yml') }}"

- name: sweep | Show the plan
  ansible.builtin.debug:
    msg: "{{ _sweep_plan.lines }}"
"""

RETURN = r"""
_raw:
  description: The plan.
  type: dict
  contains:
    points:
      description: Every point in order, with C(conc) (the client's C(--max-concurrency)), C(node_conc) (the
        concurrency of the phases it stands for), C(fleet), C(variant), C(label), C(num_prompts), C(gpus), C(runs) (false
        when already valid), C(workers) (for a point not run, the workers the earlier manifest recorded, or null) and
        C(estimate) (seconds, or null).
      type: list
      elements: dict
    pending:
      description: The concurrencies (C(conc)) that run, in order.
      type: list
      elements: int
    restarts:
      description: The engine restarts between the phases that run, each C(from) and C(to) a variant.
      type: list
      elements: dict
    estimate:
      description: Estimated seconds of all the points that run; null when any of them has no estimate.
      type: float
    lines:
      description: What the sweep prints before its first point.
      type: list
      elements: str
      sample:
        - "node1: sweep plan: 2 point(s) to run; engine restart(s): 1 (nodp -> dp); estimated ~1:42:10 in total (from targets.yml; ...)"
        - "node1:   point 1/2 c64 nodp, 640 prompts on 8 GPUs: ~0:05:27"
        - "node1:   point 2/2 c1024 dp, 10240 prompts on 8 GPUs: ~1:27:09"
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_start import plan_points


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        # lookup('...sweep_plan', phases) hands the list over as one term (ansible-core 2.19), or
        # flattened into the terms by older cores.
        phases = list(terms[0]) if len(terms) == 1 and isinstance(terms[0], list) else list(terms)
        bench = {key: self.get_option(key) for key in ('prompts_per_conc', 'random_input_len', 'random_output_len')}
        results_dir = self._loader.path_dwim(self.get_option('results_dir'))
        targets_file = self.get_option('targets_file')
        try:
            plan = plan_points(phases, results_dir, self.get_option('host'), bench,
                               self._loader.path_dwim(targets_file) if targets_file else '', self.get_option('force'),
                               self.get_option('fleet_workers'))
        except (SweepResultsError, KeyError, TypeError) as error:
            raise AnsibleLookupError('sweep_plan: %s' % error) from None
        return [plan]
