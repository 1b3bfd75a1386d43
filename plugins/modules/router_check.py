#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: router_check
short_description: Check a worker through the Infera routers of a fleet in one call, with an accuracy smoke
version_added: 0.1.0
description:
  - After a worker starts or restarts, checks it through Infera's routers (C(python -m infera.server)), from the node, in
    one module call instead of one HTTP task per request. Each step is polled every O(poll) seconds.
  - First, when O(fleet_routers) is given, every other router of the fleet must list O(worker_id) in C(GET /v1/workers)
    within O(fleet_timeout) seconds. A router that does not answer at all (refused, unreachable, timed out) is a lost
    node. It is reported in RV(lost), not waited on, and left out of the expected worker count when
    O(expected_hosts) is given.
  - Then this node's router (O(router)) must answer C(GET /health) with C(status=ok) and at least the expected
    C(active_workers), and list as many workers in C(GET /v1/workers), including O(worker_id) when it is given, within
    O(timeout) seconds.
  - Then, when O(model) is given and the router passed, one temperature-0 chat completion
    (C(POST /v1/chat/completions)) goes through the router. Its reply is RV(completion).
  - Then, when O(accuracy_questions) is above 0 and the completion returned text, the accuracy smoke.
    O(accuracy_questions) gsm8k-style arithmetic word problems (the same ones every run) go through the router at
    temperature 0, all at once (at most 32 at a time). The last number of each reply is compared with the right answer. RV(accuracy) says
    how many were right and whether that share reaches O(accuracy_threshold). A worker can be fast and wrong (in
    InferenceX's history an expert-parallel config once scored 0 on gsm8k); its throughput figures are worthless.
  - The module never fails on what the routers answer. The caller words the failure from the result (the roles name
    the node, the stage, the cause and the next step).
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
options:
  router:
    description: Base URL of this node's router, for example V(http://10.0.0.5:8000).
    type: str
    required: true
  worker_id:
    description:
      - The worker that must be listed, as Infera registers it (C(host:port) of the engine). Empty accepts any workers.
    type: str
    default: ''
  expected_workers:
    description: How many workers this router must list at least. Ignored when O(expected_hosts) is given.
    type: int
    default: 1
  expected_hosts:
    description:
      - The nodes whose workers this router must list. The expected count is their number less the lost nodes of
        RV(lost).
    type: list
    elements: str
  expected_modes:
    description:
      - "For a PD-disaggregated pair, how many workers of each C(disagg_mode) this router must list at least, as
        Infera's C(/v1/workers) names the modes, for example V({\"prefill\": 1, \"decode\": 1}). Empty checks no mode."
    type: dict
    default: {}
  fleet_routers:
    description: The other routers that must list O(worker_id), as a mapping of node name to base URL.
    type: dict
    default: {}
  fleet_timeout:
    description: Seconds to wait for O(fleet_routers) to list the worker.
    type: float
    default: 30
  timeout:
    description: Seconds to wait for O(router) to be healthy and list the workers.
    type: float
    default: 10
  poll:
    description: Seconds between two looks.
    type: float
    default: 0.2
  model:
    description: The served model name for the chat completion. Empty skips the completion.
    type: str
    default: ''
  prompt:
    description: The chat completion's one user message.
    type: str
    default: 1+1=?
  max_tokens:
    description: The completion's C(max_tokens).
    type: int
    default: 32
  completion_timeout:
    description: Seconds to wait for the completion's reply (and for each of the accuracy smoke's).
    type: float
    default: 120
  accuracy_questions:
    description: How many questions the accuracy smoke asks. V(0) skips it.
    type: int
    default: 0
  accuracy_threshold:
    description: The share of right answers (0 to 1) the accuracy smoke needs, inclusive.
    type: float
    default: 0.8
  accuracy_max_tokens:
    description: The C(max_tokens) of each accuracy smoke request (room for a worked answer).
    type: int
    default: 512
notes:
  - Requests go straight to the routers; a proxy from the environment is not used.
seealso:
  - module: infera.serving.sglang_ready
  - module: infera.serving.router_up
"""

EXAMPLES = r"""
- name: Router | Check the worker through this router and the fleet's other routers
  infera.serving.router_check:
    router: http://10.0.0.5:8000
    worker_id: 10.0.0.5:30000
    expected_hosts: [node-1, node-2, node-3]
    fleet_routers:
      node-2: http://10.0.0.6:8000
      node-3: http://10.0.0.7:8000
    model: /models/DeepSeek-V4-Pro
    accuracy_questions: 20
  register: _router_check
