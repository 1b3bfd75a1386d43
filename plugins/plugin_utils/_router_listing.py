# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Whether an Infera router's GET /v1/workers answer lists a worker. The router answers
{"workers": [{"worker_id": "host:port", ...}]} (infera/server/app.py list_workers, read at v0.1.1);
module_utils/_router_check.py owns reading that body."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils._router_check import worker_ids


def router_lists(response, worker_id):
    """True when `response` (ansible.builtin.uri's result of GET /v1/workers) is a 200 whose workers include
    `worker_id`; a router that does not answer lists nobody."""
    response = response or {}
    if response.get('status') != 200:
        return False
    return worker_id in worker_ids(response.get('json'))
