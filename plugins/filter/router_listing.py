# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.router_lists: whether an Infera router's /v1/workers answer lists a worker."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._router_listing import router_lists


class FilterModule:
    """The collection's filters over the router's answers (plugin_utils/_router_listing.py)."""

    def filters(self):
        return {'router_lists': router_lists}
