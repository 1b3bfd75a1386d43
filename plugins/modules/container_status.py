#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: container_status
short_description: Read what runs in a container and what a role's files on the node hold, in one call
version_added: 0.1.0
description:
  - One read-only look that a role takes before it changes anything, instead of one task per question
    (C(community.docker.docker_container_info), C(pgrep -a -f) through C(community.docker.docker_container_exec),
    C(ansible.builtin.stat) or C(ansible.builtin.slurp) of each file). Each node task costs a connection and a Python
    start.
  - The container comes from the Docker engine's API (C(GET /containers/<name>/json)) over O(docker_socket).
  - Its processes come from C(/proc) on the node. A process is in the container when its pid namespace is that of
    the container's init process (C(State.Pid)). Its command line (the arguments joined by spaces) is matched with
    each of O(processes) the way C(pgrep -f) inside the container matches it, and each match is returned as
    C(pgrep -a) prints it, with the pid the container sees (the last field of C(NSpid)). A container that does not
    run has no processes.
  - Each of O(files) comes back with whether it exists, its kind (V(file), V(directory), V(device), V(other)) and
    mode, and, of a regular file, its SHA-1 (the checksum C(ansible.builtin.template) and C(ansible.builtin.copy)
    compare) and its first O(head_lines) lines. A device is never opened. The roles render a launch script on the
    controller and write it only when its checksum or mode differs, and create directories only when one is missing.
  - Each of O(exists_only) comes back with whether it exists only; its content, checksum and mode are never read.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
options:
  container:
    description: The container's name.
    type: str
    required: true
  processes:
    description: Named regular expressions, each matched against the command line of every process in the container.
    type: dict
    default: {}
  files:
    description: Named absolute paths on the node (files, directories, device nodes) whose state is returned.
    type: dict
    default: {}
  exists_only:
    description: Named absolute paths on the node of which only whether they exist is returned, never their content, checksum or mode (a token file).
    type: dict
    default: {}
  image:
    description:
      - An image name (with its tag) to inspect as well, for example the container's. The container role reads it
        before it pulls, and pulls only an image the node does not have.
    type: str
  head_lines:
    description: How many first lines of each of O(files) are returned.
    type: int
    default: 5
  docker_socket:
    description: The Docker engine's unix socket.
    type: path
    default: /var/run/docker.sock
  timeout:
    description: Seconds the Docker engine may take to answer.
    type: float
    default: 5.0
notes:
  - Run it as root (C(become=true)), as the deploy runs. The pid namespace of another user's process is readable only
    by root; without it no process is found in the container.
  - Needs Python's standard library only.
requirements:
  - Python 3 on the node.
seealso:
  - module: infera.serving.node_preflight
"""

EXAMPLES = r"""
- name: SGLang worker | Find the worker container, the wrapper, any engine and the launch script
  infera.serving.container_status:
    container: sgl_mix
    processes:
      wrapper: "^python -m infera[.]engine[.]sglang "
      engine: "-m sglang[.]launch_server "
    files:
      script: /var/lib/infera/sgl_mix/scripts/engine.sh
    exists_only:
      token: /var/lib/infera/sgl_mix/run/secrets.env
  register: _worker_found
  become: true
"""

RETURN = r"""
container:
  description:
    - The container as the Docker engine reports it; C(exists) is false (and the rest empty) when there is none.
    - C(rootfs) is where the node sees the container's files, volumes included. While it runs, C(/proc/<pid>/root) of
      its init process (C(pid)), which every storage driver has and only root can read; otherwise the overlay2
      C(merged_dir) (C(GraphDriver.Data.MergedDir)), empty with the containerd snapshotter, which has none.
  returned: success
  type: dict
  sample: {exists: true, running: true, id: 3f2a..., image: "registry.example.com/infera/sglang-rocm:dsv4", pid: 4242,
           merged_dir: /var/lib/docker/overlay2/3f2a.../merged, rootfs: /proc/4242/root}
processes:
  description: For each of O(processes), the matching processes in the container, C(<pid> <command line>) each.
  returned: success
  type: dict
  sample: {wrapper: ["57 python -m infera.engine.sglang --model-path /models/dsv4 --port 30000"], engine: []}
files:
  description:
    - For each of O(files), C(exists), C(kind) (V(file), V(directory), V(device), V(other)), C(mode) (such as V(0644)),
      and of a regular file C(checksum) (SHA-1) and C(head) (its first lines); both empty otherwise.
  returned: success
  type: dict
  sample: {script: {exists: true, kind: file, mode: "0644", checksum: 9a3f..., head: ["#!/bin/bash", "# recipe: r; variant: dp"]}}
exists_only:
  description: For each of O(exists_only), C(exists).
  returned: success
  type: dict
  sample: {token: {exists: false}}
image:
  description:
    - The image O(image) as the Docker engine inspects it, with Docker's keys (as C(community.docker.docker_image_info)
      returns them) C(Id), C(RepoTags), C(RepoDigests) and C(Config.Labels); V({}) when the node does not have it.
  returned: when O(image) is set
  type: dict
  sample: {Id: "sha256:5b1e...", RepoTags: ["registry.example.com/infera/sglang-rocm:dsv4"],
           RepoDigests: ["registry.example.com/infera/sglang-rocm@sha256:77c0..."], Config: {Labels: {}}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._container_status import ARGUMENT_SPEC, container_status
from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run_or_fail(module, container_status)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
