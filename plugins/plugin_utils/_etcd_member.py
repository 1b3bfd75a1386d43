# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The etcd member the etcd role runs (roles/etcd/tasks/present.yml): the addresses it advertises and is asked at,
whether its health wait ended healthy, and whether the etcd answering its client port is this member."""

from __future__ import annotations

# etcd listening on every address is asked on loopback.
_EVERY_ADDRESS = ('0.0.0.0', '::')
# The name etcd's member list gives a member that was added but has not started yet (it has no name then).
_UNSTARTED = '(not started)'


def etcd_addresses(advertise_host, node_address='', default_ipv4=None, listen_host='0.0.0.0', client_port=2379):
    """Where the member is reached:

    - advertise_host: `advertise_host` (etcd_advertise_host), else the node's default IPv4 address: `node_address`
      (infera_node_address, which the playbooks learn) or, in a play without it, the network facts' `default_ipv4`
      (ansible_default_ipv4); '' when there is none;
    - endpoint: the client URL it advertises (http://HOST:PORT), the one routers and workers are given;
    - local_url: where the node itself asks it, loopback when it listens on every address.
    """
    host = advertise_host or node_address or (default_ipv4 or {}).get('address') or ''
    local_host = '127.0.0.1' if listen_host in _EVERY_ADDRESS else listen_host
    return {'advertise_host': host, 'endpoint': 'http://%s:%s' % (host, client_port),
            'local_url': 'http://%s:%s' % (local_host, client_port)}


def _members(list_result):
    """The members of an ansible.builtin.uri POST to /v3/cluster/member/list (its json.members)."""
    return ((list_result or {}).get('json') or {}).get('members') or []


def etcd_member_names(list_result):
    """The member names the etcd answering lists, for the failure message."""
    return [member.get('name', _UNSTARTED) for member in _members(list_result)]


def etcd_member_listed(list_result, name, endpoint):
    """Whether the etcd answering is this member: it lists a member named `name` (etcd_name) advertising `endpoint`
    among its client URLs, not another etcd left on the port (such as the repro-etcd of Infera's own kit)."""
    return any(endpoint in (member.get('clientURLs') or []) for member in _members(list_result)
               if member.get('name') == name)
