# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.sweep_phase_noted: what a sweep notes of each phase for its record."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_phase import sweep_phase_noted


class FilterModule:
    """The collection's filters of the sweep role (plugin_utils/_sweep_phase.py)."""

    def filters(self):
        return {'sweep_phase_noted': sweep_phase_noted}
