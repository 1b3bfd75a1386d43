# SPDX-License-Identifier: Apache-2.0
"""A point's energy figures from its raw power samples; every expected figure is worked out by hand below."""

from __future__ import annotations

import calendar
import json

import pytest

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_energy as sweep_energy
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError


def sample(stamp, gpu, watts):
    return {'time': stamp, 'gpu': gpu, 'watts': watts}


# Window [100, 110] s on a 2-GPU point. Readings (one amd-smi call each), unevenly spaced:
#   t=99    outside the window            (1000 W, 1000 W)  ignored
#   t=100   GPU 0: 200 W, GPU 1: 300 W   mean 250 -> total 2 * 250 =  500 W
#   t=101   GPU 0: 400 W, GPU 1: 600 W   mean 500 -> total           1000 W
#   t=104   GPU 0: 700 W, GPU 1 missing  mean 700 -> total           1400 W
#   t=109   GPU 0: 300 W, GPU 1: 500 W   mean 400 -> total            800 W
#   t=111   outside the window            (1500 W)           ignored
# Energy: (500+1000)/2*1 + (1000+1400)/2*3 + (1400+800)/2*5 + 800*1 (held to t=110)
#       = 750 + 3600 + 5500 + 800 = 10650 J
# Average power per GPU: 10650 J / 10 s / 2 GPUs = 532.5 W (a plain mean of the readings, 462.5 W, would not weigh
# the 5 s the t=104 reading stands for). Peak: 700 W (GPU 0 at t=104; the 1000/1500 W outside do not count).
# 2130 output tokens: 10650 / 2130 = 5 J per token. 21300 tokens in 10 s = 2130 tok/s at 1065 W = 1.065 kW: 2000 tok/s/kW.
SAMPLES = [
    sample(99.0, 0, 1000.0), sample(99.0, 1, 1000.0),
    sample(100.0, 0, 200.0), sample(100.0, 1, 300.0),
    sample(101.0, 0, 400.0), sample(101.0, 1, 600.0),
    sample(104.0, 0, 700.0),
    sample(109.0, 0, 300.0), sample(109.0, 1, 500.0),
    sample(111.0, 0, 1500.0),
]


def test_every_figure_of_a_point_worked_out_by_hand():
    figures = sweep_energy.energy_figures(SAMPLES, 100.0, 110.0, output_tokens=2130, total_tokens=21300, gpus=2)
    assert figures == {'avg_power_w': pytest.approx(532.5), 'peak_power_w': 700.0,
                       'j_per_output_token': pytest.approx(5.0), 'tok_s_per_kw': pytest.approx(2000.0)}


def test_without_gpus_the_gpus_sampled_in_the_window_count():
    assert sweep_energy.energy_figures(SAMPLES, 100.0, 110.0, 2130, 21300) == \
        sweep_energy.energy_figures(SAMPLES, 100.0, 110.0, 2130, 21300, gpus=2)


def test_a_point_on_more_gpus_than_sampled_scales_the_total_not_the_average():
    # 8 GPUs read like these 2: totals x4 -> 42600 J; 42600 / 2130 = 20 J/token; 2130 tok/s at 4.26 kW = 500 tok/s/kW.
    figures = sweep_energy.energy_figures(SAMPLES, 100.0, 110.0, 2130, 21300, gpus=8)
    assert figures['avg_power_w'] == pytest.approx(532.5)
    assert figures['j_per_output_token'] == pytest.approx(20.0)
    assert figures['tok_s_per_kw'] == pytest.approx(500.0)


def test_only_the_listed_gpus_count():
    # GPU 0 alone: 200, 400, 700, 300 W at t=100, 101, 104, 109.
    # (200+400)/2*1 + (400+700)/2*3 + (700+300)/2*5 + 300*1 = 300 + 1650 + 2500 + 300 = 4750 J over 10 s: 475 W.
    figures = sweep_energy.energy_figures(SAMPLES, 100.0, 110.0, 950, 9500, gpus=[0])
    assert figures == {'avg_power_w': pytest.approx(475.0), 'peak_power_w': 700.0,
                       'j_per_output_token': pytest.approx(5.0), 'tok_s_per_kw': pytest.approx(2000.0)}
    # GPU 1 alone: 300, 600, (missing), 500 W at t=100, 101, 109: (300+600)/2 + (600+500)/2*8 + 500 = 450 + 4400 + 500.
    assert sweep_energy.energy_figures(SAMPLES, 100.0, 110.0, 0, 0, gpus=[1])['avg_power_w'] == pytest.approx(535.0)


def test_the_first_reading_is_held_back_to_the_window_start():
    # Window [99.5, 110]: the t=99 reading is outside; t=100's 500 W total stands from 99.5: 10650 + 0.5 * 500 = 10900 J.
    figures = sweep_energy.energy_figures(SAMPLES, 99.5, 110.0, 2180, None, gpus=2)
    assert figures['avg_power_w'] == pytest.approx(10900.0 / 10.5 / 2)
    assert figures['j_per_output_token'] == pytest.approx(5.0)
    assert figures['tok_s_per_kw'] is None


