# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The check through Infera's routers after a worker (re)start, in one call on the node.

Infera's router answers GET /health with {"status": "ok", "active_workers": N}, GET /v1/workers
with {"workers": [{"worker_id": "host:port", ...}]} and proxies POST /v1/chat/completions to a
worker. The check has three steps, each polled every `poll` seconds up to its own deadline:

1. fleet: every other router of the fleet lists the worker (`fleet_timeout`). A router that
   does not answer at all (refused, unreachable, timed out) is a lost node: it is reported in
   `lost` and left out of the expected worker count, not waited on.
2. this router: /health is ok with at least the expected active workers and /v1/workers lists
   that many, including the worker when one is named (`timeout`).
3. a temperature-0 chat completion through this router returns text (only when 2 passed).
4. the accuracy smoke (_accuracy): `accuracy_questions` gsm8k-style questions through this
   router, all at once (at most 32), the share answered right against `accuracy_threshold` (only when 3
   returned text).

Nothing here fails: the result says what each step saw and the caller words the failure.
"""

from __future__ import annotations

import json
import time

from ansible_collections.infera.serving.plugins.module_utils._accuracy import smoke
from ansible_collections.infera.serving.plugins.module_utils._health import get_json, request_json, wait_until


def _listed(body):
    workers = (body or {}).get('workers') if isinstance(body, dict) else None
    return [worker for worker in workers or [] if isinstance(worker, dict)]


def worker_ids(body):
    """The worker ids a router's GET /v1/workers body lists; an odd body lists none."""
    return [worker.get('worker_id') for worker in _listed(body)]


def worker_modes(body):
    """worker id -> its disagg_mode as the router lists it (Infera's /v1/workers: "prefill", "decode" or "mixed",
    infera/server/app.py list_workers at v0.1.1); a record without one is mixed."""
    return {worker.get('worker_id'): worker.get('disagg_mode') or 'mixed' for worker in _listed(body)}


def modes_missing(modes, expected_modes):
    """The modes of expected_modes ({mode: count}) this listing holds fewer workers of, as {mode: (listed, wanted)}."""
    listed = list(modes.values())
    return {mode: (listed.count(mode), count) for mode, count in sorted((expected_modes or {}).items())
            if listed.count(mode) < count}


def check_fleet(routers, worker_id, timeout, poll, request_timeout=5, clock=time.monotonic, sleep=time.sleep):
    """Wait until every router in `routers` (host -> base URL) lists worker_id or does not answer.

    Returns (per-router results sorted by host, lost hosts). A result has host, url, status (None
    when it did not answer), workers (the ids it lists), error and listed.
    """
    seen = {}

    def probe():
        for host in sorted(routers):
            if host in seen and (seen[host]['listed'] or seen[host]['status'] is None):
                continue
            url = routers[host].rstrip('/') + '/v1/workers'
            status, body, error = get_json(url, request_timeout)
            ids = worker_ids(body)
            seen[host] = {'host': host, 'url': routers[host], 'status': status, 'workers': ids, 'error': error,
                          'listed': worker_id in ids}
        return seen

    if routers:
        wait_until(probe, lambda result: all(item['listed'] or item['status'] is None for item in result.values()),
                   timeout, poll, clock, sleep)
    results = [seen[host] for host in sorted(seen)]
    return results, [item['host'] for item in results if item['status'] is None]


def check_router(router, expected_workers, worker_id='', timeout=10, poll=0.2, request_timeout=5,
                 clock=time.monotonic, sleep=time.sleep, expected_modes=None):
    """Wait until this router is healthy with expected_workers, lists worker_id (when given) and, for a PD pair, at
    least expected_modes' count of workers in each mode ({"prefill": 1, "decode": 1}).

    Returns a dict: health (the /health body or None), health_error, workers (ids), modes (id -> mode),
    modes_missing, workers_error and ok.
    """
    base = router.rstrip('/')
    state = {}

    def probe():
        status, health, health_error = get_json(base + '/health', request_timeout)
        ids_status, body, workers_error = get_json(base + '/v1/workers', request_timeout)
        state.update(health=health if isinstance(health, dict) else None,
                     health_error=health_error or (None if status == 200 else 'HTTP %s' % status),
                     workers=worker_ids(body), modes=worker_modes(body), workers_error=workers_error)
        state['modes_missing'] = modes_missing(state['modes'], expected_modes)
        health = state['health'] or {}
        try:
            active = int(health.get('active_workers') or 0)
        except (TypeError, ValueError):
            active = 0
        state['ok'] = (health.get('status') == 'ok' and active >= expected_workers
                       and len(state['workers']) >= expected_workers
                       and (not worker_id or worker_id in state['workers']) and not state['modes_missing'])
        return state

    return wait_until(probe, lambda result: result['ok'], timeout, poll, clock, sleep)


def chat(router, model, content, max_tokens=32, timeout=120):
    """One temperature-0 chat completion through the router: (status, reply text, error text)."""
    status, body, error = request_json(router.rstrip('/') + '/v1/chat/completions', timeout=timeout, payload={
        'model': model, 'messages': [{'role': 'user', 'content': content}],
        'max_tokens': max_tokens, 'temperature': 0})
    text = ''
    try:
        text = (body['choices'][0]['message']['content'] or '').strip()
    except (KeyError, IndexError, TypeError, AttributeError):
        pass
    if not text and error is None:
        error = 'the reply has no text in choices[0].message.content: %s' % json.dumps(body)[:300]
    return status, text, error


def run(params, clock=time.monotonic, sleep=time.sleep):
    """The whole check for the router_check module: fleet, this router, one completion, the accuracy smoke."""
    fleet, lost = check_fleet(params['fleet_routers'] or {}, params['worker_id'], params['fleet_timeout'],
                              params['poll'], clock=clock, sleep=sleep)
    expected = params['expected_workers']
    if params['expected_hosts'] is not None:
        expected = len(set(params['expected_hosts']) - set(lost))
    router = check_router(params['router'], expected, params['worker_id'], params['timeout'], params['poll'],
                          clock=clock, sleep=sleep, expected_modes=params.get('expected_modes'))
    result = dict(fleet=fleet, lost=lost, expected_workers=expected, health=router['health'],
                  health_error=router['health_error'], workers=router['workers'], modes=router['modes'],
                  modes_missing=['%s: %d of %d' % (mode, seen, wanted)
                                 for mode, (seen, wanted) in router['modes_missing'].items()],
                  workers_error=router['workers_error'], router_ok=router['ok'],
                  unlisted=[item['host'] for item in fleet if item['status'] is not None and not item['listed']],
                  completion=None, completion_status=None, completion_error=None, accuracy=None)
    if router['ok'] and params['model']:
        status, text, error = chat(params['router'], params['model'], params['prompt'], params['max_tokens'],
                                   params['completion_timeout'])
        result.update(completion=text, completion_status=status,
                      completion_error=error if (status != 200 or not text) else None)
        if result['completion_error'] is None and params['accuracy_questions'] > 0:
            def ask(prompt):
                code, reply, failure = chat(params['router'], params['model'], prompt, params['accuracy_max_tokens'],
                                            params['completion_timeout'])
                return reply, (failure or 'HTTP %s' % code) if code != 200 else None
            result['accuracy'] = smoke(ask, params['accuracy_questions'], params['accuracy_threshold'])
    return result
