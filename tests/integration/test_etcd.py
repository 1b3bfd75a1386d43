"""playbooks/etcd.yml on a rehearsal node: the fleet's etcd in a container, its data on the node.

The node is infera-node-7, a node of this file's own (tests/conftest.py: group own-nodes, beside
molecule's scenarios): it ran on the fleet's node 2, in the fleet's group, the suite's longest,
whose tail ran alone on the two cores. No other test uses node 7, so the first node's worker
container, the fleet's nodes and the platform's own etcd on the host (which the other tests use)
are left alone. The image is the platform's real
etcd (Debian's etcd-server, ETCD_IMG in platform.env; quay.io is not reachable from CI),
which inventories/rehearsal/group_vars/mi355x.yml hands to the role as etcd_image. Keys are
written and read through etcd's v3 HTTP gateway (base64 keys and values), which both
etcd 3.4 here and 3.5 upstream serve.
"""

import base64
import json
import re
import shlex
import time

import pytest

from conftest import node_name
from rehearsal import Node, node_up, run_playbook

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('own-nodes')

NODE_INDEX = 7
NODE = node_name(NODE_INDEX)
CONTAINER = "infera-etcd"
DATA_DIR = "/var/lib/infera/etcd"
LOCAL = "http://127.0.0.1:2379"


def etcd_play(*extra):
    return run_playbook("etcd.yml", "-e", f"infera_etcd_hosts={NODE}", *extra, limit=NODE, timeout=600)


def flat(out):
    """The output with whitespace runs made one space: the YAML callback may fold a long line."""
    return re.sub(r"\s+", " ", out)


def changed_count(out):
    match = re.search(rf"^{re.escape(NODE)}\s*:\s*ok=\d+\s+changed=(\d+)", out, re.MULTILINE)
    assert match, f"no recap line for {NODE}:\n{out[-3000:]}"
    return int(match.group(1))


def b64(text):
    return base64.b64encode(text.encode()).decode()


def gateway(node, path, body):
    """POST to etcd's v3 HTTP gateway from the node itself; the JSON answer."""
    out = node.sh(f"curl -sf -X POST {LOCAL}/v3/{path} -d {shlex.quote(json.dumps(body))}").stdout
    return json.loads(out)


def put(node, key, value):
    gateway(node, "kv/put", {"key": b64(key), "value": b64(value)})


def get(node, key):
    kvs = gateway(node, "kv/range", {"key": b64(key)}).get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def wait_healthy(node, url=LOCAL, timeout=60):
    deadline = time.monotonic() + timeout
    answer = ""
    while time.monotonic() < deadline:
        answer = node.sh(f"curl -s {url}/health", check=False).stdout
        if '"health":"true"' in answer.replace(" ", ""):
            return answer
        time.sleep(1)
    logs = node.sh(f"docker logs --tail 30 {CONTAINER} 2>&1", check=False).stdout
    raise AssertionError(f"{url}/health on {NODE} answered {answer!r} after {timeout} s; last log lines:\n{logs}")


def container_exists(node, name=CONTAINER):
    return node.sh(f"docker ps -aq --filter name=^{name}$").stdout.strip() != ""


def remove_etcd(node):
    node.sh(f"docker rm -f {CONTAINER} repro-etcd >/dev/null 2>&1 || true; rm -rf {DATA_DIR}")


@pytest.fixture(scope="module")
def settings():
    settings = node_up(NODE)  # this node alone (conftest.node_fixture says why)
    assert settings.get("ETCD_IMG"), f"platform.env has no ETCD_IMG: {settings}"
    return settings


@pytest.fixture
def node(settings):
    """The node without an etcd container or data, before and after the test."""
    node = Node(NODE)
    remove_etcd(node)
    yield node
    remove_etcd(node)


def test_check_mode_says_what_it_would_start_and_starts_nothing(node):
    rc, out = etcd_play("--check")
    assert rc == 0, out[-3000:]
    assert f"would answer at http://{node.address}:2379" in flat(out), out[-3000:]
    assert changed_count(out) > 0
    assert not container_exists(node)
    assert node.sh(f"test -e {DATA_DIR}", check=False).returncode != 0, "check mode created the data directory"


