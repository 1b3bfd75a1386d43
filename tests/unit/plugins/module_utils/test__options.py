# SPDX-License-Identifier: Apache-2.0
"""The waits' options: attributes, the node name, the URL check."""

from __future__ import annotations

import socket

import pytest

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._options import WaitOptions, check_url, validate_action_options

SPEC = {'deadline': {'type': 'int'}, 'node': {'type': 'str'}, 'kill_match': {'type': 'str'}}


def test_options_are_attributes_and_an_unset_one_is_none():
    options = WaitOptions({'deadline': 60, 'node': 'node3'}, SPEC)
    assert options.deadline == 60
    assert options.kill_match is None
    assert options.node == 'node3'
    assert options.hostname == socket.gethostname()


def test_the_node_defaults_to_the_hostname():
    assert WaitOptions({'node': None}, SPEC).node == socket.gethostname()


def test_a_name_that_is_no_option_is_an_error():
    options = WaitOptions({'deadline': 60}, SPEC)
    with pytest.raises(AttributeError):
        getattr(options, 'dead_line')


def test_a_derived_value_wins_over_the_option():
    options = WaitOptions({'deadline': 60}, SPEC)
    options.deadline = 30
    assert options.deadline == 30


@pytest.mark.parametrize('url', [None, '', 'http://127.0.0.1:30000/health', 'https://router:8000/v1/workers'])
def test_check_url_accepts_unset_and_http_urls(url):
    assert check_url('health_url', url) is None


def test_check_url_names_the_option_and_the_value():
    with pytest.raises(WaitError) as error:
        check_url('engine_health_url', '127.0.0.1:30000/health')
    assert str(error.value) == "engine_health_url must be an http:// or https:// URL; got '127.0.0.1:30000/health'"


@pytest.mark.parametrize('overrides, expected', [
    ({'progress_interval': 0}, 'progress_interval must be between 1 and 60 seconds (a progress line at least once a '
                               'minute); got 0'),
    ({'progress_interval': 61}, 'progress_interval must be between 1 and 60 seconds (a progress line at least once a '
                                'minute); got 61'),
    ({'reconnect_retries': -1}, 'reconnect_retries must be 0 or more; got -1'),
    ({'reconnect_delay': -0.5}, 'reconnect_delay must be 0 or more seconds; got -0.5'),
])
def test_bad_action_options_are_named(overrides, expected):
    params = dict({'progress_interval': 30, 'reconnect_retries': 10, 'reconnect_delay': 5.0}, **overrides)
    with pytest.raises(WaitError) as error:
        validate_action_options(params)
    assert str(error.value) == expected


@pytest.mark.parametrize('params', [
    {'progress_interval': 1, 'reconnect_retries': 0, 'reconnect_delay': 0},
    {'progress_interval': 60, 'reconnect_retries': 10, 'reconnect_delay': 5.0},
])
def test_action_options_at_their_limits_are_accepted(params):
    assert validate_action_options(params) is None
