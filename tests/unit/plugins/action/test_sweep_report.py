# SPDX-License-Identifier: Apache-2.0
"""The sweep_report action plugin: fail/warn/ignore on targets, changed, check mode, paths, docs."""

from __future__ import annotations

from unittest import mock

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader

from ansible_collections.infera.serving.plugins.action import sweep_report as action_plugin
from ansible_collections.infera.serving.plugins.modules import sweep_report as report_module

from ..plugin_utils.sweep_runs import bench_record, point, standard_run, write_lines, write_manifest

TARGETS = 'metric: Output Throughput/GPU\ntargets: {32: 200, 64: 655.36, 256: 400}\n'


def make_action(args, basedir, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.action = 'infera.serving.sweep_report'
    loader = DataLoader()
    loader.set_basedir(str(basedir))
    action = action_plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=loader, templar=None,
                                        shared_loader_obj=None)
    action._load_name = 'infera.serving.sweep_report'
    return action


@pytest.fixture
def playbook_dir(tmp_path):
    standard_run(tmp_path / 'results' / 'r1')
    (tmp_path / 'targets.yml').write_text(TARGETS, encoding='utf-8')
    return tmp_path


def run(playbook_dir, check_mode=False, **args):
    # A relative run_dir is from the working directory (test_sweep_report_run_dir.py); a targets file from the playbook's.
    args.setdefault('run_dir', str(playbook_dir / 'results' / 'r1'))
    return make_action(args, playbook_dir, check_mode).run(task_vars={})


def test_below_target_fails_naming_each_point(playbook_dir):
    result = run(playbook_dir, targets_file='targets.yml')
    assert result['failed'] is True
    assert result['msg'].startswith('1 point(s) miss the Output Throughput/GPU (tok/s) target: '
                                    'infera-node-1 c64 nodp: 327.7 against target 655.4 (0.50x). See ')
    assert result['msg'].endswith('results/r1/report.md')
    assert result['changed'] is True
    assert (playbook_dir / 'results' / 'r1' / 'report.md').is_file()
    assert 'warnings' not in result


def test_below_target_warn_warns_and_succeeds(playbook_dir):
    result = run(playbook_dir, targets_file='targets.yml', below_target='warn')
    assert not result.get('failed')
    assert result['warnings'] == [action_plugin.below_target_message(result)]
    assert 'infera-node-1 c64 nodp: 327.7 against target 655.4 (0.50x)' in result['warnings'][0]


def test_below_target_ignore_only_reports(playbook_dir):
    result = run(playbook_dir, targets_file='targets.yml', below_target='ignore')
    assert not result.get('failed')
    assert 'warnings' not in result
    assert [(miss['conc'], round(miss['ratio'], 2)) for miss in result['below']] == [(64, 0.5)]


def test_results_are_returned_and_a_second_run_changes_nothing(playbook_dir):
    first = run(playbook_dir)
    assert first['changed'] is True
    assert first['csv_path'] == str(playbook_dir / 'results' / 'r1' / 'results.csv')
    assert first['plot_path'].endswith('throughput.png')
    assert [row['Concurrency'] for row in first['rows']] == [32, 64, 256]
    assert first['simulated'] is True
    assert first['table'].splitlines()[0].startswith('SIMULATED run r1')
    assert first['invalid'] == [] and first['below'] == []
    second = run(playbook_dir)
    assert second['changed'] is False
    assert second['changed_files'] == []


def test_check_mode_writes_nothing(playbook_dir):
    result = run(playbook_dir, check_mode=True)
    assert result['changed'] is True
    assert not (playbook_dir / 'results' / 'r1' / 'results.csv').exists()


def test_invalid_points_warn_but_do_not_fail(tmp_path):
    write_manifest(tmp_path / 'results' / 'r1', 'infera-node-1', [point(32, status='aborted', reason='engine exited')])
    result = run(tmp_path, below_target='fail')
    assert not result.get('failed')
    assert result['warnings'] == ['1 point(s) are invalid and left out of the CSV: infera-node-1 c32 nodp (aborted): '
                                  'marked aborted by the sweep: engine exited; mix_c32.jsonl is missing (the client writes '
                                  'no line when every request fails, or the point never ran)']


def test_a_targeted_point_without_result_fails_the_gate(tmp_path):
    write_manifest(tmp_path / 'results' / 'r1', 'infera-node-1', [point(64, status='aborted', reason='engine exited')])
    (tmp_path / 'targets.yml').write_text(TARGETS, encoding='utf-8')
    result = run(tmp_path, targets_file='targets.yml')
    assert result['failed'] is True
    assert 'infera-node-1 c64 nodp: target 655.4, no valid result: marked aborted by the sweep: engine exited' in result['msg']


@pytest.mark.parametrize('args, message', [
    ({'run_dir': 'results/absent'}, 'results/absent does not exist'),
    ({'targets_file': 'nope.yml'}, 'cannot read the targets file'),
])
def test_unreadable_inputs_fail_the_task(playbook_dir, args, message):
    with pytest.raises(AnsibleActionFail, match=message):
        run(playbook_dir, **args)


def test_a_bad_choice_is_refused(playbook_dir):
    with pytest.raises(AnsibleActionFail, match='below_target'):
        run(playbook_dir, below_target='shout')


def test_the_module_documents_exactly_the_action_options():
    documented = yaml.safe_load(report_module.DOCUMENTATION)['options']
    assert set(documented) == set(action_plugin.ARGUMENT_SPEC)
    for name, spec in action_plugin.ARGUMENT_SPEC.items():
        doc = documented[name]
        assert doc['type'] == spec['type']
        assert doc.get('required', False) == spec.get('required', False)
        assert doc.get('default') == spec.get('default')
        assert doc.get('choices') == spec.get('choices')


def test_the_module_documents_every_returned_key(playbook_dir):
    returned = set(yaml.safe_load(report_module.RETURN))
    result = run(playbook_dir)
    assert set(action_plugin._RETURNED) == returned
    assert returned <= set(result)


def test_a_node_well_below_its_fleet_warns_without_failing(tmp_path):
    run_dir = tmp_path / 'results' / 'r1'
    for host, duration in (('node1', 100.0), ('node2', 100.0), ('node3', 125.0)):
        host_dir = write_manifest(run_dir, host, [point(32)])
        write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=duration))
    result = run(tmp_path)
    assert not result.get('failed')
    assert result['warnings'] == [
        '1 node point(s) more than 10 % below the fleet median (SIMULATED): node3 c32: 2949.1 tok/s/GPU, 20.0 % below '
        'the fleet median 3686.4. See ' + str(run_dir / 'report.md')]
    assert [entry['host'] for entry in result['fleet']['below']] == ['node3']


def test_a_fleet_within_ten_percent_does_not_warn(tmp_path):
    run_dir = tmp_path / 'results' / 'r1'
    for host, duration in (('node1', 100.0), ('node2', 110.0)):
        host_dir = write_manifest(run_dir, host, [point(32)], simulated=False)
        write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=duration))
    result = run(tmp_path)
    assert 'warnings' not in result
    assert result['fleet']['below'] == []
