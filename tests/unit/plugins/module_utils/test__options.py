# SPDX-License-Identifier: Apache-2.0
"""The waits' options: attributes, the node name, the URL check."""

from __future__ import annotations

import socket

import pytest

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._options import WaitOptions, check_url

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
