# SPDX-License-Identifier: Apache-2.0
"""etcd as Infera reaches it (_etcd.py): the URL of an endpoint, a key's lease and a lease's revoke through etcd's
HTTP gateway. The HTTP call is a fake of open_url: no network."""

from __future__ import annotations

import base64
import io
import json
from urllib.error import HTTPError, URLError

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _etcd

KEY = "/infera/workers/10.0.0.7:30000"
REFUSED = URLError(ConnectionRefusedError(111, "Connection refused"))


class FakeEtcd:
    """Stands in for open_url: answers by path from `answers` ({path: (status, body) or an exception}) and keeps each
    request as (url, method, JSON body, headers, timeout, use_proxy)."""

    def __init__(self, answers):
        self.answers = answers
        self.requests = []

    def __call__(self, url, method=None, data=None, headers=None, timeout=None, use_proxy=True, **_others):
        self.requests.append((url, method, json.loads(data), headers, timeout, use_proxy))
        answer = self.answers[url.split('/', 3)[3]]
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        if status >= 400:
            raise HTTPError(url, status, {404: 'Not Found', 503: 'Service Unavailable'}[status], {},
                            io.BytesIO(body))
        return _Response(status, body)

    def paths(self):
        return [url.split('/', 3)[3] for url, *_rest in self.requests]


class _Response:
    def __init__(self, status, body):
        self.status, self.body = status, body

    def getcode(self):
        return self.status

    def read(self):
        return self.body

    def close(self):
        pass


def record(lease):
    """etcd's /v3/kv/range answer (keys only) with one record under lease, which etcd writes as a string."""
    return 200, json.dumps({"header": {"revision": "9"}, "kvs": [{"key": "eA==", "lease": lease}], "count": "1"}).encode()


@pytest.mark.parametrize("endpoint, url", [
    # infera/common/discovery.py _normalize_endpoint: a URL as it is, host:port over http, a bare host on 2379.
    ("https://etcd.example.net:2379/", "https://etcd.example.net:2379"),
    ("http://10.0.0.5:2379//", "http://10.0.0.5:2379"),
    ("http://10.0.0.5:2379", "http://10.0.0.5:2379"),
    ("10.0.0.5:2390", "http://10.0.0.5:2390"),
    ("etcd-1", "http://etcd-1:2379"),
])
def test_etcd_is_reached_as_infera_reads_the_endpoint(endpoint, url):
    assert _etcd.etcd_url(endpoint) == url


def test_a_lease_is_looked_up_by_the_base64_key_alone_without_a_proxy(monkeypatch):
    etcd = FakeEtcd({"v3/kv/range": record("7668682692136634651")})
    monkeypatch.setattr(_etcd, "open_url", etcd)
    assert _etcd.lease_of("http://10.0.0.5:2379", KEY) == {"lease": 7668682692136634651, "status": 200, "msg": "OK"}
    url, method, body, headers, timeout, use_proxy = etcd.requests[0]
    assert (url, method, timeout, use_proxy) == ("http://10.0.0.5:2379/v3/kv/range", "POST", 10, False)
    assert body == {"key": base64.b64encode(KEY.encode()).decode(), "keys_only": True}
    assert headers == {"Content-Type": "application/json"}


@pytest.mark.parametrize("answer", [(200, b'{"header": {"revision": "9"}}'), (200, b'{"kvs": []}'), (200, b"<html>"),
                                    (200, b'{"kvs": [{"key": "eA==", "lease": "x"}]}')])
def test_an_answer_without_a_record_s_lease_is_lease_0(monkeypatch, answer):
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/kv/range": answer}))
    assert _etcd.lease_of("http://10.0.0.5:2379", KEY) == {"lease": 0, "status": 200, "msg": "OK"}


def test_a_look_etcd_does_not_answer_says_why_as_ansible_s_uri_did(monkeypatch):
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/kv/range": REFUSED}))
    assert _etcd.lease_of("http://10.0.0.5:2379", KEY) == {
        "lease": 0, "status": -1, "msg": "Request failed: <urlopen error [Errno 111] Connection refused>"}
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/kv/range": (503, b"{}")}))
    assert _etcd.lease_of("http://10.0.0.5:2379", KEY) == {
        "lease": 0, "status": 503, "msg": "Status code was 503 and not [200]: HTTP Error 503: Service Unavailable"}


def test_a_lease_is_revoked_by_its_id_as_a_string(monkeypatch):
    etcd = FakeEtcd({"v3/lease/revoke": (200, b'{"header": {}}')})
    monkeypatch.setattr(_etcd, "open_url", etcd)
    assert _etcd.revoke("http://10.0.0.5:2379", 7668682692136634651) == {"status": 200, "msg": "OK"}
    url, method, body, _headers, timeout, use_proxy = etcd.requests[0]
    assert (url, method, body, timeout, use_proxy) == (
        "http://10.0.0.5:2379/v3/lease/revoke", "POST", {"ID": "7668682692136634651"}, 10, False)


def test_a_revoke_of_a_lease_that_ran_out_is_accepted_and_a_refused_one_says_why(monkeypatch):
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/lease/revoke": (404, b'{"error": "lease not found"}')}))
    assert _etcd.revoke("http://10.0.0.5:2379", 7) == {"status": 404, "msg": "OK"}
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/lease/revoke": (503, b"")}))
    assert _etcd.revoke("http://10.0.0.5:2379", 7) == {
        "status": 503, "msg": "Status code was 503 and not [200, 404]: HTTP Error 503: Service Unavailable"}
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/lease/revoke": REFUSED}))
    assert _etcd.revoke("http://10.0.0.5:2379", 7)["msg"] == (
        "Request failed: <urlopen error [Errno 111] Connection refused>")


def test_the_request_can_be_given_in_place_of_open_url():
    seen = []

    def request(url, payload, timeout):
        seen.append((url, payload, timeout))
        return 200, {"kvs": [{"lease": "42"}]}, None

    assert _etcd.lease_of("http://e:2379", "k", request)["lease"] == 42
    assert seen == [("http://e:2379/v3/kv/range", {"key": "aw==", "keys_only": True}, 10)]
