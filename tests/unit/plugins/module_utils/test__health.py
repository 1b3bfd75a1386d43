# SPDX-License-Identifier: Apache-2.0
"""HTTP to the engine and the router, against a real local server."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils import _health

from .health_server import HealthServer


def test_health_probe_ignores_a_proxy_set_in_the_environment(monkeypatch):
    """The engine's health is on loopback: a proxy in the environment must not intercept it."""
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    with HealthServer() as health:
        assert _health.probe_health(health.url, timeout=5) == (200, None)


def test_a_refused_probe_is_a_value_not_an_exception():
    status, error = _health.probe_health('http://127.0.0.1:9/health', timeout=2)
    assert status is None
    assert error
