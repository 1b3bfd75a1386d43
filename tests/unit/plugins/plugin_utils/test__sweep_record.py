# SPDX-License-Identifier: Apache-2.0
"""The sweep's one verdict on a point, its manifest entry, the atomic manifest write and the report reading it back."""

from __future__ import annotations

import datetime
import json
import os
import re
import stat
import time

import pytest
from ansible.plugins.filter.core import to_nice_json

from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_record as sweep_record
from ansible_collections.infera.serving.plugins.plugin_utils import _sweep_report as sweep_report
from ansible_collections.infera.serving.plugins.plugin_utils._sweep_errors import SweepResultsError

from .sweep_runs import VARIANTS, bench_record, write_lines

MISSING = 'mix_c%d.jsonl is missing (the client writes no line when every request fails, or the point never ran)'
RUN = {
    'run_id': '20261129T100000Z', 'host': 'infera-node-1', 'simulated': True,
    'image': 'registry.local:5000/sglang-mi355x:v0.5.9', 'image_digest': 'sha256:' + 'ab' * 32,
    'stack': {'infera': '0.1.1', 'sglang': '0.5.15.post1', 'ready_limit': 1800, 'drain': 'none', 'engine_metrics': False,
              'warning': None, 'summary': 'Infera 0.1.1 on SGLang 0.5.15.post1 (a fixed 1800 s ready limit, no drain on '
                                          'SIGTERM)'},
    'model': '/data/hf-cache/DeepSeek-V4-Pro', 'recipe': 'dsv4-pro-mi355x-mixed', 'variants': VARIANTS,
    'topology': {'kind': 'mixed'},
    'bench_args': {'backend': 'sglang-oai', 'base_url': 'http://infera-node-1:8000', 'dataset_name': 'random',
                   'dataset_path': '', 'random_input_len': 8192, 'random_output_len': 1024, 'random_range_ratio': 1.0,
                   'request_rate': 'inf', 'prompts_per_conc': 10, 'warmup_per_conc': 2, 'extra': {}},
}


def planned(conc, variant='nodp'):
    return {'conc': conc, 'variant': variant, 'num_prompts': conc * 10, 'warmup_requests': conc * 2,
            'started': '2026-11-29T10:00:00Z'}


@pytest.fixture
def host_dir(run_dir):
    directory = run_dir / 'infera-node-1'
    directory.mkdir()
    return directory


# ---------------------------------------------------------------- the verdict

@pytest.mark.parametrize('valid, resumed, aborted, status', [
    (True, False, False, 'ok'),
    (False, False, False, 'invalid'),
    (False, False, True, 'aborted'),
    (True, False, True, 'ok'),
    (True, True, False, 'resumed'),
    (False, True, False, 'resumed'),
    (True, True, True, 'resumed'),
    (False, True, True, 'aborted'),
], ids=['ran-valid', 'ran-invalid', 'aborted-without-result', 'aborted-after-a-valid-result', 'resumed',
        'resumed-file-gone-since', 'resumed-then-aborted', 'resumed-then-aborted-without-result'])
def test_each_status_of_a_point(valid, resumed, aborted, status):
    assert sweep_record.point_status(valid, resumed, aborted) == status


def test_a_point_is_judged_as_one_that_ran_unless_told_otherwise():
    assert (sweep_record.point_status(True), sweep_record.point_status(False)) == ('ok', 'invalid')


def test_judging_a_point_gives_its_record_only_when_valid(host_dir):
    # The action prints the point's figures from this record: an invalid file must give none.
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, num_prompts=310))
    entry, record = sweep_record.judge_point(str(host_dir), planned(32))
    assert (entry['status'], record) == ('invalid', None)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    entry, record = sweep_record.judge_point(str(host_dir), planned(32))
    assert (entry['status'], record['completed'], record['max_concurrency']) == ('ok', 320, 32)


def test_a_point_that_ran_and_left_no_file_is_invalid_by_default(host_dir):
    assert sweep_record.record_point(str(host_dir), planned(32))['status'] == 'invalid'


