# SPDX-License-Identifier: Apache-2.0
"""The sweep_start action plugin: the facts it sets, its documentation, a failure in one line naming the node."""

from __future__ import annotations

from unittest import mock

import yaml
from ansible.parsing.dataloader import DataLoader

from ansible_collections.infera.serving.plugins.action import sweep_start as action_plugin
from ansible_collections.infera.serving.plugins.modules import sweep_start as start_module
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_start import ARGUMENT_SPEC

from ..documented import documented_options
from ..plugin_utils.sweep_runs import DP_ARGV, NODP_ARGV

ARGS = {'run_id': 'r1', 'phases': [{'variant': 'nodp', 'concurrencies': [32], 'argv': NODP_ARGV, 'env': {}},
                                   {'variant': 'dp', 'concurrencies': [1024], 'argv': DP_ARGV, 'env': {}}],
        'recipe': 'dsv4', 'work_dir': '/w', 'results_dir': 'results', 'fleet_hosts': ['n1', 'n2'],
        'router_hosts': ['n1', 'n2'], 'play_hosts': ['n1', 'n2'], 'prompts_per_conc': 10, 'random_input_len': 8192,
        'random_output_len': 1024}


def run(basedir, host, **overrides):
    task = mock.MagicMock()
    task.args = dict(ARGS, **overrides)
    task.async_val = 0
    task.check_mode = False
    task.action = 'infera.serving.sweep_start'
    loader = DataLoader()
    loader.set_basedir(str(basedir))
    action = action_plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=loader, templar=None,
                                        shared_loader_obj=None)
    action._load_name = 'infera.serving.sweep_start'
    return action.run(task_vars={'inventory_hostname': host})


def test_each_node_gets_its_sweep_and_empty_records_of_the_run(tmp_path):
    bench, follower = run(tmp_path, 'n1'), run(tmp_path, 'n2')
    assert bench['changed'] is False and 'failed' not in bench
    facts = bench['ansible_facts']
    assert facts['_sweep'] == bench['sweep']
    assert {key: facts[key] for key in ('_sweep_recorded', '_sweep_noted', '_sweep_aborted')} == {
        '_sweep_recorded': {}, '_sweep_noted': {'variants': {}, 'restarts': []}, '_sweep_aborted': ''}
    assert facts['_sweep']['plan']['pending'] == [64, 2048]
    assert follower['ansible_facts']['_sweep']['bench_host'] == 'n1'
    assert follower['ansible_facts']['_sweep']['plan'] is None


def test_a_plan_that_cannot_be_made_fails_in_one_line_naming_the_node(tmp_path):
    result = run(tmp_path, 'n1', targets_file='missing.yml')
    assert result['failed'] is True
    assert result['msg'].startswith('n1: stage sweep (plan on the controller): ')
    assert '\n' not in result['msg'] and 'missing.yml' in result['msg']


def test_the_module_documents_exactly_the_action_options_and_its_return(tmp_path):
    documented = documented_options(start_module.DOCUMENTATION)
    assert set(documented) == set(ARGUMENT_SPEC)
    for name, spec in ARGUMENT_SPEC.items():
        assert documented[name]['type'] == spec['type']
        assert documented[name].get('elements') == spec.get('elements')
        assert documented[name].get('required', False) == spec.get('required', False)
        assert documented[name].get('default') == spec.get('default')
    result = run(tmp_path, 'n1')
    assert set(yaml.safe_load(start_module.RETURN)) == set(result) - {'changed', 'ansible_facts'}
    assert set(yaml.safe_load(start_module.RETURN)['sweep']['contains']) == set(result['sweep'])
