# SPDX-License-Identifier: Apache-2.0
"""The check through Infera's routers (router_check), against real local HTTP servers shaped like
infera.server: GET /health {"status", "active_workers"}, GET /v1/workers, POST /v1/chat/completions."""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _router_check

from .health_server import LocalServer


class Router(LocalServer):
    """A router answering as infera.server does; `workers` and `reply` can change while it runs."""

    def __init__(self, workers=(), reply='1 + 1 = 2.', status='ok', error=0, listed_from=1, modes=None):
        super().__init__()
        self.workers = list(workers)
        self.modes = modes or {}  # worker id -> disagg_mode, as Infera lists a PD leg (none: no field, as before)
        self.listed_from = listed_from  # /v1/workers lists `workers` from this request on (before: none)
        self.listings = 0
        self.reply = reply
        self.status = status
        self.error = error  # added to every worked-out answer: 0 answers right
        self.requests = []
        self.url = 'http://' + self.address

    def answer(self, path):
        self.requests.append(('GET', path, None))
        if path == '/health':
            return 200, json.dumps({'status': self.status, 'active_workers': len(self.workers)}).encode()
        if path == '/v1/workers':
            self.listings += 1
            workers = self.workers if self.listings >= self.listed_from else []
            return 200, json.dumps({'workers': [dict({'worker_id': w, 'url': 'http://' + w},
                                                     **({'disagg_mode': self.modes[w]} if w in self.modes else {}))
                                                for w in workers]}).encode()
        return 404, b'{}'

    def answer_post(self, path, body):
        body = json.loads(body)
        self.requests.append(('POST', path, body))
        if self.reply is None:
            return 503, b'{"error": "no worker available"}'
        reply = self.reply
        worked = re.search(r'Work it out as ([0-9+*() -]+)\.', body['messages'][0]['content'])
        if worked:
            # Test data of digits and + - * only.
            reply = 'The answer is %d.' % (eval(worked.group(1)) + self.error)  # noqa: S307
        return 200, json.dumps({'choices': [{'message': {'role': 'assistant', 'content': reply}}]}).encode()


def _params(router, **overrides):
    params = dict(router=router, worker_id='10.0.0.1:30000', expected_workers=1, expected_hosts=None,
                  fleet_routers={}, fleet_timeout=1.0, timeout=1.0, poll=0.1, model='/models/dsv4',
                  prompt='1+1=?', max_tokens=32, completion_timeout=5, accuracy_questions=0, accuracy_threshold=0.8,
                  accuracy_max_tokens=512)
    params.update(overrides)
    return params


def test_a_healthy_router_listing_the_worker_passes_and_answers_one_completion():
    with Router(['10.0.0.1:30000']) as router:
        result = _router_check.run(_params(router.url))
    assert result['router_ok'] is True
    assert result['health'] == {'status': 'ok', 'active_workers': 1}
    assert result['workers'] == ['10.0.0.1:30000']
    assert result['completion'] == '1 + 1 = 2.'
    assert result['completion_error'] is None
    post = [request for request in router.requests if request[0] == 'POST']
    assert post == [('POST', '/v1/chat/completions', {
        'model': '/models/dsv4', 'messages': [{'role': 'user', 'content': '1+1=?'}], 'max_tokens': 32, 'temperature': 0})]


def test_a_pd_pair_passes_once_the_router_lists_a_worker_of_each_mode(clock):
    pair = {'10.0.0.1:30000': 'prefill', '10.0.0.2:30000': 'decode'}
    with Router(list(pair), modes=pair) as router:
        result = _router_check.run(_params(router.url, expected_workers=2, expected_modes={'prefill': 1, 'decode': 1}),
                                   clock.monotonic, clock.sleep)
    assert result['router_ok'] is True
    assert result['modes'] == pair
    assert result['modes_missing'] == []
    assert result['completion'] == '1 + 1 = 2.'


def test_a_pd_pair_without_its_decode_leg_fails_naming_the_mode_and_sends_no_completion(clock):
    # Two workers listed, as expected by count, but both prefill: the pair is not up.
    both = {'10.0.0.1:30000': 'prefill', '10.0.0.2:30000': 'prefill'}
    with Router(list(both), modes=both) as router:
        result = _router_check.run(_params(router.url, expected_workers=2, timeout=0.3,
                                           expected_modes={'prefill': 1, 'decode': 1}), clock.monotonic, clock.sleep)
        assert not [request for request in router.requests if request[0] == 'POST']
    assert result['router_ok'] is False
    assert result['modes_missing'] == ['decode: 0 of 1']


def test_a_worker_listed_without_a_mode_is_mixed():
    assert _router_check.worker_modes({'workers': [{'worker_id': 'a:1'}, {'worker_id': 'b:1', 'disagg_mode': 'decode'}]}) \
        == {'a:1': 'mixed', 'b:1': 'decode'}


def test_a_router_missing_the_worker_fails_after_its_timeout_and_sends_no_completion(clock):
    with Router(['10.0.0.9:30000']) as router:
        result = _router_check.run(_params(router.url, timeout=0.3), clock.monotonic, clock.sleep)
    assert result['router_ok'] is False
    assert result['workers'] == ['10.0.0.9:30000']
    assert result['completion'] is None
    assert not [request for request in router.requests if request[0] == 'POST']


