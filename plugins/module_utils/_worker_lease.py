# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The etcd record a dead Infera wrapper left (the worker_lease module), from the node.

Infera's wrapper revokes its etcd lease when it stops. One that died (SIGKILL, the OOM killer, its container killed)
revoked nothing: its record, key <prefix><host>:<port>, lives on until the lease's TTL runs out (Infera's 30 s), and
the router keeps sending requests to a port whose engine is gone. No wrapper can hold that key when none runs, so the
lease found under it is revoked, as Infera's own stop would have done. The same look and revoke take a worker out of
the routers before the collection drains its engine.

Nothing here fails on etcd's answer: a look or revoke that fails comes back as the outcome and its message.
"""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.module_utils._etcd import etcd_url, lease_of, post_json, revoke

ARGUMENT_SPEC = dict(
    etcd_endpoint=dict(type='str', required=True),
    prefix=dict(type='str', required=True),
    worker_id=dict(type='str', required=True),
    exit_code=dict(type='str', default=''),
    node=dict(type='str', default='this node'),
)

# What became of the record: etcd did not answer the look; it holds none; check mode found one; its lease was
# revoked; the lease had run out between the look and the revoke; the revoke failed.
OUTCOMES = ('no_answer', 'none', 'check', 'revoked', 'ran_out', 'refused')

_MESSAGES = {
    'no_answer': ("WARNING {node}: stage worker: Infera's wrapper died without revoking its etcd lease ({exit_text}), "
                  "and etcd at {url} did not say whether its record {key} is still there ({look_msg}). If it is, the "
                  "router sends requests to worker {worker_id} until the lease runs out (Infera's TTL, 30 s). Next "
                  "step: curl -s {url}/health"),
    'none': '',
    'check': ("{node}: stage worker: would revoke (check mode) {record} ({exit_text}): the router still sends requests "
              "to worker {worker_id}"),
    'revoked': ("{node}: stage worker: revoked {record} ({exit_text}): the router no longer sends requests to worker "
                "{worker_id}"),
    'ran_out': '{node}: stage worker: {record}, ran out by itself',
    'refused': ("WARNING {node}: stage worker: could not revoke {record} ({exit_text}): {revoke_msg}. The router sends "
                "requests to worker {worker_id} until the lease runs out (Infera's TTL, 30 s). Next step: curl -s -X "
                "POST {url}/v3/lease/revoke -d '{{\"ID\": \"{lease}\"}}'"),
}


def message(outcome, node, url, key, worker_id, exit_code, lease=0, look_msg='', revoke_msg=''):
    """The one line the play prints of outcome ('' for none): the node, the record, how the launch ended and, for a
    failure, etcd's answer and a next step."""
    exit_text = ('its launch ended with exit %s' % exit_code) if exit_code else 'its launch never wrote an exit code'
    record = "etcd lease %s of %s, the record Infera's wrapper left when it died" % (lease, key)
    return _MESSAGES[outcome].format(node=node, url=url, key=key, worker_id=worker_id, exit_text=exit_text,
                                     record=record, lease=lease, look_msg=look_msg, revoke_msg=revoke_msg)


def revoke_worker_lease(params, check_mode, request=post_json):
    """Look up the record of params' worker in etcd and revoke its lease (not in check mode).

    Returns the module's result: outcome (one of OUTCOMES), lease (0 when none was found), etcd_url, key, message and
    changed (the lease was revoked). request(url, payload, timeout) -> (status, answer, error) is the POST to etcd.
    """
    for name in ('etcd_endpoint', 'worker_id'):
        if not params[name]:
            raise InferaServingError('%s is empty: there is no etcd record of the worker to look up' % name)
    url, key = etcd_url(params['etcd_endpoint']), params['prefix'] + params['worker_id']
    look = lease_of(url, key, request)
    answer = {'msg': ''}
    if look['status'] != 200:
        outcome = 'no_answer'
    elif look['lease'] == 0:
        outcome = 'none'
    elif check_mode:
        outcome = 'check'
    else:
        answer = revoke(url, look['lease'], request)
        outcome = {200: 'revoked', 404: 'ran_out'}.get(answer['status'], 'refused')
    text = message(outcome, params['node'], url, key, params['worker_id'], (params['exit_code'] or '').strip(),
                   look['lease'], look['msg'], answer['msg'])
    return {'outcome': outcome, 'lease': look['lease'], 'etcd_url': url, 'key': key, 'message': text,
            'changed': outcome == 'revoked'}
