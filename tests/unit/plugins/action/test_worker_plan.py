# SPDX-License-Identifier: Apache-2.0
"""The worker_plan action plugin: a plan made now is the role's published plan (the fact sglang_worker_plan); a kept
plan, and a phase of it (which the role's next step runs), set none."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.action import worker_plan as action_plugin

from .harness import make_action

PLANE = {'--discovery-backend': 'etcd', '--request-transport': 'http', '--kv-event-transport': 'zmq'}


def run(recipe, **overrides):
    args = dict({'recipe': recipe, 'conc': [64, 256], 'cuda_graph_max_bs': 128, 'cuda_graph_bs': [], 'plane': 'dev',
                 'plane_args': dict(PLANE)}, **overrides)
    return make_action(action_plugin, 'infera.serving.worker_plan', args).run(task_vars={'inventory_hostname': 'n1'})


def test_a_plan_made_now_is_published_and_a_kept_plan_or_a_phase_publishes_nothing(recipe):
    made = run(recipe)
    assert made['made'] and not made['phase']
    assert made['ansible_facts'] == {'sglang_worker_plan': made['plan']}
    kept = run(recipe, previous=made['plan'])
    assert kept['skipped'] and 'ansible_facts' not in kept
    phase = run(recipe, conc=[256], variant='dp', previous=made['plan'])
    assert phase['phase'] and phase['skipped'] and 'ansible_facts' not in phase
    assert phase['plan']['variant'] == 'dp' and phase['plan']['phases'] == made['plan']['phases']
