# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The sweep's start on one host (infera.serving.sweep_start, roles/sweep/tasks/main.yml): whose router its points go
through, where its results go, and, on the node that runs the points, the plan of the points (order, resume, restarts,
estimated time).

Serving topology: every node's router round-robins across the whole fleet, so per-node sweeps through each router
would all load every node. The fleet is swept once instead, through the router of the fleet's first router node by
name (infera_router_hosts), each concurrency C sent as C x N over the fleet's N serving workers; every node of the fleet
follows that node's plan (which phases run) and stops when it aborts.

A PD pair (`pair`, plugin_utils/_pd_pair.py's, sweep_pd.yml) is swept once, through its router on the prefill group's
first node, each concurrency C sent as C (InferenceX sends C to the router of a disaggregated system): the router
lists every leg, and the per-GPU figures divide by all their GPUs (_sweep_workers.point_gpus)."""

from __future__ import annotations

import posixpath

from ansible_collections.infera.serving.plugins.plugin_utils._node_layout import sweep_results_dir
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import load_targets
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_progress import plan_lines, plan_sweep
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_record import kept_results

ARGUMENT_SPEC = {
    'run_id': {'type': 'str', 'required': True},
    'phases': {'type': 'list', 'elements': 'dict', 'required': True},
    'recipe': {'type': 'str', 'default': ''},
    'work_dir': {'type': 'str', 'required': True},
    'results_dir': {'type': 'str', 'required': True},
    'topology': {'type': 'str', 'default': 'serving'},
    'fleet_hosts': {'type': 'list', 'elements': 'str', 'default': []},
    'router_hosts': {'type': 'list', 'elements': 'str', 'default': []},
    'play_hosts': {'type': 'list', 'elements': 'str', 'default': []},
    'prompts_per_conc': {'type': 'int', 'required': True},
    'random_input_len': {'type': 'int', 'required': True},
    'random_output_len': {'type': 'int', 'required': True},
    'targets_file': {'type': 'str', 'default': ''},
    'force': {'type': 'bool', 'default': False},
    'pair': {'type': 'dict', 'default': {}},
}

BENCH_KEYS = ('prompts_per_conc', 'random_input_len', 'random_output_len')


def bench_host(host, topology, fleet_hosts, router_hosts, play_hosts, pair=None):
    """The node whose router `host`'s points go through, and the serving workers a concurrency is multiplied by: the
    host itself and 1, or in a serving fleet of more than one node still in the play (one worker per node, as
    deploy_mixed.yml starts them) the fleet's first router node by name and the fleet's size, or for a PD pair its
    router's node and 1 (the pair serves a request with one worker of each leg)."""
    if pair:
        return pair['router'], 1
    fleet = [name for name in fleet_hosts if name in play_hosts]
    routers = [name for name in router_hosts if name in fleet]
    if topology == 'serving' and len(fleet) > 1 and routers:
        return routers[0], len(fleet)
    return host, 1


def plan_points(phases, results_dir, host, bench, targets_path, force, fleet_workers):
    """The plan of the points (plugin_utils/_sweep_progress.py plan_sweep) with what the controller already holds
    (resume) and the lines the sweep prints before its first point. `results_dir` and `targets_path` are absolute."""
    targets = load_targets(targets_path) if targets_path else None
    valid = kept_results(results_dir, phases, bench['prompts_per_conc'], fleet_workers)
    plan = plan_sweep(phases, valid, bench, targets, force, fleet_workers)
    plan['lines'] = plan_lines(host, plan)
    return plan


def listed_workers(params, workers):
    """The workers the bench host's router must list before a phase's first point: every leg of a PD pair, else one
    per node the concurrency was multiplied by."""
    pair = params['pair']
    return len(pair['hosts']) if pair else workers


def start_sweep(params, host, path_dwim):
    """The host's sweep facts (`_sweep`): run_id, bench_host, benches_here, fleet_workers, router_workers, remote_dir,
    local_dir, phases, recipe and plan (None on a node that follows another's plan). `path_dwim` resolves a controller
    path as the playbook names it."""
    bench, workers = bench_host(host, params['topology'], params['fleet_hosts'], params['router_hosts'],
                                params['play_hosts'], params['pair'])
    local_dir = posixpath.join(params['results_dir'], params['run_id'], host)
    plan = None
    if bench == host:
        targets = params['targets_file']
        plan = plan_points(params['phases'], path_dwim(local_dir), host, {key: params[key] for key in BENCH_KEYS},
                           path_dwim(targets) if targets else '', params['force'], workers)
    return {'run_id': params['run_id'], 'bench_host': bench, 'benches_here': bench == host, 'fleet_workers': workers,
            'router_workers': listed_workers(params, workers),
            'remote_dir': sweep_results_dir(params['work_dir'], params['run_id']), 'local_dir': local_dir,
            'phases': params['phases'], 'recipe': params['recipe'], 'plan': plan}
