#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_up
short_description: Wait until a just-started etcd container answers /health healthy, or etcd has exited
version_added: 0.2.0
description:
  - After an etcd container starts, waits on the node until C(GET <endpoint>/health) answers HTTP 200 with
    C({"health":"true"}), looking every O(poll) seconds for up to O(timeout) seconds, in one module call.
  - Each look also reads the container O(container) from the Docker engine. Once etcd's process has ended, the wait
    ends there, instead of waiting out O(timeout). Its process has ended when the container is gone, no longer runs
    (it exited, or Docker waits to restart it), or runs again under another pid or with more restarts than
    O(restart_count). An etcd that exits at its start (a port taken, another member's data directory) crash-loops
    under a restart policy; this reports its first exit.
  - C(/health) is asked first at each look, so another etcd answering on the port ends the wait as healthy. The
    caller checks who answered (the etcd role asks the member list).
  - The module never fails on what etcd or Docker answers. The caller words the failure from the result (the etcd
    role names the node, the stage, the cause and the next step, with the container's last log lines).
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
options:
  endpoint:
    description:
      - etcd's client URL as the node reaches it, for example V(http://127.0.0.1:2379); V(host:port) and a bare host
        are read over http, as Infera reads an endpoint (a bare host on port 2379).
    type: str
    required: true
  container:
    description: The name of etcd's container.
    type: str
    required: true
  timeout:
    description: Seconds to wait at most for C(/health) to answer healthy.
    type: float
    default: 60
  poll:
    description: Seconds between two looks.
    type: float
    default: 0.5
  restart_count:
    description:
      - The container's restart count when it was started (C(RestartCount) from C(community.docker.docker_container)).
        A higher count means etcd's process ended and Docker restarted it. Without it, the first look's count.
    type: int
  docker_socket:
    description: The Docker engine's unix socket.
    type: path
    default: /var/run/docker.sock
notes:
  - Requests go straight to etcd; a proxy from the environment is not used.
  - Run it as root (C(become=true)), or as a user who may use O(docker_socket).
requirements:
  - Python 3 on the node.
seealso:
  - module: infera.serving.router_up
"""

EXAMPLES = r"""
- name: Etcd | Wait until /health answers {"health":"true"}, or etcd exits
  infera.serving.etcd_up:
    endpoint: http://127.0.0.1:2379
    container: "{{ etcd_container }}"
    timeout: "{{ etcd_health_timeout }}"
    restart_count: 0  # RestartCount when the container was started
  register: _etcd_health
  failed_when: not _etcd_health.healthy
"""

RETURN = r"""
healthy:
  description: Whether C(/health) answered C({"health":"true"}) in time; true when RV(ended) is V(healthy) only.
  returned: always
  type: bool
ended:
  description:
    - How the wait ended. V(healthy); V(exited) (the container no longer runs, or Docker waits to restart it);
      V(restarted) (it runs again under another pid, or restarted more often than O(restart_count)); V(gone) (no such
      container); V(timeout).
  returned: always
  type: str
  sample: exited
waited:
  description: Seconds the wait took.
  returned: always
  type: float
  sample: 0.61
looks:
  description: How many times C(/health) and the container were looked at.
  returned: always
  type: int
  sample: 2
status:
  description: The HTTP status of the last C(/health) answer, or null when nothing answered.
  returned: always
  type: int
  sample: 503
body:
  description: The last C(/health) answer's body (its last 2,000 characters), empty when nothing answered.
  returned: always
  type: str
  sample: '{"health":"false","reason":"RAFT NO LEADER"}'
error:
  description: Why the last C(/health) request got no answer, or null.
  returned: always
  type: str
  sample: "[Errno 111] Connection refused"
container:
  description:
    - The container's state at the last look, as Docker reports it. C(exists), C(running) (false too while Docker
      waits to restart it), C(pid), C(restart_count), C(status) (Docker's word) and C(exit_code).
  returned: always
  type: dict
  sample: {exists: true, running: false, pid: 0, restart_count: 1, status: restarting, exit_code: 1}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail
from ansible_collections.infera.serving.plugins.module_utils._etcd_up import run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            endpoint=dict(type='str', required=True),
            container=dict(type='str', required=True),
            timeout=dict(type='float', default=60),
            poll=dict(type='float', default=0.5),
            restart_count=dict(type='int'),
            docker_socket=dict(type='path', default='/var/run/docker.sock'),
        ),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **run_or_fail(module, run))


if __name__ == '__main__':
    main()
