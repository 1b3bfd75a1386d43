# SPDX-License-Identifier: Apache-2.0
"""The waits' one error type and its one path to fail_json."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError, run_or_fail


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


def test_other_exceptions_are_not_swallowed():
    def wait(params):
        raise KeyError('log_path')

    with pytest.raises(KeyError):
        run_or_fail(FakeModule(), wait)
