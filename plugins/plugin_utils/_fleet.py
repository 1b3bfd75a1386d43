# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""What deploy_mixed.yml says and decides about the fleet, read from every node's published facts (hostvars): the
nodes that failed their change, a rolling change's stop-or-go verdict and the fleet's state at that moment, the other
routers a restarted worker must be listed by, and the fleet's one summary line.

Each node's facts are the roles' published ones: sglang_worker_status (before the run), sglang_worker_result (after its
worker stage), router_verify_result, container_result, infera_node_address, and infera_rollout_failed (set by the
rolling play's rescue).
"""

from __future__ import annotations


def _facts(hostvars, host, name, default=None):
    """hostvars[host][name], or default when the host or the fact is missing (a node lost before it published)."""
    if host not in hostvars:
        return default
    value = hostvars[host].get(name)
    return default if value is None else value


def rollout_failed_hosts(hostvars, hosts):
    """The hosts, in order, whose change failed in this run (infera_rollout_failed)."""
    return [host for host in hosts if _facts(hostvars, host, 'infera_rollout_failed', False)]


def fleet_now(hostvars, fleet_hosts, here):
    """One 'host state' line per node of the fleet at the moment `here` failed its change: failed here or earlier (and
    what it served before), changed or left unchanged in this run, or not reached yet."""
    lines = []
    for host in fleet_hosts:
        result = _facts(hostvars, host, 'sglang_worker_result', {})
        before = _facts(hostvars, host, 'sglang_worker_status', {}).get('variant', 'unknown')
        if host == here:
            state = 'FAILED here, was serving %s' % before
        elif _facts(hostvars, host, 'infera_rollout_failed', False):
            state = 'FAILED earlier in this run, was serving %s' % before
        elif result:
            state = '%s %s' % (result.get('variant'), '(restarted in this run)' if _true(result.get('restarted'))
                               else '(unchanged)')
        else:
            state = '%s (not reached)' % before
        lines.append('%s %s' % (host, state))
    return lines


def _true(value):
    """A published boolean, which a template may have made a string."""
    return value is True or str(value).lower() in ('true', 'yes', 'on', '1')


def rollout_verdict(hostvars, here, fleet_hosts, play_hosts, max_fail_percentage):
    """A rolling change's verdict when `here` failed: {'over_budget', 'verdict', 'fleet_now'}. The budget is the
    fleet's: max_fail_percentage of the play's nodes, counted over every batch."""
    failed = rollout_failed_hosts(hostvars, play_hosts)
    budget = len(play_hosts) * float(max_fail_percentage or 0) / 100
    over = len(failed) > budget
    verdict = '%s (%d of %d node(s) failed, failure budget %s %% = %s)' % (
        'the rollout stops at this node' if over else 'the rollout goes on', len(failed), len(play_hosts),
        max_fail_percentage or 0, round(budget, 2))
    return {'over_budget': over, 'verdict': verdict, 'fleet_now': fleet_now(hostvars, fleet_hosts, here)}


def fleet_routers(hostvars, here, router_hosts, topology, restarted, port):
    """The other routers that must list a restarted worker before it counts as verified, {host: url}: in the serving
    topology, every router node that served before this run or passed its verify in it, and did not fail its change."""
    if topology != 'serving' or not _true(restarted):
        return {}
    routers = {}
    for host in router_hosts:
        if host == here or _facts(hostvars, host, 'infera_rollout_failed', False):
            continue
        serving = _true(_facts(hostvars, host, 'sglang_worker_status', {}).get('serving', False))
        if serving or _facts(hostvars, host, 'router_verify_result') is not None:
            routers[host] = 'http://%s:%s' % (_facts(hostvars, host, 'infera_node_address'), port)
    return routers


def fleet_summary(hostvars, play_hosts_all, play_hosts, topology):
    """The deploy's one line for the fleet: nodes ready (in the play, not failed), the topology, whether any engine is
    the rehearsal's simulated one, the slowest cold start of this run and the variant per node."""
    failed = rollout_failed_hosts(hostvars, play_hosts_all)
    ready = [host for host in play_hosts_all if host in play_hosts and host not in failed]
    simulated = any(_true(_facts(hostvars, host, 'container_result', {}).get('simulated', False))
                    for host in play_hosts_all)
    times = []
    for host in ready:
        phases = _facts(hostvars, host, 'sglang_worker_result', {}).get('phases') or {}
        seconds = [phase.get('since_start') for phase in phases.values() if phase.get('since_start') is not None]
        times.append((host, max(seconds) if seconds else 0))
    slowest = sorted(times, key=lambda time: float(time[1]))[-1] if times else ('none', 0)
    variants = ['%s %s' % (host, 'FAILED' if host in failed else
                           _facts(hostvars, host, 'sglang_worker_result', {}).get('variant', 'FAILED'))
                for host in sorted(play_hosts_all)]
    return 'fleet: %d/%d nodes ready (%s topology)%s; %s; variant per node: %s' % (
        len(ready), len(play_hosts_all), topology, ' [SIMULATED engine]' if simulated else '',
        ('slowest %s %s s to ready' % slowest) if float(slowest[1]) > 0 else 'no engine restarted', ', '.join(variants))
