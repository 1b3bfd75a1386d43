# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.worker_plan: the worker role's variant plan, made or kept, on the controller.

Everything it reads is the play's (the recipe file, the role's settings, the plan published earlier in the run), so it
runs no module on a host. The decisions are plugin_utils/_worker_plan.py's, the selection module_utils/_variant.py's.
"""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.plugin_utils._worker_plan import ARGUMENT_SPEC, make_plan, missing_recipe_file

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _requires_connection = False

    def _load_recipe(self, path):
        """The recipe file as include_vars reads it: YAML whose values may be templates of the play's variables."""
        if not path or not os.path.isfile(path):
            raise missing_recipe_file(path)
        try:
            data = self._loader.load_from_file(path, trusted_as_template=True)
        except TypeError:  # ansible-core before 2.19 marks no trust: every loaded string may be a template
            data = self._loader.load_from_file(path)
        return self._templar.template(data)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            made = make_plan(params, (task_vars or {}).get('inventory_hostname', 'localhost'), self._load_recipe)
        except InferaServingError as error:
            result.update(failed=True, msg=str(error), **error.details)
            return result
        warnings = made.pop('warnings')
        if made['warning']:
            display.display(made['warning'])
        result.update(changed=False, **made)
        if made['made']:
            # The run's published plan, which other roles and playbooks read. A kept plan is published already, and
            # a phase of it does not replace it: the role runs the plan this returns.
            result['ansible_facts'] = {'sglang_worker_plan': made['plan']}
        if not made['made']:
            # As a skipped step the play shows it: the plan made earlier in the run serves, nothing was selected.
            result.update(skipped=True, skip_reason="the plan made earlier in the run serves these inputs")
        if warnings:
            result['warnings'] = warnings
        return result
