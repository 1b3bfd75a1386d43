# SPDX-License-Identifier: Apache-2.0
"""The node's work directory layout (plugin_utils/_node_layout.py), the one place every role's paths come from."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils import _node_layout

WORK = '/var/lib/infera/sgl_mix'


def test_every_role_file_is_in_a_folder_the_container_role_makes():
    made = set(_node_layout.work_dirs(WORK))
    files = (list(_node_layout.router_files(WORK).values()) + list(_node_layout.worker_files(WORK).values())
             + [v for k, v in _node_layout.worker_files(WORK, '20261206T1').items() if k != 'id']
             + [_node_layout.sweep_results_dir(WORK, 'run1')])
    assert all(path.rsplit('/', 1)[0] in made or path.rsplit('/', 2)[0] in made for path in files), files


def test_a_launch_has_files_of_its_own_and_the_current_links_do_not_name_a_launch():
    one, two = _node_layout.worker_files(WORK, 'a'), _node_layout.worker_files(WORK, 'b')
    assert one['id'] == 'a'
    assert not set(one.values()) & set(two.values())
    assert one['log'] == WORK + '/logs/engine-a.log' and one['state_file'] == WORK + '/run/ready-a.json'
    links = _node_layout.worker_files(WORK)
    assert links == {'script': WORK + '/scripts/engine.sh', 'secrets': WORK + '/run/secrets.env',
                     'log': WORK + '/logs/engine.log', 'exit_file': WORK + '/run/engine.exit'}


def test_the_router_and_the_sweep_write_where_the_walkthrough_s_folders_are():
    assert _node_layout.work_dirs(WORK + '/') == [WORK + '/scripts', WORK + '/logs', WORK + '/run', WORK + '/results']
    assert _node_layout.router_files(WORK) == {'script': WORK + '/scripts/router.sh', 'log': WORK + '/logs/router.log'}
    assert _node_layout.sweep_results_dir(WORK, 'r') == WORK + '/results/r'
