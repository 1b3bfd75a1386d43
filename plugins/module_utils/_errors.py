# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The collection's one error root, and the one path that turns it into fail_json.

Every error the collection raises on purpose derives from InferaServingError, on the node and on the controller
alike, so a module ends through run_or_fail and a caller catches one type.
"""

from __future__ import annotations


class InferaServingError(Exception):
    """The root: a message naming the object and the cause; ``details`` are the module's other return values."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.details = details


class WaitError(InferaServingError):
    """A failed wait or bad options of a wait."""


def run_or_fail(module, work, context=None):
    """Return work(module.params); on an InferaServingError end the module with fail_json and the error's details.

    context, when given, goes before the message ('<context>: <message>'), e.g. the node and the stage.
    """
    try:
        outcome = work(module.params)
    except InferaServingError as error:
        message = str(error) if context is None else '%s: %s' % (context, error)
        module.fail_json(msg=message, **error.details)
    return outcome
