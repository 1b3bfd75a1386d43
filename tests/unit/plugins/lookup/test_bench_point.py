# SPDX-License-Identifier: Apache-2.0
"""The bench_point lookup, with its options defined from its DOCUMENTATION as Ansible's plugin loader does."""

from __future__ import annotations

import pytest
import yaml
from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader

from ansible_collections.infera.serving.plugins.lookup import bench_point

from ..plugin_utils.sweep_runs import LINE_0_5, bench_record, write_lines

NAME = 'infera.serving.bench_point'


@pytest.fixture
def lookup(tmp_path):
    # The loader would read these from DOCUMENTATION; doing it here keeps the test independent of the collection finder.
    C.config.initialize_plugin_configuration_definitions('lookup', NAME, yaml.safe_load(bench_point.DOCUMENTATION)['options'])
    loader = DataLoader()
    loader.set_basedir(str(tmp_path))
    plugin = bench_point.LookupModule(loader=loader)
    plugin._load_name = NAME
    return plugin


def test_a_valid_point_returns_its_record(lookup):
    [checked] = lookup.run([str(LINE_0_5)], variables={}, num_prompts=8)
    assert checked['valid'] is True
    assert checked['reason'] == ''
    assert checked['record']['completed'] == 8
    assert checked['record']['request_rate'] == 'Infinity'


def test_a_missing_file_is_an_answer_not_an_error(lookup, tmp_path):
    [checked] = lookup.run(['results/r1/infera-node-1/mix_c32.jsonl'], variables={}, num_prompts=320)
    assert checked == {'valid': False, 'record': None, 'path': str(tmp_path / 'results/r1/infera-node-1/mix_c32.jsonl'),
                       'reason': 'mix_c32.jsonl is missing (the client writes no line when every request fails, '
                                 'or the point never ran)'}


def test_relative_paths_are_taken_from_the_playbook_dir_and_every_term_is_judged(lookup, tmp_path):
    write_lines(tmp_path / 'mix_c32.jsonl', bench_record(32, num_prompts=300))
    write_lines(tmp_path / 'mix_c64.jsonl', bench_record(64, num_prompts=320))
    judged = lookup.run(['mix_c32.jsonl', 'mix_c64.jsonl'], variables={}, num_prompts=320)
    assert [(item['valid'], item['reason']) for item in judged] == [(False, 'only 300 of 320 requests completed'), (True, '')]


def test_num_prompts_is_required(lookup):
    with pytest.raises(AnsibleError, match='num_prompts'):
        lookup.run([str(LINE_0_5)], variables={})


def test_negative_num_prompts_is_refused(lookup):
    with pytest.raises(AnsibleError, match='num_prompts=N'):
        lookup.run([str(LINE_0_5)], variables={}, num_prompts=-1)


def test_a_file_of_another_concurrency_is_invalid_when_conc_is_given(lookup, tmp_path):
    write_lines(tmp_path / 'mix_c64.jsonl', bench_record(32, num_prompts=640))
    [checked] = lookup.run(['mix_c64.jsonl'], variables={}, num_prompts=640, conc=64)
    assert (checked['valid'], checked['reason']) == (False, 'the file reports max_concurrency 32, the manifest says 64')
    [unchecked] = lookup.run(['mix_c64.jsonl'], variables={}, num_prompts=640)
    assert unchecked['valid'] is True
