# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""A PD-disaggregated deployment's pairs, from the inventory's two groups (Infera's sglang_1p1d_dsv4.md page: one
prefill node, one decode node; more nodes in a group give xPyD).

The prefill group's first node (by name) runs the router: the page puts etcd and the router on the prefill
node, and Infera's router pairs prefill and decode workers from etcd by itself, so one router fronts every leg. Each
node runs one leg; a node in both groups is refused, as its two legs would share its GPUs.
"""

from __future__ import annotations

from ansible_collections.infera.serving.plugins.module_utils import _preflight
from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.module_utils._gpu_smi import parse_amd_smi
from ansible_collections.infera.serving.plugins.module_utils._preflight import gpu_figure

LEGS = ('prefill', 'decode')
# The bootstrap server's port flag on the prefill leg (SGLang's --disaggregation-bootstrap-port, default 8998:
# sglang/srt/server_args.py at 0.5.15.post1).
BOOTSTRAP_FLAG = '--disaggregation-bootstrap-port'
BOOTSTRAP_DEFAULT = 8998


def pd_pair(groups, prefill_group, decode_group):
    """{'prefill': [nodes], 'decode': [nodes], 'hosts': every node sorted, 'router': the router's node,
    'modes': {'prefill': n, 'decode': m}, 'label': 'nPmD'} from the inventory's groups. Raises InferaServingError in one line when a
    group is missing or empty, or a node is in both."""
    legs = {}
    for leg, group in zip(LEGS, (prefill_group, decode_group)):
        nodes = sorted((groups or {}).get(group) or [])
        if not nodes:
            raise InferaServingError(
                'the inventory group %s (the %s nodes, infera_%s_group) has no host: put one node in each of %s and %s '
                '(one each is 1P1D), as docs/pd.md shows'
                % (group, leg, leg, prefill_group, decode_group))
        legs[leg] = nodes
    both = sorted(set(legs['prefill']) & set(legs['decode']))
    if both:
        raise InferaServingError(
            '%s %s in both %s and %s: a node runs one leg (the two legs would share its 8 GPUs); take it out of one'
            % (', '.join(both), 'is' if len(both) == 1 else 'are', prefill_group, decode_group))
    return {'prefill': legs['prefill'], 'decode': legs['decode'], 'hosts': sorted(legs['prefill'] + legs['decode']),
            'router': legs['prefill'][0], 'modes': {leg: len(legs[leg]) for leg in LEGS},
            'label': '%dP%dD' % (len(legs['prefill']), len(legs['decode']))}


def pd_problem(groups, prefill_group, decode_group):
    """What is wrong with the inventory's PD groups, in one line, or '' (pd_pair's refusal, for a check to print)."""
    try:
        pd_pair(groups, prefill_group, decode_group)
    except InferaServingError as error:
        return str(error)
    return ''


def pd_leg(pair, node):
    """The leg a node of the pair runs: 'prefill' or 'decode'."""
    for leg in LEGS:
        if node in pair[leg]:
            return leg
    raise InferaServingError('%s is in neither PD group (%s)' % (node, ', '.join(pair['hosts'])))


def bootstrap_port(plan):
    """The prefill leg's bootstrap port as its plan's argv runs it (SGLang's default when the argv names none), or
    None for a plan that is not a prefill leg's."""
    argv = [str(token) for token in (plan or {}).get('argv') or []]
    if _value(argv, '--disaggregation-mode') != 'prefill':
        return None
    port = _value(argv, BOOTSTRAP_FLAG)
    return int(port) if port is not None else BOOTSTRAP_DEFAULT


def _value(argv, flag):
    """The value after flag in argv, or None."""
    if flag in argv[:-1]:
        return argv[argv.index(flag) + 1]
    return None


def pd_ports(plan, node, pair, router_port, engine_port):
    """The ports a node of the pair listens on, which its preflight checks are free: the engine's, the router's on
    the router's node, the bootstrap server's on a prefill leg."""
    ports = [int(engine_port)]
    if node == pair['router']:
        ports.append(int(router_port))
    port = bootstrap_port(plan)
    if port is not None:
        ports.append(port)
    return ports


def pd_reach(pair, node, hostvars, engine_port):
    """The ports of the other legs this node talks to once they listen, each {'peer', 'address', 'port', 'what'}: a
    decode node asks every prefill leg's bootstrap server for each request's room (the port its plan sets), the
    router's node sends each request to every leg's engine. `hostvars`: each node's infera_node_address and, on a
    prefill node, its sglang_worker_plan."""
    wanted = []
    if node in pair['decode']:
        for peer in pair['prefill']:
            port = bootstrap_port(hostvars[peer].get('sglang_worker_plan'))
            wanted.append((peer, port or BOOTSTRAP_DEFAULT, "the prefill leg's bootstrap port"))
    if node == pair['router']:
        wanted.extend((peer, int(engine_port), "the %s leg's engine port" % pd_leg(pair, peer))
                      for peer in pair['hosts'] if peer != node)
    return [{'peer': peer, 'address': str(hostvars[peer]['infera_node_address']), 'port': port, 'what': what}
            for peer, port, what in wanted]


def pd_unreached(results, node, timeout):
    """The failure of a node whose tries of pd_reach's ports (the wait_for loop's results) did not all connect, in
    one message naming each port, the cause and the next step; '' when every port answered."""
    # ansible.builtin.wait_for answers a port it reached without a msg, and one it did not with its msg (the loop's
    # failed_when: false clears `failed`).
    missed = [result['item'] for result in results
              if not result.get('skipped') and (result.get('failed') or result.get('msg'))]
    if not missed:
        return ''
    ports = '; '.join('%s %d on %s (%s)' % (item['what'], item['port'], item['peer'], item['address']) for item in missed)
    checks = ' and '.join('nc -zv %s %d' % (item['address'], item['port']) for item in missed)
    return ('%s: stage pd-reach: %s did not accept a connection from this node within %s s, though both legs are up. '
            'Cause: a firewall or security group between the nodes drops the port, or the address is not one the '
            'peer listens on (infera_advertise_host); without it a request waits SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT '
            'and fails. Next step: open the port from %s to the peer (check with %s on %s), then rerun: the legs keep '
            'running and nothing restarts.' % (node, ports, timeout, node, checks, node))


def pd_watch(pair, node, hostvars, engine_port):
    """The other legs a sweep's bench node watches while a point runs, each {'name', 'health_url'}: every leg's engine
    /health but its own, at the address the router sends it requests (sglang_bench_wait's legs)."""
    return [{'name': '%s leg on %s' % (pd_leg(pair, peer), peer),
             'health_url': 'http://%s:%d/health' % (hostvars[peer]['infera_node_address'], int(engine_port))}
            for peer in pair['hosts'] if peer != node]


def pd_vram_held(text, max_percent=None):
    """The GPUs of an `amd-smi metric --mem-usage --json` answer that hold more than max_percent of their VRAM (the
    preflight's limit, its default when None), as the preflight names them: {'busy': ['GPU 3 (85.0%, ...)'],
    'error': why the answer could not be read, or ''}. The page's "wait for VRAM≈0 on both nodes" after a teardown."""
    limit = _preflight.ARGUMENT_SPEC['vram_max_percent']['default'] if max_percent is None else float(max_percent)
    try:
        gpus = parse_amd_smi(text)
    except ValueError as error:
        return {'busy': [], 'error': str(error)}
    return {'busy': [gpu_figure(gpu) for gpu in gpus if gpu['used_percent'] is not None and gpu['used_percent'] > limit],
            'error': ''}
