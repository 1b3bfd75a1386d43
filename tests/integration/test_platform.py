"""The rehearsal platform itself: several nodes, idempotent bring-up, the real pull path."""

import os
import subprocess

import pytest

from rehearsal import PLATFORM, Node, node_up, platform_up

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('own-nodes')

FLEET = ["fleet-test-1", "fleet-test-2", "fleet-test-3"]


def _inspect(name, template):
    return subprocess.run(["docker", "inspect", "-f", template, name],
                          capture_output=True, text=True, check=True).stdout.strip()


def _container_id(name):
    return _inspect(name, "{{.Id}}")


@pytest.fixture(scope="module")
def settings():
    return platform_up(1)


@pytest.fixture(scope="module")
def fleet(settings):
    subprocess.run([str(PLATFORM), "node-up", *FLEET], check=True)
    yield [Node(name) for name in FLEET]
    subprocess.run([str(PLATFORM), "node-down", *FLEET], check=True)


def test_three_nodes_each_pull_the_engine_image_and_look_like_mi355x(fleet, settings):
    assert len({node.address for node in fleet}) == 3
    for node in fleet:
        node.sh('docker pull -q "$IMG" >/dev/null', env={"IMG": settings["IMG"]}, timeout=300)
        node.sh("test -c /dev/kfd && for i in $(seq 128 135); do test -c /dev/dri/renderD$i; done")
        node.sh('getent group video && getent group render')
        node.sh('test -f "$MODEL/tokenizer.json" && test -f "$MODEL/config.json" && test -s "$DATASET"',
                env={"MODEL": settings["MODEL"], "DATASET": settings["DATASET"]})
        node.sh('curl -sf -X POST "$ETCD/v3/maintenance/status" -d "{}"', env={"ETCD": settings["ETCD"]})


def test_bringing_up_running_nodes_again_leaves_them_alone(fleet):
    before = [_container_id(node.name) for node in fleet]
    subprocess.run([str(PLATFORM), "node-up", *FLEET], check=True)
    assert [_container_id(node.name) for node in fleet] == before


def test_a_node_reaps_what_its_commands_leave_behind(fleet):
    """A real node's init reaps orphaned processes. The simulated amd-smi, run by every preflight, leaves its
    here-document's writer orphaned: with the node's dockerd as PID 1, each call left an `amd-smi <defunct>`
    (86 on a node after an afternoon of runs)."""
    node = fleet[0]
    assert _inspect(node.name, "{{.HostConfig.Init}}") == "true"
    node.sh("for call in 1 2 3; do amd-smi metric --mem-usage --json >/dev/null 2>&1; done")
    # The init reaps as the orphan exits; give it a moment.
    zombies = node.sh("for _ in 1 2 3 4 5 6 7 8 9 10; do z=$(ps -eo stat=,comm= | awk '$1 ~ /^Z/'); "
                      "[ -z \"$z\" ] && break; sleep 0.2; done; echo \"$z\"").stdout.strip()
    assert zombies == "", zombies


def _running(name):
    return _inspect(name, "{{.State.Running}}") == "true"


def test_bringing_up_one_node_leaves_a_node_killed_on_purpose_down(fleet):
    """A test group's fixture brings up its own nodes only (rehearsal.node_up): the groups run at once, and
    test_fleet kills a node mid-rollout on purpose; `platform up N` from another group's fixture once brought that
    node back, empty, in the middle of the rollout (CI at 806bb9c)."""
    killed, other = fleet[1].name, fleet[2].name
    subprocess.run(["docker", "kill", killed], check=True, capture_output=True)
    try:
        node_up(other)
        assert not _running(killed), f"bringing up {other} started {killed} again"
        assert _running(other)
    finally:
        node_up(killed)
    assert _running(killed)


def _host_dockerd():
    """The host's dockerd pids: those in this PID namespace (each node runs a dockerd of its own,
    and nodes come and go while other tests run)."""
    ours = os.readlink("/proc/self/ns/pid")
    pids = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True, check=False).stdout.split()
    found = []
    for pid in pids:
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") == ours:
                found.append(pid)
        except OSError:
            pass  # gone meanwhile: a node's dockerd
    return found


def test_a_running_docker_engine_is_left_alone(settings):
    before = _host_dockerd()
    subprocess.run([str(PLATFORM), "engine"], check=True)
    assert before and before == _host_dockerd()


def test_bad_node_count_is_refused_in_one_line():
    result = subprocess.run([str(PLATFORM), "up", "three"], capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "node count must be a positive integer, got 'three'" in result.stderr


def _tags(source=None):
    env = {**os.environ, **({"INFERA_REHEARSAL_INFERA_SOURCE": str(source)} if source else {})}
    out = subprocess.run([str(PLATFORM), "tags"], capture_output=True, text=True, check=True, env=env).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_two_clones_of_one_commit_share_the_images_and_other_infera_bytes_do_not(settings, tmp_path):
    """The engine image's tag is a hash of its inputs: the pinned Infera by its bytes, not by the path a clone reaches the
    vendored tarball by (a second clone built the same image again, ~2.5 min). Other bytes are another image."""
    # The default stack's Infera (platform env STACK_INFERA): shared/vendor holds other releases too.
    vendored = PLATFORM.parents[3] / "shared" / "vendor" / settings["STACK_INFERA"]
    default = _tags()
    assert default["engine"] == settings["IMG"].split("/", 1)[1], (default, settings["IMG"])
    elsewhere = tmp_path / "another-clone" / vendored.name
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(vendored.read_bytes())
    assert _tags(elsewhere) == default
    other = tmp_path / vendored.name
    other.write_bytes(vendored.read_bytes() + b"\0")
    changed = _tags(other)
    assert changed["engine"] != default["engine"]
    assert {kind: changed[kind] for kind in ("node", "etcd")} == {kind: default[kind] for kind in ("node", "etcd")}