"""

RETURN = r"""
fleet:
  description: What each of O(fleet_routers) answered at the last look, by node name.
  returned: always
  type: list
  elements: dict
  contains:
    host:
      description: The node name.
      type: str
    url:
      description: Its router's base URL.
      type: str
    status:
      description: The HTTP status of C(GET /v1/workers), or null when the router did not answer.
      type: int
    workers:
      description: The worker ids it listed.
      type: list
      elements: str
    error:
      description: Why the request failed, or null.
      type: str
    listed:
      description: Whether it listed O(worker_id).
      type: bool
lost:
  description: The nodes of O(fleet_routers) whose router did not answer at all.
  returned: always
  type: list
  elements: str
unlisted:
  description: The nodes of O(fleet_routers) whose router answered but did not list O(worker_id) in time.
  returned: always
  type: list
  elements: str
expected_workers:
  description: The worker count this router had to reach.
  returned: always
  type: int
router_ok:
  description: Whether this router was healthy with the expected workers, including O(worker_id), in time.
  returned: always
  type: bool
health:
  description: The last C(/health) body of this router, or null.
  returned: always
  type: dict
  sample: {status: ok, active_workers: 3}
health_error:
  description: Why the last C(/health) request failed, or null.
  returned: always
  type: str
workers:
  description: The worker ids this router listed at the last look.
  returned: always
  type: list
  elements: str
modes:
  description: The C(disagg_mode) of each worker this router listed at the last look (V(mixed) when it names none).
  returned: always
  type: dict
  sample: {"10.0.0.1:30000": prefill, "10.0.0.2:30000": decode}
modes_missing:
  description: The modes of O(expected_modes) the router listed too few workers of, one line each.
  returned: always
  type: list
  elements: str
  sample: ["decode: 0 of 1"]
workers_error:
  description: Why the last C(/v1/workers) request failed, or null.
  returned: always
  type: str
completion:
  description: The completion's reply text, stripped; null when it was not asked or the router did not pass.
  returned: always
  type: str
  sample: 1 + 1 = 2.
completion_status:
  description: The completion's HTTP status, or null.
  returned: always
  type: int
completion_error:
  description: Why the completion failed (no answer, an HTTP error, an empty reply), or null.
  returned: always
  type: str
accuracy:
  description: The accuracy smoke's result; null when it was skipped or did not run (an earlier step failed).
  returned: always
  type: dict
  contains:
    questions:
      description: How many questions were asked.
      type: int
    correct:
      description: How many replies ended with the right number.
      type: int
    accuracy:
      description: The share right, 0 to 1.
      type: float
    threshold:
      description: O(accuracy_threshold).
      type: float
    passed:
      description: Whether RV(accuracy.accuracy) reaches RV(accuracy.threshold).
      type: bool
    errors:
      description: How many requests failed (counted as wrong).
      type: int
    wrong:
      description: Up to 3 wrong answers, each with C(question), C(expected), C(reply) and C(error).
      type: list
      elements: dict
    wrong_text:
      description: RV(accuracy.wrong), one line each, for a failure message.
      type: str
    line:
      description: The result in words, for summaries and reports.
      type: str
      sample: 20/20 gsm8k-style answers right (100 %, threshold 80 %)
  sample: {questions: 20, correct: 20, accuracy: 1.0, threshold: 0.8, passed: true, errors: 0, wrong: [], wrong_text: ''}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._router_check import run


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router=dict(type='str', required=True),
            worker_id=dict(type='str', default=''),
            expected_workers=dict(type='int', default=1),
            expected_hosts=dict(type='list', elements='str'),
            expected_modes=dict(type='dict', default={}),
            fleet_routers=dict(type='dict', default={}),
            fleet_timeout=dict(type='float', default=30),
            timeout=dict(type='float', default=10),
            poll=dict(type='float', default=0.2),
            model=dict(type='str', default=''),
            prompt=dict(type='str', default='1+1=?'),
            max_tokens=dict(type='int', default=32, no_log=False),
            completion_timeout=dict(type='float', default=120),
            accuracy_questions=dict(type='int', default=0),
            accuracy_threshold=dict(type='float', default=0.8),
            accuracy_max_tokens=dict(type='int', default=512, no_log=False),
        ),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **run(module.params))


if __name__ == '__main__':
    main()
