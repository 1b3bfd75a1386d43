# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.dirs_missing, paths_missing and container_change: what the container role's check found."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._container_check import (
    container_change, dirs_missing, paths_missing)


class FilterModule:
    """The collection's filters over the container role's check (plugin_utils/_container_check.py)."""

    def filters(self):
        return {'dirs_missing': dirs_missing, 'paths_missing': paths_missing, 'container_change': container_change}
