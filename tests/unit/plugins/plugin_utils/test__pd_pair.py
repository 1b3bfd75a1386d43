# SPDX-License-Identifier: Apache-2.0
"""A PD pair's legs from the inventory's groups (plugin_utils/_pd_pair.py)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.plugin_utils._pd_pair import (
    bootstrap_port, pd_leg, pd_pair, pd_ports, pd_problem, pd_reach, pd_unreached, pd_vram_held, pd_watch)

GROUPS = {'infera_prefill': ['p-2', 'p-1'], 'infera_decode': ['d-1'], 'mi355x': ['p-1', 'p-2', 'd-1']}


def test_the_prefill_group_s_first_node_runs_the_router_and_each_node_one_leg():
    pair = pd_pair(GROUPS, 'infera_prefill', 'infera_decode')
    assert pair == {'prefill': ['p-1', 'p-2'], 'decode': ['d-1'], 'hosts': ['d-1', 'p-1', 'p-2'], 'router': 'p-1',
                    'modes': {'prefill': 2, 'decode': 1}, 'label': '2P1D'}
    assert [pd_leg(pair, node) for node in ('p-1', 'p-2', 'd-1')] == ['prefill', 'prefill', 'decode']
    with pytest.raises(InferaServingError, match='x is in neither PD group'):
        pd_leg(pair, 'x')


@pytest.mark.parametrize('groups, message', [
    ({'infera_decode': ['d-1']}, '^the inventory group infera_prefill \\(the prefill nodes, infera_prefill_group\\) has no '
                                 'host: put one node in each of infera_prefill and infera_decode'),
    ({'infera_prefill': ['p-1'], 'infera_decode': []}, '^the inventory group infera_decode \\(the decode nodes'),
    ({'infera_prefill': ['n-1', 'p-1'], 'infera_decode': ['n-1']},
     '^n-1 is in both infera_prefill and infera_decode: a node runs one leg'),
])
def test_a_missing_group_or_a_node_in_both_is_refused_in_one_line(groups, message):
    with pytest.raises(InferaServingError, match=message):
        pd_pair(groups, 'infera_prefill', 'infera_decode')
    assert pd_problem(groups, 'infera_prefill', 'infera_decode') == str(
        pytest.raises(InferaServingError, pd_pair, groups, 'infera_prefill', 'infera_decode').value)
    assert pd_problem(GROUPS, 'infera_prefill', 'infera_decode') == ''


def plan(*argv):
    return {'argv': list(argv)}


def test_the_bootstrap_port_is_the_prefill_leg_s():
    assert bootstrap_port(plan('--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', '9001')) == 9001
    # SGLang's default when the argv names none.
    assert bootstrap_port(plan('--disaggregation-mode', 'prefill')) == 8998
    assert bootstrap_port(plan('--disaggregation-mode', 'decode', '--disaggregation-bootstrap-port', '9001')) is None
    assert bootstrap_port(plan('--tp-size', '8')) is None
    assert bootstrap_port({}) is None


def test_each_node_checks_the_ports_it_will_listen_on():
    pair = pd_pair(GROUPS, 'infera_prefill', 'infera_decode')
    prefill = plan('--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', 8998)
    decode = plan('--disaggregation-mode', 'decode')
    assert pd_ports(prefill, 'p-1', pair, 8000, 30000) == [30000, 8000, 8998]
    assert pd_ports(prefill, 'p-2', pair, 8000, 30000) == [30000, 8998]
    assert pd_ports(decode, 'd-1', pair, '8000', '30000') == [30000]


PREFILL_PLAN = {'argv': ['--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', '9001']}
HOSTVARS = {'p-1': {'infera_node_address': '10.1.0.1', 'sglang_worker_plan': PREFILL_PLAN},
            'p-2': {'infera_node_address': '10.1.0.2', 'sglang_worker_plan': {'argv': ['--disaggregation-mode', 'prefill']}},
            'd-1': {'infera_node_address': '10.1.0.3', 'sglang_worker_plan': {'argv': ['--disaggregation-mode', 'decode']}}}


def test_a_decode_node_reaches_every_bootstrap_port_and_the_router_node_every_other_engine():
    pair = pd_pair(GROUPS, 'infera_prefill', 'infera_decode')
    assert pd_reach(pair, 'd-1', HOSTVARS, 30000) == [
        {'peer': 'p-1', 'address': '10.1.0.1', 'port': 9001, 'what': "the prefill leg's bootstrap port"},
        {'peer': 'p-2', 'address': '10.1.0.2', 'port': 8998, 'what': "the prefill leg's bootstrap port"}]
    assert pd_reach(pair, 'p-1', HOSTVARS, 30000) == [
        {'peer': 'd-1', 'address': '10.1.0.3', 'port': 30000, 'what': "the decode leg's engine port"},
        {'peer': 'p-2', 'address': '10.1.0.2', 'port': 30000, 'what': "the prefill leg's engine port"}]
    assert pd_reach(pair, 'p-2', HOSTVARS, 30000) == []


def test_a_port_that_did_not_answer_is_named_with_the_cause_and_the_next_step():
    item = {'peer': 'p-1', 'address': '10.1.0.1', 'port': 8998, 'what': "the prefill leg's bootstrap port"}
    reached = {'item': dict(item, port=9001), 'elapsed': 0, 'state': 'started', 'failed': False, 'changed': False}
    timed_out = {'item': item, 'elapsed': 10, 'msg': 'Timeout when waiting for 10.1.0.1:8998', 'failed': False,
                 'failed_when_result': False}
    assert pd_unreached([reached, {'item': item, 'skipped': True}], 'd-1', 10) == ''
    assert pd_unreached([reached, timed_out], 'd-1', 10) == (
        "d-1: stage pd-reach: the prefill leg's bootstrap port 8998 on p-1 (10.1.0.1) did not accept a connection from "
        "this node within 10 s, though both legs are up. Cause: a firewall or security group between the nodes drops "
        "the port, or the address is not one the peer listens on (infera_advertise_host); without it a request waits "
        "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT and fails. Next step: open the port from d-1 to the peer (check with "
        "nc -zv 10.1.0.1 8998 on d-1), then rerun: the legs keep running and nothing restarts.")


def test_the_bench_node_watches_every_other_leg_s_engine_at_its_address():
    pair = pd_pair(GROUPS, 'infera_prefill', 'infera_decode')
    assert pd_watch(pair, 'p-1', HOSTVARS, 30000) == [
        {'name': 'decode leg on d-1', 'health_url': 'http://10.1.0.3:30000/health'},
        {'name': 'prefill leg on p-2', 'health_url': 'http://10.1.0.2:30000/health'}]


def amd_smi(used_mb):
    """amd-smi metric --mem-usage --json as ROCm 7 prints it (ROCm/amdsmi's CLI: gpu_data, each figure value/unit)."""
    usage = [{'total_vram': {'value': 294896, 'unit': 'MB'}, 'used_vram': {'value': used, 'unit': 'MB'}} for used in used_mb]
    return json.dumps({'gpu_data': [{'gpu': index, 'mem_usage': memory} for index, memory in enumerate(usage)]})


def test_the_teardown_waits_for_the_gpus_above_the_preflight_s_limit():
    assert pd_vram_held(amd_smi([284, 285, 29490, 250661])) == {
        'busy': ['GPU 3 (85.0%, 250661 of 294896 MiB)'], 'error': ''}
    # 10.0 % is the preflight's default limit; a GPU at exactly 10 % is free, one above a lower limit is not.
    assert pd_vram_held(amd_smi([29489]))['busy'] == []
    assert pd_vram_held(amd_smi([29489]), 5)['busy'] == ['GPU 0 (10.0%, 29489 of 294896 MiB)']
    assert pd_vram_held('amd-smi: command not found') == {'busy': [], 'error': pd_vram_held('')['error']}
    assert pd_vram_held('')['error']
