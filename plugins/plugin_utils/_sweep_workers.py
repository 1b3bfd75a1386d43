# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The workers that serve a sweep point, and what they change: its concurrency, its GPU count, its validity.

The sweep reads the router's ``GET /v1/workers`` right before a point's bench starts and keeps
the workers that serve it in the point's manifest entry. A router round-robins across every
worker under its etcd prefix, so in the serving topology one node's router loads the whole
fleet: the per-GPU figures divide by the GPUs of those workers, not by one node's. A fleet
sweep sends C x N concurrent requests through one router of N serving workers, so that each
worker carries the C a node sweep gives one node.
"""

from __future__ import annotations

# Infera's WorkerStatus of a worker the router sends requests to (draining and dead ones get none).
SERVING_STATUS = 'active'
# What the manifest keeps of each worker the router lists.
WORKER_KEYS = ('worker_id', 'url', 'dp_size')


def fleet_point(node_conc, fleet_workers):
    """``conc``, ``node_conc`` and ``fleet`` of the point a concurrency of the sweep's list becomes.

    A node sweep (``fleet_workers`` 1) sends C as it is; a fleet sweep through one router of N
    serving workers sends C x N, so that each worker carries C, as one node does in a node sweep.
    """
    workers = max(int(fleet_workers), 1)
    return {'conc': node_conc * workers, 'node_conc': node_conc, 'fleet': workers > 1}


def serving_workers(listing, model=''):
    """The workers of a ``/v1/workers`` answer that serve the bench's requests, as the manifest keeps them.

    ``listing``: the answer (``{"workers": [...]}``) or its list. Infera's router sends a request
    to the active workers of the request's model, so a draining or dead worker, or one of another
    model, did not serve the point. Sorted by worker_id, each with WORKER_KEYS.
    """
    entries = listing.get('workers') if isinstance(listing, dict) else listing
    serving = []
    for worker in entries or ():
        if not isinstance(worker, dict) or worker.get('status', SERVING_STATUS) != SERVING_STATUS:
            continue
        if model and worker.get('model_name') and worker['model_name'] != model:
            continue
        serving.append({key: worker.get(key) for key in WORKER_KEYS})
    return sorted(serving, key=lambda worker: str(worker['worker_id']))


def recorded_workers(point):
    """The workers a manifest point records, or None when it records none (an older manifest, a point never measured)."""
    workers = point.get('workers')
    if not isinstance(workers, list):
        return None
    return [worker for worker in workers if isinstance(worker, dict)] or None


def node_concurrency(point):
    """The concurrency of the sweep's list a point stands for (``node_conc``; an older manifest's point: its ``conc``)."""
    for key in ('node_conc', 'conc'):
        try:
            return int(point[key])
        except (KeyError, TypeError, ValueError):
            continue
    return None


def optional_int(value):
    """An int from a manifest or record value (written by the sweep, or by hand as text), else None."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def is_fleet_point(point):
    return point.get('fleet') is True


def point_gpus(sizes, worker_count):
    """The per-GPU divisor of a point: its serving workers times one worker's GPUs (the variant's TP x PP).

    ``sizes``: _sweep_metrics.parallelism of the variant's argv. A dp worker is one worker (one
    entry of /v1/workers with dp_size 8): DP attention splits its TP group's attention and adds no
    GPU. Without recorded workers (``worker_count`` None or 0) the point keeps the rule of older
    manifests: one worker, the variant's GPUs.
    """
    return sizes['GPUs'] * (worker_count or 1)


def _names(workers):
    return ', '.join(str(worker.get('worker_id')) for worker in workers) or 'none'


def workers_problem(point, sizes):
    """Why the workers recorded for a point cannot stand for it, or '' (also when it records none).

    A fleet point needs as many serving workers as its concurrency was scaled by (conc = node_conc x N);
    every worker must run the point's variant, which the router shows by its dp_size (a nodp
    worker has none, a dp worker the variant's DP): a fleet halfway through a variant change
    serves with both.
    """
    workers = recorded_workers(point) or []
    conc, node_conc = optional_int(point.get('conc')), node_concurrency(point)
    if is_fleet_point(point) and not workers:
        # Its per-GPU figures would divide by one worker's GPUs while N workers served it.
        return 'the fleet point records no workers the router listed, so the GPUs that served it are unknown'
    if is_fleet_point(point) and node_conc and conc and len(workers) * node_conc != conc:
        return 'the router listed %d serving worker(s) (%s); the fleet point c%s planned %d (%d x c%d)' % (
            len(workers), _names(workers), conc, conc // node_conc, conc // node_conc, node_conc)
    others = [worker for worker in workers if 'dp_size' in worker and (worker['dp_size'] or 1) != sizes['DP']]
    if others:
        return 'worker(s) %s run dp_size %s, the %s variant DP %d (a fleet with mixed variants)' % (
            _names(others), '/'.join(sorted({str(worker['dp_size'] or 1) for worker in others})),
            point.get('variant'), sizes['DP'])
    return ''


def point_workers(router_listing=None, kept=None, model=''):
    """The workers to record for a point: the serving ones of the router's listing read before it ran, else the kept ones.

    ``kept``: what an earlier run recorded for a point the sweep did not run again (resume), or None.
    """
    if router_listing is not None:
        return serving_workers(router_listing, model)
    return recorded_workers({'workers': kept})
