# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""etcd as Infera reaches it: the URL of an endpoint as Infera reads it; its health as its GET /health answers it,
asked again for a while when it answers unhealthy; a key's lease and the revoke of a lease, through etcd's HTTP
gateway (as Infera's registration uses it)."""

from __future__ import annotations

import base64
import json
import re
from urllib.error import HTTPError

from ansible.module_utils.urls import open_url

from ansible_collections.infera.serving.plugins.module_utils._health import wait_until

# How often an unhealthy etcd is asked again.
POLL = 0.5
# The port of an endpoint given as a bare host, and the seconds a lease look or revoke may take.
DEFAULT_PORT = 2379
TIMEOUT = 10


def etcd_url(endpoint):
    """The base URL of etcd at endpoint, as Infera reads an endpoint (infera/common/discovery.py _normalize_endpoint):
    an http(s) URL as it is, less its trailing slashes; host:port over http; a bare host over http on port 2379."""
    if re.match(r'https?://', endpoint):
        return endpoint.rstrip('/')
    return 'http://%s%s' % (endpoint, '' if ':' in endpoint else ':%d' % DEFAULT_PORT)


def post_json(url, payload, timeout=TIMEOUT):
    """(status, answer, error) for a POST of payload (JSON) to url. status is the HTTP status, -1 when nothing
    answered; answer the parsed JSON of a 2xx answer (None when it is not JSON); error the failure's text, else None.
    Never raises."""
    try:
        # etcd is on the cluster network: a proxy from the environment would only stand in the way.
        response = open_url(url, method='POST', data=json.dumps(payload), headers={'Content-Type': 'application/json'},
                            timeout=timeout, use_proxy=False)
        try:
            status, body = response.getcode(), response.read()
        finally:
            response.close()
    except HTTPError as error:
        return error.code, None, str(error)
    except Exception as error:  # pylint: disable=broad-except
        return -1, None, str(error)
    try:
        return status, json.loads(body), None
    except ValueError:
        return status, None, None


def _said(status, error, accepted):
    """What ansible.builtin.uri says of an answer (its msg), which the roles' messages quoted before this module."""
    if status == -1:
        return 'Request failed: %s' % error
    if status not in accepted:
        return 'Status code was %s and not %s: %s' % (status, list(accepted), error)
    return 'OK'


def lease_of(url, key, request=post_json):
    """The lease of key's record in etcd at url (its POST /v3/kv/range, keys only): a dict of lease (0 when etcd holds
    no record under key, or did not answer 200), status (-1 when nothing answered) and msg (what the answer was)."""
    payload = {'key': base64.b64encode(key.encode('utf-8')).decode('ascii'), 'keys_only': True}
    status, answer, error = request(url + '/v3/kv/range', payload, TIMEOUT)
    lease = 0
    if status == 200:
        records = answer.get('kvs') if isinstance(answer, dict) else None
        record = records[0] if isinstance(records, list) and records and isinstance(records[0], dict) else {}
        try:
            lease = int(record.get('lease', 0))
        except (TypeError, ValueError):
            lease = 0
    return {'lease': lease, 'status': status, 'msg': _said(status, error, (200,))}


def revoke(url, lease, request=post_json):
    """Revoke lease in etcd at url (its POST /v3/lease/revoke); etcd then drops every record under it. A dict of
    status (200: revoked; 404: the lease had run out already; -1: nothing answered) and msg."""
    # The gateway reads an int64 as a JSON string, as etcd writes it in /v3/kv/range.
    status, _answer, error = request(url + '/v3/lease/revoke', {'ID': str(lease)}, TIMEOUT)
    return {'status': status, 'msg': _said(status, error, (200, 404))}


def ask_health(url, timeout):
    """etcd's answer to GET url (its /health): status, body, the parsed answer and whether it is healthy; error is the
    exception when etcd did not answer at all, else None."""
    try:
        # etcd is on the cluster network: a proxy from the environment would only stand in the way.
        response = open_url(url, method='GET', timeout=timeout, use_proxy=False)
        try:
            status, body = response.getcode(), response.read()
        finally:
            response.close()
    except HTTPError as error:
        # An unhealthy etcd answers 503 with its reason in the body.
        status, body = error.code, error.read() if error.fp else b''
    except Exception as error:  # pylint: disable=broad-except
        return {'status': None, 'body': b'', 'answer': None, 'healthy': False, 'error': error}
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    healthy = status == 200 and isinstance(answer, dict) and answer.get('health') == 'true'
    return {'status': status, 'body': body, 'answer': answer, 'healthy': healthy, 'error': None}


def ask_until_healthy(url, timeout, window, clock, sleep):
    """(the last ask_health answer, how many times etcd was asked).

    A healthy answer ends the asking at once, and so does none at all. An unhealthy one is asked again every POLL
    seconds while the next ask still falls within window seconds: a member whose disk is slow to sync answers 503 for
    a moment (its health read times out after 1 s), and a fleet rollout should not stop on that moment.
    """
    answers = []

    def ask():
        answers.append(ask_health(url, timeout))
        return answers[-1]

    answer = wait_until(ask, lambda answer: answer['error'] is not None or answer['healthy'], window - POLL, POLL,
                        clock, sleep)
    return answer, len(answers)
