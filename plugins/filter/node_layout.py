# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.work_dirs, router_files, worker_files and sweep_results_dir: the node's work directory layout."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._node_layout import (
    router_files, sweep_results_dir, work_dirs, worker_files)


class FilterModule:
    """The collection's filters naming the files under a node's work directory (plugin_utils/_node_layout.py)."""

    def filters(self):
        return {'work_dirs': work_dirs, 'router_files': router_files, 'worker_files': worker_files,
                'sweep_results_dir': sweep_results_dir}
