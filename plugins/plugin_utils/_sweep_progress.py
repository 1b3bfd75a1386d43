# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""What a sweep tells the user about where it is: the plan and its estimate, a line per point, the wall times.

Decided once, before the first point: the points in order, which are already valid (resume),
where the engine restarts and how long each point should take. A point's figures come from the
record that judged it (_sweep_record); nothing here judges a point again.
"""

from __future__ import annotations

import datetime

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    INPUT_THROUGHPUT_PER_GPU,
    MEDIAN_INTERACTIVITY,
    OUTPUT_THROUGHPUT_PER_GPU,
    THROUGHPUT_PER_GPU,
    latency_column,
    normalise,
    parallelism,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_record import TIME_FORMAT
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_workers import fleet_point, point_gpus

# Which tokens of a request each per-GPU throughput target counts.
_TOKENS_OF_METRIC = {
    THROUGHPUT_PER_GPU: lambda input_len, output_len: input_len + output_len,
    OUTPUT_THROUGHPUT_PER_GPU: lambda input_len, output_len: output_len,
    INPUT_THROUGHPUT_PER_GPU: lambda input_len, output_len: input_len,
}
TTFT_P99 = latency_column('P99', 'TTFT')


def clock(seconds):
    """Seconds as H:MM:SS (a sweep runs for hours)."""
    seconds = max(int(round(seconds)), 0)
    return '%d:%02d:%02d' % (seconds // 3600, seconds // 60 % 60, seconds % 60)


# ---------------------------------------------------------------- the plan

def estimate_point(num_prompts, input_len, output_len, gpus, target, metric):
    """Seconds a point's main run should take at its per-GPU throughput target; None when the target says nothing.

    Tokens ÷ (target × GPUs), counting the tokens the target's metric counts (input plus output for
    Throughput/GPU, output for Output Throughput/GPU, input for Input Throughput/GPU). A latency or
    interactivity target gives no duration. The warmup is not counted.
    """
    tokens_per_request = _TOKENS_OF_METRIC.get(metric)
    if tokens_per_request is None or not target or not gpus:
        return None
    return num_prompts * tokens_per_request(input_len, output_len) / (float(target) * gpus)


def _label(index, count, point):
    label = 'point %d/%d c%d %s' % (index, count, point['conc'], point['variant'])
    if point['fleet']:
        label += ' (fleet: %d workers x c%d)' % (point['conc'] // point['node_conc'], point['node_conc'])
    return label


def plan_sweep(phases, valid, bench, targets=None, force=False, fleet_workers=1):
    """The sweep's points in order with label, estimate and whether each runs, and where the engine restarts.

    ``phases``: the variant plan's phases (variant, concurrencies, argv). ``valid``: the client's
    concurrency -> what the earlier result keeps (_sweep_record.kept_results: ``{'workers': ...}``;
    any true value will do) when the controller already has a valid one, else a false value (the
    resume check). ``bench``: prompts_per_conc, random_input_len, random_output_len. ``targets``:
    load_targets' answer or None. ``fleet_workers``: 1 for a node sweep; N for a fleet sweep through
    one router of N serving workers, whose points send each concurrency C as C x N (fleet_point)
    on N workers' GPUs and are held to C's target.
    """
    ordered = [(phase, fleet_point(node_conc, fleet_workers)) for phase in phases for node_conc in phase['concurrencies']]
    points, restarts = [], []
    for index, (phase, planned) in enumerate(ordered, 1):
        gpus = point_gpus(parallelism(phase.get('argv')), fleet_workers)
        num_prompts = planned['conc'] * bench['prompts_per_conc']
        target = targets['targets'].get(planned['node_conc']) if targets else None
        kept = valid.get(planned['conc'])
        runs = bool(force or not kept)
        # A point kept from an earlier run keeps the workers that served it then.
        point = dict(planned, variant=phase['variant'], num_prompts=num_prompts, gpus=gpus, runs=runs,
                     workers=None if runs or not isinstance(kept, dict) else kept.get('workers'),
                     estimate=estimate_point(num_prompts, bench['random_input_len'], bench['random_output_len'], gpus,
                                             target, targets['metric'] if targets else None))
        point['label'] = _label(index, len(ordered), point)
        points.append(point)
    running = [phase for phase in phases if any(point['runs'] for point in points
                                                if point['node_conc'] in phase['concurrencies'])]
    for before, after in zip(running, running[1:]):
        restarts.append({'from': before['variant'], 'to': after['variant']})
    estimates = [point['estimate'] for point in points if point['runs']]
    return {
        'points': points,
        'pending': [point['conc'] for point in points if point['runs']],
        'restarts': restarts,
        'estimate': sum(estimates) if estimates and None not in estimates else None,
        'estimated_points': len([value for value in estimates if value is not None]),
        'targets': targets['path'] if targets else None,
    }


def plan_lines(host, plan):
    """The plan as the play prints it before the first point: one line per node, then one per point."""
    running = [point for point in plan['points'] if point['runs']]
    skipped = ['c%d' % point['conc'] for point in plan['points'] if not point['runs']]
    restarts = ', '.join('%s -> %s' % (restart['from'], restart['to']) for restart in plan['restarts'])
    head = '%s: sweep plan: %d point(s) to run%s; engine restart(s): %s; estimated %s' % (
        host, len(running), ' (skipped, already valid: %s)' % ', '.join(skipped) if skipped else '',
        '%d (%s)' % (len(plan['restarts']), restarts) if plan['restarts'] else 'none between phases',
        _total_text(plan, len(running)))
    lines = [head]
    for point in plan['points']:
        lines.append('%s:   %s, %d prompts on %d GPUs: %s' % (
            host, point['label'], point['num_prompts'], point['gpus'],
            ('~%s' % clock(point['estimate']) if point['estimate'] is not None else 'no estimate')
            if point['runs'] else 'skipped (already valid)'))
    return lines


def _total_text(plan, running):
    if not running:
        return '0:00:00'
    if plan['estimate'] is not None:
        return '~%s in total (from %s; warmup and restarts not counted)' % (clock(plan['estimate']), plan['targets'])
    if plan['estimated_points']:
        return 'for %d of %d points only (no target for the rest), so no total' % (plan['estimated_points'], running)
    return 'no estimate (no per-GPU throughput target in sweep_targets_file)'


# ---------------------------------------------------------------- after a point

def point_figures(record, argv, worker_count=None):
    """tok/s/GPU, tok/s/user and TTFT p99 of a valid record (the one the sweep's record judged); {} without one.

    Per GPU of the point's serving workers (``worker_count``; None: one worker), as the report counts them.
    """
    if not record:
        return {}
    try:
        sizes = parallelism(argv)
        row = normalise(record, dict(sizes, GPUs=point_gpus(sizes, worker_count)))
    except (KeyError, TypeError, ValueError, ZeroDivisionError, SweepResultsError):
        return {}
    return {'tput_per_gpu': row[THROUGHPUT_PER_GPU], 'output_tput_per_gpu': row[OUTPUT_THROUGHPUT_PER_GPU],
            'interactivity': row[MEDIAN_INTERACTIVITY], 'ttft_p99_ms': row[TTFT_P99]}


def _number(value, form):
    return '?' if value is None else form % value


def point_line(host, label, point, figures, sweep_seconds, simulated=False):
    """The line after a point: its figures (labelled when a simulated engine made them), its verdict, and how long
    the sweep has run."""
    verdict = {'ok': 'valid', 'resumed': 'valid (kept from an earlier run)'}.get(point['status'], point['status'])
    if point['reason']:
        verdict += ': ' + point['reason']
    shown = ''
    if figures and point['status'] != 'resumed':
        shown = '%s tok/s/GPU (%s output), %s tok/s/user, TTFT p99 %s ms, ' % (
            _number(figures['tput_per_gpu'], '%.0f'), _number(figures['output_tput_per_gpu'], '%.0f'),
            _number(figures['interactivity'], '%.1f'), _number(figures['ttft_p99_ms'], '%.0f'))
        if simulated:
            shown = '[SIMULATED engine] ' + shown
    return '%s: %s done: %s%s; sweep time %s' % (host, label or 'point c%s' % point['conc'], shown, verdict,
                                                 clock(sweep_seconds))


# ---------------------------------------------------------------- wall times

def _parse(text):
    try:
        return datetime.datetime.strptime(text, TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return None


def wall_seconds(point):
    """Seconds from a manifest point's start to its end, or None when either is missing."""
    started, ended = _parse(point.get('started')), _parse(point.get('ended'))
    return (ended - started).total_seconds() if started and ended else None


def sweep_seconds(points, now=None):
    """Seconds since the first point of these started (the sweep's running time)."""
    starts = [_parse(point.get('started')) for point in points]
    starts = [start for start in starts if start]
    if not starts:
        return 0.0
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return (now - min(starts)).total_seconds()


def _clock_or_unknown(seconds):
    return clock(seconds) if seconds is not None else '?'


def timing_lines(host, points, restarts):
    """The wall time of each point and of each engine (re)start the sweep made, for the end of the play."""
    lines = []
    for point in points:
        lines.append('%s: c%s %s: %s (%s)' % (
            host, point.get('conc'), point.get('variant'), _clock_or_unknown(wall_seconds(point)), point.get('status')))
    for restart in restarts:
        lines.append('%s: engine (re)start to %s: %s' % (
            host, restart.get('variant'), _clock_or_unknown(restart.get('seconds'))))
    return lines
