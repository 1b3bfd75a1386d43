# SPDX-License-Identifier: Apache-2.0
"""What the container role decides from its check (plugin_utils/_container_check.py): the work folders and GPU device
paths the node lacks, and what the worker container needs."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils._container_check import (
    container_change, dirs_missing, paths_missing)

WORK_DIRS = ['/w/scripts', '/w/logs', '/w/run', '/w/results']
DEVICES = ['/dev/kfd', '/dev/dri']
# What community.docker.docker_container's compare step returns when the running container has another image and
# other settings: it would stop, remove, create and start it.
RECREATE = {
    'changed': True,
    'actions': [{'stopped': 'c0ffee', 'timeout': None}, {'removed': 'c0ffee', 'force': True},
                {'created': 'Created container', 'create_parameters': {}}, {'started': 'c0ffee'}],
    'diff': {'differences': [{'image': {'parameter': 'sha256:new', 'container': 'sha256:old'}},
                             {'expected_env': {'parameter': ['A=1'], 'container': []},
                              'shm_size': {'parameter': 34359738368, 'container': 67108864}}],
             'image_different': True},
}
SKIPPED = {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}


def look(exists=True):
    return {'container': {'exists': exists, 'running': exists}, 'files': {}, 'image': {}}


def found(exists=True, kind='directory'):
    """One of container_status's files."""
    return {'exists': exists, 'kind': kind if exists else '', 'mode': '0755' if exists else ''}


def test_a_work_folder_is_missing_unless_the_node_has_it_as_a_directory():
    files = {'/w/scripts': found(), '/w/logs': found(exists=False), '/w/run': found(kind='file'),
             '/w/results': found(kind='other'), '/dev/kfd': found(kind='device')}
    assert dirs_missing(files, WORK_DIRS) == ['/w/logs', '/w/run', '/w/results']
    assert dirs_missing({path: found() for path in WORK_DIRS}, WORK_DIRS) == []
    # A path the look was not asked for is missing too (a look that is not the one check.yml made).
    assert dirs_missing({}, WORK_DIRS) == WORK_DIRS


def test_a_device_path_is_missing_unless_it_exists_whatever_its_kind():
    files = {'/dev/kfd': found(kind='device'), '/dev/dri': found(exists=False), '/w/logs': found(exists=False)}
    assert paths_missing(files, DEVICES) == ['/dev/dri']
    assert paths_missing({'/dev/kfd': found(kind='device'), '/dev/dri': found()}, DEVICES) == []
    assert paths_missing({}, DEVICES) == DEVICES


def test_a_node_without_the_container_needs_it_created_and_nothing_drained():
    change = container_change(look(exists=False), SKIPPED, 'sgl_mix')
    assert change == {'actions': [{'create': 'no container sgl_mix on the node'}], 'replaced': False,
                      'image_different': False, 'differences': []}


def test_another_image_replaces_the_container_and_names_each_setting_in_the_legacy_diff_s_order():
    change = container_change(look(), RECREATE, 'sgl_mix')
    assert change['replaced'] is True
    assert change['image_different'] is True
    assert change['differences'] == ['image', 'expected_env', 'shm_size']
    assert change['actions'] == RECREATE['actions']


@pytest.mark.parametrize('compare_run, replaced, actions', [
    # The walkthrough's container: the compare step's diff has no differences and Docker would do nothing.
    ({'changed': False, 'actions': [], 'diff': {'before': {}, 'after': {}}}, False, 0),
    # A stopped container is started, not replaced: nothing to drain.
    ({'changed': True, 'actions': [{'started': 'c0ffee'}], 'diff': {}}, False, 1),
    # A removal counts whatever its value.
    ({'changed': True, 'actions': [{'removed': None}], 'diff': {'differences': []}}, True, 1),
    # A run without actions or diff (as a check mode run of another module could read) needs nothing.
    ({'changed': False}, False, 0),
    ({'actions': None, 'diff': None}, False, 0),
])
def test_only_a_removal_replaces_the_container(compare_run, replaced, actions):
    change = container_change(look(), compare_run, 'sgl_mix')
    assert change['replaced'] is replaced
    assert len(change['actions']) == actions
    assert change['differences'] == [] and change['image_different'] is False


def test_other_settings_on_the_same_image_replace_it_without_saying_another_image():
    compare_run = dict(RECREATE, diff={'differences': [{'network_mode': {'parameter': 'host', 'container': 'bridge'}}]})
    change = container_change(look(), compare_run, 'sgl_mix')
    assert (change['replaced'], change['image_different'], change['differences']) == (True, False, ['network_mode'])
