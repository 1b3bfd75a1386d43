# SPDX-License-Identifier: Apache-2.0
"""A search within limits over a results folder (plugin_utils/_sweep_search_run.py): each variant searched over its own
part of the band, every measured point of the run reused, the answer once every variant's search is done."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_search_run import search_step, variant_bands

from .sweep_runs import bench_record, point, write_lines, write_manifest

REPO = Path(__file__).resolve().parents[4]
RECIPE = yaml.safe_load((REPO / 'roles' / 'sglang_worker' / 'recipes' / 'dsv4-pro-mi355x-mixed.yml').read_text())
LIMITS = {'tpot_p99_ms': 30.0}


def tpot_at(conc):
    """A monotone curve per variant: TPOT p99 crosses 30 ms at c80 on nodp and at c500 on dp."""
    return 10.0 + conc * 0.25 if conc <= 128 else 5.0 + conc * 0.05


def run_search(run_dir, band=(4, 1024), points=()):
    """Measure what the search asks for, point after point, as the sweep would (the manifest keeps the run's earlier
    `points`); returns (answer, concurrencies run)."""
    ran, points = [], list(points)
    for _round in range(30):
        step = search_step(str(run_dir), 'node1', RECIPE, list(band), LIMITS)
        if step['next'] is None:
            return step, ran
        conc = step['next']
        ran.append((step['variant'], conc))
        points.append(point(conc, step['variant'], started='2026-12-06T10:00:00Z', ended='2026-12-06T10:01:00Z'))
        host_dir = write_manifest(run_dir, 'node1', points)
        write_lines(host_dir / ('mix_c%d.jsonl' % conc), bench_record(conc, tpot=tpot_at(conc) / 1.5))
    raise AssertionError('the search did not end: %s' % ran)


def test_each_variant_is_searched_over_the_part_of_the_band_the_recipe_gives_it():
    assert variant_bands(__import__('ansible_collections.infera.serving.plugins.module_utils._variant',
                                    fromlist=['Recipe']).Recipe(RECIPE), [4, 1024]) == {'nodp': (4, 128), 'dp': (129, 1024)}


def test_the_search_finds_each_variant_s_best_in_fewer_points_than_the_grid(tmp_path):
    run_dir = tmp_path / 'results' / 'search'
    answer, ran = run_search(run_dir)
    # The powers-of-two grid over [4, 1024] is 9 points (6 on nodp, 3 on dp).
    assert len(ran) < 9, ran
    assert len({conc for _variant, conc in ran}) == len(ran)
    assert all(4 <= conc <= 128 for variant, conc in ran if variant == 'nodp')
    assert all(129 <= conc <= 1024 for variant, conc in ran if variant == 'dp')
    nodp, dp, overall = answer['lines']
    best_nodp = max(conc for variant, conc in ran if variant == 'nodp' and tpot_at(conc) <= 30)
    best_dp = max(conc for variant, conc in ran if variant == 'dp' and tpot_at(conc) <= 30)
    assert 80 / 1.25 <= best_nodp <= 80 and 500 / 1.25 <= best_dp <= 500
    assert nodp.startswith('nodp: best within limits: c%d nodp ' % best_nodp), nodp
    assert dp.startswith('dp: best within limits: c%d dp ' % best_dp), dp
    # Throughput per GPU rises with concurrency here: the overall best is dp's.
    assert overall.startswith('overall: best within limits: c%d dp ' % best_dp), overall
    assert overall.endswith(', %d points, %s' % (len(ran), '0:%02d:00' % len(ran))), overall
    # Done is done: asked again, the same answer and no point to run.
    assert search_step(str(run_dir), 'node1', RECIPE, [4, 1024], LIMITS) == answer


def test_points_the_run_already_holds_are_reused_never_run_again(tmp_path):
    run_dir = tmp_path / 'results' / 'search'
    grid = [4, 8, 16, 32, 64, 128]
    earlier = [point(conc, 'nodp') for conc in grid]
    host_dir = write_manifest(run_dir, 'node1', earlier)
    for conc in grid:
        write_lines(host_dir / ('mix_c%d.jsonl' % conc), bench_record(conc, tpot=tpot_at(conc) / 1.5))
    _answer, ran = run_search(run_dir, points=earlier)
    nodp = [conc for variant, conc in ran if variant == 'nodp']
    assert not set(nodp) & set(grid), nodp


def test_a_limit_no_point_meets_is_named(tmp_path):
    run_dir = tmp_path / 'results' / 'search'
    step = search_step(str(run_dir), 'node1', RECIPE, [4, 1024], {'tpot_p99_ms': 30.0})
    assert step['next'] == 23 and step['variant'] == 'nodp'
    host_dir = write_manifest(run_dir, 'node1', [point(conc, 'nodp' if conc <= 128 else 'dp')
                                                 for conc in (4, 23, 129, 364)])
    for conc in (4, 23, 129, 364):
        write_lines(host_dir / ('mix_c%d.jsonl' % conc), bench_record(conc, tpot=100.0))
    answer = search_step(str(run_dir), 'node1', RECIPE, [4, 1024], {'tpot_p99_ms': 30.0})
    assert answer['next'] is None
    assert answer['lines'][0] == 'nodp (c4-c128): no point met TPOT p99 <= 30 ms (best 150.0 ms at c4)'
    assert answer['lines'][-1] == 'overall: no point met every limit'
