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

GROUPS = {
    'tests/integration/test_fleet.py': 'fleet-nodes',
    'tests/integration/test_fleet_sweep.py': 'fleet-nodes',
    'tests/integration/test_fault_matrix.py': 'fault-node',
    'tests/integration/test_engine_faults.py': 'node-6',
    'tests/integration/test_secrets.py': 'node-6',
    'tests/integration/test_infera_lifecycle.py': 'node-6',
    'tests/integration/test_molecule.py': 'own-nodes',
    'tests/integration/test_platform.py': 'own-nodes',
    'tests/integration/test_etcd.py': 'own-nodes',
    'tests/integration/test_stacks.py': 'own-nodes',
    'tests/integration/test_user_path.py': 'ssh-node',
}
ORDER = ('fleet-nodes', 'ssh-node', 'node-1', 'node-6', 'fault-node', 'own-nodes', 'lint', 'no-node')


def group_of(nodeid):
    """The group of a test, by its id (a path relative to the repository, then ::name)."""
    path = nodeid.split('::', 1)[0]
    if path in GROUPS:
        return GROUPS[path]
    if path.startswith('tests/integration/'):
        return 'node-1'
    return 'lint' if path.startswith('tests/lint/') else 'no-node'


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    items.sort(key=lambda item: ORDER.index(group_of(item.nodeid)))


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling, with our groups as the scopes."""
    from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)

    return GroupScheduling(config, log)
