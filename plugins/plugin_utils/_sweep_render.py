# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Render a collected run as text: the CSV (and reading it back), the play's fixed-width table and the Markdown report.

The report's fleet section (several nodes) shows _sweep_fleet's comparison; every figure from a
simulated engine is labelled SIMULATED where it appears.
"""

from __future__ import annotations

import csv
import io
import os

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_fleet import is_below_median, shortfall
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    BOOL_COLUMNS,
    CSV_COLUMNS,
    FLOAT_COLUMNS,
    INPUT_THROUGHPUT_PER_GPU,
    INT_COLUMNS,
    MEDIAN_INTERACTIVITY,
    OUTPUT_THROUGHPUT_PER_GPU,
    RETOKENIZED,
    THROUGHPUT_PER_GPU,
    TOKENIZER_MISMATCH,
    TOKENIZER_MISMATCH_LIMIT,
    latency_column,
    retokenized_gap,
    workload_mismatch,
)

RESULTS_CSV = 'results.csv'
REPORT_MD = 'report.md'
THROUGHPUT_PNG = 'throughput.png'


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


def served_as(row):
    """The variant cell: a mixed point's variant, or the PD pair that served the point (1P1D), so that mixed and PD
    results of one workload stand side by side."""
    topology = row.get('Topology') or 'mixed'
    return row['Variant'] if topology == 'mixed' else topology


def host_label(row):
    """The host cell: a fleet point or a point served by several workers says so (its per-GPU figures count all of theirs)."""
    if row['Fleet']:
        return '%s (fleet: %s workers)' % (row['Host'], row['Workers'] or '?')
    if (row['Workers'] or 1) > 1:
        return '%s (%d workers)' % (row['Host'], row['Workers'])
    return row['Host']


def run_ids(run):
    """The run IDs of every manifest, for titles."""
    return ', '.join(sorted({str(manifest.get('run_id', '')) for manifest in run['manifests']}))


def invalid_line(entry, markdown=False):
    """One invalid point as the play's table, the task's warning and (with its file) the report name it."""
    if markdown:
        return '%s c%s `%s` (%s, `%s`): %s' % (
            entry['host'], entry['conc'], entry['variant'], entry['status'], entry['file'], entry['reason'])
    return '%s c%s %s (%s): %s' % (entry['host'], entry['conc'], entry['variant'], entry['status'], entry['reason'])


def tokenizer_mismatch_line(row):
    """One point whose output the client's tokenizer counts differently from the server (issue: wrong tokens counted)."""
    return ('%s c%s %s: the client re-encoded the output to %d tokens where the server counted %d (%s apart, more than '
            '%s): the throughput figures count the server\'s tokens, which the client\'s --tokenizer does not '
            'reproduce. Next step: check that the sweep\'s tokenizer (sweep_tokenizer) and the engine\'s are the '
            'model\'s own, then rerun the point.' % (
                host_label(row), row['Concurrency'], row['Variant'], row[RETOKENIZED], row['Total Output Tokens'],
                _percent(retokenized_gap(row)), _percent(TOKENIZER_MISMATCH_LIMIT, 0)))


def tokenizer_mismatches(run):
    return [row for row in run['rows'] if row[TOKENIZER_MISMATCH]]


def simulated_banner(run):
    return 'SIMULATED run %s: numbers from the GPU-free rehearsal simulator, not hardware results' % run_ids(run)


_TABLE_HEADER = ('host', 'conc', 'variant', 'TP/DP/EP', 'tok/s/GPU', 'out/GPU', 'in/GPU', 'tok/s/user', 'TTFT p99 ms',
                 'TPOT p99 ms', 'target')


def _table_cells(row, higher_is_better):
    return (host_label(row), str(row['Concurrency']), served_as(row), _shape(row), _number(row[THROUGHPUT_PER_GPU]),
            _number(row[OUTPUT_THROUGHPUT_PER_GPU]), _number(row[INPUT_THROUGHPUT_PER_GPU]),
            _number(row[MEDIAN_INTERACTIVITY]), _number(row[latency_column('P99', 'TTFT')]),
            _number(row[latency_column('P99', 'TPOT')]), verdict(row, higher_is_better))


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
        lines.append('INVALID ' + invalid_line(entry))
    lines.extend('TOKENIZER MISMATCH ' + tokenizer_mismatch_line(row) for row in tokenizer_mismatches(run))
    lines.extend(_fleet_text(run['fleet']))
    return '\n'.join(lines)


def _percent(fraction, digits=1):
    return '%.*f %%' % (digits, fraction * 100)


def below_median_line(entry):
    """One node flagged below the fleet median, as the play's table, the task's warning and the report name it."""
    return '%s c%s: %s tok/s/GPU, %s below the fleet median %s' % (
        entry['host'], entry['node_conc'], _number(entry['value']), _percent(entry['shortfall']), _number(entry['median']))


def _simulated_mark(fleet, host):
    return ' (SIMULATED)' if host in fleet['simulated_hosts'] else ''


