# SPDX-License-Identifier: Apache-2.0
"""The PD pair of Infera's 1P1D page on two rehearsal nodes (infera-node-9 prefill, infera-node-10 decode), deployed
by docs/pd.md's rehearsal command as printed: each wrapper runs exactly the page's argv and environment (the page is
parsed, not the role's data), the router lists one prefill and one decode worker, a completion goes through the pair,
a rerun changes nothing, and docs/pd.md's one-point sweep writes its jsonl with per-GPU figures over the pair's 16 GPUs.
Everything measured here is SIMULATED."""

from __future__ import annotations

import csv
import json
import re
import shlex
import shutil
import subprocess
import time

import pytest

from rehearsal import REPO, Node, node_up, playbook_env

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('pd-nodes')

PREFILL, DECODE = "infera-node-9", "infera-node-10"
CONTAINER = "pd_bench"
PAGE = REPO / "docs" / "reference" / "sglang-1p1d-dsv4-pro-mi355x.md"
DOC = REPO / "docs" / "pd.md"
ADAPTATIONS = ("adaptation: --router-backend python in place of the page", "adaptation: --etcd-prefix /infera/rehearsal-pd/")
# What the legs run beside the page's flags, and why: each is printed as an adaptation or is the collection's own.
ALLOWED_FLAGS = {
    "--etcd-prefix": ["/infera/rehearsal-pd/"],  # the rehearsal pair's own prefix, printed as an adaptation
    "--enable-metrics": [],  # Infera v0.1.1 has no drain: the collection's reads the engine's /metrics (_stack.py)
}


def doc_command(which="deploy"):
    """The rehearsal command of docs/pd.md printed under its `<!-- rehearsal <which>: ... -->` mark."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    mark = next(index for index, line in enumerate(lines) if line.startswith(f"<!-- rehearsal {which}:"))
    assert lines[mark + 1] == "```bash"
    return lines[mark + 2]


def page_legs():
    """{leg: (env, argv)} of the page's two engine commands, with the export both nodes paste and the bootstrap
    timeout the page says to bump, as the user's shell would run them."""
    text = PAGE.read_text(encoding="utf-8")
    lines = text.splitlines()
    exported = next(line for line in lines if line.startswith("export SGLANG_USE_AITER=1 "))
    shared = dict(word.split("=", 1) for word in shlex.split(exported)[1:])
    shared.update(re.findall(r"bump\s+`(SGLANG_\w+)=(\d+)`", text))
    legs, heading = {}, None
    for line in lines:
        found = re.match(r"\*\*(Prefill|Decode) leg", line)
        heading = found.group(1).lower() if found else heading
        if " -m infera.engine.sglang " in line:
            words = shlex.split(line)
            python = words.index("-m") - 1
            legs[heading] = ({**shared, **dict(word.split("=", 1) for word in words[:python])}, words[python + 3:])
    return legs


def flags(words):
    """--flag -> the values after it (none for a bare switch): the argv as argparse reads it, whatever the order."""
    parsed = {}
    for word in words:
        if word.startswith("--"):
            values = parsed.setdefault(word, [])
        else:
            values.append(word)
    return parsed


def wrapper(node):
    """(argv after `-m infera.engine.sglang`, environment) of the running wrapper in the node's container."""
    out = node.in_container(CONTAINER, "pid=$(pgrep -f '^python -m infera[.]engine[.]sglang ' | head -1); "
                            "tr '\\0' '\\n' </proc/$pid/cmdline; echo '--ENV--'; tr '\\0' '\\n' </proc/$pid/environ").stdout
    argv, _marker, env = out.partition("--ENV--\n")
    words = argv.splitlines()
    return words[3:], dict(line.split("=", 1) for line in env.splitlines() if "=" in line)


def playbook(command):
    """A command of docs/pd.md as printed, run from the checkout with its settings: (returncode, output)."""
    result = subprocess.run(shlex.split(command), cwd=REPO, env=playbook_env(), capture_output=True, text=True,
                            timeout=1500, check=False)
    return result.returncode, result.stdout + result.stderr


def deploy():
    return playbook(doc_command("deploy"))


@pytest.fixture(scope="module")
def pair():
    settings = node_up(PREFILL, DECODE)
    nodes = {"prefill": Node(PREFILL), "decode": Node(DECODE)}
    for node in nodes.values():
        node.remove_worker_container(CONTAINER)
    yield settings, nodes
    for node in nodes.values():
        node.remove_worker_container(CONTAINER)


