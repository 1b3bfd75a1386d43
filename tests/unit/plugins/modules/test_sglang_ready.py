# SPDX-License-Identifier: Apache-2.0
"""The whole sglang_ready module: arguments in, exit_json/fail_json out, against real files, its wait on a fake clock."""

from __future__ import annotations

import functools

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _readiness
from ansible_collections.infera.serving.plugins.modules import sglang_ready

from ..module_utils.health_server import HealthServer
from .utils import run_module

LAUNCH = (
    'Load weight begin. avail mem=287.11 GB\n'
    'Load weight end. elapsed=12.34 s, avail mem=101.2 GB\n'
    'Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1, 8], avail mem=90.00 GB\n'
    '\rCapturing batches (bs=8 avail_mem=90.00 GB):  50%|█████     | 1/2 [00:01<00:01,  1.60s/it]'
    '\rCapturing batches (bs=1 avail_mem=89.90 GB): 100%|██████████| 2/2 [00:03<00:00,  1.60s/it]\n'
    'Capture target decode CUDA graph end. elapsed=3.20 s, mem usage=0.10 GB, avail mem=89.90 GB.\n'
)
READY = 'The server is fired up and ready to roll!\n'


@pytest.fixture(autouse=True)
def on_the_clock(clock, monkeypatch):
    """The module's wait, on the test's clock (on a node it keeps the real one)."""
    monkeypatch.setattr(sglang_ready, 'wait_until_ready',
                        functools.partial(_readiness.wait_until_ready, clock=clock.time, sleep=clock.sleep))


@pytest.fixture
def health_url():
    with HealthServer() as server:
        yield server.url


@pytest.fixture
def log(tmp_path):
    return tmp_path / 'engine.log'


@pytest.mark.parametrize('check_mode', [False, True])
def test_ready_launch_exits_unchanged(log, health_url, check_mode):
    log.write_text(LAUNCH + READY)
    kind, result, _warnings = run_module(sglang_ready.main, {
        'log_path': str(log), 'health_url': health_url, 'poll_interval': 0.05}, check_mode=check_mode)
    assert kind == 'exit'
    assert result['changed'] is False
    assert result['ready'] is True
    assert result['phase'] == 'ready'
    assert result['phases']['weights_loaded']['reported_elapsed'] == 12.34
    assert result['state_file'] == str(log) + '.ready-state.json'


def test_max_wait_returns_progress_not_failure(log):
    log.write_text(LAUNCH)
    kind, result, _warnings = run_module(sglang_ready.main, {
        'log_path': str(log), 'max_wait': 0.2, 'poll_interval': 0.05, 'node': 'node2'})
    assert kind == 'exit'
    assert result['ready'] is False
    assert result['phase'] == 'graph_captured'
    assert result['graph_progress'] == {'done': 2, 'total': 2, 'bs': 1}
    assert result['node'] == 'node2'


def test_fatal_line_fails_with_a_message_for_a_person(log):
    log.write_text(LAUNCH[:150] + '\nRuntimeError: HIP out of memory. Tried to allocate 4.00 GiB\n')
    kind, result, _warnings = run_module(sglang_ready.main, {
        'log_path': str(log), 'poll_interval': 0.05, 'node': 'node2'})
    assert kind == 'fail'
    assert result['phase'] == 'failed'
    headline = result['msg'].splitlines()[0]
    assert headline.startswith('SGLang engine on node2')
    assert 'failed during stage capturing_cuda_graph' in headline
    assert 'HIP out of memory' in headline
    assert 'Next step: lower --cuda-graph-max-bs or --mem-fraction-static' in headline
    assert result['msg'].endswith('\n'.join(result['log_tail']))


def test_exit_file_fails(log, tmp_path):
    log.write_text(LAUNCH[:40] + '\n')
    (tmp_path / 'engine.exit').write_text('2')
    kind, result, _warnings = run_module(sglang_ready.main, {
        'log_path': str(log), 'exit_file': str(tmp_path / 'engine.exit'), 'poll_interval': 0.05})
    assert kind == 'fail'
    assert result['phase'] == 'exited'
    assert result['exit_code'] == 2


def test_bad_option_fails_before_waiting(log):
    kind, result, _warnings = run_module(sglang_ready.main, {'log_path': str(log), 'poll_interval': 30})
    assert kind == 'fail'
    assert result['msg'].startswith('poll_interval must be more than 0 and at most 5 seconds')


def test_log_path_is_required():
    kind, result, _warnings = run_module(sglang_ready.main, {})
    assert kind == 'fail'
    assert 'log_path' in result['msg']