@pytest.fixture
def controller_east_of_utc(monkeypatch):
    """The controller's local time 5 h ahead of UTC (a POSIX TZ string: no zone files needed)."""
    monkeypatch.setenv('TZ', 'XST-5')
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_end_time_is_utc_whatever_the_controller_zone(controller_east_of_utc):
    ended = datetime.datetime.strptime(sweep_record.utc_now(), sweep_record.TIME_FORMAT)
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs(ended - now) < datetime.timedelta(minutes=1)


def test_a_valid_point_is_recorded_ok_with_every_manifest_key(host_dir):
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    entry = sweep_record.record_point(str(host_dir), planned(32))
    assert list(entry) == ['conc', 'node_conc', 'fleet', 'variant', 'num_prompts', 'warmup_requests', 'file', 'started',
                           'ended', 'status', 'reason', 'workers']
    assert {key: entry[key] for key in entry if key != 'ended'} == {
        'conc': 32, 'node_conc': 32, 'fleet': False, 'variant': 'nodp', 'num_prompts': 320, 'warmup_requests': 64,
        'file': 'mix_c32.jsonl', 'started': '2026-11-29T10:00:00Z', 'status': 'ok', 'reason': '', 'workers': None}
    assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', entry['ended'])


@pytest.mark.parametrize('write, resumed, aborted, status, reason', [
    (None, False, True, 'aborted', MISSING % 32),
    (None, False, False, 'invalid', MISSING % 32),
    (bench_record(32, num_prompts=310), False, False, 'invalid', 'only 310 of 320 requests completed'),
    (bench_record(64), False, False, 'invalid', 'the file reports max_concurrency 64, the manifest says 32'),
    (bench_record(32), True, False, 'resumed', ''),
    (bench_record(32), False, True, 'ok', ''),
], ids=['aborted', 'never-written', 'short', 'another-concurrency', 'resumed', 'valid-before-the-abort'])
def test_the_recorded_status_and_reason(host_dir, write, resumed, aborted, status, reason):
    if write is not None:
        write_lines(host_dir / 'mix_c32.jsonl', write)
    entry = sweep_record.record_point(str(host_dir), planned(32), resumed=resumed, aborted=aborted, ended='2026-11-29T10:10:00Z')
    assert (entry['status'], entry['reason'], entry['ended']) == (status, reason, '2026-11-29T10:10:00Z')


# ---------------------------------------------------------------- the manifest file

def test_the_manifest_is_written_as_to_nice_json_wrote_it(host_dir):
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    manifest = sweep_record.build_manifest(RUN, [sweep_record.record_point(str(host_dir), planned(32))])
    assert sweep_record.manifest_text(manifest) == to_nice_json(manifest) + '\n'
    assert sweep_record.write_manifest(str(host_dir), manifest) is True
    assert json.loads((host_dir / 'manifest.json').read_text(encoding='utf-8')) == manifest
    assert sorted(manifest) == sorted(sweep_record.RUN_KEYS + ('points',))


def test_a_pd_pair_is_recorded_as_its_legs_and_router_and_no_pair_as_mixed():
    pair = {'prefill': ['node9'], 'decode': ['node10'], 'hosts': ['node10', 'node9'], 'router': 'node9',
            'modes': {'prefill': 1, 'decode': 1}, 'label': '1P1D'}
    assert sweep_record.build_manifest(dict(RUN, topology=pair), [])['topology'] == {
        'kind': 'pd', 'label': '1P1D', 'prefill': ['node9'], 'decode': ['node10'], 'router': 'node9'}
    assert sweep_record.build_manifest(dict(RUN, topology={}), [])['topology'] == {'kind': 'mixed'}


def test_a_manifest_is_written_once_then_unchanged_and_check_mode_writes_nothing(host_dir):
    manifest = sweep_record.build_manifest(RUN, [])
    assert sweep_record.write_manifest(str(host_dir), manifest, check_mode=True) is True
    assert not (host_dir / 'manifest.json').exists()
    assert sweep_record.write_manifest(str(host_dir), manifest) is True
    assert stat.S_IMODE(os.stat(host_dir / 'manifest.json').st_mode) == 0o644
    assert sweep_record.write_manifest(str(host_dir), manifest) is False
    assert sweep_record.write_manifest(str(host_dir), dict(manifest, image='other'), check_mode=True) is True
    assert json.loads((host_dir / 'manifest.json').read_text(encoding='utf-8'))['image'] == RUN['image']
    assert os.listdir(host_dir) == ['manifest.json']


