# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""Controller side of infera.serving.sglang_ready: run the wait in slices and report progress.

A cold start takes about half an hour. The wait runs as short calls that share a state file on
the node (plugin_utils/_sliced_wait.py runs them); a progress line is printed between them.
"""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils._readiness import (
    ARGUMENT_SPEC,
    default_state_file,
    progress_line,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sliced_wait import SlicedWaitAction


class ActionModule(SlicedWaitAction):
    MODULE = 'infera.serving.sglang_ready'
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def _module_args(self, params):
        self._reported_bytes = 0
        return {'state_file': self._task.args.get('state_file') or default_state_file(self._task.args['log_path'])}

    def _total(self, params):
        return params['max_wait']

    def _is_last(self, outcome):
        return bool(outcome.get('ready'))

    def _after_slice(self, outcome, module_args, params, host):
        log_bytes = outcome.get('log_bytes') or 0
        self._show(host, progress_line(host, outcome, log_bytes - self._reported_bytes))
        self._reported_bytes = log_bytes

    def _waiting_on(self, module_args):
        return 'the SGLang engine'

    def _retry_note(self, module_args):
        return ' from %s, the engine keeps running' % module_args['state_file']

    def _resume_hint(self, module_args):
        return 'The engine keeps starting on its own; run the task again to resume from %s.' % module_args['state_file']