def test_the_worker_listed_during_the_wait_passes_at_the_first_look_that_lists_it(clock):
    # The router lists the worker from its third /v1/workers answer on: the check keeps polling until
    # then and stops at that look (counted, not timed: a loaded machine cannot change the count).
    with Router(['10.0.0.1:30000'], listed_from=3) as router:
        result = _router_check.run(_params(router.url, timeout=30), clock.monotonic, clock.sleep)
    assert result['router_ok'] is True
    assert result['workers'] == ['10.0.0.1:30000']
    assert router.listings == 3
    assert sum(1 for request in router.requests if request[1] == '/health') == 3


def test_fewer_workers_than_expected_fail_even_when_the_worker_is_listed(clock):
    with Router(['10.0.0.1:30000']) as router:
        result = _router_check.run(_params(router.url, expected_workers=2, timeout=0.2), clock.monotonic, clock.sleep)
    assert result['router_ok'] is False
    assert result['expected_workers'] == 2


def test_an_unhealthy_status_fails(clock):
    with Router(['10.0.0.1:30000'], status='degraded') as router:
        result = _router_check.run(_params(router.url, timeout=0.2), clock.monotonic, clock.sleep)
    assert result['router_ok'] is False
    assert result['health']['status'] == 'degraded'


def test_a_router_that_does_not_answer_reports_its_error(clock):
    result = _router_check.run(_params('http://127.0.0.1:9', timeout=0.2), clock.monotonic, clock.sleep)
    assert result['router_ok'] is False
    assert result['health'] is None
    assert result['health_error']


def test_an_empty_or_refused_completion_is_reported_with_its_status():
    with Router(['10.0.0.1:30000'], reply='  ') as router:
        empty = _router_check.run(_params(router.url))
        router.reply = None
        refused = _router_check.run(_params(router.url))
    assert empty['completion'] == '' and empty['completion_status'] == 200 and empty['completion_error']
    assert refused['completion_status'] == 503 and refused['completion_error']


def test_other_routers_must_list_the_worker_and_a_silent_one_is_lost_and_not_counted(clock):
    with Router(['10.0.0.1:30000', '10.0.0.2:30000']) as own, Router(['10.0.0.2:30000']) as other:
        clock.after(0.2, lambda: other.workers.append('10.0.0.1:30000'))
        result = _router_check.run(_params(
            own.url, expected_hosts=['node-1', 'node-2', 'node-3'], fleet_timeout=5,
            fleet_routers={'node-2': other.url, 'node-3': 'http://127.0.0.1:9'}), clock.monotonic, clock.sleep)
    assert result['lost'] == ['node-3']
    assert result['unlisted'] == []
    assert [item['listed'] for item in result['fleet']] == [True, False]
    # Three nodes expected, one lost: the own router must list two.
    assert result['expected_workers'] == 2
    assert result['router_ok'] is True


def test_another_router_that_never_lists_the_worker_is_unlisted_with_what_it_lists(clock):
    with Router(['10.0.0.1:30000']) as own, Router(['10.0.0.2:30000']) as other:
        result = _router_check.run(_params(own.url, fleet_routers={'node-2': other.url}, fleet_timeout=0.3),
                                   clock.monotonic, clock.sleep)
    assert result['unlisted'] == ['node-2']
    assert result['fleet'][0]['workers'] == ['10.0.0.2:30000']
    assert result['fleet'][0]['status'] == 200


@pytest.mark.parametrize('body', [{'workers': None}, {'other': 1}, ['not', 'a', 'dict']])
def test_worker_ids_of_an_odd_body_are_empty(body):
    assert _router_check.worker_ids(body) == []


@pytest.mark.parametrize('error, passed', [(0, True), (7, False)])
def test_the_accuracy_smoke_asks_through_the_router_after_the_completion(error, passed):
    with Router(['10.0.0.1:30000'], error=error) as router:
        # A generous timeout: the 20 questions go at once, and a loaded machine answers them slowly.
        result = _router_check.run(_params(router.url, accuracy_questions=20, completion_timeout=60))
    # A failed request would count as a wrong answer and hide in the error=7 case: none may fail.
    assert result['accuracy']['errors'] == 0, result['accuracy']['wrong_text']
    assert result['accuracy']['questions'] == 20
    assert result['accuracy']['correct'] == (20 if passed else 0)
    assert result['accuracy']['passed'] is passed
    asked = [request for request in router.requests if request[0] == 'POST']
    assert len(asked) == 21
    assert all(request[2]['temperature'] == 0 and request[2]['max_tokens'] == 512 for request in asked[1:])


def test_no_accuracy_smoke_when_the_completion_failed():
    with Router(['10.0.0.1:30000'], reply=None) as router:
        result = _router_check.run(_params(router.url, accuracy_questions=20))
    assert result['accuracy'] is None
    assert len([request for request in router.requests if request[0] == 'POST']) == 1