def _fleet_point_line(point):
    return '%s c%s %s (fleet: %s workers x c%s): %s tok/s/GPU%s' % (
        point['host'], point['conc'], point['variant'], point['workers'] or '?', point['node_conc'],
        _number(point['value']), ' (SIMULATED)' if point['simulated'] else '')


def _fleet_text(fleet):
    if not fleet:
        return []
    lines = ['', 'fleet: %s per node, median per concurrency; BELOW MEDIAN: more than %s under it%s' % (
        fleet['metric'], _percent(fleet['threshold'], 0), ' (SIMULATED: %s)' % ', '.join(fleet['simulated_hosts'])
        if fleet['simulated_hosts'] else '')]
    for concurrency in fleet['concurrencies']:
        values = ', '.join('%s %s' % (host, _number(value)) for host, value in concurrency['values'].items())
        lines.append('  c%s: median %s (%s)' % (concurrency['node_conc'], _number(concurrency['median']), values))
    lines.extend('  BELOW MEDIAN %s%s' % (below_median_line(entry), _simulated_mark(fleet, entry['host'])) for entry in fleet['below'])
    if not fleet['below']:
        lines.append('  every node within %s of the fleet median' % _percent(fleet['threshold'], 0))
    lines.extend('  fleet point ' + _fleet_point_line(point) for point in fleet['fleet_points'])
    return lines


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


def _topology_text(topology):
    if topology.get('kind') != 'pd':
        return 'mixed (one worker per node)'
    return '%s (prefill %s; decode %s; router on %s; the per-GPU figures count every leg\'s GPUs)' % (
        topology.get('label') or 'PD', ', '.join(topology.get('prefill') or ()) or '-',
        ', '.join(topology.get('decode') or ()) or '-', topology.get('router') or '-')