def test_the_pair_runs_the_page_s_legs_serves_through_the_router_and_a_rerun_changes_nothing(pair):
    settings, nodes = pair
    rc, out = deploy()
    assert rc == 0, out[-6000:]
    assert [out.count(line) for line in ADAPTATIONS] == [1, 1], out[-3000:]
    assert f"PD pair up: 1P1D, prefill {PREFILL}, decode {DECODE}, router http://{nodes['prefill'].address}:8000" in out

    # Each wrapper runs the page's command with the site's values, and the page's environment.
    site = {"$MODEL": settings["MODEL"], "$P_IP": nodes["prefill"].address, "$D_IP": nodes["decode"].address}
    for leg, (page_env, page_argv) in page_legs().items():
        argv, env = wrapper(nodes[leg])
        expected = [site.get(word, word) for word in page_argv]
        # $ETCD is the site's etcd endpoint (the page's is "$P_IP:2379"; the rehearsal's etcd is the platform's).
        etcd = expected.index("--etcd-endpoint") + 1
        assert page_argv[etcd] == "$ETCD"
        expected[etcd] = settings["ETCD"]
        assert flags(argv) == {**flags(expected), **ALLOWED_FLAGS}, leg
        assert {name: env.get(name) for name in page_env} == page_env, leg

    # The router on the prefill node lists one worker of each mode; a completion goes through the pair.
    workers = json.loads(nodes["prefill"].in_container(CONTAINER, "curl -s http://127.0.0.1:8000/v1/workers").stdout)
    modes = sorted((worker["disagg_mode"], worker["worker_id"]) for worker in workers["workers"])
    assert modes == [("decode", f"{nodes['decode'].address}:30000"), ("prefill", f"{nodes['prefill'].address}:30000")]
    reply = json.loads(nodes["decode"].in_container(CONTAINER, (
        f"curl -s http://{nodes['prefill'].address}:8000/v1/chat/completions -H 'Content-Type: application/json' "
        "-d " + shlex.quote(json.dumps({"model": settings["MODEL"], "max_tokens": 16, "temperature": 0,
                                        "messages": [{"role": "user", "content": "1+1=?"}]})))).stdout)
    assert reply["choices"][0]["message"]["content"], reply

    rc, out = deploy()
    assert rc == 0, out[-6000:]
    recap = [line for line in out.splitlines() if line.startswith((PREFILL, DECODE)) and "changed=" in line]
    assert len(recap) == 2 and all("changed=0" in line and "failed=0" in line for line in recap), out[-3000:]

    check_sweep(nodes)

    # docs/pd.md's teardown: both legs stopped (deregistered, engines gone), the router and both containers removed.
    rc, out = playbook(doc_command("teardown"))
    assert rc == 0, out[-6000:]
    for node in nodes.values():
        assert node.sh(f"docker ps -aq --filter name=^{CONTAINER}$").stdout.strip() == ""


