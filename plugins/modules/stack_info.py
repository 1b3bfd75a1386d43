#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: stack_info
short_description: Read which Infera and SGLang an engine image runs, and what differs between their versions
version_added: 0.2.0
description:
  - Runs a short probe with the image's own C(python3) and returns the installed C(amd-infera) and C(sglang)
    versions and the behaviour the collection adapts to. It imports nothing of Infera or SGLang.
  - With O(container), the probe runs inside that container on the node (C(docker exec), as
    M(community.docker.docker_container_exec) does); without it, with the C(python3) where the module runs.
  - "The wrapper's ready limit: Infera v0.1.1 gives up on an engine that is not ready after a fixed 1800 s;
    from v0.2.0 the limit is C(INFERA_ENGINE_READY_TIMEOUT), which the collection sets to its deadline.
    RV(stack.ready_limit) is the fixed limit, or null."
  - "The drain: Infera with C(infera/engine/drain.py) (v0.2.10 on) waits for the engine's requests in flight on
    SIGTERM; without it the requests in flight are cut. RV(stack.drain) says which."
  - The behaviour is read from Infera's code, not from its version number (an image built without its git
    history reports 0.0.0).
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
options:
  container:
    description:
      - The container to probe on the node. Without it, the probe runs with the C(python3) where the module runs.
    type: str
  deadline:
    description:
      - The deadline in seconds the collection gives a cold start (C(sglang_worker_ready_deadline)). When the image's
        wrapper has a fixed limit shorter than this, RV(stack.warning) says so, with the remedies.
    type: float
  node:
    description:
      - The node's name, for messages.
    type: str
    default: this node
"""

EXAMPLES = r"""
- name: Read the image's Infera and SGLang
  infera.serving.stack_info:
    container: sgl_mix
    deadline: 2700
  register: stack

- name: Warn before a launch the wrapper would cut short
  ansible.builtin.debug:
    msg: "WARNING {{ inventory_hostname }}: {{ stack.stack.warning }}"
  when: stack.stack.warning
"""

RETURN = r"""
stack:
  description: What the image runs.
  returned: success
  type: dict
  contains:
    infera:
      description: The installed amd-infera version (V(unknown) when it has no metadata).
      type: str
      sample: 0.1.1
    sglang:
      description: The installed sglang version; in the rehearsal, the release the simulated engine stands in for.
      type: str
      sample: 0.5.15.post1
    ready_limit:
      description: Seconds after which the wrapper gives up on an engine that is not ready, when fixed; else null.
      type: int
      sample: 1800
    drain:
      description: V(infera) when Infera drains the requests in flight on SIGTERM, V(none) when it cuts them.
      type: str
      sample: none
    engine_metrics:
      description: Whether the wrapper adds C(--enable-metrics) to the engine's argv.
      type: bool
    engine_flags:
      description:
        - Flags the collection adds to the engine's argv for this stack. V([--enable-metrics]) where it drains the
          worker itself (RV(stack.drain=none)) and the wrapper does not enable the engine's C(/metrics), which that drain reads.
      type: list
      elements: str
      sample: [--enable-metrics]
    warning:
      description: One line to print before a launch whose deadline the wrapper would cut short, or null.
      type: str
facts:
  description: The probe's raw facts.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail
from ansible_collections.infera.serving.plugins.module_utils._stack import ARGUMENT_SPEC, describe, run_probe_here


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    if module.params['container']:
        module.fail_json(msg='container is handled by the action plugin on the controller; call the module as '
                             'infera.serving.stack_info')

    def probe(params):
        facts = run_probe_here(module.run_command)
        return facts, describe(facts, params['deadline'])

    facts, stack = run_or_fail(module, probe, context='%s: stage stack' % module.params['node'])
    module.exit_json(changed=False, stack=stack, facts=facts)


if __name__ == '__main__':
    main()
