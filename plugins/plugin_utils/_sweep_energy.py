# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""A point's energy figures from its raw GPU power samples: average and peak W per GPU, J per output token, tok/s per kW.

The node's sampler (roles/sweep/files/power_sampler.py, the one reader of amd-smi's power) writes
``power_c<C>.jsonl`` beside the point's ``mix_c<C>.jsonl``: one JSON object a line,
``{"time": <unix s>, "gpu": <index>, "watts": <socket power, W>}``, the same time for every GPU of
one amd-smi call. The figures are recomputed from those samples whenever a row is built; on the
rehearsal the samples are the SIMULATED amd-smi's modelled power.

Definitions, over the point's window [started, ended] (T = ended - started seconds); samples outside
it are ignored, and so are GPUs not in ``gpus`` when it lists indices:

- a *reading* is the samples of one time t_k (one amd-smi call); m_k = mean watts of the GPUs it
  has (a GPU whose power read N/A is missing from it, and does not count as 0 W);
- G = the point's GPUs: ``gpus`` (a count, or the number of indices listed), else the GPUs seen
  in the window; the total power at t_k is P_k = G * m_k;
- energy_j = the integral of the total power over the window: the trapezoid rule over the
  readings' (t_k, P_k), each end held flat to the window's edge (a sample at the edge needs none);
- avg_power_w = energy_j / (T * G): the time-weighted average power of one GPU (uneven spacing
  weighs each reading by the time it stands for, unlike a plain mean of the samples);
- peak_power_w = the highest single-GPU sample in the window;
- j_per_output_token = energy_j / output_tokens;
- tok_s_per_kw = (total_tokens / T) / (energy_j / T / 1000): the point's token throughput over
  its average total power in kW, i.e. total_tokens * 1000 / energy_j.

Every figure is None when the window holds no sample (or is empty); a per-token figure also when
its token count is not a positive number.

SemiAnalysisAI/InferenceX ``utils/aggregate_power.py`` integrates the same kind of per-second
samples (amd-smi ``socket_power``) with the trapezoid rule, per GPU, interpolating at the window's
edges from samples outside it; here the window's own samples decide (the sampler runs from before
the client starts until after it ends, so each held edge is under one interval).
"""

from __future__ import annotations

import datetime
import json
import math

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError

# The CSV columns of a point's energy (issue 44's names, which scripts read), in order.
ENERGY_COLUMNS = ('avg_power_w', 'peak_power_w', 'j_per_output_token', 'tok_s_per_kw')
# The raw samples of point C, beside its mix_c<C>.jsonl.
SAMPLES_FILE = 'power_c%d.jsonl'


def samples_file(conc):
    """The name of point ``conc``'s samples file."""
    return SAMPLES_FILE % int(conc)


def _number(value):
    """A finite float, else None (bools and strings are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _sample(line, path, number):
    """One line as ``{'time', 'gpu', 'watts'}``; SweepResultsError naming the file and line when it is not one."""
    try:
        data = json.loads(line)
    except ValueError as error:
        raise SweepResultsError('%s line %d is not JSON (%s)' % (path, number, error)) from None
    if not isinstance(data, dict):
        raise SweepResultsError('%s line %d is a JSON %s, not a sample object' % (path, number, type(data).__name__))
    stamp, watts, gpu = _number(data.get('time')), _number(data.get('watts')), data.get('gpu')
    if stamp is None or watts is None or watts < 0 or isinstance(gpu, bool) or not isinstance(gpu, int):
        raise SweepResultsError('%s line %d is not a power sample {"time": s, "gpu": index, "watts": W}: %s'
                                % (path, number, line.strip()[:200]))
    return {'time': stamp, 'gpu': gpu, 'watts': watts}


def read_samples(path):
    """The samples of a ``power_c<C>.jsonl``, in file order: ``[{'time': float, 'gpu': int, 'watts': float}]``.

    A missing file has none (a point recorded before the sampler, or one whose sampler never ran).
    A last line without its newline that is not JSON is a sample torn by the sampler's end and is
    skipped; any other line that is not a sample raises SweepResultsError, as does an unreadable file.
    """
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            text = handle.read()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise SweepResultsError('cannot read %s: %s' % (path, error.strerror or error)) from None
    lines = text.split('\n')
    torn = lines.pop()  # '' when the file ends with its newline
    samples = [_sample(line, path, number) for number, line in enumerate(lines, 1) if line.strip()]
    if torn.strip():
        try:
            samples.append(_sample(torn, path, len(lines) + 1))
        except SweepResultsError:
            pass  # cut short while the sampler was writing it
    return samples


def unix_seconds(value):
    """Unix seconds from a number or an ISO-8601 time ('2026-11-29T10:00:00Z', as the sweep notes a point's start)."""
    number = _number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.strip().replace('Z', '+00:00'))
        except ValueError:
            moment = None
        if moment is not None:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.timezone.utc)
            return moment.timestamp()
    raise SweepResultsError('%r is not a time (unix seconds or ISO-8601) for a power window' % (value,))


