# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""What the container role decides from its check (roles/container/tasks/check.yml): which work folders and GPU
device paths the node lacks, from one infera.serving.container_status look, and what the comparison of the worker
container with the walkthrough's found, from community.docker.docker_container run in check mode with its diff."""

from __future__ import annotations


def dirs_missing(files, wanted):
    """The folders of `wanted` that are not a directory on the node; `files` is container_status's files
    (path: {exists, kind, ...})."""
    found = files or {}
    return [path for path in wanted if (found.get(path) or {}).get('kind') != 'directory']


def paths_missing(files, wanted):
    """The paths of `wanted` (files, folders or devices) that do not exist on the node."""
    found = files or {}
    return [path for path in wanted if not (found.get(path) or {}).get('exists')]


def _comparison(look, compare_run, container_name):
    """The compare step's run when the node has the container (the look's container.exists), else the creation a
    missing container needs: the compare step is skipped then, a first deploy saves the call."""
    if ((look or {}).get('container') or {}).get('exists'):
        return compare_run or {}
    return {'actions': [{'create': 'no container %s on the node' % container_name}]}


def container_change(look, compare_run, container_name):
    """What the worker container needs, from check.yml's look and compare step (roles/container/tasks/replace.yml):

    - actions: the comparison's actions, empty when the container is the walkthrough's;
    - replaced: one of them removes a container (another image or other settings), so its worker is drained first;
    - image_different: the container runs another image;
    - differences: the names of the settings that differ, in the order of community.docker's legacy diff
      ([{name: {parameter, container}}]).
    """
    compared = _comparison(look, compare_run, container_name)
    actions = compared.get('actions') or []
    diff = compared.get('diff') or {}
    return {
        'actions': actions,
        'replaced': any('removed' in action for action in actions),
        'image_different': bool(diff.get('image_different', False)),
        'differences': [name for difference in diff.get('differences') or [] for name in difference],
    }
