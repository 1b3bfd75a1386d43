# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.sweep_start: the sweep's start on one host, on the controller.

It decides whose router the host's points go through and where its results go, plans the points on the node that
runs them, and sets the sweep's facts (one `_sweep` dict, and the records of the run emptied). The decisions are
plugin_utils/_sweep_start.py's.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_start import ARGUMENT_SPEC, start_sweep


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        host = (task_vars or {}).get('inventory_hostname', 'localhost')
        try:
            sweep = start_sweep(params, host, self._loader.path_dwim)
        except (InferaServingError, KeyError, TypeError) as error:
            result.update(failed=True, msg='%s: stage sweep (plan on the controller): %s' % (host, error))
            return result
        # The records of this run start empty: a second sweep in the same play must not read the first one's.
        result.update(changed=False, sweep=sweep, ansible_facts={
            '_sweep': sweep, '_sweep_recorded': {}, '_sweep_noted': {'variants': {}, 'restarts': []}, '_sweep_aborted': ''})
        return result
