# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.require_hosts: refuse a node playbook whose group matches no host, or whose settings file is ignored.

Everything it reads is the controller's (the play's inventory variables and the inventory's folders), so it runs no
module on a host; the decision and its messages are plugin_utils/_require_hosts.py's.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.infera.serving.plugins.plugin_utils._require_hosts import hosts_matching, refusal

ARGUMENT_SPEC = {
    'pattern': {'type': 'str', 'required': True},
    'next_step': {'type': 'str', 'required': True},
}


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature
        task_vars = task_vars or {}

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        # The play runs on `localhost:all`, so its hosts are the inventory's within the --limit: what the node play
        # will run on. The `groups` variable ignores the --limit.
        play_hosts = set(task_vars.get('ansible_play_hosts_all') or ())
        matched = [host for host in hosts_matching(task_vars.get('groups') or {}, params['pattern'], self._loader)
                   if host in play_hosts]
        message = refusal(params['pattern'], params['next_step'], task_vars.get('ansible_inventory_sources') or [],
                          matched, task_vars.get('ansible_limit'))
        result.update(changed=False, hosts=matched)
        if message:
            result.update(failed=True, msg=message)
        return result
