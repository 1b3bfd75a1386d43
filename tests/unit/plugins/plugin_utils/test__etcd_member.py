# SPDX-License-Identifier: Apache-2.0
"""The etcd member the etcd role runs (plugin_utils/_etcd_member.py): where it is reached, whether its health wait
ended healthy, and whether the etcd answering its client port is this member."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils._etcd_member import (
    etcd_addresses, etcd_member_listed, etcd_member_names)

ENDPOINT = 'http://10.0.0.5:2379'


def member_list(*members):
    """What ansible.builtin.uri registers for a POST to /v3/cluster/member/list."""
    return {'status': 200, 'json': {'header': {'cluster_id': '1'}, 'members': list(members)}}


@pytest.mark.parametrize('given, node_address, default_ipv4, host', [
    ('10.1.0.5', '10.0.0.5', {'address': '10.0.0.6'}, '10.1.0.5'),
    ('', '10.0.0.5', {'address': '10.0.0.6'}, '10.0.0.5'),
    # A play of its own, without infera_node_address (or with it empty): the network facts' default address.
    ('', '', {'address': '10.0.0.6'}, '10.0.0.6'),
    ('', None, {'address': '10.0.0.6'}, '10.0.0.6'),
    # Before the facts are gathered, or a node without a default route: nothing to advertise.
    ('', '', {}, ''),
    ('', '', None, ''),
])
def test_the_advertised_address_is_the_one_given_else_the_node_s_default_ipv4(given, node_address, default_ipv4, host):
    addresses = etcd_addresses(given, node_address, default_ipv4, '0.0.0.0', 2379)
    assert addresses['advertise_host'] == host
    assert addresses['endpoint'] == 'http://%s:2379' % host


@pytest.mark.parametrize('listen_host, local_url', [
    ('0.0.0.0', 'http://127.0.0.1:2390'), ('::', 'http://127.0.0.1:2390'), ('10.0.0.5', 'http://10.0.0.5:2390')])
def test_the_node_asks_etcd_on_loopback_when_it_listens_everywhere(listen_host, local_url):
    addresses = etcd_addresses('10.0.0.5', '', {}, listen_host, '2390')
    assert addresses == {'advertise_host': '10.0.0.5', 'endpoint': 'http://10.0.0.5:2390', 'local_url': local_url}


def test_the_etcd_answering_is_this_member_only_by_its_name_and_its_advertised_url():
    own = {'name': 'node-1', 'clientURLs': [ENDPOINT, 'http://127.0.0.1:2379']}
    assert etcd_member_listed(member_list(own), 'node-1', ENDPOINT)
    # Infera's kit leaves its repro-etcd on the port: same URL, another name.
    assert not etcd_member_listed(member_list({'name': 'default', 'clientURLs': [ENDPOINT]}), 'node-1', ENDPOINT)
    # This name, another address (a data directory of another node's member).
    assert not etcd_member_listed(member_list({'name': 'node-1', 'clientURLs': ['http://10.0.0.9:2379']}),
                                  'node-1', ENDPOINT)
    # A member added but not started has neither.
    assert not etcd_member_listed(member_list({'ID': '1', 'peerURLs': []}), 'node-1', ENDPOINT)
    assert not etcd_member_listed(member_list({'name': 'node-1'}), 'node-1', ENDPOINT)
    # No answer yet (uri failed: no json), or nothing registered.
    assert not etcd_member_listed({'status': -1, 'msg': 'Connection refused'}, 'node-1', ENDPOINT)
    assert not etcd_member_listed({}, 'node-1', ENDPOINT)


def test_the_message_names_each_member_and_one_not_started_as_such():
    listed = member_list({'name': 'default', 'clientURLs': ['http://localhost:2379']}, {'ID': '2', 'peerURLs': []})
    assert etcd_member_names(listed) == ['default', '(not started)']
    assert etcd_member_names({}) == []
    assert etcd_member_names({'json': {}}) == []