def test_a_single_reading_stands_for_the_whole_window():
    figures = sweep_energy.energy_figures([sample(5.0, 0, 600.0), sample(5.0, 1, 800.0)], 0.0, 10.0, 1400, 7000, gpus=2)
    # 2 * 700 W for 10 s = 14000 J: 10 J/token; 700 tok/s at 1.4 kW = 500 tok/s/kW.
    assert figures == {'avg_power_w': pytest.approx(700.0), 'peak_power_w': 800.0,
                       'j_per_output_token': pytest.approx(10.0), 'tok_s_per_kw': pytest.approx(500.0)}


@pytest.mark.parametrize('started, ended', [(112.0, 120.0), (90.0, 98.0), (110.0, 100.0), (105.0, 105.0)])
def test_no_sample_in_the_window_gives_no_figures(started, ended):
    assert sweep_energy.energy_figures(SAMPLES, started, ended, 2130, 21300, gpus=2) == dict.fromkeys(
        ('avg_power_w', 'peak_power_w', 'j_per_output_token', 'tok_s_per_kw'))
    assert sweep_energy.energy_figures([], 100.0, 110.0, 2130, 21300)['avg_power_w'] is None


@pytest.mark.parametrize('tokens', [None, 0, -5, 'many', float('nan'), True])
def test_per_token_figures_need_a_positive_token_count(tokens):
    figures = sweep_energy.energy_figures(SAMPLES, 100.0, 110.0, tokens, tokens, gpus=2)
    assert figures['avg_power_w'] == pytest.approx(532.5)
    assert figures['j_per_output_token'] is None and figures['tok_s_per_kw'] is None


def test_the_window_may_be_iso_times_as_the_sweep_notes_them():
    start = calendar.timegm((2026, 11, 29, 10, 0, 0))
    moved = [dict(entry, time=entry['time'] - 100.0 + start) for entry in SAMPLES]
    figures = sweep_energy.energy_figures(moved, '2026-11-29T10:00:00Z', '2026-11-29T10:00:10Z', 2130, 21300, gpus=2)
    assert figures['avg_power_w'] == pytest.approx(532.5) and figures['tok_s_per_kw'] == pytest.approx(2000.0)


@pytest.mark.parametrize('started, gpus', [('yesterday', 2), (None, 2), (100.0, 0), (100.0, []), (100.0, True), (100.0, ['a'])])
def test_a_bad_window_or_gpu_list_is_named(started, gpus):
    with pytest.raises(SweepResultsError):
        sweep_energy.energy_figures(SAMPLES, started, 110.0, 1, 1, gpus=gpus)


def test_keys_pair_the_issue_names_with_the_columns():
    assert sweep_energy.ENERGY_COLUMNS == ('avg_power_w', 'peak_power_w', 'j_per_output_token', 'tok_s_per_kw')
    assert sweep_energy.samples_file(64) == 'power_c64.jsonl'


# ---------------------------------------------------------------- the samples file

def write(path, text):
    path.write_text(text, encoding='utf-8')
    return path


def lines(*entries):
    return ''.join(json.dumps(entry) + '\n' for entry in entries)


def test_samples_are_read_in_file_order(tmp_path):
    path = write(tmp_path / 'power_c8.jsonl', lines(*SAMPLES[:3]) + '\n')
    assert sweep_energy.read_samples(str(path)) == SAMPLES[:3]


def test_a_torn_last_line_is_skipped_and_a_whole_one_kept(tmp_path):
    torn = write(tmp_path / 'torn.jsonl', lines(*SAMPLES[:2]) + '{"time": 100.0, "gpu": 0, "wat')
    assert sweep_energy.read_samples(str(torn)) == SAMPLES[:2]
    whole = write(tmp_path / 'whole.jsonl', lines(*SAMPLES[:2]) + json.dumps(SAMPLES[2]))
    assert sweep_energy.read_samples(str(whole)) == SAMPLES[:3]


@pytest.mark.parametrize('bad', ['{"time": 100.0, "gpu": 0, "wat', '[1, 2]', '{"time": 1.0, "gpu": "0", "watts": 5}',
                                 '{"time": 1.0, "gpu": 0, "watts": -5}', '{"time": "now", "gpu": 0, "watts": 5}',
                                 '{"time": 1.0, "gpu": true, "watts": 5}', '{"time": 1.0, "gpu": 0, "watts": NaN}'])
def test_a_broken_line_before_the_last_names_the_file_and_line(tmp_path, bad):
    path = write(tmp_path / 'power_c8.jsonl', lines(SAMPLES[0]) + bad + '\n' + lines(SAMPLES[1]))
    with pytest.raises(SweepResultsError, match=r'power_c8\.jsonl line 2'):
        sweep_energy.read_samples(str(path))


def test_a_missing_file_has_no_samples_and_an_unreadable_one_is_named(tmp_path):
    assert sweep_energy.read_samples(str(tmp_path / 'power_c1.jsonl')) == []
    with pytest.raises(SweepResultsError, match='cannot read'):
        sweep_energy.read_samples(str(tmp_path))
