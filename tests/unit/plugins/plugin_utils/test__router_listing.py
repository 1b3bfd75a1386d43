# SPDX-License-Identifier: Apache-2.0
"""Whether a router's /v1/workers answer lists a worker (plugin_utils/_router_listing.py)."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._router_listing import router_lists


def answer(*ids, status=200):
    """ansible.builtin.uri's result of GET /v1/workers (infera/server/app.py list_workers at v0.1.1)."""
    return {'status': status, 'json': {'workers': [{'worker_id': worker_id, 'status': 'active'} for worker_id in ids]}}


def test_a_router_lists_the_workers_it_answers_with():
    assert router_lists(answer('10.0.0.7:30000', '10.0.0.8:30000'), '10.0.0.8:30000')
    assert not router_lists(answer('10.0.0.7:30000'), '10.0.0.8:30000')
    assert not router_lists(answer(), '10.0.0.8:30000')


def test_a_router_that_does_not_answer_or_a_skipped_look_lists_nobody():
    assert not router_lists(answer('10.0.0.8:30000', status=503), '10.0.0.8:30000')
    assert not router_lists({'status': -1, 'msg': 'Connection refused'}, '10.0.0.8:30000')
    assert not router_lists({'skipped': True, 'changed': False}, '10.0.0.8:30000')
    assert not router_lists({'status': 200, 'json': {'workers': ['odd']}}, '10.0.0.8:30000')
