# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Turn a sweep's results folder into InferenceX-comparable rows, a CSV, a report and a plot.

Everything is computed from the files alone (``<run_dir>/<host>/manifest.json`` and the
``mix_c<C>.jsonl`` lines sglang.bench_serving wrote), so a results folder copied anywhere
can be rebuilt. Plain Python plus PyYAML; matplotlib is imported only to draw the plot.

The arithmetic follows SemiAnalysisAI/InferenceX ``utils/process_result.py`` and the column
names follow the CSV export of its dashboard (InferenceX-app ``csv-export-helpers.ts``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re

import yaml

RESULTS_CSV = 'results.csv'
REPORT_MD = 'report.md'
THROUGHPUT_PNG = 'throughput.png'
MANIFEST = 'manifest.json'

# Manifest statuses whose points may enter the CSV (the role's own judgement comes first).
USABLE_STATUSES = ('ok', 'resumed')

THROUGHPUT_PER_GPU = 'Throughput/GPU (tok/s)'
OUTPUT_THROUGHPUT_PER_GPU = 'Output Throughput/GPU (tok/s)'
INPUT_THROUGHPUT_PER_GPU = 'Input Throughput/GPU (tok/s)'
MEDIAN_INTERACTIVITY = 'Median Interactivity (tok/s/user)'
DEFAULT_TARGET_METRIC = OUTPUT_THROUGHPUT_PER_GPU

_STATISTICS = (('Mean', 'mean'), ('Median', 'median'), ('P99', 'p99'), ('Std', 'std'))
# Display name -> the key stems a client may write (sglang: e2e_latency; InferenceX's own client: e2el).
_LATENCIES = (('TTFT', ('ttft',)), ('TPOT', ('tpot',)), ('ITL', ('itl',)), ('E2E Latency', ('e2e_latency', 'e2el')))


def _latency_column(statistic, name):
    return '%s %s (ms)' % (statistic, name)


def _interactivity_column(statistic):
    return '%s Interactivity (tok/s/user)' % statistic


def _metric_columns():
    """InferenceX export order: throughputs, TTFT, TPOT, interactivity, ITL, E2E latency."""
    columns = [THROUGHPUT_PER_GPU, OUTPUT_THROUGHPUT_PER_GPU, INPUT_THROUGHPUT_PER_GPU]
    for name, _stems in _LATENCIES[:2]:
        columns.extend(_latency_column(statistic, name) for statistic, _key in _STATISTICS)
    columns.extend(_interactivity_column(statistic) for statistic, _key in _STATISTICS)
    for name, _stems in _LATENCIES[2:]:
        columns.extend(_latency_column(statistic, name) for statistic, _key in _STATISTICS)
    return columns


METRIC_COLUMNS = tuple(_metric_columns())
LATENCY_COLUMNS = frozenset(column for column in METRIC_COLUMNS if column.endswith('(ms)'))

IDENTITY_COLUMNS = ('Run ID', 'Host', 'Simulated', 'Model', 'ISL', 'OSL', 'Variant', 'Concurrency',
                    'TP', 'PP', 'DP', 'EP', 'DP Attention', 'GPUs')
RUN_COLUMNS = ('Completed', 'Num Prompts', 'Duration (s)', 'Total Input Tokens', 'Total Output Tokens',
               'Throughput (tok/s)', 'Output Throughput (tok/s)', 'Input Throughput (tok/s)')
TARGET_COLUMNS = ('Target Metric', 'Target', 'Ratio', 'Below Target')
TRACE_COLUMNS = ('Status', 'File')
CSV_COLUMNS = IDENTITY_COLUMNS + METRIC_COLUMNS + RUN_COLUMNS + TARGET_COLUMNS + TRACE_COLUMNS

INT_COLUMNS = frozenset(('ISL', 'OSL', 'Concurrency', 'TP', 'PP', 'DP', 'EP', 'GPUs', 'Completed', 'Num Prompts',
                         'Total Input Tokens', 'Total Output Tokens'))
BOOL_COLUMNS = frozenset(('Simulated', 'DP Attention', 'Below Target'))
FLOAT_COLUMNS = frozenset(METRIC_COLUMNS + ('Duration (s)', 'Throughput (tok/s)', 'Output Throughput (tok/s)',
                                            'Input Throughput (tok/s)', 'Target', 'Ratio'))
NUMERIC_COLUMNS = tuple(column for column in CSV_COLUMNS if column in INT_COLUMNS | FLOAT_COLUMNS
                        and column not in ('Target', 'Ratio'))

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


class SweepResultsError(ValueError):
    """A results folder or targets file that cannot be read; the message names the file and the cause."""


# ---------------------------------------------------------------- one point

def _finite(value):
    """A finite number from a record value, else None (bools, strings, NaN and Infinity are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


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


def validate_point(path, num_prompts=None):
    """Judge one point's jsonl: ``{valid, reason, record, path}`` (reason is '' when valid).

    Invalid when the file is missing or has no line (the client writes none when every request
    fails), the last line is not a JSON object, fewer than ``num_prompts`` requests completed
    (any completed when it is not given), or the duration or token counts are missing.
    """
    record, problem = read_last_record(path)
    if problem is None:
        problem = record_problem(record, num_prompts)
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
            metrics[_latency_column(statistic, name)] = _latency(record, key, stems)
    for statistic, key in _STATISTICS:
        tpot = metrics[_latency_column(statistic, 'TPOT')]
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


def normalise(record, context):
    """One CSV row from a valid record and its context (identity and parallelism columns)."""
    row = dict.fromkeys(CSV_COLUMNS)
    row.update(context)
    row['Completed'] = int(record['completed'])
    for column, key in (('ISL', 'random_input_len'), ('OSL', 'random_output_len')):
        if row[column] is None:
            row[column] = _optional_int(_finite(record.get(key)))
    row.update(throughput_metrics(record, context['GPUs']))
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
        raise SweepResultsError('the targets file %s is not YAML: %s' % (path, error)) from None
    if not isinstance(data, dict) or not isinstance(data.get('targets'), dict) or not data['targets']:
        raise SweepResultsError('%s must be a mapping with a non-empty "targets" mapping of concurrency: value '
                                '(and optionally "metric" and "higher_is_better")' % path)
    unknown = sorted(set(data) - {'metric', 'targets', 'higher_is_better'})
    if unknown:
        raise SweepResultsError('%s has unknown keys %s; allowed: metric, targets, higher_is_better' % (path, unknown))
    metric = resolve_metric(data.get('metric') or DEFAULT_TARGET_METRIC)
    higher_is_better = data.get('higher_is_better', metric not in LATENCY_COLUMNS)
    if not isinstance(higher_is_better, bool):
        raise SweepResultsError('%s: higher_is_better must be true or false, not %r' % (path, higher_is_better))
    targets = {}
    for conc, value in data['targets'].items():
        targets[_concurrency_key(conc, path)] = _target_value(conc, value, path)
    return {'metric': metric, 'higher_is_better': higher_is_better, 'targets': targets, 'path': str(path)}


def misses_target(ratio, higher_is_better):
    return ratio < 1.0 if higher_is_better else ratio > 1.0


def apply_targets(rows, targets):
    """Fill Target Metric, Target, Ratio (value / target) and Below Target (misses the target) in place."""
    if not targets:
        return
    for row in rows:
        target = targets['targets'].get(row['Concurrency'])
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


# ---------------------------------------------------------------- the run folder

def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ('1', 'true', 'yes', 'on')
    return bool(value)


def _optional_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


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
    return manifest


def find_manifests(run_dir):
    """Every ``<run_dir>/<host>/manifest.json``, in host order."""
    if not os.path.isdir(run_dir):
        raise SweepResultsError('results folder %s does not exist' % run_dir)
    host_dirs = sorted(entry.path for entry in os.scandir(run_dir)
                       if entry.is_dir() and os.path.isfile(os.path.join(entry.path, MANIFEST)))
    if not host_dirs:
        raise SweepResultsError('no <host>/%s under %s; is it a results/<run_id> folder of a sweep?' % (MANIFEST, run_dir))
    return [(host_dir, read_manifest(host_dir)) for host_dir in host_dirs]


def _point_context(manifest, point):
    bench_args = manifest.get('bench_args') or {}
    return {
        'Run ID': manifest.get('run_id', ''),
        'Host': manifest['host'],
        'Simulated': manifest['simulated'],
        'Model': manifest.get('model', ''),
        'ISL': _optional_int(bench_args.get('random_input_len')),
        'OSL': _optional_int(bench_args.get('random_output_len')),
        'Variant': point.get('variant', ''),
        'Concurrency': _optional_int(point.get('conc')),
        'Num Prompts': _optional_int(point.get('num_prompts')),
        'Status': point.get('status') or 'ok',
        'File': point.get('file') or ('mix_c%s.jsonl' % point.get('conc')),
    }


def _variant_sizes(manifest, variant):
    spec = (manifest.get('variants') or {}).get(variant)
    if not isinstance(spec, dict):
        raise SweepResultsError('variant %r is not in the manifest, so TP/DP/EP are unknown' % (variant,))
    return parallelism(spec.get('argv'))


def _invalid_entry(context, reason):
    return {'host': context['Host'], 'conc': context['Concurrency'], 'variant': context['Variant'],
            'status': context['Status'], 'file': context['File'], 'reason': reason}


def _concurrency_problem(context, record):
    """A file written for another concurrency must not stand in for this point (e.g. a copied or renamed file)."""
    reported = _optional_int(record.get('max_concurrency'))
    if context['Concurrency'] is None:
        context['Concurrency'] = reported
    elif reported is not None and reported != context['Concurrency']:
        return 'the file reports max_concurrency %d, the manifest says %d' % (reported, context['Concurrency'])
    return None


def _evaluate_point(host_dir, manifest, point):
    """``(row, None)`` for a usable point, ``(None, invalid entry)`` otherwise."""
    context = _point_context(manifest, point)
    try:
        context.update(_variant_sizes(manifest, context['Variant']))
    except SweepResultsError as error:
        return None, _invalid_entry(context, str(error))
    checked = validate_point(os.path.join(host_dir, context['File']), context['Num Prompts'])
    reasons = []
    if context['Status'] not in USABLE_STATUSES:
        told = point.get('reason') or ''
        reasons.append('marked %s by the sweep%s' % (context['Status'], ': ' + told if told and told != checked['reason'] else ''))
    reasons.append(checked['reason'] if not checked['valid'] else _concurrency_problem(context, checked['record']))
    reasons = [reason for reason in reasons if reason]
    if reasons:
        return None, _invalid_entry(context, '; '.join(reasons))
    return normalise(checked['record'], context), None


def _sort_key(row):
    return (row['Host'], row['Concurrency'] or 0, row['Variant'])


def _invalid_sort_key(entry):
    return (entry['host'], entry['conc'] or 0, entry['variant'])


def collect(run_dir, targets_file=None):
    """Rows (valid points), invalid points, target misses and the manifests of a results folder."""
    manifests = find_manifests(run_dir)
    targets = load_targets(targets_file) if targets_file else None
    rows, invalid = [], []
    for host_dir, manifest in manifests:
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
        'manifests': [manifest for _host_dir, manifest in manifests],
        'simulated': any(manifest['simulated'] for _host_dir, manifest in manifests),
        'targets': targets,
        'rows': rows,
        'invalid': invalid,
        'below': target_misses(rows, invalid, targets),
        'untargeted': untested_targets(manifests, targets),
    }


def target_misses(rows, invalid, targets):
    """Each row that misses its target, and each targeted point the sweep ran without a valid result."""
    if not targets:
        return []
    misses = [{'host': row['Host'], 'conc': row['Concurrency'], 'variant': row['Variant'], 'metric': targets['metric'],
               'value': row[targets['metric']], 'target': row['Target'], 'ratio': row['Ratio'], 'reason': ''}
              for row in rows if row['Below Target']]
    valid = {(row['Host'], row['Concurrency']) for row in rows}
    for entry in invalid:
        target = targets['targets'].get(entry['conc'])
        if target is not None and (entry['host'], entry['conc']) not in valid:
            misses.append({'host': entry['host'], 'conc': entry['conc'], 'variant': entry['variant'], 'metric': targets['metric'],
                           'value': None, 'target': target, 'ratio': None, 'reason': 'no valid result: %s' % entry['reason']})
    misses.sort(key=_invalid_sort_key)
    return misses


def untested_targets(manifests, targets):
    """Target concurrencies no manifest lists a point for (informational: the sweep did not try them)."""
    if not targets:
        return []
    tried = {_optional_int(point.get('conc')) for _host_dir, manifest in manifests
             for point in manifest.get('points', []) if isinstance(point, dict)}
    return sorted(set(targets['targets']) - tried)


# ---------------------------------------------------------------- CSV

def _csv_cell(value):
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float):
        return repr(value)
    return str(value)


def render_csv(rows):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator='\n')
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([_csv_cell(row[column]) for column in CSV_COLUMNS])
    return buffer.getvalue()


def _typed(column, text):
    if text == '':
        return None
    if column in BOOL_COLUMNS:
        return text == 'true'
    if column in INT_COLUMNS:
        return int(text)
    if column in FLOAT_COLUMNS:
        return float(text)
    return text


def load_csv(path):
    """Rows of a results.csv with their types back (empty cells are None)."""
    with open(path, encoding='utf-8', newline='') as handle:
        return [{column: _typed(column, text) for column, text in row.items()} for row in csv.DictReader(handle)]


# ---------------------------------------------------------------- text

def _number(value, digits=1):
    return '-' if value is None else '%.*f' % (digits, value)


def verdict(row, higher_is_better=True):
    """The target cell: '-', 'ok (1.20x)', 'BELOW TARGET (0.52x)' or, for latency targets, 'ABOVE TARGET (1.80x)'."""
    if row['Target'] is None:
        return '-'
    if row['Ratio'] is None:
        return 'NO VALUE (%s missing)' % row['Target Metric']
    ratio = '(%.2fx)' % row['Ratio']
    if not row['Below Target']:
        return 'ok %s' % ratio
    return ('BELOW TARGET ' if higher_is_better else 'ABOVE TARGET ') + ratio


def _shape(row):
    return '%s/%s/%s' % (row['TP'], row['DP'], row['EP'])


def _run_ids(run):
    return ', '.join(sorted({str(manifest.get('run_id', '')) for manifest in run['manifests']}))


def simulated_banner(run):
    return 'SIMULATED run %s: numbers from the GPU-free rehearsal simulator, not hardware results' % _run_ids(run)


_TABLE_HEADER = ('host', 'conc', 'variant', 'TP/DP/EP', 'tok/s/GPU', 'out/GPU', 'in/GPU', 'tok/s/user', 'TTFT p99 ms',
                 'TPOT p99 ms', 'target')


def _table_cells(row, higher_is_better):
    return (row['Host'], str(row['Concurrency']), row['Variant'], _shape(row), _number(row[THROUGHPUT_PER_GPU]),
            _number(row[OUTPUT_THROUGHPUT_PER_GPU]), _number(row[INPUT_THROUGHPUT_PER_GPU]),
            _number(row[MEDIAN_INTERACTIVITY]), _number(row[_latency_column('P99', 'TTFT')]),
            _number(row[_latency_column('P99', 'TPOT')]), verdict(row, higher_is_better))


def _higher_is_better(run):
    return run['targets']['higher_is_better'] if run['targets'] else True


def text_table(run):
    """A fixed-width table for the play output, with a SIMULATED line first when any host was simulated."""
    lines = [simulated_banner(run)] if run['simulated'] else []
    if run['targets']:
        lines.append('target: %s per concurrency (%s)' % (run['targets']['metric'], os.path.basename(run['targets']['path'])))
    cells = [_TABLE_HEADER] + [_table_cells(row, _higher_is_better(run)) for row in run['rows']]
    widths = [max(len(line[index]) for line in cells) for index in range(len(_TABLE_HEADER))]
    numeric = set(range(4, len(_TABLE_HEADER) - 1)) | {1}
    for line in cells:
        lines.append('  '.join(cell.rjust(width) if index in numeric else cell.ljust(width)
                               for index, (cell, width) in enumerate(zip(line, widths))).rstrip())
    if not run['rows']:
        lines.append('(no valid point)')
    for entry in run['invalid']:
        lines.append('INVALID %s c%s %s (%s): %s' % (entry['host'], entry['conc'], entry['variant'], entry['status'], entry['reason']))
    return '\n'.join(lines)


def _bold_if(text, condition):
    return '**%s**' % text if condition else text


def _markdown_table(header, rows):
    lines = ['| %s |' % ' | '.join(header), '|%s|' % '|'.join('---' for _cell in header)]
    lines.extend('| %s |' % ' | '.join(str(cell).replace('|', '\\|') for cell in row) for row in rows)
    return lines


def _argv_block(argv):
    """One flag (with its values) per line, so the levers read like the walkthrough's command."""
    lines = []
    for token in argv or ():
        token = str(token)
        if token.startswith('--') or not lines:
            lines.append(token)
        else:
            lines[-1] += ' ' + token
    return ['```text'] + lines + ['```']


def _manifest_section(manifest):
    lines = ['', '## Host %s' % manifest['host'], '',
             '- run: `%s`%s' % (manifest.get('run_id', ''), ' (SIMULATED)' if manifest['simulated'] else ''),
             '- image: `%s`' % (manifest.get('image') or '-'),
             '- image digest: `%s`' % (manifest.get('image_digest') or '-'),
             '- model: `%s`' % (manifest.get('model') or '-'),
             '- recipe: `%s`' % (manifest.get('recipe') or '-'),
             '', '### Bench arguments', '']
    bench_args = manifest.get('bench_args') or {}
    lines.extend(_markdown_table(('argument', 'value'), [('`%s`' % key, '`%s`' % (value,)) for key, value in bench_args.items()]))
    for name, spec in (manifest.get('variants') or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        lines.extend(['', '### Engine levers: variant `%s`' % name, '', 'argv:', ''])
        lines.extend(_argv_block(spec.get('argv')))
        env = spec.get('env') or {}
        lines.extend(['', 'env:', ''])
        lines.extend(['```text'] + ['%s=%s' % (key, value) for key, value in env.items()] + ['```'])
    return lines


def render_report(run):
    title = '# Sweep report: %s' % _run_ids(run)
    lines = [title + (' (SIMULATED)' if run['simulated'] else ''), '']
    if run['simulated']:
        lines.extend(['> **%s.**' % simulated_banner(run), ''])
    lines.extend(['%d valid point(s), %d invalid, %d missing the target. Per-GPU numbers divide by the GPUs of the point '
                  '(TP x PP); see docs/results.md. Data: [`%s`](%s).' % (len(run['rows']), len(run['invalid']), len(run['below']),
                                                                         RESULTS_CSV, RESULTS_CSV), ''])
    if run['targets']:
        lines.extend(['Target: **%s** per concurrency from `%s` (%s is better).' % (
            run['targets']['metric'], os.path.basename(run['targets']['path']),
            'higher' if run['targets']['higher_is_better'] else 'lower'), ''])
    lines.extend(['## Results', ''])
    header = ('host', 'conc', 'variant', 'TP/DP/EP', 'tok/s/GPU total', 'tok/s/GPU output', 'tok/s/GPU input',
              'tok/s/user (median)', 'TTFT p99 ms', 'TPOT p99 ms', 'target', 'ratio / result')
    lines.extend(_markdown_table(header, [
        (row['Host'], row['Concurrency'], row['Variant'], _shape(row), _number(row[THROUGHPUT_PER_GPU]),
         _number(row[OUTPUT_THROUGHPUT_PER_GPU]), _number(row[INPUT_THROUGHPUT_PER_GPU]), _number(row[MEDIAN_INTERACTIVITY]),
         _number(row[_latency_column('P99', 'TTFT')]), _number(row[_latency_column('P99', 'TPOT')]),
         _number(row['Target']), _bold_if(verdict(row, _higher_is_better(run)), row['Below Target']))
        for row in run['rows']]))
    lines.extend(['', '![throughput per GPU against interactivity](%s)' % THROUGHPUT_PNG, ''])
    lines.extend(_problem_sections(run))
    for manifest in run['manifests']:
        lines.extend(_manifest_section(manifest))
    return '\n'.join(lines) + '\n'


def _problem_sections(run):
    lines = ['## Invalid or aborted points', '']
    if run['invalid']:
        lines.append('Not in the CSV, the table or the plot:')
        lines.append('')
        lines.extend('- %s c%s `%s` (%s, `%s`): %s' % (entry['host'], entry['conc'], entry['variant'], entry['status'],
                                                       entry['file'], entry['reason']) for entry in run['invalid'])
    else:
        lines.append('None.')
    missing = [miss for miss in run['below'] if miss['value'] is None]
    if missing:
        lines.extend(['', 'Targeted points without a valid result count as missing the target:', ''])
        lines.extend('- %s c%s: target %s' % (miss['host'], miss['conc'], _number(miss['target'])) for miss in missing)
    if run['untargeted']:
        lines.extend(['', 'Targets for concurrencies the sweep did not run: %s.' % ', '.join('c%d' % conc for conc in run['untargeted'])])
    return lines + ['']


# ---------------------------------------------------------------- plot

# InferenceX's main chart: token throughput per GPU against median interactivity; output throughput beside it.
PLOT_PANELS = ((THROUGHPUT_PER_GPU, 'Token throughput per GPU (tok/s/GPU)'),
               (OUTPUT_THROUGHPUT_PER_GPU, 'Output token throughput per GPU (tok/s/GPU)'))


def _series(rows):
    """Rows grouped by (host, variant); the label names the host only when there are several."""
    several_hosts = len({row['Host'] for row in rows}) > 1
    groups = {}
    for row in rows:
        label = '%s %s' % (row['Host'], row['Variant']) if several_hosts else row['Variant']
        groups.setdefault(label, []).append(row)
    return groups


def _draw_panel(axes, run, column, label):
    for name, rows in _series(run['rows']).items():
        points = sorted((row[MEDIAN_INTERACTIVITY], row[column], row) for row in rows
                        if row[MEDIAN_INTERACTIVITY] is not None and row[column] is not None)
        if not points:
            continue
        axes.plot([x for x, _y, _row in points], [y for _x, y, _row in points], marker='o', label=name)
        for x, y, row in points:
            axes.annotate('c%s %s' % (row['Concurrency'], row['Variant']), (x, y), textcoords='offset points',
                          xytext=(4, 4), fontsize=7)
    targets = run['targets']
    if targets and targets['metric'] == column:
        marked = [(row[MEDIAN_INTERACTIVITY], row['Target'], row['Below Target']) for row in run['rows']
                  if row['Target'] is not None and row[MEDIAN_INTERACTIVITY] is not None]
        if marked:
            axes.scatter([x for x, _t, _m in marked], [t for _x, t, _m in marked], marker='_', s=200,
                         c=['red' if miss else 'black' for _x, _t, miss in marked], label='target (red: missed)')
    if not run['rows']:
        axes.text(0.5, 0.5, 'no valid point', ha='center', va='center', transform=axes.transAxes)
    axes.set_xlabel('Interactivity (tok/s/user, 1000 / median TPOT)')
    axes.set_ylabel(label)
    axes.grid(True, alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)


def render_plot(run):
    """PNG bytes of the throughput-per-GPU vs interactivity chart (Agg canvas, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(13, 5.5), dpi=100)
    FigureCanvasAgg(figure)
    for index, (column, label) in enumerate(PLOT_PANELS):
        _draw_panel(figure.add_subplot(1, len(PLOT_PANELS), index + 1), run, column, label)
    models = ', '.join(sorted({os.path.basename(str(manifest.get('model') or '').rstrip('/')) or '?' for manifest in run['manifests']}))
    title = '%s sweep %s: throughput per GPU vs interactivity' % (models, _run_ids(run))
    if run['simulated']:
        title = 'SIMULATED (not hardware numbers): ' + title
    figure.suptitle(title, color='darkred' if run['simulated'] else 'black')
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format='png', metadata={'Software': None})
    return buffer.getvalue()


# ---------------------------------------------------------------- rebuild

def _write_if_changed(path, content, check_mode):
    """Write content (bytes) unless the file already holds it; return whether it differed."""
    try:
        with open(path, 'rb') as handle:
            if handle.read() == content:
                return False
    except OSError:
        pass
    if not check_mode:
        temporary = path + '.tmp'
        with open(temporary, 'wb') as handle:
            handle.write(content)
        os.replace(temporary, path)
    return True


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
               if _write_if_changed(os.path.join(run_dir, name), content, check_mode)]
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
        'table': text_table(run),
        'changed_files': changed,
        'changed': bool(changed),
    }
