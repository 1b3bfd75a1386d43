# SPDX-License-Identifier: Apache-2.0
"""Run a module's main() in-process: arguments in, exit_json/fail_json out as exceptions."""

from __future__ import annotations

import contextlib
import json
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core < 2.19
    patch_module_args = None


class AnsibleExitJson(Exception):
    """exit_json was called; args[0] is the result."""


class AnsibleFailJson(Exception):
    """fail_json was called; args[0] is the result."""


@contextlib.contextmanager
def set_module_args(args):
    """Expose args (plus Ansible's internal keys such as _ansible_check_mode) to AnsibleModule."""
    if patch_module_args is not None:
        with patch_module_args(args):
            yield
        return
    with mock.patch.object(basic, '_ANSIBLE_ARGS', to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))):
        yield


def _exit_json(self, **kwargs):
    kwargs.setdefault('changed', False)
    raise AnsibleExitJson(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs['failed'] = True
    kwargs['msg'] = msg
    raise AnsibleFailJson(kwargs)


def run_module(main, args, check_mode=False):
    """Return ('exit' | 'fail', result, warnings) for one call of main() with args."""
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with set_module_args(args), \
            mock.patch.object(basic.AnsibleModule, 'exit_json', _exit_json), \
            mock.patch.object(basic.AnsibleModule, 'fail_json', _fail_json), \
            mock.patch.object(basic.AnsibleModule, 'warn') as warn:
        try:
            main()
        except AnsibleExitJson as done:
            return 'exit', done.args[0], [call.args[0] for call in warn.call_args_list]
        except AnsibleFailJson as failed:
            return 'fail', failed.args[0], [call.args[0] for call in warn.call_args_list]
    raise AssertionError('main() returned without calling exit_json or fail_json')
