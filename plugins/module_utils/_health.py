# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""HTTP probes of the engine and the router, shared by the readiness and bench-point waits."""

from __future__ import annotations

import json

from ansible.module_utils.urls import open_url


def _get(url, timeout, read_body):
    """(status code or None, body text or '', error text or None) for a GET of url; the body only when read_body.

    Any failure to answer (refused, reset, HTTP error, timeout) comes back as a status or None plus its text, never
    as an exception.
    """
    try:
        # The engine is local to the node: a proxy from the environment would only stand in its way.
        response = open_url(url, method='GET', timeout=timeout, use_proxy=False)
        try:
            return response.getcode(), response.read().decode('utf-8', 'replace') if read_body else '', None
        finally:
            response.close()
    except Exception as error:  # pylint: disable=broad-except
        return getattr(error, 'code', None), '', str(error)


def probe_health(url, timeout):
    """Return (status code or None, error text or None) for a GET of url, its body unread.

    Callers count any failure to answer as one failed check.
    """
    status, _body, error = _get(url, timeout, read_body=False)
    return status, error


def get_text(url, timeout):
    """Return (status code or None, body text or '', error text or None) for a GET of url; never raises."""
    return _get(url, timeout, read_body=True)


def wait_until(probe, done, timeout, poll, clock, sleep):
    """Call probe() until done(result) or timeout seconds have passed; return the last result."""
    deadline = clock() + timeout
    while True:
        result = probe()
        if done(result) or clock() >= deadline:
            return result
        sleep(poll)


def get_json(url, timeout):
    """Return (status code or None, parsed JSON body or None, error text or None) for a GET of url.

    Like probe_health, any failure comes back as values, never as an exception.
    """
    return request_json(url, timeout)


def router_workers(url, timeout):
    """(the worker objects Infera's router lists at url, its GET /v1/workers, None) or (None, why not).

    The one reading of the router's worker list: the readiness wait maps it to worker_ids, a
    sweep point records it whole.
    """
    status, body, error = get_json(url, timeout)
    if status == 200 and isinstance(body, dict) and isinstance(body.get('workers'), list):
        return [worker for worker in body['workers'] if isinstance(worker, dict)], None
    if status == 200:
        return None, 'GET %s answered HTTP 200 without a workers list: %r' % (url, body)
    return None, 'GET %s answered %s' % (url, error if error is not None else 'HTTP %s' % status)


def request_json(url, timeout, payload=None):
    """get_json for a GET, or for a POST of `payload` (JSON) when it is given."""
    data = None if payload is None else json.dumps(payload)
    headers = {} if payload is None else {'Content-Type': 'application/json'}
    try:
        response = open_url(url, method='GET' if payload is None else 'POST', data=data, headers=headers,
                            timeout=timeout, use_proxy=False)
        try:
            return response.getcode(), json.loads(response.read()), None
        finally:
            response.close()
    except ValueError as error:
        return None, None, 'not JSON: %s' % error
    except Exception as error:  # pylint: disable=broad-except
        return getattr(error, 'code', None), None, str(error)
