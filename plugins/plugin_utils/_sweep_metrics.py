# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Read and judge one bench jsonl point, compute its InferenceX columns and per-GPU numbers, and apply targets.

The arithmetic follows SemiAnalysisAI/InferenceX ``utils/process_result.py`` and the column
names follow the CSV export of its dashboard (InferenceX-app ``csv-export-helpers.ts``).
Plain Python plus PyYAML (for the targets file).
"""

from __future__ import annotations

import json
import math
import os
import re

import yaml

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_energy import ENERGY_COLUMNS
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_workers import node_concurrency, optional_int

THROUGHPUT_PER_GPU = 'Throughput/GPU (tok/s)'
OUTPUT_THROUGHPUT_PER_GPU = 'Output Throughput/GPU (tok/s)'
INPUT_THROUGHPUT_PER_GPU = 'Input Throughput/GPU (tok/s)'
MEDIAN_INTERACTIVITY = 'Median Interactivity (tok/s/user)'
DEFAULT_TARGET_METRIC = OUTPUT_THROUGHPUT_PER_GPU

_STATISTICS = (('Mean', 'mean'), ('Median', 'median'), ('P99', 'p99'), ('Std', 'std'))
# Display name -> the key stems a client may write (sglang: e2e_latency; InferenceX's own client: e2el).
_LATENCIES = (('TTFT', ('ttft',)), ('TPOT', ('tpot',)), ('ITL', ('itl',)), ('E2E Latency', ('e2e_latency', 'e2el')))


def latency_column(statistic, name):
    return '%s %s (ms)' % (statistic, name)


def _interactivity_column(statistic):
    return '%s Interactivity (tok/s/user)' % statistic


def _metric_columns():
    """InferenceX export order: throughputs, TTFT, TPOT, interactivity, ITL, E2E latency."""
    columns = [THROUGHPUT_PER_GPU, OUTPUT_THROUGHPUT_PER_GPU, INPUT_THROUGHPUT_PER_GPU]
    for name, _stems in _LATENCIES[:2]:
        columns.extend(latency_column(statistic, name) for statistic, _key in _STATISTICS)
    columns.extend(_interactivity_column(statistic) for statistic, _key in _STATISTICS)
    for name, _stems in _LATENCIES[2:]:
        columns.extend(latency_column(statistic, name) for statistic, _key in _STATISTICS)
    return columns


METRIC_COLUMNS = tuple(_metric_columns())
LATENCY_COLUMNS = frozenset(column for column in METRIC_COLUMNS if column.endswith('(ms)'))

# Topology: what served the point, 'mixed' (one worker per node) or a PD pair's label (1P1D).
IDENTITY_COLUMNS = ('Run ID', 'Host', 'Simulated', 'Model', 'ISL', 'OSL', 'Range Ratio', 'Variant', 'Topology', 'Concurrency',
                    'TP', 'PP', 'DP', 'EP', 'DP Attention', 'GPUs', 'Workers', 'Fleet', 'Node Concurrency')
RETOKENIZED = 'Retokenized Output Tokens'
TOKENIZER_MISMATCH = 'Tokenizer Mismatch'
# Beyond this fraction apart, the client's and the server's counts of the output are not the same tokens.
TOKENIZER_MISMATCH_LIMIT = 0.10
RUN_COLUMNS = ('Completed', 'Num Prompts', 'Duration (s)', 'Total Input Tokens', 'Total Output Tokens', RETOKENIZED,
               TOKENIZER_MISMATCH, 'Throughput (tok/s)', 'Output Throughput (tok/s)', 'Input Throughput (tok/s)')
# Issue 44's columns, by the names scripts read: the requests per second that met the search's limits (sweep_limits;
# empty without them), and the point's GPU power and energy from its power_c<C>.jsonl samples (_sweep_energy.py).
GOODPUT = 'goodput_req_s'
ANSWER_COLUMNS = (GOODPUT,) + ENERGY_COLUMNS
TARGET_COLUMNS = ('Target Metric', 'Target', 'Ratio', 'Below Target')
TRACE_COLUMNS = ('Status', 'File')
CSV_COLUMNS = IDENTITY_COLUMNS + METRIC_COLUMNS + RUN_COLUMNS + ANSWER_COLUMNS + TARGET_COLUMNS + TRACE_COLUMNS

INT_COLUMNS = frozenset(('ISL', 'OSL', 'Concurrency', 'TP', 'PP', 'DP', 'EP', 'GPUs', 'Workers', 'Node Concurrency',
                         'Completed', 'Num Prompts', 'Total Input Tokens', 'Total Output Tokens', RETOKENIZED))
BOOL_COLUMNS = frozenset(('Simulated', 'DP Attention', 'Fleet', 'Below Target', TOKENIZER_MISMATCH))
FLOAT_COLUMNS = frozenset(METRIC_COLUMNS + ANSWER_COLUMNS + (
    'Range Ratio', 'Duration (s)', 'Throughput (tok/s)', 'Output Throughput (tok/s)', 'Input Throughput (tok/s)', 'Target',
    'Ratio'))
NUMERIC_COLUMNS = tuple(column for column in CSV_COLUMNS if column in INT_COLUMNS | FLOAT_COLUMNS
                        and column not in ('Range Ratio', 'Target', 'Ratio'))

# The bench client's workload options a targets file may name, and the CSV column of each.
TARGET_WORKLOAD_KEYS = {'random_input_len': 'ISL', 'random_output_len': 'OSL', 'random_range_ratio': 'Range Ratio'}

# InferenceX's process_result.py keys for the same numbers, accepted as target metric names.
_INFERENCEX_KEYS = {
    'tput_per_gpu': THROUGHPUT_PER_GPU,
    'output_tput_per_gpu': OUTPUT_THROUGHPUT_PER_GPU,
    'input_tput_per_gpu': INPUT_THROUGHPUT_PER_GPU,
}
_INFERENCEX_KEYS.update(('%s_intvty' % key, _interactivity_column(statistic)) for statistic, key in _STATISTICS)

# SGLang server flags (argparse also takes the short prefixes the walkthrough uses, e.g. --dp).
_PARALLEL_FLAGS = {
    'TP': ('--tp-size', '--tensor-parallel-size', '--tp'),
    'PP': ('--pp-size', '--pipeline-parallel-size', '--pp'),
    'DP': ('--dp-size', '--data-parallel-size', '--dp'),
    'EP': ('--ep-size', '--expert-parallel-size', '--ep'),
}
_DP_ATTENTION_FLAG = '--enable-dp-attention'
_NO_LINE_HINT = 'the client writes no line when every request fails'


# ---------------------------------------------------------------- one point

def _finite(value):
    """A finite number from a record value, else None (bools, strings, NaN and Infinity are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def optional_float(value):
    """A finite float from a manifest or record value, else None."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _json_safe(value):
    """The record with NaN/Infinity spelled as strings, so Ansible can carry it as JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return 'NaN' if math.isnan(value) else ('Infinity' if value > 0 else '-Infinity')
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


def read_last_record(path):
    """Return ``(record, problem)`` for the last line of a bench jsonl; exactly one of them is None.

    The client appends one object per run and may write ``Infinity``/``NaN`` (Python's json
    reads both). Only the last non-blank line counts: it is the latest run.
    """
    name = os.path.basename(path)
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            lines = [line for line in handle.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return None, '%s is missing (%s, or the point never ran)' % (name, _NO_LINE_HINT)
    except OSError as error:
        return None, 'cannot read %s: %s' % (name, error.strerror or error)
    if not lines:
        return None, '%s has no result line (%s)' % (name, _NO_LINE_HINT)
    try:
        record = json.loads(lines[-1])
    except ValueError as error:
        return None, 'the last line of %s is not JSON (%s)' % (name, error)
    if not isinstance(record, dict):
        return None, 'the last line of %s is a JSON %s, not an object' % (name, type(record).__name__)
    return _json_safe(record), None


def record_problem(record, num_prompts=None):
    """Why a bench record cannot be used, or None when it can."""
    completed = _finite(record.get('completed'))
    if completed is None:
        return "the result has no 'completed' count"
    if num_prompts and completed < num_prompts:
        return 'only %d of %d requests completed' % (completed, num_prompts)
    if not num_prompts and completed <= 0:
        return 'no request completed'
    duration = record.get('duration')
    if _finite(duration) is None:
        return "the result has no finite 'duration' (found %r)" % (duration,)
    if duration <= 0:
        return 'duration is %r; it must be more than 0 seconds' % (duration,)
    for key in ('total_input_tokens', 'total_output_tokens'):
        if _finite(record.get(key)) is None:
            return "the result has no %r, so throughput cannot be computed" % key
    return None


def concurrency_problem(record, conc):
    """A file written for another concurrency must not stand in for this point (e.g. a copied or renamed file)."""
    reported = optional_int(record.get('max_concurrency'))
    if conc is not None and reported is not None and reported != conc:
        return 'the file reports max_concurrency %d, the manifest says %d' % (reported, conc)
    return None


def validate_point(path, num_prompts=None, conc=None):
    """Judge one point's jsonl: ``{valid, reason, record, path}`` (reason is '' when valid).

    The one validity check of the collection: the sweep's resume check, its point record and the
    report all call it. Invalid when the file is missing or has no line (the client writes none
    when every request fails), the last line is not a JSON object, fewer than ``num_prompts``
    requests completed (any completed when it is not given), the duration or token counts are
    missing, or the line reports another ``max_concurrency`` than ``conc`` (when both are known).
    """
    record, problem = read_last_record(path)
    if problem is None:
        problem = record_problem(record, num_prompts) or concurrency_problem(record, conc)
    return {'valid': problem is None, 'reason': problem or '', 'record': record, 'path': str(path)}


# ---------------------------------------------------------------- normalisation

def _flag_value(argv, names):
    """The value of the last of ``names`` in argv (``--flag V`` or ``--flag=V``), or None."""
    found = None
    for index, token in enumerate(argv):
        flag, equals, inline = token.partition('=')
        if flag not in names:
            continue
        if equals:
            found = inline
        elif index + 1 < len(argv):
            found = argv[index + 1]
    return found


def parallelism(argv):
    """TP, PP, DP, EP, DP Attention and GPUs of an engine argv.

    GPUs = TP x PP as in InferenceX. DP with DP attention splits the attention of the TP group
    and adds no GPU; only plain data parallelism (DP > 1 without ``--enable-dp-attention``)
    starts DP copies of the TP group and so multiplies the count.
    """
    argv = [str(token) for token in argv or ()]
    sizes = {}
    for key, names in _PARALLEL_FLAGS.items():
        value = _flag_value(argv, names)
        try:
            sizes[key] = 1 if value is None else int(value)
        except ValueError:
            raise SweepResultsError('%s %r in the engine argv is not an integer' % (names[0], value)) from None
        if sizes[key] < 1:
            raise SweepResultsError('%s %r in the engine argv must be at least 1' % (names[0], value))
    dp_attention = _DP_ATTENTION_FLAG in argv
    gpus = sizes['TP'] * sizes['PP'] * (1 if dp_attention else sizes['DP'])
    return dict(sizes, **{'DP Attention': dp_attention, 'GPUs': gpus})


def _latency(record, statistic_key, stems):
    for stem in stems:
        value = _finite(record.get('%s_%s_ms' % (statistic_key, stem)))
        if value is not None:
            return float(value)
    return None


def _per(amount, divisor):
    return None if amount is None or not divisor else amount / divisor


def latency_metrics(record):
    """Latency columns in ms and interactivity (1000 / TPOT ms, for each statistic, as InferenceX does)."""
    metrics = {}
    for name, stems in _LATENCIES:
        for statistic, key in _STATISTICS:
            metrics[latency_column(statistic, name)] = _latency(record, key, stems)
    for statistic, key in _STATISTICS:
        tpot = metrics[latency_column(statistic, 'TPOT')]
        metrics[_interactivity_column(statistic)] = _per(1000.0, tpot)
    return metrics


def throughput_metrics(record, gpus):
    """Throughputs computed from token counts and duration; the clients' own throughput keys differ by version."""
    duration = float(record['duration'])
    input_rate = record['total_input_tokens'] / duration
    output_rate = record['total_output_tokens'] / duration
    return {
        'Duration (s)': duration,
        'Total Input Tokens': int(record['total_input_tokens']),
        'Total Output Tokens': int(record['total_output_tokens']),
        'Throughput (tok/s)': input_rate + output_rate,
        'Output Throughput (tok/s)': output_rate,
        'Input Throughput (tok/s)': input_rate,
        THROUGHPUT_PER_GPU: (input_rate + output_rate) / gpus,
        OUTPUT_THROUGHPUT_PER_GPU: output_rate / gpus,
        INPUT_THROUGHPUT_PER_GPU: input_rate / gpus,
    }


def retokenized_gap(row):
    """How far the client's count of the output, re-encoded with its --tokenizer, is from the server's count
    (a fraction of the server's), or None when the client wrote no such count or the server counted none."""
    reported, retokenized = row['Total Output Tokens'], row[RETOKENIZED]
    if retokenized is None or not reported:
        return None
    return abs(retokenized - reported) / reported


def normalise(record, context):
    """One CSV row from a valid record and its context (identity and parallelism columns)."""
    row = dict.fromkeys(CSV_COLUMNS)
    row.update(context)
    row['Completed'] = int(record['completed'])
    for column, key in (('ISL', 'random_input_len'), ('OSL', 'random_output_len')):
        if row[column] is None:
            row[column] = optional_int(_finite(record.get(key)))
    if row['Range Ratio'] is None:
        row['Range Ratio'] = optional_float(_finite(record.get('random_range_ratio')))
    row.update(throughput_metrics(record, context['GPUs']))
    row[RETOKENIZED] = optional_int(_finite(record.get('total_output_tokens_retokenized')))
    gap = retokenized_gap(row)
    row[TOKENIZER_MISMATCH] = None if gap is None else gap > TOKENIZER_MISMATCH_LIMIT
    row.update(latency_metrics(record))
    return row


# ---------------------------------------------------------------- targets

def resolve_metric(name):
    """The CSV column a targets file names: exact, without its unit, or an InferenceX key."""
    text = str(name).strip()
    if text in NUMERIC_COLUMNS:
        return text
    if text in _INFERENCEX_KEYS:
        return _INFERENCEX_KEYS[text]
    wanted = text.lower()
    for column in NUMERIC_COLUMNS:
        if wanted in (column.lower(), re.sub(r'\s*\([^)]*\)$', '', column).lower()):
            return column
    raise SweepResultsError('unknown target metric %r; use one of: %s' % (name, ', '.join(NUMERIC_COLUMNS)))


def _target_value(conc, value, path):
    number = _finite(value)
    if number is None or number <= 0:
        raise SweepResultsError('%s: the target for concurrency %s is %r; it must be a number above 0' % (path, conc, value))
    return float(number)


def _concurrency_key(conc, path):
    try:
        key = int(str(conc).strip().lstrip('c'))
    except ValueError:
        raise SweepResultsError('%s: %r is not a concurrency (expected an integer such as 64)' % (path, conc)) from None
    if key < 1:
        raise SweepResultsError('%s: concurrency %r must be at least 1' % (path, conc))
    return key


def load_targets(path):
    """Read a targets file: ``{metric: COLUMN, targets: {CONC: VALUE}, higher_is_better: BOOL}``.

    ``metric`` defaults to Output Throughput/GPU; ``higher_is_better`` defaults to false for the
    latency columns (ms) and true for the rest.
    """
    try:
        with open(path, encoding='utf-8') as handle:
            data = yaml.safe_load(handle)
    except OSError as error:
        raise SweepResultsError('cannot read the targets file %s: %s' % (path, error.strerror or error)) from None
    except yaml.YAMLError as error:
        # One line: PyYAML's message spans several (where it broke, what it expected).
        raise SweepResultsError('the targets file %s is not YAML: %s' % (path, ' '.join(str(error).split()))) from None
    if not isinstance(data, dict) or not isinstance(data.get('targets'), dict) or not data['targets']:
        raise SweepResultsError('%s must be a mapping with a non-empty "targets" mapping of concurrency: value '
                                '(and optionally "metric" and "higher_is_better")' % path)
    unknown = sorted(set(data) - {'metric', 'targets', 'higher_is_better'} - set(TARGET_WORKLOAD_KEYS))
    if unknown:
        raise SweepResultsError('%s has unknown keys %s; allowed: metric, targets, higher_is_better, %s'
                                % (path, unknown, ', '.join(TARGET_WORKLOAD_KEYS)))
    workload = {}
    for key, column in TARGET_WORKLOAD_KEYS.items():
        if key in data:
            value = optional_float(data[key])
            if value is None or value < 0 or isinstance(data[key], bool):
                raise SweepResultsError('%s: %s must be a number, not %r' % (path, key, data[key]))
            workload[column] = value
    metric = resolve_metric(data.get('metric') or DEFAULT_TARGET_METRIC)
    higher_is_better = data.get('higher_is_better', metric not in LATENCY_COLUMNS)
    if not isinstance(higher_is_better, bool):
        raise SweepResultsError('%s: higher_is_better must be true or false, not %r' % (path, higher_is_better))
    targets = {}
    for conc, value in data['targets'].items():
        targets[_concurrency_key(conc, path)] = _target_value(conc, value, path)
    return {'metric': metric, 'higher_is_better': higher_is_better, 'targets': targets, 'path': str(path),
            'workload': workload}


def workload_mismatch(targets, rows):
    """What the targets file says it was measured at and the run's rows differ in: [(column, targets', run's)].

    A targets file may name its workload (random_input_len, random_output_len, random_range_ratio: the
    bench client's options); InferenceX's runs of 8192/1024 draw lengths with a range ratio of 0.8, the
    walkthrough's bench 1.0, and the per-GPU figures of the two are not the same workload's.
    """
    mismatches = []
    for column, expected in sorted(((targets or {}).get('workload') or {}).items(), key=lambda item: IDENTITY_COLUMNS.index(item[0])):
        used = sorted({row[column] for row in rows if row.get(column) is not None})
        if used and used != [expected]:
            mismatches.append((column, expected, used))
    return mismatches


def misses_target(ratio, higher_is_better):
    return ratio < 1.0 if higher_is_better else ratio > 1.0


def apply_targets(rows, targets):
    """Fill Target Metric, Target, Ratio (value / target) and Below Target (misses the target) in place.

    A target is per GPU at a concurrency of the sweep's list, so a fleet point (C x N through one
    router of N workers) is held to the target of its node concurrency C.
    """
    if not targets:
        return
    for row in rows:
        target = targets['targets'].get(row['Node Concurrency'])
        if target is None:
            continue
        value = row[targets['metric']]
        row['Target Metric'] = targets['metric']
        row['Target'] = target
        if value is None:
            row['Below Target'] = True
            continue
        row['Ratio'] = value / target
        row['Below Target'] = misses_target(row['Ratio'], targets['higher_is_better'])


def target_misses(rows, invalid, targets):
    """Each row that misses its target, and each targeted point the sweep ran without a valid result."""
    if not targets:
        return []
    misses = [{'host': row['Host'], 'conc': row['Concurrency'], 'variant': row['Variant'], 'metric': targets['metric'],
               'value': row[targets['metric']], 'target': row['Target'], 'ratio': row['Ratio'], 'reason': ''}
              for row in rows if row['Below Target']]
    valid = {(row['Host'], row['Node Concurrency']) for row in rows}
    for entry in invalid:
        target = targets['targets'].get(entry['node_conc'])
        if target is not None and (entry['host'], entry['node_conc']) not in valid:
            misses.append({'host': entry['host'], 'conc': entry['conc'], 'variant': entry['variant'], 'metric': targets['metric'],
                           'value': None, 'target': target, 'ratio': None, 'reason': 'no valid result: %s' % entry['reason']})
    misses.sort(key=lambda miss: (miss['host'], miss['conc'] or 0, miss['variant']))
    return misses


def untested_targets(manifests, targets):
    """Target concurrencies no manifest lists a point for (informational: the sweep did not try them)."""
    if not targets:
        return []
    tried = {node_concurrency(point) for manifest in manifests
             for point in manifest.get('points', []) if isinstance(point, dict)}
    return sorted(set(targets['targets']) - tried)
