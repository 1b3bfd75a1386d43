# SPDX-License-Identifier: Apache-2.0
"""What deploy_mixed.yml decides and says about the fleet (plugin_utils/_fleet.py), from every node's facts."""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.plugin_utils._fleet import (fleet_routers, fleet_summary, fleet_now,
                                                                            rollout_failed_hosts, rollout_verdict)


def node(variant=None, restarted=False, before='nodp', serving=True, failed=False, verified=False, simulated=True,
         ready=None, address='10.0.0.1'):
    """A node's published facts, as the roles and the rolling play leave them."""
    facts = {'sglang_worker_status': {'serving': serving, 'variant': before}, 'infera_node_address': address,
             'container_result': {'simulated': simulated}}
    if variant:
        facts['sglang_worker_result'] = {'variant': variant, 'restarted': restarted,
                                         'phases': {'ready': {'since_start': ready}} if ready is not None else {}}
    if failed:
        facts['infera_rollout_failed'] = True
    if verified:
        facts['router_verify_result'] = {'workers': []}
    return facts


FLEET = {'n1': node('dp', restarted=True, ready=612.5, address='10.0.0.1'),
         'n2': node(failed=True, address='10.0.0.2'),
         'n3': node(before='nodp', address='10.0.0.3'),
         'n4': node('nodp', address='10.0.0.4')}


def test_the_failed_hosts_are_those_the_rescue_marked_in_play_order():
    assert rollout_failed_hosts(FLEET, ['n4', 'n3', 'n2', 'n1']) == ['n2']
    assert rollout_failed_hosts(FLEET, ['n1', 'gone']) == []


def test_the_fleet_now_says_each_node_s_state_at_the_failure():
    assert fleet_now(FLEET, ['n1', 'n2', 'n3', 'n4'], 'n3') == [
        'n1 dp (restarted in this run)', 'n2 FAILED earlier in this run, was serving nodp',
        'n3 FAILED here, was serving nodp', 'n4 nodp (unchanged)']
    assert fleet_now({'n5': {}}, ['n5'], 'n1') == ['n5 unknown (not reached)']


def test_the_rollout_stops_once_the_failed_nodes_exceed_the_fleet_s_budget():
    hosts = ['n1', 'n2', 'n3', 'n4']
    stop = rollout_verdict(FLEET, 'n2', hosts, hosts, 0)
    assert stop['over_budget'] and stop['verdict'] == (
        'the rollout stops at this node (1 of 4 node(s) failed, failure budget 0 % = 0.0)')
    go = rollout_verdict(FLEET, 'n2', hosts, hosts, 25)
    assert not go['over_budget'] and go['verdict'].startswith('the rollout goes on (1 of 4')
    assert go['fleet_now'][1] == 'n2 FAILED here, was serving nodp'


def test_a_restarted_worker_must_be_listed_by_the_other_routers_that_serve():
    facts = dict(FLEET, n3=node(serving=False, verified=True, address='10.0.0.3'),
                 n4=node(serving=False, address='10.0.0.4'))
    assert fleet_routers(facts, 'n1', ['n1', 'n2', 'n3', 'n4'], 'serving', True, 8000) == {
        'n3': 'http://10.0.0.3:8000'}
    assert fleet_routers(FLEET, 'n1', ['n1', 'n3', 'n4'], 'serving', 'True', 8000) == {
        'n3': 'http://10.0.0.3:8000', 'n4': 'http://10.0.0.4:8000'}
    assert fleet_routers(FLEET, 'n1', ['n1', 'n3'], 'serving', False, 8000) == {}
    assert fleet_routers(FLEET, 'n1', ['n1', 'n3'], 'isolated', True, 8000) == {}


def test_the_fleet_s_line_names_ready_nodes_the_slowest_start_and_each_variant():
    line = fleet_summary(FLEET, ['n1', 'n2', 'n3', 'n4'], ['n1', 'n3', 'n4'], 'serving')
    assert line == ('fleet: 3/4 nodes ready (serving topology) [SIMULATED engine]; slowest n1 612.5 s to ready; '
                    'variant per node: n1 dp, n2 FAILED, n3 FAILED, n4 nodp')


def test_a_fleet_with_nothing_restarted_on_real_engines_says_so():
    facts = {'n1': node('nodp', simulated=False), 'n2': node('nodp', simulated=False)}
    assert fleet_summary(facts, ['n2', 'n1'], ['n1', 'n2'], 'isolated') == (
        'fleet: 2/2 nodes ready (isolated topology); no engine restarted; variant per node: n1 nodp, n2 nodp')


def test_the_slowest_of_equal_starts_is_the_last_ready_node():
    facts = {'a': node('dp', ready=30), 'b': node('dp', ready=30.0)}
    assert 'slowest b 30.0 s to ready' in fleet_summary(facts, ['a', 'b'], ['a', 'b'], 'serving')
