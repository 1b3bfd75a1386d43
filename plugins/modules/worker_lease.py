#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: worker_lease
short_description: Revoke the etcd lease of an Infera worker's record (a dead wrapper's, or a held one's before a drain)
version_added: 0.2.0
description:
  - Infera's wrapper registers its worker in etcd under the key C(<prefix><host>:<port>), with a lease it keeps alive,
    and revokes that lease when it stops. A wrapper that died (SIGKILL, the OOM killer, its container killed) revoked
    nothing, so its record stays until the lease's TTL runs out (Infera's 30 s), and the router keeps sending requests
    to a worker whose engine is gone. The module looks up the record under the worker's key and revokes its lease, as
    Infera's own stop would have done; etcd then drops the record, and the router the worker.
  - It talks to etcd's HTTP gateway (C(POST /v3/kv/range) with the key only, then C(POST /v3/lease/revoke)), as
    Infera's registration uses it, from where the module runs, without a proxy, 10 seconds at most per request.
  - "Neither a look nor a revoke that fails fails the module: RV(outcome) says what became of the record and
    RV(message) says it in one line, a warning (C(WARNING <node>: ...)) with a next step when etcd did not answer."
  - Call it only when no wrapper of the worker runs, or while it is held still (SIGSTOP), as the
    P(infera.serving.sglang_worker#role) role does before it drains an engine whose Infera has no drain of its own; a
    running wrapper would register again within its keepalive's 10 s. RV(message) speaks of a dead wrapper's record.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode the module looks up the record but does not revoke its lease (RV(outcome=check)), with
        C(changed=false).
  diff_mode:
    support: N/A
    details:
      - A revoked lease is not something to diff.
  idempotent:
    support: full
    details:
      - C(changed=true) only when a lease was revoked. Run again, the module finds no record (RV(outcome=none)).
options:
  etcd_endpoint:
    description:
      - The etcd Infera's wrapper registers in, as Infera reads it (C(infera/common/discovery.py _normalize_endpoint)),
        an V(http://) or V(https://) URL, less its trailing slashes; V(host:port) over http; a bare host over http on
        port 2379.
    type: str
    required: true
  prefix:
    description: Infera's etcd prefix for workers (its C(--etcd-prefix)), such as V(/infera/workers/).
    type: str
    required: true
  worker_id:
    description: The worker as Infera registers it, C(host:port) of its engine. The record's key is O(prefix) followed by it.
    type: str
    required: true
  exit_code:
    description: The exit code the worker's last launch ended with, for RV(message); empty when it wrote none.
    type: str
    default: ''
  node:
    description: The node's name, for RV(message).
    type: str
    default: this node
notes:
  - Needs Python's standard library only.
requirements:
  - Python 3 where the module runs.
seealso:
  - module: infera.serving.container_status
"""

EXAMPLES = r"""
- name: SGLang worker | Revoke the etcd lease a wrapper that died left (the router drops its worker)
  infera.serving.worker_lease:
    etcd_endpoint: "{{ sglang_worker_etcd_endpoint }}"
    prefix: /infera/workers/
    worker_id: 10.0.0.7:30000
    exit_code: "137"
    node: "{{ inventory_hostname }}"
  register: _stale

- name: SGLang worker | Say what became of the record
  ansible.builtin.debug:
    msg: "{{ _stale.message }}"
  when: _stale.message | length > 0
"""

RETURN = r"""
outcome:
  description:
    - What became of the record. V(no_answer) etcd did not answer the look with HTTP 200; V(none) it holds no record
      under the key; V(check) check mode found one and left it; V(revoked) its lease was revoked; V(ran_out) the lease
      had run out before the revoke (HTTP 404); V(refused) the revoke failed.
  returned: always
  type: str
  sample: revoked
lease:
  description: The record's lease ID, 0 when etcd holds no record under the key or did not answer.
  returned: always
  type: int
  sample: 7668682692136634651
etcd_url:
  description: The base URL the module reached etcd at, from O(etcd_endpoint).
  returned: always
  type: str
  sample: http://10.0.0.5:2379
key:
  description: The record's key, O(prefix) followed by O(worker_id).
  returned: always
  type: str
  sample: /infera/workers/10.0.0.7:30000
message:
  description:
    - What became of the record, in one line to print; empty for V(none). A line that begins with C(WARNING) says what
      etcd answered and a next step.
  returned: always
  type: str
  sample: >-
    node-1: stage worker: revoked etcd lease 7668682692136634651 of /infera/workers/10.0.0.7:30000, the record Infera's
    wrapper left when it died (its launch ended with exit 137): the router no longer sends requests to worker
    10.0.0.7:30000
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail
from ansible_collections.infera.serving.plugins.module_utils._worker_lease import ARGUMENT_SPEC, revoke_worker_lease


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run_or_fail(module, lambda params: revoke_worker_lease(params, module.check_mode),
                         context='%s: stage worker' % module.params['node'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
