# SPDX-License-Identifier: Apache-2.0
"""The throughput-per-GPU against interactivity plot."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_plot as sweep_plot
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_report as sweep_report

from .sweep_runs import PNG_SIGNATURE, bench_record, point, standard_run, write_lines, write_manifest, write_targets


def test_the_plot_is_a_png_drawn_the_same_way_twice_without_matplotlibs_version(run_dir, tmp_path):
    standard_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {64: 655.36}\n'))
    image = sweep_plot.render_plot(run)
    assert image[:8] == PNG_SIGNATURE
    # 13 x 5.5 inches at 100 dpi: wide enough for two panels and their labels.
    assert (int.from_bytes(image[16:20], 'big'), int.from_bytes(image[20:24], 'big')) == (1300, 550)
    assert sweep_plot.render_plot(run) == image
    # No Software chunk naming matplotlib's version: another matplotlib does not change the file for that alone.
    assert b'Software' not in image and b'Matplotlib' not in image


def test_the_png_and_its_size_do_not_follow_the_controllers_matplotlibrc(run_dir, monkeypatch):
    import matplotlib

    monkeypatch.setitem(matplotlib.rcParams, 'figure.dpi', 200.0)
    monkeypatch.setitem(matplotlib.rcParams, 'savefig.dpi', 200.0)
    monkeypatch.setitem(matplotlib.rcParams, 'savefig.format', 'svg')
    standard_run(run_dir)
    image = sweep_plot.render_plot(sweep_report.collect(str(run_dir)))
    assert image[:8] == PNG_SIGNATURE
    assert (int.from_bytes(image[16:20], 'big'), int.from_bytes(image[20:24], 'big')) == (1300, 550)


def plotted_figure(run, monkeypatch):
    """The figure render_plot saves (it keeps the figure to itself)."""
    from matplotlib.figure import Figure

    saved = []
    savefig = Figure.savefig

    def spy(figure, *args, **kwargs):
        saved.append(figure)
        return savefig(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, 'savefig', spy)
    sweep_plot.render_plot(run)
    return saved[0]


def plot_title(run, monkeypatch):
    return plotted_figure(run, monkeypatch).get_suptitle()


def test_each_panel_plots_every_variant_against_interactivity_with_labels_and_targets(run_dir, tmp_path, monkeypatch):
    standard_run(run_dir)
    run = sweep_report.collect(str(run_dir), write_targets(tmp_path / 't.yml', 'targets: {32: 200, 64: 655.36}\n'))
    total, output = plotted_figure(run, monkeypatch).axes
    # Side by side, each the figure's whole height: one row of two panels.
    assert [axes.get_subplotspec().get_geometry() for axes in (total, output)] == [(1, 2, 0, 0), (1, 2, 1, 1)]
    for axes, label in zip((total, output), ('Token throughput per GPU (tok/s/GPU)', 'Output token throughput per GPU (tok/s/GPU)')):
        assert (axes.get_xlabel(), axes.get_ylabel()) == ('Interactivity (tok/s/user, 1000 / median TPOT)', label)
        assert [(line.get_label(), line.get_marker()) for line in axes.get_lines()] == [('nodp', 'o'), ('dp', 'o')]
        # Each label sits 4 points up and right of its mark, whatever the axes' scale.
        assert [(text.get_text(), text.get_fontsize(), text.xyann, text.anncoords) for text in axes.texts] == [
            ('c64 nodp', 7, (4, 4), 'offset points'), ('c32 nodp', 7, (4, 4), 'offset points'),
            ('c256 dp', 7, (4, 4), 'offset points')]
    nodp = output.get_lines()[0]
    assert list(nodp.get_xdata()) == [pytest.approx(1000 / 28.5), pytest.approx(1000 / 19.0)]
    assert list(nodp.get_ydata()) == [pytest.approx(327.68), pytest.approx(204.8)]
    marks, = output.collections
    assert [tuple(point) for point in marks.get_offsets()] == [
        (pytest.approx(1000 / 19.0), 200.0), (pytest.approx(1000 / 28.5), 655.36)]
    assert [tuple(color) for color in marks.get_facecolors()] == [(0.0, 0.0, 0.0, 1.0), (1.0, 0.0, 0.0, 1.0)]
    # A wide dash at each target, named in the legend.
    from matplotlib.markers import MarkerStyle

    dash = MarkerStyle('_')
    assert (marks.get_paths()[0].vertices == dash.get_path().transformed(dash.get_transform()).vertices).all()
    assert (list(marks.get_sizes()), marks.get_label()) == ([200], 'target (red: missed)')
    assert [text.get_text() for text in output.get_legend().get_texts()] == ['nodp', 'dp', 'target (red: missed)']
    assert not total.collections


def test_an_empty_plot_says_so(run_dir, monkeypatch):
    write_manifest(run_dir, 'infera-node-1', [point(32)])
    for axes in plotted_figure(sweep_report.collect(str(run_dir)), monkeypatch).axes:
        assert [text.get_text() for text in axes.texts] == ['no valid point']


def test_a_point_without_interactivity_is_left_off_the_plot(run_dir, monkeypatch):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(64)])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, median_tpot_ms=None))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64))
    lines = plotted_figure(sweep_report.collect(str(run_dir)), monkeypatch).axes[0].get_lines()
    assert [len(line.get_xdata()) for line in lines] == [1]


def test_a_variant_with_nothing_to_plot_leaves_the_next_variant_drawn(run_dir, monkeypatch):
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(256, variant='dp')])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, median_tpot_ms=None))
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256))
    lines = plotted_figure(sweep_report.collect(str(run_dir)), monkeypatch).axes[0].get_lines()
    assert [line.get_label() for line in lines] == ['dp']


@pytest.mark.parametrize('simulated, start', [
    (True, 'SIMULATED (not hardware numbers): DeepSeek-V4-Pro sweep 20261129T100000Z'),
    (False, 'DeepSeek-V4-Pro sweep 20261129T100000Z'),
], ids=['simulated', 'hardware'])
def test_the_plot_title_says_simulated_only_for_a_simulated_run(run_dir, monkeypatch, simulated, start):
    standard_run(run_dir, simulated=simulated)
    assert plot_title(sweep_report.collect(str(run_dir)), monkeypatch).startswith(start)


@pytest.mark.parametrize('simulated, colour', [(True, 'darkred'), (False, 'black')], ids=['simulated', 'hardware'])
def test_the_whole_title_and_its_colour(run_dir, monkeypatch, simulated, colour):
    standard_run(run_dir, simulated=simulated)
    figure = plotted_figure(sweep_report.collect(str(run_dir)), monkeypatch)
    title = figure._suptitle  # pylint: disable=protected-access
    prefix = 'SIMULATED (not hardware numbers): ' if simulated else ''
    assert title.get_text() == prefix + 'DeepSeek-V4-Pro sweep 20261129T100000Z: throughput per GPU vs interactivity'
    assert title.get_color() == colour


def test_the_title_names_every_model_once_by_its_folder_name(run_dir, monkeypatch):
    """Two hosts with different models (one path with a trailing slash: only the slash goes, not the X), a third with none."""
    for host, model in (('node-a', '/data/hf-cache/Model-X/'), ('node-b', '/data/hf-cache/Model-A'),
                        ('node-c', '/data/hf-cache/Model-A'), ('node-d', '')):
        host_dir = write_manifest(run_dir, host, [point(32)], model=model)
        write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    title = plot_title(sweep_report.collect(str(run_dir)), monkeypatch)
    assert title.startswith('SIMULATED (not hardware numbers): ?, Model-A, Model-X sweep ')


def test_a_fleet_point_is_its_own_series_not_a_point_of_its_nodes_curve(run_dir, monkeypatch):
    workers = [{'worker_id': '10.0.0.%d:30000' % index, 'url': '', 'dp_size': None} for index in (1, 2, 3)]
    host_dir = write_manifest(run_dir, 'infera-node-1', [point(32), point(96, node_conc=32, fleet=True, workers=workers)])
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    total, _output = plotted_figure(sweep_report.collect(str(run_dir)), monkeypatch).axes
    assert [line.get_label() for line in total.get_lines()] == ['nodp', 'fleet nodp']
