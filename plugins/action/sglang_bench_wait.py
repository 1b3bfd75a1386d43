# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""Controller side of infera.serving.sglang_bench_wait: wait for a sweep point in slices and show its progress.

A point runs up to an hour and a half. The wait runs as short calls (plugin_utils/_sliced_wait.py
runs them); each returns what the next one needs (the start, failed health checks in a row, how far
the bench log was read), and one line per slice says where the point is.
"""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils._bench_wait import (
    ACTION_ONLY_OPTIONS,
    ARGUMENT_SPEC,
    progress_line,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sliced_wait import SlicedWaitAction


class ActionModule(SlicedWaitAction):
    MODULE = 'infera.serving.sglang_bench_wait'
    ARGUMENT_SPEC = ARGUMENT_SPEC
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    @classmethod
    def action_only_options(cls):
        return ACTION_ONLY_OPTIONS

    def _is_last(self, outcome):
        return bool(outcome.get('finished'))

    def _after_slice(self, outcome, module_args, params, host):
        module_args['resume'] = outcome['resume']
        self._show(host, progress_line(host, outcome, params['label'], params['estimate']))

    def _waiting_on(self, module_args):
        return 'point c%s' % module_args['conc'] if module_args.get('conc') is not None else 'the bench point'

    def _retry_note(self, module_args):
        return ', the bench client keeps running'

    def _resume_hint(self, module_args):
        return ('The bench client may still be running on the node; its exit file is %s. Check the node, then run '
                'the sweep again with the same run_id to resume.' % module_args['exit_file'])
