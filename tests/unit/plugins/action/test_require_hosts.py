# SPDX-License-Identifier: Apache-2.0
"""The require_hosts action: the play's variables in, one line out, nothing sent to a node, the same in check mode."""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.infera.serving.plugins.action import require_hosts as action_plugin

from . import harness

NEXT = 'put the nodes in group mi355x of the inventory'
GROUPS = {'all': ['gpu-a', 'gpu-b'], 'ungrouped': [], 'mi355x': ['gpu-b'], 'other': ['gpu-a']}


def run_action(task_vars, pattern='mi355x', check_mode=False):
    action = harness.make_action(action_plugin, 'infera.serving.require_hosts', {'pattern': pattern, 'next_step': NEXT},
                                 check_mode)
    connection = action._connection
    with mock.patch.object(action, '_execute_module', side_effect=AssertionError('the action ran a module')):
        result = action.run(task_vars=task_vars)
    assert connection.exec_command.call_count == 0 and connection.put_file.call_count == 0
    return result


def play_vars(tmp_path, play_hosts, **extra):
    return {'groups': GROUPS, 'ansible_play_hosts_all': play_hosts,
            'ansible_inventory_sources': [str(tmp_path / 'hosts.ini')], **extra}


@pytest.mark.parametrize('check_mode', [False, True])
def test_a_group_with_a_host_in_the_play_passes_and_returns_its_hosts(tmp_path, check_mode):
    result = run_action(play_vars(tmp_path, ['localhost', 'gpu-a', 'gpu-b']), check_mode=check_mode)
    assert result['changed'] is False and 'failed' not in result
    assert result['hosts'] == ['gpu-b']
    assert action_plugin.ActionModule._requires_connection is False


@pytest.mark.parametrize('check_mode', [False, True])
def test_a_group_whose_hosts_the_limit_leaves_out_fails_naming_the_limit(tmp_path, check_mode):
    result = run_action(play_vars(tmp_path, ['localhost', 'gpu-a'], ansible_limit='gpu-a'), check_mode=check_mode)
    assert result['failed'] is True and result['changed'] is False and result['hosts'] == []
    assert result['msg'] == (f'mi355x: no host of the inventory ({tmp_path}/hosts.ini) is in group mi355x within --limit '
                             f'gpu-a; next step: {NEXT}')


def test_a_pattern_is_read_as_a_host_pattern(tmp_path):
    assert run_action(play_vars(tmp_path, ['localhost', 'gpu-a', 'gpu-b']), pattern='mi355x:other')['hosts'] == \
        ['gpu-b', 'gpu-a']
    assert run_action(play_vars(tmp_path, ['localhost', 'gpu-a', 'gpu-b']), pattern='all:!mi355x')['hosts'] == ['gpu-a']


def test_a_hidden_settings_file_fails(tmp_path):
    (tmp_path / 'group_vars' / 'mi355x').mkdir(parents=True)
    (tmp_path / 'group_vars' / 'mi355x.yml').write_text('infera_image: registry.example.com/sglang:dsv4\n')
    result = run_action(play_vars(tmp_path, ['localhost', 'gpu-b']))
    assert result['failed'] is True
    assert result['msg'].startswith(f'mi355x: {tmp_path}/group_vars/mi355x.yml is ignored: ')