def check_sweep(nodes):
    """docs/pd.md's one-point sweep, as printed: the point goes through the pair's router as it is (c4), its jsonl
    comes back under the router's node, its per-GPU figures count both legs' GPUs (recomputed here from the jsonl),
    the manifest records the pair and each leg's argv and env, and the deployed pair did not change."""
    command = doc_command("sweep")
    run_id = re.search(r"-e run_id=(\S+)", command).group(1)
    results = REPO / "results" / run_id
    shutil.rmtree(results, ignore_errors=True)
    running = {leg: engines(node) for leg, node in nodes.items()}
    rc, out = playbook(command)
    assert rc == 0, out[-6000:]
    assert "SIMULATED" in out
    # The pair was up: neither leg restarted.
    assert {leg: engines(node) for leg, node in nodes.items()} == running
    assert all(running.values()), running
    assert sorted(path.name for path in results.iterdir() if path.is_dir()) == [PREFILL]
    host_dir = results / PREFILL
    record = json.loads((host_dir / "mix_c4.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert record["max_concurrency"] == 4 and record["completed"] == 40
    manifest = json.loads((host_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["topology"] == {"kind": "pd", "label": "1P1D", "prefill": [PREFILL], "decode": [DECODE],
                                    "router": PREFILL}
    for leg in ("prefill", "decode"):
        argv, env = wrapper(nodes[leg])
        noted = manifest["variants"][leg]
        assert flags(noted["argv"])["--disaggregation-mode"] == [leg] == flags(argv)["--disaggregation-mode"]
        assert {name: env.get(name) for name in noted["env"]} == noted["env"], leg
    [point] = manifest["points"]
    assert (point["status"], point["conc"], point["fleet"], len(point["workers"])) == ("ok", 4, False, 2), point
    with open(results / "results.csv", encoding="utf-8", newline="") as handle:
        [row] = list(csv.DictReader(handle))
    assert (row["Topology"], row["GPUs"], row["Workers"], row["Concurrency"]) == ("1P1D", "16", "2", "4"), row
    tokens = record["total_input_tokens"] + record["total_output_tokens"]
    assert float(row["Throughput/GPU (tok/s)"]) == pytest.approx(tokens / record["duration"] / 16, rel=1e-3)


def engines(node):
    """The worker wrappers running in the node's pd_bench container (none when it has no container)."""
    return node.sh(f"docker exec {CONTAINER} pgrep -f '^python -m infera[.]engine[.]sglang ' || true", check=False).stdout.split()


def test_a_node_whose_container_sees_no_rdma_port_stops_both_legs_before_either_starts(pair):
    _settings, nodes = pair
    for node in nodes.values():
        node.remove_worker_container(CONTAINER)
    decode = nodes["decode"]
    decode.sh("rm -f /dev/infiniband/uverbs*")
    try:
        rc, out = deploy()
    finally:
        decode.sh("for i in 0 1 2 3 4 5 6 7; do [ -e /dev/infiniband/uverbs$i ] || mknod -m 666 /dev/infiniband/uverbs$i c 1 3; done")
    text = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert (f"{DECODE}: stage rdma: the container {CONTAINER} sees 0 active RDMA port(s) (`ibv_devinfo | grep -c "
            "PORT_ACTIVE`); expected 8 (infera_rdma_ports).") in text, out[-3000:]
    assert "The container has no RDMA device (ibv_devinfo: No IB devices found)" in text
    assert "rerun with -e infera_ionic_overlay=true" in text
    assert "No IB devices found" in text.rsplit("Last lines of ibv_devinfo in the container:", maxsplit=1)[-1]
    assert engines(nodes["prefill"]) == [] and engines(decode) == []


def test_busy_vram_on_one_leg_stops_both_before_any_change(pair):
    _settings, nodes = pair
    for node in nodes.values():
        node.remove_worker_container(CONTAINER)
    decode = nodes["decode"]
    decode.sh("echo '3 85' > /etc/infera-sim/busy-gpu")
    try:
        rc, out = deploy()
    finally:
        decode.sh("rm -f /etc/infera-sim/busy-gpu")
    text = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert f"{DECODE}: preflight gpus: GPU 3 (85.0%, 250661 of 294896 MiB) has more than 10% of its VRAM in use" in text
    # Nothing changed on either node: no container was created.
    for node in nodes.values():
        assert node.sh(f"docker ps -aq --filter name=^{CONTAINER}$").stdout.strip() == ""


def test_a_bootstrap_port_the_decode_node_cannot_reach_is_named_before_any_request_waits_for_it(pair):
    """A firewall between the legs dropping the prefill leg's bootstrap port: both legs come up, then the decode node's
    try of the port names it, instead of a completion waiting SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (1800 s)."""
    _settings, nodes = pair
    for node in nodes.values():
        node.remove_worker_container(CONTAINER)
    prefill, decode = nodes["prefill"], nodes["decode"]
    rule = f"INPUT -p tcp --dport 8998 -s {decode.address} -j DROP"
    prefill.sh(f"iptables -I {rule}")
    try:
        rc, out = deploy()
    finally:
        prefill.sh(f"iptables -D {rule}")
    text = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert (f"{DECODE}: stage pd-reach: the prefill leg's bootstrap port 8998 on {PREFILL} ({prefill.address}) did not "
            "accept a connection from this node within 10 s, though both legs are up.") in text, out[-3000:]
    assert f"check with nc -zv {prefill.address} 8998 on {DECODE}" in text
    # Named before the verify's completion, which would have waited for the bootstrap.
    assert "PD pair up" not in out and "Verify through the router" not in out
    # The router's node reached the decode leg's engine port: only the dropped port is named.
    assert f"{PREFILL}: stage pd-reach" not in text


def test_a_container_provider_that_does_not_match_the_host_is_named_then_the_opt_in_overlay_mends_it(pair):
    """The page's §2: 0 active ports in the container while the node has them, as when the image's ionic provider does
    not match the host's driver. The deploy stops naming the overlay; the same command with
    -e infera_ionic_overlay=true copies the host's libionic.so into the container and the pair comes up."""
    _settings, nodes = pair
    decode = nodes["decode"]
    rc, out = deploy()
    assert rc == 0, out[-3000:]
    decode.in_container(CONTAINER, "printf 'ionic-abi image-50\\n' >/usr/lib/x86_64-linux-gnu/libionic.so.1")
    rc, out = deploy()
    text = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert (f"{DECODE}: stage rdma: the container {CONTAINER} sees 0 active RDMA port(s) (`ibv_devinfo | grep -c "
            "PORT_ACTIVE`); expected 8 (infera_rdma_ports).") in text, out[-3000:]
    assert "rerun with -e infera_ionic_overlay=true" in text and "No IB devices found" not in text
    rc, out = playbook(doc_command("deploy") + " -e infera_ionic_overlay=true")
    assert rc == 0, out[-3000:]
    assert "PD pair up: 1P1D" in out
    provider = decode.in_container(CONTAINER, "cat /usr/lib/x86_64-linux-gnu/libionic.so.1").stdout
    assert "ionic-abi host-54" in provider
    assert decode.in_container(CONTAINER, "ibv_devinfo | grep -c PORT_ACTIVE", check=False).stdout.strip() == "8"


def test_a_second_pair_comes_up_and_goes_while_the_first_serves_every_request(pair):
    """docs/pd.md's second pair (its own groups and etcd prefix) is deployed and torn down while completions go
    through the first pair's router: not one fails, and each router lists only its own pair's legs."""
    settings, nodes = pair
    node_up("infera-node-11", "infera-node-12")
    second = {"prefill": Node("infera-node-11"), "decode": Node("infera-node-12")}
    rc, out = deploy()
    assert rc == 0, out[-3000:]
    first_router = f"http://{nodes['prefill'].address}:8000"
    body = shlex.quote(json.dumps({"model": settings["MODEL"], "max_tokens": 4, "temperature": 0,
                                   "messages": [{"role": "user", "content": "1+1=?"}]}))
    load = (f"rm -f /tmp/pd-load /tmp/pd-load.stop; until [ -e /tmp/pd-load.stop ]; do curl -s -o /dev/null -m 60 "
            f"-w '%{{http_code}}\\n' {first_router}/v1/chat/completions -H 'Content-Type: application/json' -d {body} "
            ">>/tmp/pd-load; done; touch /tmp/pd-load.done")
    nodes["decode"].in_container(CONTAINER, load, detach=True)
    command = doc_command("second pair")
    try:
        rc, out = playbook(command)
        assert rc == 0, out[-6000:]
        assert ("PD pair up: 1P1D, prefill infera-node-11, decode infera-node-12, "
                f"router http://{second['prefill'].address}:8000") in out
        for router, legs in ((nodes["prefill"], nodes), (second["prefill"], second)):
            listed = json.loads(router.in_container(CONTAINER, "curl -s http://127.0.0.1:8000/v1/workers").stdout)
            assert sorted(worker["worker_id"] for worker in listed["workers"]) == sorted(
                f"{node.address}:30000" for node in legs.values()), listed
        teardown = doc_command("teardown") + command.split("deploy_pd.yml", 1)[1]
        rc, out = playbook(teardown)
        assert rc == 0, out[-6000:]
    finally:
        nodes["decode"].in_container(CONTAINER, "touch /tmp/pd-load.stop; for i in $(seq 1 120); do "
                                     "[ -e /tmp/pd-load.done ] && break; sleep 0.5; done", check=False)
        for node in second.values():
            node.remove_worker_container(CONTAINER)
    codes = nodes["decode"].in_container(CONTAINER, "cat /tmp/pd-load").stdout.split()
    assert len(codes) >= 5 and set(codes) == {"200"}, codes
    for node in second.values():
        assert node.sh(f"docker ps -aq --filter name=^{CONTAINER}$").stdout.strip() == ""


def test_a_decode_leg_that_dies_mid_sweep_aborts_the_point_naming_it_and_keeps_the_earlier_point(pair):
    """The decode engine SIGKILLed while c8 is measured on the prefill node: the point aborts naming the decode leg
    (its /health, watched from the bench node), c2 stays valid on the controller."""
    _settings, nodes = pair
    prefill, decode = nodes["prefill"], nodes["decode"]
    run_id = f"pd-decode-dies-{time.time_ns()}"
    settings = {"run_id": run_id, "concurrencies": [2, 8], "sweep_random_input_len": 64, "sweep_random_output_len": 512,
                "sweep_prompts_per_conc": 4, "sweep_below_target": "ignore"}
    process = subprocess.Popen(["ansible-playbook", "playbooks/sweep_pd.yml", "-e", json.dumps(settings)], cwd=REPO,
                               env=playbook_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and process.poll() is None:
            if prefill.sh("pgrep -f 'sglang.bench_serving.*--max-concurrency 8 '", check=False).returncode == 0:
                time.sleep(3)  # the client is measuring c8
                decode.in_container(CONTAINER, "pkill -KILL -f 'sglang[.]launch_server'")
                break
            time.sleep(0.5)
        out = process.communicate(timeout=900)[0]
    finally:
        if process.poll() is None:
            process.kill()
    text = " ".join(out.split())
    assert process.returncode != 0, out[-3000:]
    assert (f"{PREFILL}: stage sweep c8 (prefill): the decode leg on {DECODE} died during point c8 on {PREFILL}") in text, \
        out[-3000:]
    assert f"Cause: the decode leg on {DECODE} does not answer its health URL http://{decode.address}:30000/health" in text
    points = {point["conc"]: point for point in
              json.loads((REPO / "results" / run_id / PREFILL / "manifest.json").read_text(encoding="utf-8"))["points"]}
    assert (points[2]["status"], points[8]["status"]) == ("ok", "aborted"), points
    assert (REPO / "results" / run_id / PREFILL / "mix_c2.jsonl").exists()
    shutil.rmtree(REPO / "results" / run_id, ignore_errors=True)


def test_the_teardown_waits_for_free_vram_on_both_nodes_and_names_a_gpu_that_stays_busy(pair):
    """The page, before the next topology: "wait for VRAM≈0 on both nodes". A decode GPU still busy after the legs
    stopped is waited for (amd-smi every 5 s) and, once free, the teardown finishes; one that stays busy past
    infera_pd_vram_wait is named. The legs may be up or not: the teardown converges either way."""
    _settings, nodes = pair
    decode = nodes["decode"]
    command = shlex.split(doc_command("teardown"))
    decode.sh("echo '5 60' > /etc/infera-sim/busy-gpu")
    try:
        rc, out = playbook(shlex.join(command + ["-e", "infera_pd_vram_wait=5", "--tags", "worker"]))
        text = " ".join(out.split())
        assert rc != 0, out[-3000:]
        assert (f"{DECODE}: stage teardown: GPU 5 (60.0%, 176937 of 294896 MiB) still holds more than 10% of VRAM 5 s "
                "after both legs stopped.") in text, out[-3000:]
        assert "Next step: amd-smi process on the node" in text
        assert f"{PREFILL}: stage teardown" not in text

        # Unbuffered: the retry line must reach the test when Ansible prints it, not with the play's end.
        process = subprocess.Popen(command, cwd=REPO, env=playbook_env({"PYTHONUNBUFFERED": "1"}),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = []
        for line in process.stdout:
            seen.append(line)
            if "Wait for free VRAM on the node" in line and "RETRYING" in line and DECODE in line:
                decode.sh("rm -f /etc/infera-sim/busy-gpu")
        process.wait(timeout=600)
    finally:
        decode.sh("rm -f /etc/infera-sim/busy-gpu")
    out = "".join(seen)
    assert process.returncode == 0, out[-3000:]
    assert "FAILED - RETRYING: [infera-node-10]: Teardown PD | Wait for free VRAM on the node" in out, out[-3000:]
    for node in nodes.values():
        assert node.sh(f"docker ps -aq --filter name=^{CONTAINER}$").stdout.strip() == ""
