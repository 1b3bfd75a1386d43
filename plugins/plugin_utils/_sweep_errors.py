# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The one error type of the sweep's controller-side code, shared by every _sweep_* helper."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError


class SweepResultsError(InferaServingError):
    """A results folder, manifest or targets file that cannot be read or written; the message names the file and the cause."""
