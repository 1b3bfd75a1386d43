# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.sweep_phase_noted and sweep_search_problem: what a sweep notes of each phase for its record, and the
search's limits checked before any node is touched."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_phase import sweep_phase_noted
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_search import check_band, check_limits


def sweep_search_problem(limits, band):
    """What is wrong with the search's limits or band, in one line, or '' (for a check to print)."""
    try:
        check_band(band)
        check_limits(limits)
    except SweepResultsError as error:
        return str(error)
    return ''


class FilterModule:
    """The collection's filters of the sweep role (plugin_utils/_sweep_phase.py)."""

    def filters(self):
        return {'sweep_phase_noted': sweep_phase_noted, 'sweep_search_problem': sweep_search_problem}
