# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.sglang_variant: pick the variant and build the engine's command line, on the controller.

The choice is arithmetic on the recipe (data the controller already holds), so it runs here, in the play's
own process, instead of as a module on the node (a connection and a Python start there, ~0.4 s per
node). The logic, its argument spec and its errors are module_utils/_variant.py's, the same the module uses.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.infera.serving.plugins.module_utils._variant import ARGUMENT_SPEC, VariantError, select


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            selected = select(params)
        except VariantError as error:
            result.update(failed=True, msg=str(error), **error.details)
            return result
        warnings = selected.pop('warnings')
        result.update(changed=False, **selected)
        if warnings:
            result['warnings'] = warnings
        return result
