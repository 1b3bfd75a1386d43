# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Rebuild a run folder's results.csv, report.md and throughput.png from its manifests and jsonl files.

Everything is computed from the files alone (``<run_dir>/<host>/manifest.json`` and the
``mix_c<C>.jsonl`` lines sglang.bench_serving wrote), so a results folder copied anywhere can
be rebuilt. The recorded verdicts come from _sweep_record, the numbers from _sweep_metrics,
each point's GPU count from the workers that served it (_sweep_workers), the nodes against
the fleet median from _sweep_fleet, the text from _sweep_render and the picture from _sweep_plot.
"""

from __future__ import annotations

import os

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_fleet import fleet_comparison
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_energy import energy_figures, read_samples, samples_file
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    ANSWER_COLUMNS,
    GOODPUT,
    apply_targets,
    load_targets,
    normalise,
    optional_float,
    optional_int,
    parallelism,
    target_misses,
    untested_targets,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_plot import render_plot
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_record import (
    find_manifests,
    recorded_file,
    recorded_problem,
    recorded_status,
    topology_label,
    write_if_changed,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_search import check_limits, request_goodput
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_render import (
    REPORT_MD,
    RESULTS_CSV,
    THROUGHPUT_PNG,
    render_csv,
    render_report,
    text_table,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_workers import (
    is_fleet_point,
    node_concurrency,
    point_gpus,
    recorded_workers,
)


def _point_context(manifest, point):
    bench_args = manifest.get('bench_args') or {}
    return {
        'Run ID': manifest.get('run_id') or None,
        'Host': manifest['host'],
        'Simulated': manifest['simulated'],
        'Model': manifest.get('model') or None,
        'ISL': optional_int(bench_args.get('random_input_len')),
        'OSL': optional_int(bench_args.get('random_output_len')),
        'Range Ratio': optional_float(bench_args.get('random_range_ratio')),
        'Variant': point.get('variant', ''),
        'Topology': topology_label(manifest),
        'Concurrency': optional_int(point.get('conc')),
        'Fleet': is_fleet_point(point),
        'Node Concurrency': node_concurrency(point),
        'Num Prompts': optional_int(point.get('num_prompts')),
        'Status': recorded_status(point),
        'File': recorded_file(point),
    }


def _variant_sizes(manifest, variant):
    spec = (manifest.get('variants') or {}).get(variant)
    if not isinstance(spec, dict):
        raise SweepResultsError('variant %r is not in the manifest, so TP/DP/EP are unknown' % (variant,))
    return parallelism(spec.get('argv'))


def _invalid_entry(context, reason):
    return {'host': context['Host'], 'conc': context['Concurrency'], 'node_conc': context['Node Concurrency'],
            'variant': context['Variant'], 'status': context['Status'], 'file': context['File'], 'reason': reason}


def _evaluate_point(host_dir, manifest, point):
    """``(row, None)`` for a usable point, ``(None, invalid entry)`` otherwise.

    Per-GPU figures divide by the GPUs of the workers that served the point (point_gpus).
    """
    context = _point_context(manifest, point)
    try:
        sizes = _variant_sizes(manifest, context['Variant'])
    except SweepResultsError as error:
        return None, _invalid_entry(context, str(error))
    workers = recorded_workers(point)
    context.update(sizes, Workers=len(workers) if workers else None)
    context['GPUs'] = point_gpus(sizes, context['Workers'])
    checked, problem = recorded_problem(host_dir, point, sizes)
    if checked['valid'] and context['Concurrency'] is None:
        context['Concurrency'] = optional_int(checked['record'].get('max_concurrency'))
    if context['Node Concurrency'] is None:
        context['Node Concurrency'] = context['Concurrency']
    if problem:
        return None, _invalid_entry(context, problem)
    row = normalise(checked['record'], context)
    row.update(point_answers(host_dir, checked['record'], row, (manifest.get('bench_args') or {}).get('limits')))
    return row, None


def point_answers(host_dir, record, row, limits):
    """Issue 44's columns of a valid point: its goodput within the sweep's limits (the client's per-request details,
    written with --output-details when limits are set) and its energy from the power samples beside its jsonl.

    The samples are the bench node's GPUs, taken while the client ran: the window is the client's measured run, its
    last `duration` seconds before the sampler stopped with it. A point served by GPUs of other nodes too (a fleet or
    a PD pair) gets no energy figures: one node's samples cannot stand for them."""
    answers = dict.fromkeys(ANSWER_COLUMNS)
    if limits:
        answers[GOODPUT] = request_goodput(record, check_limits(limits))
    if row['Concurrency'] is None:
        return answers
    samples = read_samples(os.path.join(host_dir, samples_file(row['Concurrency'])))
    sampled = {sample['gpu'] for sample in samples}
    duration = optional_float(record.get('duration'))
    if samples and duration and row['GPUs'] == len(sampled):
        ended = max(sample['time'] for sample in samples)
        answers.update(energy_figures(samples, ended - duration, ended, row['Total Output Tokens'],
                                      (row['Total Input Tokens'] or 0) + (row['Total Output Tokens'] or 0)))
    return answers


