#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: router_up
short_description: Wait until a just-started Infera router answers /health, or its process is gone
version_added: 0.2.0
description:
  - After the Infera router (C(python -m infera.server)) starts, waits on the node until C(GET /health) answers
    C(status=ok), looking every O(poll) seconds for up to O(timeout) seconds, in one module call. A router just started
    has no worker yet, so the status alone counts.
  - With O(process_pattern) and O(container_pid), each look that does not pass also looks for the router's process
    among the processes of its container. Once there is none, the wait ends there and RV(exited) is true, instead of
    waiting out O(timeout). A router that exits at its start (etcd not answering, a bad tokenizer path, its port taken)
    is so reported at once.
  - The module never fails on what the router answers. The caller words the failure from the result (the router role
    names the node, the stage, the cause and the next step, with the router log's last lines).
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
options:
  router:
    description: Base URL of the router, for example V(http://127.0.0.1:8000).
    type: str
    required: true
  timeout:
    description: Seconds to wait for C(/health) to answer C(status=ok).
    type: float
    default: 120
  poll:
    description: Seconds between two looks.
    type: float
    default: 0.2
  process_pattern:
    description:
      - A regular expression for the command line of the router's process (C(re.search), as C(pgrep -f) matches it),
        looked for among the processes of O(container_pid)'s container. Empty does not look.
      - The router role gives the router's command and its launch script's path, so the moment between the start and
        the C(exec) of the router counts as running.
    type: str
    default: ''
  container_pid:
    description:
      - The process id, on the node, of the container's first process (Docker's C(State.Pid)); the processes looked at
        for O(process_pattern) are those of its pid namespace. V(0) does not look.
    type: int
    default: 0
notes:
  - Requests go straight to the router; a proxy from the environment is not used.
seealso:
  - module: infera.serving.router_check
"""

EXAMPLES = r"""
- name: Router | Poll /health until it answers status ok
  infera.serving.router_up:
    router: http://127.0.0.1:8000
    timeout: 120
    process_pattern: "^python -m infera[.]server |/var/lib/infera/sgl_mix/scripts/router[.]sh"
    container_pid: 4242
  register: _router_health
  failed_when: not _router_health.up
"""

RETURN = r"""
up:
  description: Whether C(/health) answered C(status=ok) in time.
  returned: always
  type: bool
exited:
  description:
    - Whether the wait ended because no process matched O(process_pattern) any more (always false when it is not
      given).
  returned: always
  type: bool
waited:
  description: Seconds the wait took.
  returned: always
  type: float
  sample: 2.4
health:
  description: The last C(/health) body, or null.
  returned: always
  type: dict
  sample: {status: ok, active_workers: 0}
health_error:
  description: Why the last C(/health) request failed, or null.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._router_up import run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router=dict(type='str', required=True),
            timeout=dict(type='float', default=120),
            poll=dict(type='float', default=0.2),
            process_pattern=dict(type='str', default=''),
            container_pid=dict(type='int', default=0),
        ),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **run(module.params))


if __name__ == '__main__':
    main()