def test_a_failed_write_leaves_the_previous_manifest_whole_and_no_temporary_file(host_dir, monkeypatch):
    first = sweep_record.build_manifest(RUN, [])
    sweep_record.write_manifest(str(host_dir), first)
    before = (host_dir / 'manifest.json').read_bytes()

    def full_disk(_source, _target):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(sweep_record.os, 'replace', full_disk)
    with pytest.raises(SweepResultsError, match='^cannot write .*manifest.json: No space left on device$'):
        sweep_record.write_manifest(str(host_dir), dict(first, points=[{'conc': 32}]))
    assert (host_dir / 'manifest.json').read_bytes() == before
    assert os.listdir(host_dir) == ['manifest.json']


def test_the_temporary_file_is_made_beside_the_file_it_replaces(host_dir, monkeypatch):
    # os.replace is atomic only within one filesystem: a temporary file in /tmp could not be renamed onto a mount.
    real_replace = os.replace
    folders = []

    def replace(source, target):
        folders.append(os.path.dirname(source))
        real_replace(source, target)

    monkeypatch.setattr(sweep_record.os, 'replace', replace)
    sweep_record.write_manifest(str(host_dir), sweep_record.build_manifest(RUN, []))
    monkeypatch.chdir(host_dir)
    assert sweep_record.write_if_changed('results.csv', b'conc\n') is True
    assert folders == [str(host_dir), str(host_dir)]
    assert (host_dir / 'results.csv').read_bytes() == b'conc\n'


def test_a_folder_that_cannot_take_the_file_is_named(tmp_path):
    with pytest.raises(SweepResultsError, match='^cannot write %s: No such file or directory$'
                       % re.escape(str(tmp_path / 'absent' / 'manifest.json'))):
        sweep_record.write_manifest(str(tmp_path / 'absent'), sweep_record.build_manifest(RUN, []))


# ---------------------------------------------------------------- the report reads what the sweep recorded

def record_run(host_dir):
    """What point.yml does: record each point after it and rewrite the manifest with every point so far."""
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=200.0))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, num_prompts=600))
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256, duration=800.0))
    points = []
    for conc, variant, resumed, aborted in ((32, 'nodp', True, False), (64, 'nodp', False, False),
                                            (256, 'dp', False, False), (512, 'dp', False, True)):
        points.append(sweep_record.record_point(str(host_dir), planned(conc, variant), resumed, aborted))
        sweep_record.write_manifest(str(host_dir), sweep_record.build_manifest(RUN, points))
    return points


def test_the_report_reads_the_recorded_manifest_and_its_verdicts(run_dir, host_dir):
    points = record_run(host_dir)
    assert [(entry['conc'], entry['status']) for entry in points] == [(32, 'resumed'), (64, 'invalid'), (256, 'ok'),
                                                                      (512, 'aborted')]
    manifest = sweep_record.read_manifest(str(host_dir))
    assert manifest == sweep_record.build_manifest(RUN, points)
    run = sweep_report.collect(str(run_dir))
    assert [(row['Concurrency'], row['Variant'], row['Status']) for row in run['rows']] == [
        (32, 'nodp', 'resumed'), (256, 'dp', 'ok')]
    assert [(entry['conc'], entry['status'], entry['reason']) for entry in run['invalid']] == [
        (64, 'invalid', 'marked invalid by the sweep; only 600 of 640 requests completed'),
        (512, 'aborted', 'marked aborted by the sweep; ' + MISSING % 512)]
    assert run['rows'][0]['Model'] == RUN['model']
    assert (run['rows'][1]['GPUs'], run['rows'][1]['DP Attention']) == (8, True)


