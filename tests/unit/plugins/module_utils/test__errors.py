# SPDX-License-Identifier: Apache-2.0
"""The collection's one error root, every error class under it, and its one path to fail_json."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError, WaitError, run_or_fail

PLUGINS = Path(__file__).resolve().parents[4] / 'plugins'


def _base_name(base):
    return base.attr if isinstance(base, ast.Attribute) else getattr(base, 'id', '')


def error_classes():
    """(module name, class name, its bases' names) of every class in plugins/ whose base is an error or an exception."""
    found = []
    for path in sorted(PLUGINS.rglob('*.py')):
        module = '.'.join(('ansible_collections', 'infera', 'serving') + path.relative_to(PLUGINS.parent).with_suffix('').parts)
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            bases = [_base_name(base) for base in getattr(node, 'bases', ())]
            if isinstance(node, ast.ClassDef) and any(base.endswith(('Error', 'Exception')) for base in bases):
                found.append((module, node.name, bases))
    return found


def test_the_scan_finds_the_error_classes():
    names = {name for _module, name, _bases in error_classes()}
    assert {'InferaServingError', 'WaitError', 'PreflightError', 'ContainerStatusError', 'VariantError', 'StackError',
            'SweepResultsError'} <= names


@pytest.mark.parametrize('module, name', [(module, name) for module, name, _bases in error_classes()])
def test_every_error_class_derives_from_the_one_root(module, name):
    assert issubclass(getattr(importlib.import_module(module), name), InferaServingError)


def test_exactly_one_class_derives_directly_from_exception():
    direct = [(module, name) for module, name, bases in error_classes() if 'Exception' in bases]
    assert direct == [('ansible_collections.infera.serving.plugins.module_utils._errors', 'InferaServingError')]


class Failed(Exception):
    """fail_json was called."""


class FakeModule:
    params = {'deadline': 5}

    @staticmethod
    def fail_json(**result):
        raise Failed(result)


def test_the_error_carries_its_message_and_the_other_return_values():
    error = WaitError('worker died during point c64 on node3', aborted=True, killed_pids=[41])
    assert str(error) == 'worker died during point c64 on node3'
    assert error.details == {'aborted': True, 'killed_pids': [41]}


def test_run_or_fail_returns_what_the_wait_returns():
    assert run_or_fail(FakeModule(), lambda params: ('done', params['deadline'])) == ('done', 5)


def test_run_or_fail_turns_the_error_into_fail_json_with_its_details():
    def wait(params):
        raise WaitError('deadline must be more than 0 seconds; got 0', ready=False)

    with pytest.raises(Failed) as failed:
        run_or_fail(FakeModule(), wait)
    assert failed.value.args[0] == {'msg': 'deadline must be more than 0 seconds; got 0', 'ready': False}


def test_run_or_fail_puts_the_context_before_the_message():
    def probe(params):
        raise InferaServingError('the stack probe printed no JSON')

    with pytest.raises(Failed) as failed:
        run_or_fail(FakeModule(), probe, context='node3: stage stack')
    assert failed.value.args[0] == {'msg': 'node3: stage stack: the stack probe printed no JSON'}


def test_other_exceptions_are_not_swallowed():
    def wait(params):
        raise KeyError('log_path')

    with pytest.raises(KeyError):
        run_or_fail(FakeModule(), wait)
