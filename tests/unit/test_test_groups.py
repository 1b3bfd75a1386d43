# SPDX-License-Identifier: Apache-2.0
"""The integration tests name the rehearsal nodes they use (tests/conftest.py schedules by it): a test file that
names none stops the run at collection, one that names a group is scheduled in it."""

import importlib.util
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# tests/conftest.py, by its path: the name conftest is tests/unit's own here.
_SPEC = importlib.util.spec_from_file_location('suite_conftest', REPO / 'tests' / 'conftest.py')
conftest = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(conftest)


def _suite(tmp_path, body):
    """A copy of the suite's scheduling (tests/conftest.py, pytest.ini) with one integration test file."""
    (tmp_path / 'tests' / 'integration').mkdir(parents=True)
    shutil.copy(REPO / 'tests' / 'conftest.py', tmp_path / 'tests' / 'conftest.py')
    shutil.copy(REPO / 'pytest.ini', tmp_path / 'pytest.ini')
    (tmp_path / 'tests' / 'integration' / 'test_new.py').write_text(body)
    return subprocess.run([sys.executable, '-m', 'pytest', '--collect-only', '-q', '-p', 'no:cacheprovider',
                           'tests/integration'], cwd=tmp_path, capture_output=True, text=True, check=False)


def test_an_integration_test_file_without_its_nodes_stops_the_run(tmp_path):
    result = _suite(tmp_path, 'def test_x():\n    pass\n')
    assert result.returncode != 0
    assert ("tests/integration/test_new.py: an integration test file names the rehearsal nodes it uses"
            in result.stdout + result.stderr)


def test_a_group_that_does_not_exist_stops_the_run(tmp_path):
    result = _suite(tmp_path, "import pytest\npytestmark = pytest.mark.nodes('node-9')\n\ndef test_x():\n    pass\n")
    assert result.returncode != 0
    assert "found ('node-9',)" in result.stdout + result.stderr


def test_a_file_that_names_its_nodes_is_collected(tmp_path):
    result = _suite(tmp_path, "import pytest\npytestmark = pytest.mark.nodes('node-6')\n\ndef test_x():\n    pass\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'tests/integration/test_new.py::test_x' in result.stdout


@pytest.mark.parametrize('path', sorted(p.relative_to(REPO).as_posix()
                                        for p in (REPO / 'tests' / 'integration').glob('test_*.py')))
def test_each_integration_test_file_names_a_group_the_scheduler_knows(path):
    assert conftest.group_of(f'{path}::test_x') in conftest.ORDER[:-2]


def test_the_other_tests_are_grouped_by_their_folder():
    assert conftest.group_of('tests/lint/test_lint.py::test_x') == 'lint'
    assert conftest.group_of('tests/unit/test_docs_reference.py::test_x') == 'no-node'
