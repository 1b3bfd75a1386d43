# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Draw a collected run's throughput-per-GPU against interactivity chart as PNG bytes (matplotlib, imported only here)."""

from __future__ import annotations

import io
import os

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import (
    MEDIAN_INTERACTIVITY,
    OUTPUT_THROUGHPUT_PER_GPU,
    THROUGHPUT_PER_GPU,
)
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_render import run_ids, served_as

# InferenceX's main chart: token throughput per GPU against median interactivity; output throughput beside it.
PLOT_PANELS = ((THROUGHPUT_PER_GPU, 'Token throughput per GPU (tok/s/GPU)'),
               (OUTPUT_THROUGHPUT_PER_GPU, 'Output token throughput per GPU (tok/s/GPU)'))


def _series(rows):
    """Rows grouped by (host, fleet, variant); the label names the host only when there are several.

    A fleet point (one router for the whole fleet) is not a point of its node's curve.
    """
    several_hosts = len({row['Host'] for row in rows}) > 1
    groups = {}
    for row in rows:
        label = ('fleet ' if row['Fleet'] else '') + served_as(row)
        groups.setdefault('%s %s' % (row['Host'], label) if several_hosts else label, []).append(row)
    return groups


def _draw_panel(axes, run, column, label):
    for name, rows in _series(run['rows']).items():
        points = sorted(((row[MEDIAN_INTERACTIVITY], row[column], row) for row in rows
                         if row[MEDIAN_INTERACTIVITY] is not None and row[column] is not None),
                        key=lambda point: point[:2])
        if not points:
            continue
        axes.plot([x for x, _y, _row in points], [y for _x, y, _row in points], marker='o', label=name)
        for x, y, row in points:
            axes.annotate('c%s %s' % (row['Concurrency'], served_as(row)), (x, y), textcoords='offset points',
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
    title = '%s sweep %s: throughput per GPU vs interactivity' % (models, run_ids(run))
    if run['simulated']:
        title = 'SIMULATED (not hardware numbers): ' + title
    figure.suptitle(title, color='darkred' if run['simulated'] else 'black')
    figure.tight_layout()
    buffer = io.BytesIO()
    # dpi='figure': the figure's own 100 dpi, whatever a matplotlibrc's savefig.dpi says (1300 x 550 pixels).
    figure.savefig(buffer, format='png', dpi='figure', metadata={'Software': None})
    return buffer.getvalue()
