# SPDX-License-Identifier: Apache-2.0
"""The whole worker_lease module: arguments in, exit_json out, against a fake of etcd's HTTP gateway (no network)."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils import _etcd
from ansible_collections.infera.serving.plugins.modules import worker_lease

from ..module_utils.test__etcd import REFUSED, FakeEtcd, record
from .utils import run_module

ARGS = {"etcd_endpoint": "10.0.0.5:2379", "prefix": "/infera/workers/", "worker_id": "10.0.0.7:30000",
        "exit_code": "137", "node": "node-1"}


def test_revokes_the_lease_of_the_record_it_finds(monkeypatch):
    etcd = FakeEtcd({"v3/kv/range": record("7668682692136634651"), "v3/lease/revoke": (200, b"{}")})
    monkeypatch.setattr(_etcd, "open_url", etcd)
    kind, result, warnings = run_module(worker_lease.main, ARGS)
    assert kind == "exit" and not warnings
    assert etcd.paths() == ["v3/kv/range", "v3/lease/revoke"]
    assert {name: result[name] for name in ("changed", "outcome", "lease", "etcd_url", "key")} == {
        "changed": True, "outcome": "revoked", "lease": 7668682692136634651, "etcd_url": "http://10.0.0.5:2379",
        "key": "/infera/workers/10.0.0.7:30000"}
    assert result["message"].startswith("node-1: stage worker: revoked etcd lease 7668682692136634651")


def test_in_check_mode_it_looks_but_does_not_revoke(monkeypatch):
    etcd = FakeEtcd({"v3/kv/range": record("7668682692136634651")})
    monkeypatch.setattr(_etcd, "open_url", etcd)
    kind, result, _warnings = run_module(worker_lease.main, ARGS, check_mode=True)
    assert kind == "exit"
    assert etcd.paths() == ["v3/kv/range"]
    assert (result["changed"], result["outcome"], result["lease"]) == (False, "check", 7668682692136634651)
    assert result["message"].startswith("node-1: stage worker: would revoke (check mode) etcd lease")


def test_an_etcd_that_does_not_answer_is_a_result_not_a_module_failure(monkeypatch):
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/kv/range": REFUSED}))
    kind, result, _warnings = run_module(worker_lease.main, dict(ARGS, exit_code=""))
    assert kind == "exit"
    assert (result["changed"], result["outcome"], result["lease"]) == (False, "no_answer", 0)
    assert result["message"].startswith("WARNING node-1: stage worker: Infera's wrapper died without revoking")
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/kv/range": record("7"), "v3/lease/revoke": (503, b"")}))
    kind, result, _warnings = run_module(worker_lease.main, ARGS)
    assert (kind, result["changed"], result["outcome"]) == ("exit", False, "refused")


def test_no_record_is_no_change_and_says_nothing(monkeypatch):
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({"v3/kv/range": (200, b'{"header": {}}')}))
    kind, result, _warnings = run_module(worker_lease.main, ARGS)
    assert (kind, result["changed"], result["outcome"], result["lease"], result["message"]) == (
        "exit", False, "none", 0, "")


def test_an_empty_endpoint_fails_with_the_node_and_the_stage(monkeypatch):
    monkeypatch.setattr(_etcd, "open_url", FakeEtcd({}))
    kind, result, _warnings = run_module(worker_lease.main, dict(ARGS, etcd_endpoint=""))
    assert kind == "fail"
    assert result["msg"] == "node-1: stage worker: etcd_endpoint is empty: there is no etcd record of the worker to look up"