def _sort_key(row):
    return (row['Host'], row['Concurrency'] or 0, row['Variant'])


def _invalid_sort_key(entry):
    return (entry['host'], entry['conc'] or 0, entry['variant'])


def collect(run_dir, targets_file=None):
    """Rows (valid points), invalid points, target misses and the manifests of a results folder."""
    found = find_manifests(run_dir)
    manifests = [manifest for _host_dir, manifest in found]
    targets = load_targets(targets_file) if targets_file else None
    rows, invalid = [], []
    for host_dir, manifest in found:
        for point in manifest.get('points', []):
            row, problem = _evaluate_point(host_dir, manifest, point if isinstance(point, dict) else {})
            if row is None:
                invalid.append(problem)
            else:
                rows.append(row)
    rows.sort(key=_sort_key)
    invalid.sort(key=_invalid_sort_key)
    apply_targets(rows, targets)
    return {
        'run_dir': str(run_dir),
        'manifests': manifests,
        'simulated': any(manifest['simulated'] for manifest in manifests),
        'targets': targets,
        'rows': rows,
        'invalid': invalid,
        'below': target_misses(rows, invalid, targets),
        'untargeted': untested_targets(manifests, targets),
        'fleet': fleet_comparison(rows),
    }


def rebuild(run_dir, targets_file=None, check_mode=False):
    """Build results.csv, report.md and throughput.png in run_dir from its manifests and jsonl files.

    Returns the paths, the rows, the invalid points, the target misses, the text table and
    whether any file changed (in check mode: would change; nothing is written).
    """
    run = collect(run_dir, targets_file)
    outputs = {
        RESULTS_CSV: render_csv(run['rows']).encode('utf-8'),
        REPORT_MD: render_report(run).encode('utf-8'),
        THROUGHPUT_PNG: render_plot(run),
    }
    changed = [name for name, content in outputs.items()
               if write_if_changed(os.path.join(run_dir, name), content, check_mode)]
    return {
        'run_dir': str(run_dir),
        'csv_path': os.path.join(run_dir, RESULTS_CSV),
        'report_path': os.path.join(run_dir, REPORT_MD),
        'plot_path': os.path.join(run_dir, THROUGHPUT_PNG),
        'simulated': run['simulated'],
        'hosts': [manifest['host'] for manifest in run['manifests']],
        'target_metric': run['targets']['metric'] if run['targets'] else None,
        'rows': run['rows'],
        'invalid': run['invalid'],
        'below': run['below'],
        'untargeted': run['untargeted'],
        'fleet': run['fleet'],
        'table': text_table(run),
        'changed_files': changed,
        'changed': bool(changed),
    }
