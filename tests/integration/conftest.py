"""Fixtures shared by the tests that run on the rehearsal platform's first node."""

import pytest

from rehearsal import Node, platform_up

NODE = "infera-node-1"


@pytest.fixture(scope="module")
def node():
    platform_up(1)
    return Node(NODE)


@pytest.fixture
def clean_node(node):
    """The node without a worker container, before and after the test."""
    node.remove_worker_container()
    yield node
    node.remove_worker_container()
