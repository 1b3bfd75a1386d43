# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The sweep's record of a run: judge each point once, build and atomically write <host>/manifest.json, read it back.

The sweep calls record_point after every point and write_manifest with every point so far, so
nothing collected is lost when a later point fails; the report reads the same file back with
read_manifest and recorded_problem, and the next run's plan with kept_results (resume). The
file is what the role used to write with ``to_nice_json``: the same keys, the same layout. A
point records the workers that served it (_sweep_workers); an older manifest's points have none.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import optional_int, parallelism, validate_point
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_workers import (
    fleet_point,
    recorded_workers,
    workers_problem,
)

MANIFEST = 'manifest.json'
# The run's keys of a manifest; 'points' follows them.
RUN_KEYS = ('run_id', 'host', 'simulated', 'image', 'image_digest', 'stack', 'model', 'recipe', 'variants',
            'topology', 'bench_args')
# What served the points when the sweep names nothing: one mixed worker per node.
MIXED = {'kind': 'mixed'}
# What a manifest keeps of a PD pair (plugin_utils/_pd_pair.py pd_pair).
PAIR_KEYS = ('label', 'prefill', 'decode', 'router')
# The planned point's keys record_point needs. conc: the client's --max-concurrency; node_conc: the
# concurrency of the sweep's list it stands for (conc / N for a fleet point); workers: the serving
# workers the router listed before the bench (_sweep_workers.serving_workers), None when unknown.
PLANNED_KEYS = ('conc', 'node_conc', 'fleet', 'variant', 'num_prompts', 'warmup_requests', 'started', 'workers')
# Statuses whose points may enter the CSV (their file must still be valid).
USABLE_STATUSES = ('ok', 'resumed')
TIME_FORMAT = '%Y-%m-%dT%H:%M:%SZ'


# ---------------------------------------------------------------- one point

def point_file(conc):
    """The jsonl a point's client writes (the --output-file of bench.sh.j2)."""
    return 'mix_c%s.jsonl' % conc


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(TIME_FORMAT)


def point_status(valid, resumed=False, aborted=False):
    """The sweep's verdict on a point: ok, invalid, aborted or resumed.

    ``aborted``: the sweep stopped at or before this point, which has no valid result.
    ``resumed``: the resume check found a valid result on the controller, so the point did not run.
    """
    if aborted and not valid:
        return 'aborted'
    if resumed:
        return 'resumed'
    return 'ok' if valid else 'invalid'


def record_point(host_dir, planned, resumed=False, aborted=False, ended=None, argv=None):
    """Judge a point from the controller's copy of its jsonl and return its manifest entry.

    ``planned`` holds PLANNED_KEYS (``node_conc``, ``fleet`` and ``workers`` may be missing: a node
    point, workers unknown); ``argv`` is the variant's engine argv, against which the workers are
    checked. The entry adds the file, the end time, the status and the reason the point is not
    valid ('' when it is).
    """
    return judge_point(host_dir, planned, resumed, aborted, ended, argv)[0]


def _variant_sizes(argv):
    try:
        return parallelism(argv)
    except SweepResultsError:
        return None


def judge_point(host_dir, planned, resumed=False, aborted=False, ended=None, argv=None):
    """``(entry, record)``: record_point's manifest entry and the valid record it judged (None when invalid).

    Valid: the file is valid and the workers that served the point can stand for it (workers_problem).
    """
    planned = dict(planned, node_conc=planned.get('node_conc') or planned['conc'], fleet=bool(planned.get('fleet')),
                   workers=recorded_workers(planned))
    name = point_file(planned['conc'])
    checked = validate_point(os.path.join(host_dir, name), planned['num_prompts'], planned['conc'])
    sizes = _variant_sizes(argv) if argv is not None else None
    reason = checked['reason'] or (workers_problem(planned, sizes) if sizes else '')
    return _entry(planned, name, reason, resumed, aborted, ended), None if reason else checked['record']


