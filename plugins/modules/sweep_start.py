#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# The work is done by the action plugin of the same name on the controller; this file only documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: sweep_start
short_description: Start a sweep on one host, on the controller (whose router, where its results go, the plan)
version_added: 0.2.0
description:
  - The first step of the P(infera.serving.sweep#role) role after its phases are known.
  - Decides whose router the host's points go through. That is the host itself, or in a serving fleet of more than
    one node still in the play (O(topology=serving)) the fleet's first router node by name. A fleet is swept once,
    through that router, each concurrency C sent as C x N over the fleet's N serving workers, and every node of the
    fleet follows that node's plan.
  - A PD pair (O(pair)) is swept once, through its router on the prefill group's first node, each concurrency C sent as
    C; the router lists every leg.
  - Names where the run's results go. On the node, it is the C(results) folder of O(work_dir), under O(run_id). On the
    controller, it is O(results_dir), under O(run_id) and the host.
  - On the node that runs the points, plans them as P(infera.serving.sweep_plan#lookup) does (order, resume,
    restarts, estimated time).
  - Sets the facts C(_sweep) (the returned RV(sweep)) and empties the run's records C(_sweep_recorded),
    C(_sweep_noted) and C(_sweep_aborted), so a second sweep in one play starts afresh.
  - Runs on the controller only and changes nothing.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
  - infera.serving._attributes.controller
  - infera.serving._sweep_plan
options:
  run_id:
    description: The run's name, one folder under O(results_dir) (the role checks it first).
    type: str
    required: true
  phases:
    description: The variant plan's phases (C(sglang_worker_plan.phases)), each with C(variant), C(concurrencies), C(argv).
    type: list
    elements: dict
    required: true
  recipe:
    description: The recipe's name, as the manifest records it.
    type: str
    default: ''
  work_dir:
    description: The node's work directory (mounted at the same path in the container).
    type: str
    required: true
  results_dir:
    description: The controller's results folder, relative to the playbook.
    type: str
    required: true
  topology:
    description: The inventory's topology; a V(serving) fleet of more than one node is swept once through one router.
    type: str
    default: serving
  fleet_hosts:
    description: The serving fleet's nodes (C(infera_fleet_hosts)).
    type: list
    elements: str
    default: []
  router_hosts:
    description: The nodes that run a router, in order (C(infera_router_hosts)).
    type: list
    elements: str
    default: []
  play_hosts:
    description: The nodes still in the play (C(ansible_play_hosts)).
    type: list
    elements: str
    default: []
  pair:
    description:
      - A PD pair, as the P(infera.serving.pd_pair#filter) filter reads it from the inventory (C(router), C(hosts)); empty
        for a mixed sweep.
      - Its points go through the router on C(router), each concurrency as it is, and that router must list every node of
        C(hosts) before a phase's first point.
    type: dict
    default: {}
seealso:
  - plugin: infera.serving.sweep_plan
    plugin_type: lookup
  - module: infera.serving.sweep_record
"""

EXAMPLES = r"""
- name: Start the sweep of one node through its own router
  infera.serving.sweep_start:
    run_id: 20261206T170000Z
    phases:
      - {variant: nodp, concurrencies: [16, 64], argv: [--tp-size, "8"], env: {}}
    recipe: dsv4-pro-mi355x-mixed
    work_dir: "{{ sweep_work_dir }}"
    results_dir: "{{ sweep_results_dir }}"
    play_hosts: ["{{ inventory_hostname }}"]
    prompts_per_conc: "{{ sweep_prompts_per_conc }}"
    random_input_len: "{{ sweep_random_input_len }}"
    random_output_len: "{{ sweep_random_output_len }}"
  register: started

- name: Show the plan
  ansible.builtin.debug:
    msg: "{{ started.sweep.plan.lines }}"
  when: started.sweep.benches_here
"""

RETURN = r"""
sweep:
  description: The host's sweep, also set as the fact C(_sweep).
  returned: success
  type: dict
  contains:
    run_id:
      description: The run's name.
      type: str
    bench_host:
      description: The node whose router the host's points go through.
      type: str
    benches_here:
      description: Whether this host runs the points (it is its own bench host).
      type: bool
    fleet_workers:
      description: The serving workers a concurrency is multiplied by (N in a serving fleet's sweep, 1 for a node or a PD pair).
      type: int
    router_workers:
      description: The workers the bench host's router must list before a phase's first point (every leg of a PD pair).
      type: int
    remote_dir:
      description: The run's folder on the node.
      type: str
    local_dir:
      description: The host's folder of the run on the controller, relative to the playbook.
      type: str
    phases:
      description: O(phases).
      type: list
    recipe:
      description: O(recipe).
      type: str
    plan:
      description: On the host that runs the points, the plan as P(infera.serving.sweep_plan#lookup) returns it; null on
        a node that follows another's plan.
      type: dict
"""