def test_a_point_recorded_ok_is_still_left_out_when_its_file_changed_since(run_dir, host_dir):
    record_run(host_dir)
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256, num_prompts=5))
    run = sweep_report.collect(str(run_dir))
    assert [row['Concurrency'] for row in run['rows']] == [32]
    assert {entry['conc']: entry['reason'] for entry in run['invalid']}[256] == 'only 5 of 2560 requests completed'


@pytest.mark.parametrize('point, problem', [
    ({'conc': 32, 'status': 'ok'}, ''),
    ({'conc': 32}, ''),
    ({'conc': 32, 'status': 'invalid', 'reason': 'engine exited'}, 'marked invalid by the sweep: engine exited'),
    ({'conc': 32, 'status': 'aborted', 'reason': ''}, 'marked aborted by the sweep'),
    ({'conc': 32, 'num_prompts': 640}, 'only 320 of 640 requests completed'),
    ({'conc': 64, 'file': 'mix_c32.jsonl'}, 'the file reports max_concurrency 32, the manifest says 64'),
], ids=['ok', 'no-status-means-ok', 'marked', 'marked-without-a-reason', 'file-short', 'file-of-another-point'])
def test_a_recorded_point_reads_as_its_status_then_its_file(host_dir, point, problem):
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    checked, found = sweep_record.recorded_problem(str(host_dir), point)
    assert found == problem
    assert checked['record']['max_concurrency'] == 32


# ---------------------------------------------------------------- the workers that served the point

def serving(count, dp_size=None):
    return [{'worker_id': '10.0.0.%d:30000' % index, 'url': 'http://10.0.0.%d:30000' % index, 'dp_size': dp_size}
            for index in range(1, count + 1)]


def fleet_planned(workers, variant='nodp'):
    return dict(planned(96, variant), node_conc=32, fleet=True, workers=workers)


def test_a_point_records_its_workers_and_is_judged_against_them(host_dir):
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    entry, record = sweep_record.judge_point(str(host_dir), fleet_planned(serving(3)), argv=VARIANTS['nodp']['argv'])
    assert (entry['status'], entry['conc'], entry['node_conc'], entry['fleet'], entry['workers']) == (
        'ok', 96, 32, True, serving(3))
    assert record['max_concurrency'] == 96


@pytest.mark.parametrize('workers, variant, reason', [
    (serving(2), 'nodp', 'the router listed 2 serving worker(s) (10.0.0.1:30000, 10.0.0.2:30000); '
                         'the fleet point c96 planned 3 (3 x c32)'),
    (serving(3), 'dp', 'worker(s) 10.0.0.1:30000, 10.0.0.2:30000, 10.0.0.3:30000 run dp_size 1, the dp variant DP 8 '
                       '(a fleet with mixed variants)'),
], ids=['a-worker-missing', 'the-other-variant'])
def test_a_valid_file_from_workers_that_cannot_stand_for_the_point_is_invalid(host_dir, workers, variant, reason):
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    entry, record = sweep_record.judge_point(str(host_dir), fleet_planned(workers, variant), argv=VARIANTS[variant]['argv'])
    assert (entry['status'], entry['reason'], record) == ('invalid', reason, None)


def test_the_recorded_entry_is_judged_against_the_workers_too(host_dir):
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    entry = sweep_record.record_point(str(host_dir), fleet_planned(serving(2)), argv=VARIANTS['nodp']['argv'])
    assert (entry['status'], entry['reason'], entry['workers']) == (
        'invalid', 'the router listed 2 serving worker(s) (10.0.0.1:30000, 10.0.0.2:30000); '
                   'the fleet point c96 planned 3 (3 x c32)', serving(2))


def test_without_the_variant_argv_or_with_a_bad_one_the_workers_are_recorded_unchecked(host_dir):
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    for argv in (None, ['--tp-size', 'eight']):
        entry = sweep_record.record_point(str(host_dir), fleet_planned(serving(2)), argv=argv)
        assert (entry['status'], entry['workers']) == ('ok', serving(2))


