# SPDX-License-Identifier: Apache-2.0
"""The sweep_record action plugin: the point's verdict, the manifest after every point, check mode, diff, docs, the role's task."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader

from ansible_collections.infera.serving.plugins.action import sweep_record as action_plugin
from ansible_collections.infera.serving.plugins.modules import sweep_record as record_module
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_record import RUN_KEYS

from ..plugin_utils.sweep_runs import VARIANTS, bench_record, write_lines

POINT_TASKS = Path(__file__).resolve().parents[4] / 'roles' / 'sweep' / 'tasks' / 'point.yml'
HOST_DIR = 'results/r1/infera-node-1'
BENCH_ARGS = {'backend': 'sglang-oai', 'base_url': 'http://infera-node-1:8000', 'dataset_name': 'random', 'dataset_path': '',
              'random_input_len': 8192, 'random_output_len': 1024, 'random_range_ratio': 1.0, 'request_rate': 'inf',
              'prompts_per_conc': 10, 'warmup_per_conc': 2, 'extra': {}, 'limits': {}}


def make_action(args, basedir, check_mode=False, diff=False):
    task = mock.MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = diff
    task.action = 'infera.serving.sweep_record'
    loader = DataLoader()
    loader.set_basedir(str(basedir))
    action = action_plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=loader, templar=None,
                                        shared_loader_obj=None)
    action._load_name = 'infera.serving.sweep_record'
    return action


@pytest.fixture
def playbook_dir(tmp_path):
    (tmp_path / HOST_DIR).mkdir(parents=True)
    return tmp_path


def run(playbook_dir, check_mode=False, diff=False, **args):
    defaults = {'dest': HOST_DIR, 'run_id': 'r1', 'host': 'infera-node-1', 'simulated': True, 'image': 'sglang:v0.5.9',
                'model': '/data/hf-cache/DeepSeek-V4-Pro', 'recipe': 'dsv4-pro-mi355x-mixed', 'variants': VARIANTS,
                'bench_args': BENCH_ARGS, 'conc': 32, 'variant': 'nodp', 'num_prompts': 320, 'warmup_requests': 64,
                'started': '2026-11-29T10:00:00Z'}
    return make_action(dict(defaults, **args), playbook_dir, check_mode, diff).run(task_vars={})


def written(playbook_dir):
    return json.loads((playbook_dir / HOST_DIR / 'manifest.json').read_text(encoding='utf-8'))


def test_each_point_rewrites_the_manifest_with_every_point_so_far(playbook_dir):
    write_lines(playbook_dir / HOST_DIR / 'mix_c32.jsonl', bench_record(32))
    first = run(playbook_dir)
    assert first['changed'] is True
    assert first['path'] == str(playbook_dir / HOST_DIR / 'manifest.json')
    assert (first['point']['status'], first['point']['reason']) == ('ok', '')
    assert written(playbook_dir) == first['manifest']
    second = run(playbook_dir, points=first['manifest']['points'], conc=64, aborted=True)
    assert [(entry['conc'], entry['status']) for entry in written(playbook_dir)['points']] == [(32, 'ok'), (64, 'aborted')]
    assert second['point']['reason'].startswith('mix_c64.jsonl is missing')
    # Recorded again: kept by a later round of a search (resumed), the entry that measured it stays as it is; measured
    # again, its entry is replaced. Never two entries of one concurrency.
    third = run(playbook_dir, points=second['manifest']['points'], conc=32, resumed=True)
    assert third['manifest']['points'] == second['manifest']['points']
    write_lines(playbook_dir / HOST_DIR / 'mix_c64.jsonl', bench_record(64))
    fourth = run(playbook_dir, points=third['manifest']['points'], conc=64)
    assert [(entry['conc'], entry['status']) for entry in fourth['manifest']['points']] == [(32, 'ok'), (64, 'ok')]


def test_the_manifest_keeps_the_keys_and_values_the_role_passes(playbook_dir):
    manifest = run(playbook_dir, image_digest='sha256:' + 'ab' * 32)['manifest']
    assert list(manifest) == list(RUN_KEYS) + ['points']
    assert manifest['bench_args'] == BENCH_ARGS
    assert manifest['variants'] == VARIANTS
    assert (manifest['run_id'], manifest['host'], manifest['simulated']) == ('r1', 'infera-node-1', True)
    assert list(manifest['points'][0]) == ['conc', 'node_conc', 'fleet', 'variant', 'num_prompts', 'warmup_requests', 'file',
                                           'started', 'ended', 'status', 'reason', 'workers']


def test_a_resumed_point_is_recorded_resumed(playbook_dir):
    write_lines(playbook_dir / HOST_DIR / 'mix_c32.jsonl', bench_record(32))
    assert run(playbook_dir, resumed=True)['point']['status'] == 'resumed'


def test_the_points_files_are_kept_beside_its_jsonl_before_the_manifest(playbook_dir):
    # The role passes the bench script it sent to the node; the results keep it, rewritten only when it differs.
    write_lines(playbook_dir / HOST_DIR / 'mix_c32.jsonl', bench_record(32))
    script = '#!/bin/bash\npython3 -m sglang.bench_serving --max-concurrency 32\n'
    assert run(playbook_dir, files={'bench-c32.sh': script})['changed'] is True
    assert (playbook_dir / HOST_DIR / 'bench-c32.sh').read_text() == script
    first = written(playbook_dir)
    again = run(playbook_dir, files={'bench-c32.sh': script})
    assert again['changed'] is False and written(playbook_dir) == first
    assert run(playbook_dir, files={'bench-c32.sh': script + 'echo changed\n'})['changed'] is True
    assert (playbook_dir / HOST_DIR / 'bench-c32.sh').read_text().endswith('echo changed\n')
    # Check mode writes none of it.
    run(playbook_dir, check_mode=True, conc=64, files={'bench-c64.sh': script})
    assert not (playbook_dir / HOST_DIR / 'bench-c64.sh').exists()


def test_a_jsonl_passed_in_files_is_written_before_the_point_is_judged(playbook_dir):
    # The sweep role passes the jsonl and the log the wait brought back: no copy on the controller before this task.
    record = json.dumps(bench_record(32)) + '\n'
    result = run(playbook_dir, files={'mix_c32.jsonl': record, 'bench-c32.log': 'Warmup completed with 64 sequences.\n'})
    assert result['point']['status'] == 'ok', result['point']
    assert (playbook_dir / HOST_DIR / 'mix_c32.jsonl').read_text(encoding='utf-8') == record
    assert (playbook_dir / HOST_DIR / 'bench-c32.log').is_file()
    assert written(playbook_dir)['points'][0]['status'] == 'ok'


@pytest.mark.parametrize('name', ['../bench.sh', 'sub/bench.sh', '', '..', 'manifest.json'])
def test_a_file_name_outside_the_results_folder_or_the_manifest_is_refused_before_anything_is_written(playbook_dir, name):
    with pytest.raises(AnsibleActionFail, match='is not a plain file name in the results folder'):
        run(playbook_dir, files={name: 'x'})
    assert list((playbook_dir / HOST_DIR).iterdir()) == []


def test_check_mode_writes_nothing_and_says_it_would_change(playbook_dir):
    result = run(playbook_dir, check_mode=True)
    assert result['changed'] is True
    assert result['point']['status'] == 'invalid'
    assert not (playbook_dir / HOST_DIR / 'manifest.json').exists()


def test_diff_shows_the_manifest_before_and_after(playbook_dir):
    first = run(playbook_dir)
    result = run(playbook_dir, diff=True, points=first['manifest']['points'], conc=64)
    assert result['diff']['before'] == json.dumps(first['manifest'], indent=4, sort_keys=True) + '\n'
    assert json.loads(result['diff']['after']) == result['manifest']


def test_a_folder_that_cannot_take_the_manifest_fails_the_task(tmp_path):
    with pytest.raises(AnsibleActionFail, match=r'infera-node-1: stage sweep c32 \(record on the controller\): cannot write '
                                                r'.*manifest.json: No such file or directory'):
        run(tmp_path)


def test_a_full_disk_names_stage_cause_the_points_kept_the_next_step_and_the_free_space(playbook_dir, monkeypatch):
    write_lines(playbook_dir / HOST_DIR / 'mix_c4.jsonl', bench_record(4))
    run(playbook_dir, conc=4, num_prompts=40)
    earlier = written(playbook_dir)['points']
    assert [(point['conc'], point['status']) for point in earlier] == [(4, 'ok')]
    before = (playbook_dir / HOST_DIR / 'manifest.json').read_bytes()

    def no_space(*_args, **_kwargs):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(action_plugin.os, 'replace', no_space)
    with pytest.raises(AnsibleActionFail) as failed:
        run(playbook_dir, points=earlier)
    message = str(failed.value)
    host_dir = str(playbook_dir / HOST_DIR)
    assert message.startswith('infera-node-1: stage sweep c32 (record on the controller): cannot write %s/manifest.json: '
                              'No space left on device. Cause: the controller cannot write the results folder' % host_dir)
    assert 'The points recorded before stay intact in %s/manifest.json: c4.' % host_dir in message
    assert 'Next step: free space (df -h %s), then rerun with -e run_id=r1: valid points are kept and c32 runs again.' \
        % host_dir in message
    assert message.rsplit('. ', 1)[1].startswith('Disk: %s: ' % host_dir) and message.endswith(' MB')
    # The write went to a temporary file that was never renamed: the earlier manifest is whole, no temporary is left.
    assert (playbook_dir / HOST_DIR / 'manifest.json').read_bytes() == before
    assert sorted(path.name for path in (playbook_dir / HOST_DIR).iterdir()) == ['manifest.json', 'mix_c4.jsonl']


def test_a_missing_option_is_refused(playbook_dir):
    with pytest.raises(AnsibleActionFail, match='num_prompts'):
        run(playbook_dir, num_prompts=None)


def test_the_module_documents_exactly_the_action_options():
    documented = yaml.safe_load(record_module.DOCUMENTATION)['options']
    assert set(documented) == set(action_plugin.ARGUMENT_SPEC)
    for name, spec in action_plugin.ARGUMENT_SPEC.items():
        doc = documented[name]
        assert doc['type'] == spec['type']
        assert doc.get('elements') == spec.get('elements')
        assert doc.get('required', False) == spec.get('required', False)
        assert doc.get('default') == spec.get('default')


def test_the_module_documents_every_returned_key(playbook_dir):
    returned = set(yaml.safe_load(record_module.RETURN))
    result = run(playbook_dir)
    assert returned == set(result) - {'changed'}


def test_the_sweep_role_passes_every_manifest_key():
    tasks = yaml.safe_load(POINT_TASKS.read_text(encoding='utf-8'))
    [task] = [task for task in tasks if 'infera.serving.sweep_record' in task]
    args = task['infera.serving.sweep_record']
    assert set(args) <= set(action_plugin.ARGUMENT_SPEC)
    assert set(RUN_KEYS) <= set(args)
    assert set(args['bench_args']) == set(BENCH_ARGS)


def listed(index, status='active', model='/data/hf-cache/DeepSeek-V4-Pro'):
    """An entry of Infera's GET /v1/workers as the role's uri task passes it."""
    return {'worker_id': '10.0.0.%d:30000' % index, 'url': 'http://10.0.0.%d:30000' % index, 'model_name': model,
            'engine': 'sglang', 'status': status, 'disagg_mode': 'mixed', 'disagg_meta': {}, 'kv_events_endpoint': None,
            'kv_block_size': 64, 'dp_rank': None, 'dp_size': None}


def kept(index):
    return {'worker_id': '10.0.0.%d:30000' % index, 'url': 'http://10.0.0.%d:30000' % index, 'dp_size': None}


def test_the_point_records_the_serving_workers_of_the_router_and_counts_their_gpus(playbook_dir):
    write_lines(playbook_dir / HOST_DIR / 'mix_c96.jsonl', bench_record(96, duration=100.0))
    result = run(playbook_dir, conc=96, node_conc=32, fleet=True, num_prompts=960,
                 router_workers=[listed(3), listed(1), listed(2), listed(4, status='draining'), listed(5, model='other')])
    assert result['point']['workers'] == [kept(1), kept(2), kept(3)]
    assert (result['point']['status'], result['point']['node_conc'], result['point']['fleet']) == ('ok', 32, True)
    assert written(playbook_dir)['points'][0]['workers'] == [kept(1), kept(2), kept(3)]
    assert result['figures']['tput_per_gpu'] == pytest.approx(960 * 9216 / 100.0 / 24)


def test_a_fleet_point_whose_router_missed_a_worker_is_invalid(playbook_dir):
    write_lines(playbook_dir / HOST_DIR / 'mix_c96.jsonl', bench_record(96))
    result = run(playbook_dir, conc=96, node_conc=32, fleet=True, num_prompts=960, router_workers=[listed(1), listed(2)])
    assert result['point']['status'] == 'invalid'
    assert result['point']['reason'].startswith('the router listed 2 serving worker(s)')
    assert result['figures'] == {}


def test_a_resumed_point_keeps_the_workers_recorded_when_it_ran(playbook_dir):
    write_lines(playbook_dir / HOST_DIR / 'mix_c32.jsonl', bench_record(32))
    result = run(playbook_dir, resumed=True, workers=[kept(1)])
    assert (result['point']['status'], result['point']['workers'], result['point']['node_conc']) == ('resumed', [kept(1)], 32)


def test_without_workers_the_point_records_none_and_counts_one_workers_gpus(playbook_dir):
    write_lines(playbook_dir / HOST_DIR / 'mix_c32.jsonl', bench_record(32, duration=100.0))
    result = run(playbook_dir)
    assert (result['point']['workers'], result['point']['fleet']) == (None, False)
    assert result['figures']['tput_per_gpu'] == pytest.approx(320 * 9216 / 100.0 / 8)


def test_router_workers_and_kept_workers_are_mutually_exclusive(playbook_dir):
    with pytest.raises(AnsibleActionFail, match='mutually exclusive'):
        run(playbook_dir, router_workers=[listed(1)], workers=[kept(1)])