def _gpu_filter(gpus):
    """(the point's GPU count or None, the GPU indices to keep or None) from ``gpus``."""
    if gpus is None:
        return None, None
    if isinstance(gpus, bool):
        raise SweepResultsError('gpus must be a count or a list of GPU indices, not %r' % (gpus,))
    if isinstance(gpus, int):
        if gpus <= 0:
            raise SweepResultsError('gpus must be more than 0, not %d' % gpus)
        return gpus, None
    try:
        indices = frozenset(int(gpu) for gpu in gpus)
    except (TypeError, ValueError):
        raise SweepResultsError('gpus must be a count or a list of GPU indices, not %r' % (gpus,)) from None
    if not indices:
        raise SweepResultsError('gpus lists no GPU index')
    return len(indices), indices


def _per_token(energy_j, tokens):
    tokens = _number(tokens)
    return energy_j / tokens if tokens and tokens > 0 else None


def energy_figures(samples, started, ended, output_tokens, total_tokens, gpus=None):
    """``{'avg_power_w', 'peak_power_w', 'j_per_output_token', 'tok_s_per_kw'}`` of one point (the module's definitions).

    ``samples``: read_samples' list; ``started``/``ended``: the point's window, unix seconds or
    ISO-8601; ``output_tokens``/``total_tokens``: the point's totals (input plus output for the
    latter); ``gpus``: the point's GPU count, or the GPU indices that served it, or None for every
    GPU sampled. Every value is None without a sample in the window.
    """
    start, end = unix_seconds(started), unix_seconds(ended)
    count, keep = _gpu_filter(gpus)
    figures = dict.fromkeys(ENERGY_COLUMNS)
    window = [sample for sample in samples if start <= sample['time'] <= end
              and (keep is None or sample['gpu'] in keep)]
    if end <= start or not window:
        return figures
    readings = {}
    for sample in window:
        readings.setdefault(sample['time'], []).append(sample['watts'])
    count = count or len({sample['gpu'] for sample in window})
    # (t_k, P_k): the mean of the GPUs read at t_k, times the point's GPUs.
    totals = [(stamp, count * sum(watts) / len(watts)) for stamp, watts in sorted(readings.items())]
    edges = [(start, totals[0][1])] + totals + [(end, totals[-1][1])]
    energy_j = sum((right - left) * (left_power + right_power) / 2.0
                   for (left, left_power), (right, right_power) in zip(edges, edges[1:]))
    seconds = end - start
    figures['avg_power_w'] = energy_j / seconds / count
    figures['peak_power_w'] = max(sample['watts'] for sample in window)
    figures['j_per_output_token'] = _per_token(energy_j, output_tokens)
    tokens = _number(total_tokens)
    if energy_j > 0 and tokens is not None and tokens > 0:
        figures['tok_s_per_kw'] = (tokens / seconds) / (energy_j / seconds / 1000.0)
    return figures
