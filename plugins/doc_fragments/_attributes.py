# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This doc fragment is PRIVATE to the infera.serving collection; it may change at any time.

from __future__ import annotations


class ModuleDocFragment:
    """Attribute descriptions shared by the collection's modules."""

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and then reports what it would do without changing the target.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run in diff mode.
  idempotent:
    description:
      - Run twice in a row with the same arguments, the second run reports no change.
      - This assumes the system the module looks at has not changed in a relevant way in between.
"""

    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - The module changes nothing on the target, so check mode runs it exactly as a normal run.
  diff_mode:
    support: N/A
    details:
      - The module changes nothing on the target, so there is nothing to diff.
  idempotent:
    support: full
    details:
      - The module changes nothing on the target and always reports C(changed=false).
"""

    CONTROLLER = r"""
options: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
  async:
    description: Supports being used with the C(async) keyword.
    support: none
"""
