# SPDX-License-Identifier: Apache-2.0
"""The record a dead Infera wrapper may have left in etcd (_worker_lease.py, the worker_lease module, used by the
worker role's tasks/stale_record.yml and drain.yml): where etcd is, which lease is revoked and what the play says.
etcd's answers are given in place of the HTTP call: no network. Whether the record may be stale at all (the last
launch's exit, the wrapper) is plugin_utils/_container_found.py's, tested in test__container_found.py."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.module_utils._worker_lease import OUTCOMES, revoke_worker_lease

KEY = "/infera/workers/10.0.0.7:30000"
LEASE = "7668682692136634651"
RECORD = (200, {"kvs": [{"key": "x", "lease": LEASE}]}, None)
REFUSED = (-1, None, "<urlopen error [Errno 111] Connection refused>")


def settle(look, revoke=None, exit_code="137", endpoint="http://10.0.0.5:2379", check_mode=False):
    """revoke_worker_lease's result when etcd answers the look and the revoke so ((status, answer, error) each), and the
    requests it made."""
    requests = []

    def request(url, payload, timeout):
        requests.append((url, payload, timeout))
        return look if url.endswith("/v3/kv/range") else revoke

    params = {"etcd_endpoint": endpoint, "prefix": "/infera/workers/", "worker_id": "10.0.0.7:30000",
              "exit_code": exit_code, "node": "localhost"}
    result = revoke_worker_lease(params, check_mode, request)
    assert result["outcome"] in OUTCOMES
    return result, requests


def test_the_record_looked_up_is_the_worker_s_key_under_the_prefix():
    result, requests = settle((200, {}, None))
    assert result["key"] == KEY
    assert requests == [("http://10.0.0.5:2379/v3/kv/range", {"key": "L2luZmVyYS93b3JrZXJzLzEwLjAuMC43OjMwMDAw",
                                                              "keys_only": True}, 10)]


@pytest.mark.parametrize("endpoint, url", [
    # infera/common/discovery.py _normalize_endpoint: a URL as it is, host:port over http, a bare host on 2379.
    ("https://etcd.example.net:2379/", "https://etcd.example.net:2379"), ("10.0.0.5:2390", "http://10.0.0.5:2390"),
    ("etcd-1", "http://etcd-1:2379")])
def test_etcd_is_reached_as_infera_reads_the_endpoint(endpoint, url):
    result, requests = settle(RECORD, (200, {}, None), endpoint=endpoint)
    assert result["etcd_url"] == url
    assert [request[0] for request in requests] == [url + "/v3/kv/range", url + "/v3/lease/revoke"]


def test_a_revoked_lease_is_said_with_the_record_and_the_launch_s_exit():
    result, requests = settle(RECORD, (200, {}, None))
    assert result["lease"] == 7668682692136634651
    assert requests[1] == ("http://10.0.0.5:2379/v3/lease/revoke", {"ID": LEASE}, 10)
    assert (result["outcome"], result["changed"]) == ("revoked", True)
    assert result["message"] == (
        f"localhost: stage worker: revoked etcd lease 7668682692136634651 of {KEY}, the record Infera's wrapper left "
        "when it died (its launch ended with exit 137): the router no longer sends requests to worker 10.0.0.7:30000")


def test_a_lease_that_ran_out_before_the_revoke_is_said_so():
    result, _requests = settle(RECORD, (404, None, "HTTP Error 404: Not Found"))
    assert (result["outcome"], result["changed"]) == ("ran_out", False)
    assert result["message"].endswith("the record Infera's wrapper left when it died, ran out by itself")


def test_a_refused_revoke_warns_with_etcd_s_answer_and_the_revoke_to_run_by_hand():
    result, _requests = settle(RECORD, (503, None, "HTTP Error 503: Service Unavailable"))
    said = result["message"]
    assert (result["outcome"], result["changed"]) == ("refused", False)
    assert said.startswith("WARNING localhost: stage worker: could not revoke etcd lease 7668682692136634651")
    assert "Status code was 503" in said
    assert said.endswith(
        """Next step: curl -s -X POST http://10.0.0.5:2379/v3/lease/revoke -d '{"ID": "7668682692136634651"}'""")
    result, _requests = settle(RECORD, REFUSED, exit_code="")
    assert result["outcome"] == "refused"
    assert "(its launch never wrote an exit code): Request failed: <urlopen error" in result["message"]


def test_no_record_says_nothing_and_revokes_nothing():
    for look in ((200, {}, None), (200, {"kvs": []}, None), (200, None, None)):
        result, requests = settle(look)
        assert result["message"] == "" and result["lease"] == 0
        assert (result["outcome"], result["changed"], len(requests)) == ("none", False, 1)


def test_an_etcd_that_does_not_answer_warns_with_its_error_and_a_next_step():
    result, requests = settle(REFUSED, exit_code="")
    said = result["message"]
    assert (result["outcome"], result["lease"], result["changed"], len(requests)) == ("no_answer", 0, False, 1)
    assert said.startswith("WARNING localhost: stage worker: Infera's wrapper died without revoking its "
                           "etcd lease (its launch never wrote an exit code)")
    assert "Connection refused" in said
    assert said.endswith("Next step: curl -s http://10.0.0.5:2379/health")
    result, _requests = settle((503, None, "HTTP Error 503: Service Unavailable"))
    assert result["outcome"] == "no_answer"
    assert "(Status code was 503 and not [200]: HTTP Error 503: Service Unavailable)" in result["message"]


def test_check_mode_looks_but_does_not_revoke():
    result, requests = settle(RECORD, check_mode=True)
    assert [request[0] for request in requests] == ["http://10.0.0.5:2379/v3/kv/range"]
    assert (result["outcome"], result["lease"], result["changed"]) == ("check", 7668682692136634651, False)
    assert result["message"] == (
        f"localhost: stage worker: would revoke (check mode) etcd lease 7668682692136634651 of {KEY}, the record "
        "Infera's wrapper left when it died (its launch ended with exit 137): the router still sends requests to "
        "worker 10.0.0.7:30000")


@pytest.mark.parametrize("name", ["etcd_endpoint", "worker_id"])
def test_without_an_etcd_or_a_worker_there_is_nothing_to_look_up(name):
    params = {"etcd_endpoint": "http://10.0.0.5:2379", "prefix": "/infera/workers/", "worker_id": "10.0.0.7:30000",
              "exit_code": "", "node": "localhost", name: ""}
    with pytest.raises(InferaServingError, match=f"^{name} is empty"):
        revoke_worker_lease(params, False, lambda *args: pytest.fail("no request without an etcd and a worker"))
