# SPDX-License-Identifier: Apache-2.0
"""The sweep_plan lookup, with its options defined from its DOCUMENTATION as Ansible's plugin loader does."""

from __future__ import annotations

import json

import pytest
from ansible import constants as C
from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader

from ansible_collections.infera.serving.plugins.lookup import sweep_plan

from ..documented import documented_options
from ..plugin_utils.sweep_runs import DP_ARGV, NODP_ARGV, bench_record, write_lines, write_targets

NAME = 'infera.serving.sweep_plan'
PHASES = [{'variant': 'nodp', 'concurrencies': [32, 64], 'argv': NODP_ARGV},
          {'variant': 'dp', 'concurrencies': [1024], 'argv': DP_ARGV}]
BENCH = {'prompts_per_conc': 10, 'random_input_len': 8192, 'random_output_len': 1024}


@pytest.fixture
def lookup(tmp_path):
    C.config.initialize_plugin_configuration_definitions('lookup', NAME, documented_options(sweep_plan.DOCUMENTATION))
    loader = DataLoader()
    loader.set_basedir(str(tmp_path))
    plugin = sweep_plan.LookupModule(loader=loader)
    plugin._load_name = NAME
    return plugin


def test_the_plan_skips_valid_points_and_estimates_from_the_targets(lookup, tmp_path):
    host_dir = tmp_path / 'results' / 'r1' / 'node1'
    host_dir.mkdir(parents=True)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    write_targets(tmp_path / 'targets.yml', 'metric: Throughput/GPU\ntargets: {64: 2100, 1024: 2256}\n')
    [plan] = lookup.run(PHASES, variables={}, results_dir='results/r1/node1', host='node1',
                        targets_file='targets.yml', **BENCH)
    assert plan['pending'] == [64, 1024]
    assert plan['restarts'] == [{'from': 'nodp', 'to': 'dp'}]
    assert plan['lines'][0].startswith('node1: sweep plan: 2 point(s) to run (skipped, already valid: c32)')
    assert plan['lines'][3] == 'node1:   point 3/3 c1024 dp, 10240 prompts on 8 GPUs: ~1:27:09'


def test_the_phases_may_come_as_one_term(lookup):
    """lookup('infera.serving.sweep_plan', _sweep_phases) in ansible-core 2.19 hands the list over whole."""
    [plan] = lookup.run([PHASES], variables={}, results_dir='results/none', host='node1', **BENCH)
    assert plan['pending'] == [32, 64, 1024]


def test_without_targets_there_is_no_estimate(lookup):
    [plan] = lookup.run(PHASES, variables={}, results_dir='results/none', host='node1', **BENCH)
    assert plan['pending'] == [32, 64, 1024]
    assert plan['estimate'] is None
    assert plan['lines'][1].endswith(': no estimate')


def test_a_bad_targets_file_is_named(lookup, tmp_path):
    write_targets(tmp_path / 'targets.yml', 'targets: []\n')
    with pytest.raises(AnsibleLookupError, match='sweep_plan: .*targets.yml must be a mapping'):
        lookup.run(PHASES, variables={}, results_dir='r', host='node1', targets_file='targets.yml', **BENCH)


def test_a_fleet_plan_scales_the_concurrencies_and_resumes_with_the_earlier_workers(lookup, tmp_path):
    host_dir = tmp_path / 'results' / 'r1' / 'node1'
    host_dir.mkdir(parents=True)
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    workers = [{'worker_id': '10.0.0.%d:30000' % index, 'url': '', 'dp_size': None} for index in (1, 2, 3)]
    (host_dir / 'manifest.json').write_text(json.dumps({'points': [
        {'conc': 96, 'node_conc': 32, 'fleet': True, 'variant': 'nodp', 'workers': workers}]}), encoding='utf-8')
    [plan] = lookup.run(PHASES, variables={}, results_dir='results/r1/node1', host='node1', fleet_workers=3, **BENCH)
    assert plan['pending'] == [192, 3072]
    assert [(point['conc'], point['node_conc'], point['gpus'], point['workers']) for point in plan['points']] == [
        (96, 32, 24, workers), (192, 64, 24, None), (3072, 1024, 24, None)]
    assert plan['lines'][1] == 'node1:   point 1/3 c96 nodp (fleet: 3 workers x c32), 960 prompts on 24 GPUs: skipped (already valid)'