def _entry(planned, name, reason, resumed, aborted, ended):
    return {
        'conc': planned['conc'],
        'node_conc': planned['node_conc'],
        'fleet': planned['fleet'],
        'variant': planned['variant'],
        'num_prompts': planned['num_prompts'],
        'warmup_requests': planned['warmup_requests'],
        'file': name,
        'started': planned['started'],
        'ended': ended or utc_now(),
        'status': point_status(not reason, resumed, aborted),
        'reason': reason,
        'workers': planned['workers'],
    }


def recorded_status(point):
    return point.get('status') or 'ok'


def recorded_file(point):
    return point.get('file') or point_file(point.get('conc'))


def recorded_problem(host_dir, point, sizes=None):
    """``(checked, problem)`` for a manifest point: what the sweep recorded, then the point checked the same way.

    A folder may be copied, edited or written by an older sweep, so a usable status still needs a
    valid file and, given the variant's ``sizes`` (parallelism), recorded workers that can stand
    for the point; a point the sweep marked otherwise says so. ``checked`` is validate_point's
    answer for the point's file; ``problem`` is '' when the point is usable.
    """
    checked = validate_point(os.path.join(host_dir, recorded_file(point)), optional_int(point.get('num_prompts')),
                             optional_int(point.get('conc')))
    found = [checked['reason'], workers_problem(point, sizes) if sizes else '']
    status = recorded_status(point)
    reasons = []
    if status not in USABLE_STATUSES:
        told = point.get('reason') or ''
        reasons.append('marked %s by the sweep%s' % (status, ': ' + told if told and told not in found else ''))
    reasons.extend(found)
    return checked, '; '.join(reason for reason in reasons if reason)


def previous_points(host_dir):
    """The points of the manifest an earlier run left in host_dir, by conc; {} when there is none or it cannot be read."""
    try:
        manifest = read_manifest(host_dir)
    except SweepResultsError:
        return {}
    return {optional_int(point.get('conc')): point for point in manifest['points'] if isinstance(point, dict)}


def kept_results(host_dir, phases, prompts_per_conc, fleet_workers=1):
    """The resume check of a sweep's every point: conc -> what its earlier result keeps, or None to run it.

    A point keeps its earlier result when its file is valid (validate_point, as the bench_point
    lookup checks it) and the workers the earlier manifest recorded for it can stand for this
    plan's point (a fleet point of as many workers, in the variant); it keeps those workers
    (``{'workers': [...]}``, None when the earlier run recorded none). ``phases``: the variant
    plan's; ``fleet_workers``: the N of a fleet sweep, 1 for a node sweep.
    """
    previous = previous_points(host_dir)
    kept = {}
    for phase in phases:
        sizes = parallelism(phase.get('argv'))
        for node_conc in phase['concurrencies']:
            planned = fleet_point(node_conc, fleet_workers)
            conc = planned['conc']
            checked = validate_point(os.path.join(host_dir, point_file(conc)), conc * prompts_per_conc, conc)
            earlier = dict(planned, variant=phase['variant'], workers=recorded_workers(previous.get(conc) or {}))
            usable = checked['valid'] and not workers_problem(earlier, sizes)
            kept[conc] = {'workers': earlier['workers']} if usable else None
    return kept


# ---------------------------------------------------------------- the manifest

def merged_points(points, point):
    """The run's points with `point` recorded: one entry per concurrency. A point recorded again replaces its entry,
    but a point kept from an earlier round of a search (resumed) keeps the entry of the round that measured it, with
    its times and workers."""
    same = [entry for entry in points if isinstance(entry, dict) and entry.get('conc') == point['conc']]
    if point['status'] == 'resumed' and same and same[-1].get('status') in USABLE_STATUSES:
        return list(points)
    return [entry for entry in points if entry not in same] + [point]


