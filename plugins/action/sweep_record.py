# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""infera.serving.sweep_record: judge one sweep point and rewrite its host's manifest.json on the controller.

The point's jsonl and the manifest live on the controller, so this runs no module on a host;
the work is in plugin_utils/_sweep_record.py.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_record import (
    MANIFEST,
    PLANNED_KEYS,
    RUN_KEYS,
    build_manifest,
    merged_points,
    judge_point,
    manifest_text,
    write_if_changed,
    write_manifest,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_progress import (
    point_figures,
    point_line,
    sweep_seconds,
    timing_lines,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_workers import point_workers

display = Display()

ARGUMENT_SPEC = {
    'dest': {'type': 'path', 'required': True},
    'run_id': {'type': 'str', 'required': True},
    'host': {'type': 'str', 'required': True},
    'simulated': {'type': 'bool', 'default': False},
    'image': {'type': 'str', 'default': ''},
    'image_digest': {'type': 'str', 'default': ''},
    'stack': {'type': 'dict', 'default': {}},
    'model': {'type': 'str', 'default': ''},
    'recipe': {'type': 'str', 'default': ''},
    'variants': {'type': 'dict', 'default': {}},
    'topology': {'type': 'dict', 'default': {}},
    'bench_args': {'type': 'dict', 'default': {}},
    'points': {'type': 'list', 'elements': 'dict', 'default': []},
    'conc': {'type': 'int', 'required': True},
    'node_conc': {'type': 'int'},
    'fleet': {'type': 'bool', 'default': False},
    'router_workers': {'type': 'list', 'elements': 'dict'},
    'workers': {'type': 'list', 'elements': 'dict'},
    'variant': {'type': 'str', 'required': True},
    'num_prompts': {'type': 'int', 'required': True},
    'warmup_requests': {'type': 'int', 'default': 0},
    'started': {'type': 'str', 'default': ''},
    'resumed': {'type': 'bool', 'default': False},
    'aborted': {'type': 'bool', 'default': False},
    'label': {'type': 'str'},
    'restarts': {'type': 'list', 'elements': 'dict', 'default': []},
    'files': {'type': 'dict', 'default': {}},
}


def unwritten_message(params, dest, error):
    """The failure when the manifest cannot be written (a full or read-only results disk): node, stage, cause, next step,
    what stays intact, and the disk's free space as its last line."""
    kept = ['c%s' % point.get('conc') for point in params['points'] if point.get('status') in ('ok', 'resumed')]
    try:
        stats = os.statvfs(dest)
        disk = '%s: %.1f MB free of %.1f MB' % (dest, stats.f_bavail * stats.f_frsize / 1e6, stats.f_blocks * stats.f_frsize / 1e6)
    except OSError as statvfs_error:
        disk = '%s: %s' % (dest, statvfs_error.strerror or statvfs_error)
    return ('%s: stage sweep c%s (record on the controller): %s. Cause: the controller cannot write the results folder '
            '(a full or read-only disk). The points recorded before stay intact in %s: %s. Next step: free space '
            '(df -h %s), then rerun with -e run_id=%s: valid points are kept and c%s runs again. Disk: %s'
            % (params['host'], params['conc'], error, os.path.join(dest, MANIFEST), ', '.join(kept) or 'none yet',
               dest, params['run_id'], params['conc'], disk))


def _current_text(path):
    try:
        with open(path, encoding='utf-8') as handle:
            return handle.read()
    except OSError:
        return ''


def _write_files(dest, files, check_mode):
    """Write every file of files (name -> text) into dest; whether any changed."""
    changed = False
    for name, text in sorted(files.items()):
        changed = write_if_changed(os.path.join(dest, name), text.encode('utf-8'), check_mode) or changed
    return changed


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _requires_connection = False

    @staticmethod
    def _write(params, dest, write):
        """write() (whether it changed a file), or the failure that names the full or read-only results disk."""
        try:
            return write()
        except SweepResultsError as error:
            raise AnsibleActionFail(unwritten_message(params, dest, error)) from None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # unused since ansible-core 2.x, kept for the signature

        _validation, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC,
                                                          mutually_exclusive=[('router_workers', 'workers')])
        dest = self._loader.path_dwim(params['dest'])
        path = os.path.join(dest, MANIFEST)
        for name, text in params['files'].items():
            if not isinstance(name, str) or os.path.basename(name) != name or name in ('', '.', '..', MANIFEST):
                raise AnsibleActionFail('files: %r is not a plain file name in the results folder (nor %s)' % (name, MANIFEST))
            if not isinstance(text, str):
                raise AnsibleActionFail('files.%s must be the file\'s text, got %s' % (name, type(text).__name__))
        argv = (params['variants'].get(params['variant']) or {}).get('argv')
        planned = dict({key: params.get(key) for key in PLANNED_KEYS},
                       workers=point_workers(params['router_workers'], params['workers'], params['model']))
        before = _current_text(path) if self._task.diff else None
        # The point's own files first (its bench script, exactly what ran; its jsonl, which the judge reads), then the
        # manifest that lists the point.
        changed = self._write(params, dest, lambda: _write_files(dest, params['files'], self._task.check_mode))
        point, record = judge_point(dest, planned, params['resumed'], params['aborted'], argv=argv)
        manifest = build_manifest({key: params[key] for key in RUN_KEYS}, merged_points(params['points'], point))
        changed = self._write(params, dest, lambda: write_manifest(dest, manifest, check_mode=self._task.check_mode)) or changed

        figures = point_figures(record, argv, len(point['workers'] or ()))
        line = point_line(params['host'], params['label'], point, figures, sweep_seconds(manifest['points']),
                          simulated=params['simulated'])
        display.display(line)
        result.update({'changed': changed, 'path': path, 'point': point, 'manifest': manifest, 'figures': figures,
                       'line': line, 'timings': timing_lines(params['host'], manifest['points'], params['restarts'])})
        if self._task.diff and changed:
            result['diff'] = {'before_header': path, 'after_header': path, 'before': before, 'after': manifest_text(manifest)}
        return result
