# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.worker_run: the worker's variant plan as it runs on one node."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._worker_plan import worker_run


class FilterModule:
    """The collection's filters over the worker's plan (plugin_utils/_worker_plan.py)."""

    def filters(self):
        return {'worker_run': worker_run}