def build_manifest(run, points):
    """The manifest of one host: the run's keys (RUN_KEYS) and its points so far. The run's topology is a PD pair
    (pd_pair's), recorded as its PAIR_KEYS, or empty: MIXED."""
    manifest = {key: run[key] for key in RUN_KEYS}
    pair = manifest['topology'] or {}
    manifest['topology'] = dict({key: pair[key] for key in PAIR_KEYS if key in pair}, kind='pd') if pair else dict(MIXED)
    manifest['points'] = list(points)
    return manifest


def manifest_text(manifest):
    """The file's text, as Ansible's to_nice_json wrote it (4-space indent, sorted keys) with a final newline."""
    return json.dumps(manifest, indent=4, sort_keys=True, separators=(',', ': ')) + '\n'


def write_if_changed(path, content, check_mode=False):
    """Write bytes unless the file already holds them; return whether it differed (in check mode: would differ).

    The bytes go to a temporary file in the same folder that is then renamed over ``path``, so a
    reader or a failure never leaves half a file behind.
    """
    try:
        with open(path, 'rb') as handle:
            if handle.read() == content:
                return False
    except OSError:
        pass
    if not check_mode:
        _replace(path, content)
    return True


def _replace(path, content):
    directory, name = os.path.split(path)
    try:
        descriptor, temporary = tempfile.mkstemp(prefix='.%s.' % name, suffix='.tmp', dir=directory or '.')
    except OSError as error:
        raise SweepResultsError('cannot write %s: %s' % (path, error.strerror or error)) from None
    replaced = False
    try:
        with os.fdopen(descriptor, 'wb') as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
        replaced = True
    except OSError as error:
        raise SweepResultsError('cannot write %s: %s' % (path, error.strerror or error)) from None
    finally:
        if not replaced:
            os.unlink(temporary)


def write_manifest(host_dir, manifest, check_mode=False):
    """Write ``<host_dir>/manifest.json`` unless it already holds this manifest; return whether it differed."""
    return write_if_changed(os.path.join(host_dir, MANIFEST), manifest_text(manifest).encode('utf-8'), check_mode)


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ('1', 'true', 'yes', 'on')
    return bool(value)


def read_manifest(host_dir):
    path = os.path.join(host_dir, MANIFEST)
    try:
        with open(path, encoding='utf-8') as handle:
            manifest = json.load(handle)
    except OSError as error:
        raise SweepResultsError('cannot read %s: %s' % (path, error.strerror or error)) from None
    except ValueError as error:
        raise SweepResultsError('%s is not JSON: %s' % (path, error)) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get('points', []), list):
        raise SweepResultsError('%s must be a JSON object with a "points" list' % path)
    manifest['host'] = manifest.get('host') or os.path.basename(host_dir)
    manifest['simulated'] = _truthy(manifest.get('simulated'))
    if not isinstance(manifest.get('topology'), dict) or not manifest['topology'].get('kind'):
        manifest['topology'] = dict(MIXED)
    return manifest


def topology_label(manifest):
    """What served a manifest's points, as the report names it: 'mixed', or a PD pair's label (1P1D)."""
    topology = manifest.get('topology') or MIXED
    return str(topology.get('label') or topology.get('kind') or MIXED['kind'])


def find_manifests(run_dir):
    """Every ``<run_dir>/<host>/manifest.json``, in host order, as ``(host_dir, manifest)``."""
    if not os.path.isdir(run_dir):
        raise SweepResultsError('results folder %s does not exist' % run_dir)
    host_dirs = sorted(entry.path for entry in os.scandir(run_dir)
                       if entry.is_dir() and os.path.isfile(os.path.join(entry.path, MANIFEST)))
    if not host_dirs:
        raise SweepResultsError('no <host>/%s under %s; is it a results/<run_id> folder of a sweep?' % (MANIFEST, run_dir))
    return [(host_dir, read_manifest(host_dir)) for host_dir in host_dirs]
