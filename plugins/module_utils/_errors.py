# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The one error the collection's waits raise, and the one path that turns it into fail_json."""

from __future__ import annotations


class WaitError(Exception):
    """A failed wait or bad options; ``details`` are the module's other return values."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.details = details


def run_or_fail(module, wait):
    """Return wait(module.params); on a WaitError end the module with fail_json and the error's details."""
    try:
        outcome = wait(module.params)
    except WaitError as error:
        module.fail_json(msg=str(error), **error.details)
    return outcome
