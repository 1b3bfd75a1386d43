# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.script_current, router_found and worker_found: what the roles decide from a container_status look."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._container_found import (
    router_found, script_current, worker_found)


class FilterModule:
    """The collection's filters over infera.serving.container_status results."""

    def filters(self):
        return {'script_current': script_current, 'router_found': router_found, 'worker_found': worker_found}
