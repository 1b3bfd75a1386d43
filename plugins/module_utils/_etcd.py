# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""etcd's health as its GET /health answers it, asked again for a while when it answers unhealthy."""

from __future__ import annotations

import json
from urllib.error import HTTPError

from ansible.module_utils.urls import open_url

from ansible_collections.infera.serving.plugins.module_utils._health import wait_until

# How often an unhealthy etcd is asked again.
POLL = 0.5


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
