"""Fixtures shared by the tests on the rehearsal platform's nodes (node 1 unless a module says another)."""

import pytest

from rehearsal import Node, node_up


def node_name(index):
    """The platform's node `index` (1-based), as the rehearsal inventory names it."""
    return f"infera-node-{index}"


def node_fixture(index):
    """A module-scoped `node` fixture on the platform's node `index`: node 1 here for every module; a module whose
    group (tests/conftest.py) owns another node sets `node = node_fixture(i)` and overrides it."""

    @pytest.fixture(scope="module", name="node")
    def _node():
        # This node alone: `platform up <index>` would also start nodes 1..index-1, bringing back a node that another
        # group's test has just killed on purpose (CI at 806bb9c: test_fleet's lost node 3 came back mid-rollout).
        node_up(node_name(index))
        return Node(node_name(index))

    return _node


NODE = node_name(1)
node = node_fixture(1)


@pytest.fixture
def clean_node(node):
    """The node without a worker container, before and after the test."""
    node.remove_worker_container()
    yield node
    node.remove_worker_container()
