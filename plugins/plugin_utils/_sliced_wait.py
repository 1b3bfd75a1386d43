# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Run a waiting module in short slices from the controller, print one line per slice, retry a lost connection.

A cold start takes half an hour and a sweep point more than an hour. One long module call would
show nothing until it ends and would die with the SSH connection, so the waits run as short calls
(slices). Each action says what carries over from one slice to the next, when a slice's answer is
the last one, and what its line says; the loop, the reconnects and the give-up are here, once.
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._options import SLICE_OPTIONS, validate_action_options

display = Display()


class SlicedWaitAction(ActionBase):
    """An action that runs MODULE in slices of at most progress_interval seconds.

    A subclass sets MODULE and ARGUMENT_SPEC and implements _module_args, _is_last, _after_slice
    (which prints the slice's line and carries state into the next call's arguments), _waiting_on,
    _retry_note and _resume_hint.
    """

    TRANSFERS_FILES = False
    MODULE = None
    ARGUMENT_SPEC = {}
    # The controller's clock and sleep; the unit tests set a fake clock's instead.
    _clock = staticmethod(time.monotonic)
    _sleep = staticmethod(time.sleep)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        try:
            validate_action_options(params)
        except WaitError as error:
            raise AnsibleActionFail(str(error))

        host = task_vars.get('inventory_hostname') or self._play_context.remote_addr or 'node'
        self._simulated = params['simulated']
        # Pass on only what the task set (the module applies its own defaults, with paths expanded on the node).
        module_args = {key: value for key, value in self._task.args.items() if key not in self.action_only_options()}
        module_args['node'] = params['node'] or host
        module_args.update(self._module_args(params))

        result.update(self._wait_in_slices(module_args, params, host, task_vars))
        return result

    @classmethod
    def action_only_options(cls):
        return tuple(SLICE_OPTIONS)

    # ---------------------------------------------------------------- what each wait says

    def _module_args(self, params):
        """Arguments the action adds for the module (for example a state file); {} by default."""
        return {}

    def _total(self, params):
        """Seconds the whole wait may take on the controller's clock; 0 for no limit (the module keeps its own)."""
        return 0

    def _is_last(self, outcome):
        raise NotImplementedError

    def _after_slice(self, outcome, module_args, params, host):
        raise NotImplementedError

    def _waiting_on(self, module_args):
        """What the wait is for, in messages: 'the SGLang engine'."""
        raise NotImplementedError

    def _retry_note(self, module_args):
        """The rest of a connection-lost line: where the wait resumes from, and that the node carries on."""
        raise NotImplementedError

    def _resume_hint(self, module_args):
        """What goes on while the connection is down and how to pick up again, for the give-up message."""
        raise NotImplementedError

    def _show(self, host, line):
        """Print a slice's progress line; an engine that is the rehearsal platform's simulator says so first."""
        display.display(simulated_line(host, line) if self._simulated else line)

    # ---------------------------------------------------------------- the loop

    def _wait_in_slices(self, module_args, params, host, task_vars):
        total = self._total(params)
        begin = self._clock()
        lost_in_a_row = 0
        while True:
            module_args['max_wait'] = self._slice_length(params['progress_interval'], total, self._clock() - begin)
            outcome = self._run_slice(module_args, task_vars)
            if outcome.get('unreachable'):
                lost_in_a_row += 1
                if lost_in_a_row > params['reconnect_retries']:
                    return self._gave_up(outcome, host, lost_in_a_row, module_args)
                display.display('%s: connection lost (%s); retry %d/%d in %gs%s'
                                % (host, _first_line(outcome.get('msg')), lost_in_a_row, params['reconnect_retries'],
                                   params['reconnect_delay'], self._retry_note(module_args)))
                self._reconnect(params['reconnect_delay'])
                continue
            lost_in_a_row = 0
            if outcome.get('failed') or self._is_last(outcome):
                return outcome
            self._after_slice(outcome, module_args, params, host)
            if total and self._clock() - begin >= total:
                return outcome

    @staticmethod
    def _slice_length(interval, total, elapsed):
        if not total:
            return interval
        # At least one second, so the last slice still takes a real look.
        return max(min(interval, total - elapsed), 1)

    def _run_slice(self, module_args, task_vars):
        try:
            return self._execute_module(module_name=self.MODULE, module_args=dict(module_args), task_vars=task_vars)
        except AnsibleConnectionFailure as error:
            return {'unreachable': True, 'msg': to_text(error)}

    def _reconnect(self, delay):
        self._sleep(delay)
        try:
            self._connection.reset()
        except AnsibleConnectionFailure:
            # The next slice reconnects by itself; a failed reset only means the link is still down.
            pass

    def _gave_up(self, outcome, host, attempts, module_args):
        return {
            'unreachable': True,
            'msg': ('lost the connection to %s %d times in a row while waiting for %s (last error: %s). %s'
                    % (host, attempts, self._waiting_on(module_args), _first_line(outcome.get('msg')),
                       self._resume_hint(module_args))),
        }


def simulated_line(host, line):
    """line ('<host>: ...') with [SIMULATED engine] after the host: its phases, times and counts are the simulator's."""
    prefix = '%s: ' % host
    if line.startswith(prefix):
        return prefix + '[SIMULATED engine] ' + line[len(prefix):]
    return '[SIMULATED engine] ' + line


def _first_line(text):
    lines = to_text(text or 'no detail').strip().splitlines()
    return lines[0] if lines else 'no detail'
