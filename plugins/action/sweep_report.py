# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.sweep_report: rebuild a sweep's CSV, report and plot on the controller.

The results live on the controller (the sweep fetches every point there), so this runs no
module on a host; the work is in plugin_utils/_sweep_report.py.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_render import below_median_line, invalid_line
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_report import rebuild

ARGUMENT_SPEC = {
    'run_dir': {'type': 'path', 'required': True},
    'targets_file': {'type': 'path'},
    'below_target': {'type': 'str', 'default': 'fail', 'choices': ['fail', 'warn', 'ignore']},
}

_RETURNED = ('csv_path', 'report_path', 'plot_path', 'simulated', 'hosts', 'target_metric', 'rows', 'invalid', 'below',
             'untargeted', 'fleet', 'table', 'changed_files')


def _value(number, digits=1):
    return 'none' if number is None else '%.*f' % (digits, number)


def describe_miss(miss):
    """One point that misses its target, named so it can be found in the report."""
    where = '%s c%s %s' % (miss['host'], miss['conc'], miss['variant'])
    if miss['value'] is None:
        return '%s: target %s, %s' % (where, _value(miss['target']), miss['reason'] or 'no value')
    return '%s: %s against target %s (%sx)' % (where, _value(miss['value']), _value(miss['target']), _value(miss['ratio'], 2))


def below_target_message(summary):
    misses = summary['below']
    return '%d point(s) miss the %s target: %s. See %s' % (
        len(misses), summary['target_metric'], '; '.join(describe_miss(miss) for miss in misses), summary['report_path'])


def below_median_message(summary):
    """The nodes well below their fleet: the reason to sweep a fleet, so the play says it even when nothing fails."""
    fleet = summary['fleet']
    return '%d node point(s) more than %.0f %% below the fleet median%s: %s. See %s' % (
        len(fleet['below']), fleet['threshold'] * 100, ' (SIMULATED)' if fleet['simulated_hosts'] else '',
        '; '.join(below_median_line(entry) for entry in fleet['below']), summary['report_path'])


def invalid_message(summary):
    entries = summary['invalid']
    return '%d point(s) are invalid and left out of the CSV: %s' % (len(entries), '; '.join(invalid_line(entry) for entry in entries))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        # From where the user stands (the controller's working directory, where the sweep writes results/), so the
        # printed `-e run_dir=results/<run_id>` works as typed; the playbook's folder is an install path.
        run_dir = os.path.abspath(params['run_dir'])
        targets_file = self._loader.path_dwim(params['targets_file']) if params['targets_file'] else None
        try:
            summary = rebuild(run_dir, targets_file, check_mode=self._task.check_mode)
        except SweepResultsError as error:
            raise AnsibleActionFail('sweep report for %s: %s' % (run_dir, error)) from None

        result.update({key: summary[key] for key in _RETURNED})
        result['changed'] = summary['changed']
        warnings = result.setdefault('warnings', [])
        if summary['invalid']:
            warnings.append(invalid_message(summary))
        if summary['fleet'] and summary['fleet']['below']:
            warnings.append(below_median_message(summary))
        if summary['below'] and params['below_target'] == 'fail':
            result['failed'] = True
            result['msg'] = below_target_message(summary)
        elif summary['below'] and params['below_target'] == 'warn':
            warnings.append(below_target_message(summary))
        if not warnings:
            del result['warnings']
        return result