def test_data_survives_restart_and_replacement_and_a_second_run_changes_nothing(node, settings):
    endpoint = f"http://{node.address}:2379"
    rc, out = etcd_play()
    assert rc == 0, out[-3000:]
    assert f"set infera_etcd_endpoint: {endpoint}" in flat(out), out[-3000:]
    assert changed_count(out) > 0
    # The address comes from the playbooks' one way of learning it (tasks/node_address.yml), not from gathering
    # the network facts (the role's fallback when it runs without it: a skipped task prints no banner).
    assert "Node address | Learn the node's default address" in out, out[-3000:]
    assert "Etcd | Learn the node's default address to advertise" not in out, out[-3000:]

    # Listening on the node's address (what routers and workers use), not only on loopback.
    wait_healthy(node, endpoint, timeout=10)
    inspect = node.sh(f"docker inspect -f '{{{{.Config.Image}}}} {{{{.HostConfig.RestartPolicy.Name}}}} "
                      f"{{{{.HostConfig.NetworkMode}}}}' {CONTAINER}").stdout.split()
    assert inspect == [settings["ETCD_IMG"], "unless-stopped", "host"], inspect
    # The member advertises the endpoint the playbook printed.
    members = gateway(node, "cluster/member/list", {})["members"]
    assert [(member["name"], member["clientURLs"]) for member in members] == [(NODE, [endpoint])], members

    key, value = "/infera/test-etcd/survives", f"written {time.time_ns()}"
    put(node, key, value)

    node.sh(f"docker restart {CONTAINER} >/dev/null")
    wait_healthy(node)
    assert get(node, key) == value, "the key did not survive docker restart"

    for mode in (("--check",), ()):
        rc, out = etcd_play(*mode)
        assert rc == 0, out[-3000:]
        assert changed_count(out) == 0, f"second run {mode or '(real)'} changed something:\n{out[-3000:]}"

    node.sh(f"docker rm -f {CONTAINER} >/dev/null")
    rc, out = etcd_play()
    assert rc == 0, out[-3000:]
    assert changed_count(out) > 0
    wait_healthy(node, timeout=10)
    assert get(node, key) == value, "the key did not survive a replaced container"

    rc, out = etcd_play("-e", "etcd_state=absent")
    assert rc == 0, out[-3000:]
    assert not container_exists(node)
    assert node.sh(f"test -d {DATA_DIR}/member", check=False).returncode == 0, "absent removed the data"
    rc, out = etcd_play("-e", "etcd_state=absent")
    assert rc == 0 and changed_count(out) == 0, out[-3000:]

    rc, out = etcd_play("-e", "etcd_state=absent", "-e", "etcd_remove_data=true")
    assert rc == 0, out[-3000:]
    assert node.sh(f"test -e {DATA_DIR}", check=False).returncode != 0, "etcd_remove_data left the data"


def test_another_etcd_on_the_port_is_named_not_taken_for_this_one(node, settings):
    # Exactly what Infera's kit (examples/deepseek_v4/common.sh start_etcd) leaves on a node.
    image = settings["ETCD_IMG"]
    node.sh(f"docker pull -q {image} >/dev/null && docker run -d --name repro-etcd --network=host {image} etcd "
            f"--advertise-client-urls http://{node.address}:2379 --listen-client-urls http://0.0.0.0:2379 >/dev/null")
    wait_healthy(node)

    rc, out = etcd_play("-e", "etcd_health_timeout=10")
    assert rc != 0, out[-3000:]
    text = flat(out)
    assert (f"{NODE}: stage etcd: an etcd answers {LOCAL} but it is not this one: it lists members "
            f'["default"], none named {NODE} advertising http://{node.address}:2379.') in text, out[-3000:]
    assert "Infera's kit leaves `repro-etcd`" in text
    assert f"Last lines of `docker logs {CONTAINER}`:" in text
    assert "address already in use" in text, out[-3000:]


def test_an_etcd_that_exits_at_its_start_is_named_at_its_first_exit_not_after_the_timeout(node):
    # Another process holds the peer port: etcd exits at its start ("bind: address already in use") and Docker's
    # restart policy restarts it again and again. The wait ends at the first exit and names it; before, it polled
    # /health for the whole etcd_health_timeout (60 s) and then said only that /health did not answer.
    marker = "infera-test-holds-etcd-peer-port"
    node.sh("nohup python3 -c 'import socket, sys, time; s = socket.socket(); s.bind((\"0.0.0.0\", 2380)); "
            f"s.listen(); time.sleep(600)' {marker} >/dev/null 2>&1 &")
    try:
        deadline = time.monotonic() + 10
        while ":2380 " not in node.sh("ss -Hltn", check=False).stdout and time.monotonic() < deadline:
            time.sleep(0.2)
        rc, out = etcd_play()
    finally:
        node.sh(f"pkill -f '[{marker[0]}]{marker[1:]}' || true")  # the bracket: not this shell, whose line has it too
    assert rc != 0, out[-3000:]
    text = flat(out)
    exited = re.search(rf"{NODE}: stage etcd: etcd exited at its start, before {re.escape(LOCAL)}/health answered "
                       r'\{"health":"true"\}: the container had (?:stopped|restarted) ([0-9.]+) s into the wait \(last answer: ', text)
    assert exited, out[-3000:]
    assert float(exited.group(1)) < 60, f"the wait ran to its timeout: {exited.group(0)}"
    assert "address already in use" in text, out[-3000:]
    assert f"Container {CONTAINER} (" in text and "Then rerun; the data in" in text, out[-3000:]


def test_more_than_one_host_is_refused_before_anything_changes(node):
    # The other host is node 6 (another group's): the refusal runs on the controller and reaches no node.
    hosts = f"{node_name(6)},{NODE}"
    rc, out = run_playbook("etcd.yml", "-e", f"infera_etcd_hosts={hosts}", limit=hosts, timeout=300)
    assert rc != 0
    assert f"2 hosts matched ({node_name(6)}, {NODE}): this playbook runs one single-member etcd" in flat(out), \
        out[-3000:]
    assert not container_exists(node)