def _manifest_section(manifest):
    lines = ['', '## Host %s' % manifest['host'], '',
             '- run: `%s`%s' % (manifest.get('run_id', ''), ' (SIMULATED)' if manifest['simulated'] else ''),
             '- image: `%s`' % (manifest.get('image') or '-'),
             '- image digest: `%s`' % (manifest.get('image_digest') or '-'),
             '- stack: %s' % ((manifest.get('stack') or {}).get('summary') or '-'),
             '- model: `%s`' % (manifest.get('model') or '-'),
             '- recipe: `%s`' % (manifest.get('recipe') or '-'),
             '- topology: %s' % _topology_text(manifest.get('topology') or {}),
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
        lines.extend(['', 'accuracy smoke: %s' % accuracy_text(spec.get('accuracy'), manifest['simulated'])])
    return lines


def accuracy_text(accuracy, simulated=False):
    """The verify step's accuracy smoke for one variant, as the manifest keeps it (its own line), in words."""
    if not isinstance(accuracy, dict) or not accuracy.get('line'):
        return 'not recorded (router_accuracy_questions 0, or a run before the smoke existed)'
    return '%s%s%s' % (accuracy['line'], '' if accuracy.get('passed') else ' FAILED',
                       ' [SIMULATED engine]' if simulated else '')


def _divisor_text(run):
    if any(row['Workers'] for row in run['rows']):
        return 'the GPUs of the workers that served the point (serving workers x TP x PP)'
    return 'the GPUs of the point (TP x PP)'


def _values(values):
    return '/'.join(str(value) for value in values) or '?'


def workload_lines(run):
    """The workload the points ran (the bench client's lengths and range ratio), for comparing with others."""
    if not run['rows']:
        return []
    used = {column: sorted({row[column] for row in run['rows'] if row.get(column) is not None})
            for column in ('ISL', 'OSL', 'Range Ratio')}
    return ['Workload: `--dataset-name random`, ISL %s, OSL %s, `--random-range-ratio` %s (each request\'s lengths drawn '
            'between ratio x and the full ISL and OSL). InferenceX\'s fixed-length runs use 0.8; compare with its figures '
            'at the same ratio (docs/results.md).' % (_values(used['ISL']), _values(used['OSL']), _values(used['Range Ratio'])), '']


def target_workload_lines(run):
    """One line per workload option the targets file was measured at and the run was not."""
    names = {'ISL': '`--random-input-len`', 'OSL': '`--random-output-len`', 'Range Ratio': '`--random-range-ratio`'}
    return ['The targets were measured at %s %s; this run used %s: not the same workload, so the ratios to target '
            'compare unlike figures.' % (names[column], str(expected), _values(used))
            for column, expected, used in workload_mismatch(run['targets'], run['rows'])]


def render_report(run):
    title = '# Sweep report: %s' % run_ids(run)
    lines = [title + (' (SIMULATED)' if run['simulated'] else ''), '']
    if run['simulated']:
        lines.extend(['> **%s.**' % simulated_banner(run), ''])
    lines.extend(['%d valid point(s), %d invalid, %d missing the target. Per-GPU numbers divide by %s; see '
                  'docs/results.md. Data: [`%s`](%s).' % (len(run['rows']), len(run['invalid']), len(run['below']),
                                                          _divisor_text(run), RESULTS_CSV, RESULTS_CSV), ''])
    lines.extend(workload_lines(run))
    if run['targets']:
        lines.extend(['Target: **%s** per concurrency from `%s` (%s is better).' % (
            run['targets']['metric'], os.path.basename(run['targets']['path']),
            'higher' if run['targets']['higher_is_better'] else 'lower'), ''])
        lines.extend(['**%s**' % line for line in target_workload_lines(run)] + [''] * bool(target_workload_lines(run)))
    lines.extend(['## Results', ''])
    header = ('host', 'conc', 'variant', 'TP/DP/EP', 'tok/s/GPU total', 'tok/s/GPU output', 'tok/s/GPU input',
              'tok/s/user (median)', 'TTFT p99 ms', 'TPOT p99 ms', 'target', 'ratio / result')
    lines.extend(_markdown_table(header, [
        (host_label(row), row['Concurrency'], served_as(row), _shape(row), _number(row[THROUGHPUT_PER_GPU]),
         _number(row[OUTPUT_THROUGHPUT_PER_GPU]), _number(row[INPUT_THROUGHPUT_PER_GPU]), _number(row[MEDIAN_INTERACTIVITY]),
         _number(row[latency_column('P99', 'TTFT')]), _number(row[latency_column('P99', 'TPOT')]),
         _number(row['Target']), _bold_if(verdict(row, _higher_is_better(run)), row['Below Target']))
        for row in run['rows']]))
    lines.extend(['', '![throughput per GPU against interactivity](%s)' % THROUGHPUT_PNG, ''])
    lines.extend(_fleet_section(run['fleet']))
    lines.extend(_problem_sections(run))
    for manifest in run['manifests']:
        lines.extend(_manifest_section(manifest))
    return '\n'.join(lines) + '\n'


def _fleet_cell(value, median):
    if value is None:
        return '-'
    if is_below_median(value, median):
        return '**%s (%s below)**' % (_number(value), _percent(shortfall(value, median)))
    return _number(value)


def _fleet_section(fleet):
    if not fleet:
        return []
    simulated = fleet['simulated_hosts']
    lines = ['## Fleet: %s per node%s' % (fleet['metric'], ' (SIMULATED)' if simulated else ''), '',
             'Each node swept through its own router, at each concurrency; the fleet median of the nodes with a valid '
             'point there; in bold the nodes more than %s below it (exactly %s below is not flagged).' % (
                 _percent(fleet['threshold'], 0), _percent(fleet['threshold'], 0))]
    if simulated:
        lines.append('SIMULATED figures (the GPU-free rehearsal simulator, not hardware results): %s.' % ', '.join(simulated))
    lines.append('')
    header = ['conc'] + [host + _simulated_mark(fleet, host) for host in fleet['hosts']] + [
        'fleet median' + (' (SIMULATED)' if simulated else '')]
    lines.extend(_markdown_table(header, [
        [concurrency['node_conc']] + [_fleet_cell(concurrency['values'].get(host), concurrency['median'])
                                      for host in fleet['hosts']] + [_number(concurrency['median'])]
        for concurrency in fleet['concurrencies']]))
    lines.append('')
    if fleet['below']:
        lines.extend(['Nodes more than %s below the fleet median:' % _percent(fleet['threshold'], 0), ''])
        lines.extend('- **%s**%s' % (below_median_line(entry), _simulated_mark(fleet, entry['host'])) for entry in fleet['below'])
    else:
        lines.append('Every node is within %s of the fleet median.' % _percent(fleet['threshold'], 0))
    if fleet['fleet_points']:
        lines.extend(['', 'Fleet points (one router for the whole fleet; they do not tell the nodes apart):', ''])
        lines.extend('- ' + _fleet_point_line(point) for point in fleet['fleet_points'])
    return lines + ['']


def _problem_sections(run):
    lines = ['## Tokenizer mismatch', '']
    if tokenizer_mismatches(run):
        lines.append('Points whose output token counts disagree by more than %s (still in the CSV, with '
                     '`%s` true):' % (_percent(TOKENIZER_MISMATCH_LIMIT, 0), TOKENIZER_MISMATCH))
        lines.append('')
        lines.extend('- **%s**' % tokenizer_mismatch_line(row) for row in tokenizer_mismatches(run))
    else:
        lines.append('None: on every point the client\'s re-encoded output count is within %s of the server\'s '
                     '(or the client wrote none).' % _percent(TOKENIZER_MISMATCH_LIMIT, 0))
    lines.extend(['', '## Invalid or aborted points', ''])
    if run['invalid']:
        lines.append('Not in the CSV, the table or the plot:')
        lines.append('')
        lines.extend('- ' + invalid_line(entry, markdown=True) for entry in run['invalid'])
    else:
        lines.append('None.')
    missing = [miss for miss in run['below'] if miss['value'] is None]
    if missing:
        lines.extend(['', 'Targeted points without a valid result count as missing the target:', ''])
        lines.extend('- %s c%s: target %s' % (miss['host'], miss['conc'], _number(miss['target'])) for miss in missing)
    if run['untargeted']:
        lines.extend(['', 'Targets for concurrencies the sweep did not run: %s.' % ', '.join('c%d' % conc for conc in run['untargeted'])])
    return lines + ['']
