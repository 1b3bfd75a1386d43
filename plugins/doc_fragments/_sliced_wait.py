# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This doc fragment is PRIVATE to the infera.serving collection; it may change at any time.

from __future__ import annotations


class ModuleDocFragment:
    """The options of a wait that its action plugin runs in slices (module_utils/_options.py SLICE_OPTIONS)."""

    DOCUMENTATION = r"""
options:
  progress_interval:
    description:
      - Action plugin only. Seconds each slice waits on the node before the controller prints a progress line, 1 to 60.
    type: int
    default: 30
  reconnect_retries:
    description:
      - Action plugin only. How many times in a row a slice may be lost to a dropped connection (or an unreachable host)
        before the task gives up as unreachable. Each retry resumes the same wait where the last slice left it; what
        it waits for (the engine, the bench client) keeps running meanwhile.
    type: int
    default: 10
  reconnect_delay:
    description: Action plugin only. Seconds to sleep before retrying after a dropped connection.
    type: float
    default: 5
  simulated:
    description:
      - Action plugin only. The engine is the rehearsal platform's simulator (the container role's
        C(container_result.simulated)). Each progress line then says V([SIMULATED engine]) after the node's name, since
        its phases, times and counts are the simulator's, not a GPU's.
    type: bool
    default: false
"""
