# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""Controller side of infera.serving.sglang_ready: run the wait in slices and report progress.

A cold start takes about half an hour. One long module call would show nothing until it ends
and would die with the SSH connection, so the wait runs as short calls that share a state file
on the node. A progress line is printed between them, and a lost connection is retried.
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._readiness import (
    ACTION_ONLY_OPTIONS,
    ARGUMENT_SPEC,
    default_state_file,
    progress_line,
    validate_action_options,
)

display = Display()

_MODULE = 'infera.serving.sglang_ready'


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            validate_action_options(params)
        except WaitError as error:
            raise AnsibleActionFail(str(error))

        host = task_vars.get('inventory_hostname') or self._play_context.remote_addr or 'node'
        # Pass on only what the task set (the module applies its own defaults, with paths expanded on the node).
        module_args = {key: value for key, value in self._task.args.items() if key not in ACTION_ONLY_OPTIONS}
        module_args['node'] = params['node'] or host
        module_args['state_file'] = self._task.args.get('state_file') or default_state_file(self._task.args['log_path'])

        result.update(self._wait_in_slices(module_args, params, host, task_vars))
        return result

    def _wait_in_slices(self, module_args, params, host, task_vars):
        total = params['max_wait']
        begin = time.monotonic()
        lost_in_a_row = 0
        reported_bytes = 0
        while True:
            module_args['max_wait'] = self._slice_length(params['progress_interval'], total, begin)
            outcome = self._run_slice(module_args, task_vars)
            if outcome.get('unreachable'):
                lost_in_a_row += 1
                if lost_in_a_row > params['reconnect_retries']:
                    return self._gave_up(outcome, host, lost_in_a_row, module_args['state_file'])
                display.display('%s: connection lost (%s); retry %d/%d in %gs from %s, the engine keeps running'
                                % (host, _first_line(outcome.get('msg')), lost_in_a_row, params['reconnect_retries'],
                                   params['reconnect_delay'], module_args['state_file']))
                self._reconnect(params['reconnect_delay'])
                continue
            lost_in_a_row = 0
            if outcome.get('failed') or outcome.get('ready'):
                return outcome
            log_bytes = outcome.get('log_bytes') or 0
            display.display(progress_line(host, outcome, log_bytes - reported_bytes))
            reported_bytes = log_bytes
            if total and time.monotonic() - begin >= total:
                return outcome

    @staticmethod
    def _slice_length(interval, total, begin):
        if not total:
            return interval
        # At least one second, so the last slice still takes a real look.
        return max(min(interval, total - (time.monotonic() - begin)), 1)

    def _run_slice(self, module_args, task_vars):
        try:
            return self._execute_module(module_name=_MODULE, module_args=dict(module_args), task_vars=task_vars)
        except AnsibleConnectionFailure as error:
            return {'unreachable': True, 'msg': to_text(error)}

    def _reconnect(self, delay):
        time.sleep(delay)
        try:
            self._connection.reset()
        except AnsibleConnectionFailure:
            # The next slice reconnects by itself; a failed reset only means the link is still down.
            pass

    @staticmethod
    def _gave_up(outcome, host, attempts, state_file):
        return {
            'unreachable': True,
            'msg': ('lost the connection to %s %d times in a row while waiting for the SGLang engine (last error: %s). '
                    'The engine keeps starting on its own; run the task again to resume from %s.'
                    % (host, attempts, _first_line(outcome.get('msg')), state_file)),
        }


def _first_line(text):
    lines = to_text(text or 'no detail').strip().splitlines()
    return lines[0] if lines else 'no detail'