def test_a_recorded_point_without_the_variant_sizes_is_not_held_to_its_workers(host_dir):
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    point = dict(fleet_planned(serving(2, dp_size=8)), status='ok', reason='')
    assert sweep_record.recorded_problem(str(host_dir), point)[1] == ''
    assert sweep_record.recorded_problem(str(host_dir), point, {'DP': 1, 'GPUs': 8})[1] == (
        'the router listed 2 serving worker(s) (10.0.0.1:30000, 10.0.0.2:30000); the fleet point c96 planned 3 (3 x c32)')


def earlier_manifest(host_dir, points):
    sweep_record.write_manifest(str(host_dir), sweep_record.build_manifest(RUN, points))


PHASES = [{'variant': 'nodp', 'concurrencies': [32, 64], 'argv': VARIANTS['nodp']['argv']},
          {'variant': 'dp', 'concurrencies': [256], 'argv': VARIANTS['dp']['argv']}]


def test_resume_keeps_valid_results_with_the_workers_recorded_when_they_ran(host_dir):
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, num_prompts=600))
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256))
    earlier_manifest(host_dir, [dict(planned(32), workers=serving(3), status='ok', reason='')])
    # c256 has no entry in the manifest (an older sweep's file): valid by its file, no workers to keep.
    assert sweep_record.kept_results(str(host_dir), PHASES, 10) == {
        32: {'workers': serving(3)}, 64: None, 256: {'workers': None}}


def test_resume_of_a_fleet_point_needs_as_many_workers_as_the_plan(host_dir):
    write_lines(host_dir / 'mix_c96.jsonl', bench_record(96))
    write_lines(host_dir / 'mix_c192.jsonl', bench_record(192))
    earlier_manifest(host_dir, [fleet_planned(serving(3)), dict(fleet_planned(serving(2)), conc=192, node_conc=64)])
    kept = sweep_record.kept_results(str(host_dir), PHASES[:1], 10, fleet_workers=3)
    assert kept == {96: {'workers': serving(3)}, 192: None}


def test_resume_checks_the_earlier_workers_against_each_phase_variant(host_dir):
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256))
    write_lines(host_dir / 'mix_c512.jsonl', bench_record(512))
    earlier_manifest(host_dir, [dict(planned(256, 'dp'), workers=serving(1, dp_size=8)),
                                dict(planned(512, 'dp'), workers=serving(1))])   # a nodp worker served the dp point
    phases = [{'variant': 'dp', 'concurrencies': [256, 512], 'argv': VARIANTS['dp']['argv']}]
    assert sweep_record.kept_results(str(host_dir), phases, 10) == {256: {'workers': serving(1, dp_size=8)}, 512: None}


def test_resume_does_not_keep_a_file_of_another_concurrency(host_dir):
    # A file copied or renamed from another point: enough requests completed, but at c64.
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(64))
    assert sweep_record.kept_results(str(host_dir), PHASES[:1], 10) == {32: None, 64: None}


def test_resume_reads_an_unreadable_manifest_as_none(host_dir):
    (host_dir / 'manifest.json').write_text('{"points": [', encoding='utf-8')
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32))
    assert sweep_record.previous_points(str(host_dir)) == {}
    assert sweep_record.kept_results(str(host_dir), PHASES[:1], 10)[32] == {'workers': None}


def test_an_older_manifest_without_workers_reads_and_reports_as_before(run_dir, host_dir):
    older = {key: RUN[key] for key in sweep_record.RUN_KEYS}
    older['points'] = [{'conc': 32, 'variant': 'nodp', 'num_prompts': 320, 'warmup_requests': 64, 'file': 'mix_c32.jsonl',
                        'started': '2026-11-29T10:00:00Z', 'ended': '2026-11-29T10:10:00Z', 'status': 'ok', 'reason': ''}]
    (host_dir / 'manifest.json').write_text(json.dumps(older), encoding='utf-8')
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=100.0))
    assert sweep_record.recorded_problem(str(host_dir), older['points'][0], {'DP': 1, 'GPUs': 8})[1] == ''
    [row] = sweep_report.collect(str(run_dir))['rows']
    assert (row['GPUs'], row['Workers'], row['Fleet'], row['Node Concurrency']) == (8, None, False, 32)


# ---------------------------------------------------------------- reading a manifest back

