# SPDX-License-Identifier: Apache-2.0
"""Whether a node playbook must refuse to run: a group that matches no host, a group_vars file its folder hides."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _require_hosts as require_hosts

NEXT = 'put the nodes in group mi355x of the inventory'
GROUPS = {'all': ['gpu-a', 'gpu-b', 'gpu-c'], 'ungrouped': [], 'mi355x': ['gpu-a', 'gpu-b'], 'other': ['gpu-c']}


def inventory(root, hidden=False, folder=True):
    """An inventory folder with hosts.yml; group_vars/mi355x/ with a vault.yml, and a group_vars/mi355x.yml it hides."""
    (root / 'group_vars').mkdir(parents=True)
    (root / 'hosts.yml').write_text('mi355x:\n  hosts:\n    gpu-a:\n')
    if folder:
        (root / 'group_vars' / 'mi355x').mkdir()
        (root / 'group_vars' / 'mi355x' / 'vault.yml').write_text('vault_hf_token: hf_x\n')
    if hidden:
        (root / 'group_vars' / 'mi355x.yml').write_text('infera_image: registry.example.com/sglang:dsv4\n')
    return root


# ---------------------------------------------------------------- the hosts a pattern matches

@pytest.mark.parametrize('pattern, hosts', [
    ('mi355x', ['gpu-a', 'gpu-b']),
    ('other', ['gpu-c']),
    ('mi355x:other', ['gpu-a', 'gpu-b', 'gpu-c']),
    ('mi355x:!gpu-a', ['gpu-b']),
    ('mi355x:&other', []),
    ('gpu-[a:b]', ['gpu-a', 'gpu-b']),
    ('~gpu-[bc]', ['gpu-b', 'gpu-c']),
    ('gpu-c,gpu-a', ['gpu-c', 'gpu-a']),
    ('nope', []),
])
def test_the_hosts_a_pattern_matches_are_the_inventory_hostnames_lookups(pattern, hosts):
    assert require_hosts.hosts_matching(GROUPS, pattern) == hosts


def test_a_pattern_ansible_refuses_matches_nothing():
    # A subscript past the group's end is an error of Ansible's; the lookup reads it as no host.
    assert require_hosts.hosts_matching(GROUPS, 'mi355x[5]') == []


def test_no_group_matches_nothing():
    assert require_hosts.hosts_matching({}, 'mi355x') == []


# ---------------------------------------------------------------- a group that matches no host

def test_a_group_without_a_host_names_the_inventory_the_group_and_the_next_step():
    assert require_hosts.refusal('mi355x', NEXT, ['/srv/hosts.ini'], []) == (
        'mi355x: no host of the inventory (/srv/hosts.ini) is in group mi355x; next step: ' + NEXT)


def test_every_inventory_source_is_named_and_the_limit_when_there_is_one():
    assert require_hosts.refusal('mi355x', NEXT, ['/srv/a.ini', '/srv/b'], [], limit='gpu-c') == (
        'mi355x: no host of the inventory (/srv/a.ini, /srv/b) is in group mi355x within --limit gpu-c; next step: ' + NEXT)


def test_no_host_is_the_first_problem_even_with_a_hidden_file():
    message = require_hosts.refusal('mi355x', NEXT, ['/srv/hosts.ini'], [], hidden=['/srv/group_vars/mi355x.yml'])
    assert message.startswith('mi355x: no host of the inventory')


def test_a_matched_group_without_a_hidden_file_may_run(tmp_path):
    assert require_hosts.refusal('mi355x', NEXT, [str(inventory(tmp_path / 'prod'))], ['gpu-a']) is None
    assert require_hosts.refusal('mi355x', NEXT, ['/srv/hosts.ini'], ['gpu-a'], hidden=[]) is None


# ---------------------------------------------------------------- a settings file the group's folder hides

def test_a_file_beside_the_groups_folder_is_named_with_the_folder_and_the_layout_to_move_it_to(tmp_path):
    root = inventory(tmp_path / 'prod', hidden=True)
    assert require_hosts.refusal('mi355x', NEXT, [str(root)], ['gpu-a']) == (
        f'mi355x: {root}/group_vars/mi355x.yml is ignored: Ansible reads the folder beside it ({root}/group_vars/mi355x/) '
        'instead, so none of its settings apply; next step: move the file into that folder, e.g. as '
        'group_vars/mi355x/vars.yml (the layout of inventories/mi355x-example)')


def test_the_group_vars_beside_an_inventory_file_count(tmp_path):
    root = inventory(tmp_path / 'prod', hidden=True)
    assert require_hosts.hidden_settings_files([str(root / 'hosts.yml')], 'mi355x') == [f'{root}/group_vars/mi355x.yml']


def test_every_sources_hidden_file_is_named_in_order_each_once(tmp_path):
    first = inventory(tmp_path / 'first', hidden=True)
    second = inventory(tmp_path / 'second', hidden=True)
    sources = [str(first), str(first / 'hosts.yml'), str(second / 'hosts.yml')]
    hidden = require_hosts.hidden_settings_files(sources, 'mi355x')
    assert hidden == [f'{first}/group_vars/mi355x.yml', f'{second}/group_vars/mi355x.yml']
    assert require_hosts.refusal('mi355x', NEXT, sources, ['gpu-a']).startswith(
        f'mi355x: {hidden[0]}, {hidden[1]} is ignored: Ansible reads the folder beside it '
        f'({first}/group_vars/mi355x/, {second}/group_vars/mi355x/) instead')


@pytest.mark.parametrize('hidden, folder', [(True, False), (False, True), (False, False)])
def test_a_file_alone_or_a_folder_alone_hides_nothing(tmp_path, hidden, folder):
    root = inventory(tmp_path / 'prod', hidden=hidden, folder=folder)
    assert require_hosts.hidden_settings_files([str(root)], 'mi355x') == []


def test_another_groups_folder_hides_nothing_of_this_group(tmp_path):
    root = inventory(tmp_path / 'prod', hidden=True)
    assert require_hosts.hidden_settings_files([str(root)], 'other') == []


def test_a_host_list_has_no_folder_and_a_missing_file_the_folder_it_would_be_in(tmp_path):
    root = inventory(tmp_path / 'prod', hidden=True)
    assert require_hosts.settings_roots(['gpu-a,gpu-b,', str(root / 'absent.ini')]) == [str(root)]
    assert require_hosts.hidden_settings_files(['gpu-a,gpu-b,'], 'mi355x') == []
