# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""What runs in a container and what a role's files on the node hold, in one look, changing nothing.

A role reads it before it changes anything, instead of one task per question (container info, pgrep in
the container, stat or slurp of each file): each node task costs a connection and a Python start
(~0.5 s). The container comes from the Docker engine's API over its unix socket; its processes from
/proc, those in the pid namespace of the container's init process (State.Pid), matched on their command
line the way `pgrep -a -f` inside the container matches them, with the pid the container sees (the last
NSpid field). Each path: whether it exists, its kind (file, directory, device) and mode, and of a regular
file its SHA-1 (what ansible.builtin.template compares) and first lines; a secret file (exists_only) only whether it exists.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from urllib.parse import quote

from ansible_collections.infera.serving.plugins.module_utils._docker_socket import docker_json, inspect_container
from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.module_utils._procs import (
    all_pids,
    pid_in_namespace,
    pid_namespace,
    process_root,
    read_command_line,
)

ARGUMENT_SPEC = dict(
    container=dict(type='str', required=True),
    processes=dict(type='dict', default={}),
    files=dict(type='dict', default={}),
    exists_only=dict(type='dict', default={}),
    image=dict(type='str'),
    head_lines=dict(type='int', default=5),
    docker_socket=dict(type='path', default='/var/run/docker.sock'),
    timeout=dict(type='float', default=5.0),
)

_NO_CONTAINER = {'exists': False, 'running': False, 'id': '', 'image': '', 'pid': 0, 'merged_dir': '', 'rootfs': ''}


class ContainerStatusError(InferaServingError):
    """A bad argument: the task fails with this message."""


def container_rootfs(running, pid, merged_dir):
    """Where the node sees the container's files: /proc/<pid>/root of its init process while it runs, which every
    storage driver has (the containerd snapshotter, Docker 29's default, has no MergedDir) and which shows its
    volumes too; readable by root only. The overlay2 MergedDir only when no process runs in it ('' without one)."""
    if running and pid:
        return process_root(pid)
    return merged_dir


def container_state(socket_path, name, timeout):
    """The named container as the engine reports it: exists, running, id, image, pid and its root filesystem."""
    inspect = inspect_container(socket_path, name, timeout)
    if not inspect:
        return dict(_NO_CONTAINER)
    state = inspect.get('State') or {}
    graph = (inspect.get('GraphDriver') or {}).get('Data') or {}
    running = bool(state.get('Running'))
    pid = int(state.get('Pid') or 0)
    merged_dir = graph.get('MergedDir', '')
    return {
        'exists': True,
        'running': running,
        'id': inspect.get('Id', ''),
        'image': (inspect.get('Config') or {}).get('Image', ''),
        'pid': pid,
        'merged_dir': merged_dir,
        'rootfs': container_rootfs(running, pid, merged_dir),
    }


def image_state(socket_path, name, timeout):
    """The named image as the engine inspects it (Id, RepoTags, RepoDigests, Config.Labels), {} when the node has none.

    The keys are Docker's, as community.docker.docker_image_pull and docker_image_info return them, so a
    role reads either the same way.
    """
    inspect = docker_json(socket_path, '/images/%s/json' % quote(name, safe='/:@'), timeout)
    if not inspect:
        return {}
    return {
        'Id': inspect.get('Id', ''),
        'RepoTags': inspect.get('RepoTags') or [],
        'RepoDigests': inspect.get('RepoDigests') or [],
        'Config': {'Labels': (inspect.get('Config') or {}).get('Labels') or {}},
    }


def processes_in(init_pid, patterns):
    """{name: ['<pid> <command line>', ...]} of the processes in init_pid's pid namespace whose command line
    matches each named pattern (re.search, as pgrep -f), in pid order; the pids are those the container sees."""
    found = {name: [] for name in patterns}
    namespace = pid_namespace(init_pid) if init_pid else None
    if namespace is None:
        return found
    compiled = [(name, re.compile(pattern)) for name, pattern in patterns.items()]
    for pid in all_pids():
        if pid_namespace(pid) != namespace:
            continue
        line = read_command_line(pid)
        if not line:
            # Gone, a kernel thread or a zombie: pgrep -f would not match its empty command line either.
            continue
        for name, regex in compiled:
            if regex.search(line):
                found[name].append('%d %s' % (pid_in_namespace(pid), line))
    return found


def _kind(mode):
    if stat.S_ISREG(mode):
        return 'file'
    if stat.S_ISDIR(mode):
        return 'directory'
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return 'device'
    return 'other'


def file_state(path, head_lines):
    """exists, kind (file, directory, device, other), mode ('0644') and, of a regular file only, its checksum
    (SHA-1 of the content) and first head_lines lines. A device is never opened."""
    try:
        info = os.stat(path)
    except OSError:
        return {'exists': False, 'kind': '', 'mode': '', 'checksum': '', 'head': []}
    result = {'exists': True, 'kind': _kind(info.st_mode), 'mode': '0%03o' % stat.S_IMODE(info.st_mode),
              'checksum': '', 'head': []}
    if result['kind'] == 'file':
        try:
            with open(path, 'rb') as handle:
                content = handle.read()
        except OSError:
            return result
        result['checksum'] = hashlib.sha1(content).hexdigest()
        result['head'] = content.decode('utf-8', 'replace').splitlines()[:head_lines]
    return result


def container_status(params):
    """The module's result from its parameters."""
    for name, pattern in params['processes'].items():
        try:
            re.compile(pattern)
        except (re.error, TypeError) as error:
            raise ContainerStatusError('processes.%s is not a valid regular expression (%s): %r' % (name, error, pattern))
    for option in ('files', 'exists_only'):
        for name, path in params[option].items():
            if not isinstance(path, str) or not os.path.isabs(path):
                raise ContainerStatusError('%s.%s must be an absolute path on the node, got %r' % (option, name, path))
    container = container_state(params['docker_socket'], params['container'], params['timeout'])
    result = {
        'container': container,
        'processes': processes_in(container['pid'] if container['running'] else 0, params['processes']),
        'files': {name: file_state(path, params['head_lines']) for name, path in params['files'].items()},
        'exists_only': {name: {'exists': os.path.exists(path)} for name, path in params['exists_only'].items()},
    }
    if params.get('image'):
        result['image'] = image_state(params['docker_socket'], params['image'], params['timeout'])
    return result
