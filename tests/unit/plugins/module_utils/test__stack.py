# SPDX-License-Identifier: Apache-2.0
"""The stack probe on Infera's real code: the three vendored releases, each unpacked and probed as the image's python3
would probe it (a python3 without amd-infera installed, the release on its path)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError
from ansible_collections.infera.serving.plugins.module_utils._stack import (
    PROBE, StackError, describe, parse, ready_limit, summary)

REPO = Path(__file__).resolve().parents[4]
VENDOR = REPO.parent / 'shared' / 'vendor'
# The system python3, as in an image: the venv's has the rehearsal's own Infera installed.
PYTHON = shutil.which('python3', path='/usr/bin:/bin')


def stack_tarballs():
    """{stack: its vendored tarball's name}, from the rehearsal platform's STACKS table (the one place that names the
    source of each stack)."""
    text = (REPO / 'tests' / 'rehearsal' / 'platform').read_text(encoding='utf-8')
    table = re.search(r'^STACKS="\n(.*?)^"', text, re.MULTILINE | re.DOTALL).group(1)
    return {row.split()[0]: row.split()[1] for row in table.splitlines() if row.strip()}


@pytest.fixture(scope='module')
def probed(tmp_path_factory):
    """{release: the probe's facts with that release's infera package on the path}."""
    facts = {}
    tarballs = stack_tarballs()
    for release in ('v0.1.1', 'v0.2.10', 'infera-main'):
        root = tmp_path_factory.mktemp(release)
        with tarfile.open(VENDOR / tarballs[release]) as archive:
            archive.extractall(root, filter='data')
        package_parent = next(root.iterdir())
        done = subprocess.run([PYTHON, '-c', PROBE], env={'PYTHONPATH': str(package_parent), 'PATH': '/usr/bin:/bin'},
                              cwd=str(root), capture_output=True, text=True, check=True, timeout=60)
        facts[release] = parse(done.stdout)
    return facts


def test_v0_1_1_has_a_fixed_ready_limit_and_no_drain(probed):
    stack = describe(probed['v0.1.1'], deadline=2700)
    assert stack['ready_limit'] == 1800 and stack['drain'] == 'none' and stack['engine_metrics'] is False
    # The collection drains it, reading the engine's /metrics: the launch adds the flag v0.1.1 does not.
    assert stack['engine_flags'] == ['--enable-metrics']
    assert stack['warning'].startswith("this image's Infera wrapper (amd-infera unknown) gives up on the engine after "
                                       "a fixed 1800 s")
    assert 'less than sglang_worker_ready_deadline 2700 s' in stack['warning']
    assert 'a smaller --cuda-graph-max-bs' in stack['warning'] and 'warm JIT cache' in stack['warning']


def test_a_deadline_within_the_fixed_limit_needs_no_warning(probed):
    assert describe(probed['v0.1.1'], deadline=1800)['warning'] is None
    assert describe(probed['v0.1.1'])['warning'] is None


@pytest.mark.parametrize('release', ['v0.2.10', 'infera-main'])
def test_later_releases_read_the_deadline_and_drain(probed, release):
    stack = describe(probed[release], deadline=7200)
    assert stack['ready_limit'] is None and stack['drain'] == 'infera' and stack['engine_metrics'] is True
    assert stack['engine_flags'] == []
    assert stack['warning'] is None


def test_versions_come_from_the_metadata_and_a_simulated_engine_says_so(probed):
    facts = dict(probed['v0.1.1'], **{'amd-infera': '0.1.1', 'sglang': '0.4.10.post2',
                                      'simulated_sglang': '0.5.15.post1'})
    stack = describe(facts)
    assert summary(stack) == stack['summary'] == ('Infera 0.1.1 on SGLang 0.5.15.post1 (simulated engine) (a fixed 1800 '
                                                  's ready limit, no drain on SIGTERM)')
    assert describe(dict(facts, simulated_sglang=None))['sglang'] == '0.4.10.post2'


def test_the_limit_is_read_from_the_signature_not_the_number():
    assert ready_limit({'wait_ready': ['async def _wait_ready(self, timeout: float = 3600):']}) == 3600
    assert ready_limit({'wait_ready': ['async def _wait_ready(self, timeout: float = 3600):'],
                        'reads_ready_timeout': True}) is None
    assert ready_limit({'wait_ready': ['async def _wait_ready(self, timeout=None):']}) is None


def test_an_image_without_infera_is_named():
    with pytest.raises(StackError, match='Infera is not installed in the image'):
        describe({'amd-infera': None, 'sglang': '0.5.15.post1', 'infera_root': None})


@pytest.mark.parametrize('stdout', ['', 'Traceback ...\nNameError: x', '[1, 2]', '{"sglang": "0.5"}'])
def test_output_that_is_not_the_probe_s_is_refused(stdout):
    with pytest.raises(WaitError, match='the stack probe printed'):
        parse(stdout)