def test_a_manifest_keeps_its_host_and_one_without_a_host_takes_its_folder_name(run_dir):
    copied = run_dir / 'node1-copy'
    copied.mkdir()
    earlier_manifest(copied, [])
    assert sweep_record.read_manifest(str(copied))['host'] == RUN['host']
    older = {key: RUN[key] for key in sweep_record.RUN_KEYS if key != 'host'}
    (copied / 'manifest.json').write_text(json.dumps(dict(older, points=[])), encoding='utf-8')
    assert sweep_record.read_manifest(str(copied))['host'] == 'node1-copy'


@pytest.mark.parametrize('simulated, expected', [
    (True, True), ('true', True), ('1', True), ('yes', True), ('YES', True), ('on', True), (' On ', True),
    (False, False), ('false', False), ('0', False), ('no', False), ('off', False), ('', False), (None, False),
])
def test_the_simulated_flag_may_be_a_boolean_string(host_dir, simulated, expected):
    (host_dir / 'manifest.json').write_text(json.dumps(dict(RUN, simulated=simulated, points=[])), encoding='utf-8')
    assert sweep_record.read_manifest(str(host_dir))['simulated'] is expected


def test_a_manifest_that_cannot_be_read_is_named(host_dir):
    path = host_dir / 'manifest.json'
    with pytest.raises(SweepResultsError) as raised:
        sweep_record.read_manifest(str(host_dir))
    assert str(raised.value) == 'cannot read %s: No such file or directory' % path
    path.mkdir()
    with pytest.raises(SweepResultsError) as raised:
        sweep_record.read_manifest(str(host_dir))
    assert str(raised.value) == 'cannot read %s: Is a directory' % path


def test_a_manifest_that_is_not_json_is_named_with_where_it_breaks(host_dir):
    (host_dir / 'manifest.json').write_text('{"points": ', encoding='utf-8')
    with pytest.raises(SweepResultsError) as raised:
        sweep_record.read_manifest(str(host_dir))
    assert str(raised.value) == '%s is not JSON: Expecting value: line 1 column 12 (char 11)' % (host_dir / 'manifest.json')


@pytest.mark.parametrize('text', ['[]', '"points"', '{"points": {}}', '{"points": null}'],
                         ids=['a-list', 'a-string', 'points-an-object', 'points-null'])
def test_a_manifest_that_is_not_an_object_with_a_points_list_is_named(host_dir, text):
    (host_dir / 'manifest.json').write_text(text, encoding='utf-8')
    with pytest.raises(SweepResultsError) as raised:
        sweep_record.read_manifest(str(host_dir))
    assert str(raised.value) == '%s must be a JSON object with a "points" list' % (host_dir / 'manifest.json')


def test_the_manifests_of_a_run_are_its_host_folders_that_hold_one(run_dir):
    for host in ('infera-node-2', 'infera-node-1'):
        (run_dir / host).mkdir()
        sweep_record.write_manifest(str(run_dir / host), sweep_record.build_manifest(dict(RUN, host=host), []))
    (run_dir / 'infera-node-3').mkdir()     # a host whose sweep never wrote its manifest
    (run_dir / 'results.csv').write_text('Host\n', encoding='utf-8')
    (run_dir / 'report.md').write_text('# Sweep\n', encoding='utf-8')
    found = sweep_record.find_manifests(str(run_dir))
    assert [(host_dir, manifest['host']) for host_dir, manifest in found] == [
        (str(run_dir / 'infera-node-1'), 'infera-node-1'), (str(run_dir / 'infera-node-2'), 'infera-node-2')]


def test_a_run_folder_without_manifests_is_named(run_dir):
    with pytest.raises(SweepResultsError) as raised:
        sweep_record.find_manifests(str(run_dir / 'absent'))
    assert str(raised.value) == 'results folder %s does not exist' % (run_dir / 'absent')
    (run_dir / 'infera-node-1').mkdir()
    with pytest.raises(SweepResultsError) as raised:
        sweep_record.find_manifests(str(run_dir))
    assert str(raised.value) == 'no <host>/manifest.json under %s; is it a results/<run_id> folder of a sweep?' % run_dir
