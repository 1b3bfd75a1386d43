# SPDX-License-Identifier: Apache-2.0
"""Which tests may run at the same time (`make test` runs six pytest-xdist workers).

A group runs in one worker, one test after another; groups run side by side. They share
nothing a test changes:

- ``node-1``: the tests on the rehearsal platform's first node (its worker container, the
  default etcd prefix /infera/workers/, its results);
- ``fleet-nodes``: the fleet tests on nodes 2-4 (each on an etcd prefix of its own);
- ``fault-node``: the fault matrix's sweep cases on node 5 (its own etcd prefix in the isolated
  topology, its own etcd for the etcd cases);
- ``node-6``: the fault matrix's deploy cases, the secrets tests and Infera's worker lifecycle
  (ready once listed, drain on teardown) on node 6 (an etcd prefix of its own);
- ``own-nodes``: molecule's scenarios and the platform's own test, on nodes they create, the
  etcd role's test (its own etcd container on node 7) and the stack tests (node 7, its own etcd prefix);
- ``pd-nodes``: the PD pairs on nodes 9 and 10, and 11 and 12 (an etcd prefix per pair), which the test brings up;
- ``ssh-node``: the user's path as printed (README and quickstart) over SSH on node infera-ssh-1, with an
  etcd of its own;
- ``lint``: ansible-lint and ansible-test sanity (the repository, read only);
- ``no-node``: unit and simulator tests (free ports, temporary directories).

``make test`` runs ``no-node`` beside ``lint`` and node 1's early tests (the Makefile's EARLY) in two
workers first, on the core the unit tests leave idle, then the six node groups in six workers.

The groups are xdist's scheduling units (a scheduler of our own below: xdist's ``loadgroup``
renames test ids through an attribute pytest 9 no longer reads). xdist starts the groups with
the most tests first, one per worker, and hands a group left over (node 1's early tests, in the
first part) to the first worker with two tests or fewer left to run.
"""

from __future__ import annotations

import ast
import functools
import pathlib

import pytest

# The groups, in the order they start. An integration test file names its own (pytestmark =
# pytest.mark.nodes('<group>')); the other tests are lint or no-node by their folder.
ORDER = ('fleet-nodes', 'ssh-node', 'node-1', 'node-6', 'fault-node', 'own-nodes', 'pd-nodes', 'lint', 'no-node')
INTEGRATION = 'tests/integration/'
ROOT = pathlib.Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def declared_group(path):
    """The group a test file declares by its module-level ``pytestmark = pytest.mark.nodes('<group>')``, read
    from its source: xdist's scheduler runs in the controlling process, which sees test ids, never items."""
    tree = ast.parse((ROOT / path).read_text(encoding='utf-8'))
    for statement in tree.body:
        if (isinstance(statement, ast.Assign) and [getattr(t, 'id', None) for t in statement.targets] == ['pytestmark']
                and isinstance(statement.value, ast.Call) and ast.unparse(statement.value.func) == 'pytest.mark.nodes'
                and [type(a) for a in statement.value.args] == [ast.Constant]):
            return statement.value.args[0].value
    return None


def group_of(nodeid):
    """The group of a test, by its id (a path relative to the repository, then ::name)."""
    path = nodeid.split('::', 1)[0]
    if path.startswith(INTEGRATION):
        return declared_group(path) or 'undeclared'
    return 'lint' if path.startswith('tests/lint/') else 'no-node'


def pytest_configure(config):
    config.addinivalue_line('markers', 'nodes(group): the rehearsal nodes an integration test file uses, one of '
                            + ', '.join(ORDER[:-2]) + ' (tests/conftest.py schedules the files by it)')


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    """An integration test without a declared group of nodes stops the run before any test starts: it would share
    nodes with whatever ran beside it."""
    for item in items:
        if not item.nodeid.startswith(INTEGRATION):
            continue
        marker = item.get_closest_marker('nodes')
        group = group_of(item.nodeid)
        if marker is None or group not in ORDER[:-2] or tuple(marker.args) != (group,):
            raise pytest.UsageError(
                f"{item.nodeid.split('::', 1)[0]}: an integration test file names the rehearsal nodes it uses in one "
                f"module-level line, pytestmark = pytest.mark.nodes('<group>'), with a group of {', '.join(ORDER[:-2])} "
                f"(tests/conftest.py); found {marker.args if marker else 'none'}")
    items.sort(key=lambda item: ORDER.index(group_of(item.nodeid)))


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling, with our groups as the scopes."""
    from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)

    return GroupScheduling(config, log)
