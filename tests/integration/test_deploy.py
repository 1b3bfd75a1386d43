"""deploy_mixed.yml on a rehearsal node: bad input, missing levers, reruns, a router that never answers, teardown
(secrets: test_secrets.py; engine faults: test_engine_faults.py and test_fault_matrix.py).

Each test starts from a node without the worker container, runs the real playbook with
the rehearsal inventory, and checks what a person at 3 a.m. would see.
"""

import re
import time

import pytest

from rehearsal import platform_up, run_playbook

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-1')


def deploy(*extra, env=None):
    return run_playbook("deploy_mixed.yml", *extra, env=env, timeout=600)


def container_exists(node):
    return node.sh("docker ps -aq --filter name=^sgl_mix$").stdout.strip() != ""


@pytest.mark.parametrize("conc, expected", [
    ("0", "conc value 0"),
    ("-5", "conc value -5"),
    ("12.5", "12.5"),
    ("abc", "abc"),
    ("[]", "empty"),
    ("32,256", 'conc "32,256" names 2 concurrencies (32, 256) and a deploy serves one'),
])
def test_bad_concurrency_fails_in_one_line_before_anything(clean_node, conc, expected):
    rc, out = deploy("-e", f"conc={conc}" if conc != "[]" else '{"conc": []}')
    assert rc != 0
    lines = out.splitlines()
    errors = [index for index, line in enumerate(lines) if line.startswith("[ERROR]: Task failed")]
    assert len(errors) == 1 and expected in lines[errors[0]], out[-2000:]
    # Ansible prints where the task is right after the message: a line in between would be more
    # of the message (a traceback, a multi-line dump).
    assert lines[errors[0] + 1].startswith("Origin: "), out[-2000:]
    assert not container_exists(clean_node), "the node was changed before the input was validated"


@pytest.mark.parametrize("override, missing", [
    ('{"infera_extra_env": {"SGLANG_OPT_USE_FUSED_COMPRESS": null}}', "SGLANG_OPT_USE_FUSED_COMPRESS"),
    ('{"sglang_worker_extra_args": {"--attention-backend": "aiter"}}', "--attention-backend dsv4"),
])
def test_missing_lever_fails_before_starting(clean_node, override, missing):
    rc, out = deploy("-e", "conc=64", "-e", override)
    assert rc != 0
    assert missing in out and "sglang_worker_allow_missing_levers" in out, out[-2000:]
    assert not container_exists(clean_node)


def test_a_rerun_that_changes_nothing_writes_nothing_and_restarts_nothing(clean_node):
    """The launch scripts are rendered on the controller and compared with the node's copies: the first deploy writes
    each as it starts its process (one node call), an unchanged rerun writes and restarts nothing."""
    clean_node.sh("rm -f /var/lib/infera/sgl_mix/scripts/engine.sh /var/lib/infera/sgl_mix/scripts/router.sh")
    rc, out = deploy("-e", "conc=64")
    assert rc == 0, out[-3000:]
    rc, again = deploy("-e", "conc=64")
    assert rc == 0, again[-3000:]
    for started in ("SGLang worker | Write the launch script if it changed and start the engine detached",
                    "Router | Write the launch script if it changed and start the router detached"):
        assert started in out, f"the first deploy must write the launch scripts: {started!r} missing"
        assert started not in again, again[-3000:]
    # What was written is what the controller rendered: the rerun found both copies current.
    for script in ("engine.sh", "router.sh"):
        assert clean_node.sh(f"stat -c %a /var/lib/infera/sgl_mix/scripts/{script}").stdout.strip() == "644"
    assert re.search(r"infera-node-1\s+: ok=\d+\s+changed=0 ", again), again[-1500:]
    # Every task costs the controller a fork, a skipped one too (docs/performance.md): the paths an unchanged rerun
    # does not take (a start, a replacement, a failure report) are one include each, skipped as a whole, and the
    # shared names' check runs once per play. 81 tasks at this writing (with the inventory's group check and the
    # one-concurrency check before anything); 103 before.
    recap = re.search(r"infera-node-1\s+: ok=(\d+)\s+changed=0 .*skipped=(\d+)", again)
    assert int(recap[1]) + int(recap[2]) <= 81, recap[0]
    # The variant plan is made once per deploy (before the preflight reads the node's address, which the plan names
    # $HOST); the worker stage reuses it, and the launch script has the address.
    for output in (out, again):
        selections = re.findall(r"Select the variant for the concurrency and check the levers\] \**\s*ok: ", output)
        assert len(selections) == 1, output[-3000:]
    assert f"--advertise-host {clean_node.address} " in clean_node.in_container(
        "sgl_mix", "cat /var/lib/infera/sgl_mix/scripts/engine.sh").stdout
    assert "variant per node: infera-node-1 nodp" in again and "engine restarted: False" in again, again[-2500:]
    # The node has the image: the container role's look saw it, so no pull (a node call) was made.
    assert "Container | Pull the engine image" not in again, again[-3000:]

    # Check mode with --diff shows how the launch script would change and writes nothing (the start that would write
    # it does not run in check mode).
    script = "/var/lib/infera/sgl_mix/scripts/engine.sh"
    before = clean_node.sh(f"sha1sum {script}").stdout
    rc, checked = deploy("-e", "conc=64", "-e", "sglang_worker_cuda_graph_max_bs=160", "--check", "--diff")
    assert rc == 0, checked[-3000:]
    assert re.search(r"^-\s+--cuda-graph-max-bs 128 \\$", checked, re.M), checked[-3000:]
    assert re.search(r"^\+\s+--cuda-graph-max-bs 160 \\$", checked, re.M), checked[-3000:]
    # The flags the collection adds for the image's stack (v0.1.1: --enable-metrics, for its drain) are read in check
    # mode too: the diff shows no change a real run would not make.
    assert not re.search(r"^[-+].*--enable-metrics", checked, re.M), checked[-3000:]
    assert clean_node.sh(f"sha1sum {script}").stdout == before

    # The node without the image's tag (its layers kept under another name): the look sees none and the
    # pull brings the tag back, the same image, so the container and the engine are left alone.
    image = platform_up(1)["IMG"]
    clean_node.sh(f"docker tag {image} kept/{image.rsplit('/', 1)[1]} && docker rmi {image}")
    rc, pulled = deploy("-e", "conc=64")
    assert rc == 0, pulled[-3000:]
    assert re.search(r"Pull the engine image the node does not have\] \**\s+changed: \[infera-node-1\]", pulled), \
        pulled[-3000:]
    assert clean_node.sh(f"docker image inspect -f ok {image}").stdout.strip() == "ok"
    assert re.search(r"infera-node-1\s+: ok=\d+\s+changed=1 ", pulled), pulled[-1500:]
    assert "engine restarted: False" in pulled, pulled[-2500:]


def test_a_router_that_exits_at_its_start_is_named_with_its_log_at_once(clean_node):
    """Infera's router exits at its start on a tokenizer path that is neither a folder nor a Hugging Face id
    (infera/common/tokenizer.py resolve_tokenizer_path): the health wait must see its process gone and say so then,
    with the router log's last lines, before any worker starts, not after router_health_timeout (120 s)."""
    rc, out = deploy("-e", "conc=64", "-e", "router_tokenizer_path=/no/such/tokenizer")
    assert rc != 0, out[-3000:]
    text = " ".join(out.split())
    exited = re.search(r'infera-node-1: stage router: the router exited at its start, before /health answered '
                       r'\{"status": "ok"\} \(its process was gone ([0-9.]+) s into the wait\)\. Cause: Infera\'s router '
                       r'stopped at its start', text)
    assert exited, out[-3000:]
    # The router's imports and its tokenizer check take seconds; the timeout it no longer waits out is 120 s.
    assert float(exited.group(1)) < 40, exited.group(0)
    assert "Last lines:" in out and "ValueError: '/no/such/tokenizer': not a local path" in out, out[-3000:]
    assert "SGLang worker | Write the launch script if it changed and start the engine" not in out, \
        "a worker started behind a router that is down"


def test_a_router_whose_etcd_never_answers_is_waited_for_while_it_runs_then_named_when_it_exits(clean_node):
    """An etcd endpoint that accepts the connection and never answers: Infera's router runs, not answering /health,
    until its first read of the workers times out (httpx, 10 s; infera/common/discovery.py Registry.start), then
    exits. The wait must take the running router for running (the role's process pattern matches Infera's real
    router: a pattern that matched nothing would end the wait at its first look) and report the exit after it."""
    port = 23799
    clean_node.sh(f"nohup python3 -c 'import socket, time; s = socket.socket(); "
                  f"s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"127.0.0.1\", {port})); "
                  f"s.listen(16); time.sleep(120)' silent-etcd >/dev/null 2>&1 &")
    try:
        rc, out = deploy("-e", "conc=64", "-e", f"router_etcd_endpoint=http://127.0.0.1:{port}")
    finally:
        clean_node.sh("pkill -f 'time.sleep.120. silent-[e]tcd' || true")
    assert rc != 0, out[-3000:]
    text = " ".join(out.split())
    exited = re.search(r"stage router: the router exited at its start, before /health answered \{\"status\": \"ok\"\} "
                       r"\(its process was gone ([0-9.]+) s into the wait\)", text)
    assert exited, out[-3000:]
    # A pattern matching nothing ends the wait at its first look (0 s). Infera's router exits ~10 s after its own start;
    # how much of that passes before the wait's first look is the launch's time, up to 6.5 s under the suite's load (a
    # CI run saw 3.45 s left): a second of looking at the running router is the proof, not a share of the 10 s.
    assert float(exited.group(1)) >= 1, exited.group(0)
    assert f"Next step: check the etcd endpoint http://127.0.0.1:{port}" in text, out[-3000:]
    assert "httpx.ReadTimeout" in out, out[-3000:]
    assert "SGLang worker | Write the launch script if it changed and start the engine" not in out


def test_raising_capture_size_warns_about_memory(clean_node):
    rc, out = deploy("-e", "conc=64", "-e", "sglang_worker_cuda_graph_max_bs=160", "--check")
    assert rc == 0, out[-3000:]
    assert "raises the capture set" in out and "drop --mem-fraction-static" in out, out[-2000:]
    assert not container_exists(clean_node), "check mode changed the node"


def test_an_engine_left_behind_by_a_killed_wrapper_is_stopped_before_the_next_launch_and_by_a_worker_stop(clean_node):
    """SIGKILL on Infera's wrapper leaves its engine running, on port 30000 and the GPUs; the next
    launch must stop it and say so, not die on "Address already in use". So must a stop of the worker
    alone (teardown.yml --tags worker keeps the container), which used to look only for the wrapper."""
    rc, out = deploy("-e", "conc=64")
    assert rc == 0, out[-3000:]
    engine = clean_node.sh("pgrep -f -- '-m sglang[.]launch_server '").stdout.split()
    assert len(engine) == 1, engine
    clean_node.sh("pkill -KILL -f '^python -m infera[.]engine[.]sglang '")
    time.sleep(2)
    state = clean_node.sh(f"ps -o stat= -p {engine[0]} || true").stdout.strip()
    assert state and not state.startswith("Z"), "the engine did not outlive its wrapper"
    rc, out = deploy("-e", "conc=64")
    assert rc == 0, out[-3000:]
    assert "engine process(es) run in sgl_mix without Infera" in " ".join(out.split()), out[-3000:]
    # Gone, or a zombie: its parent died and the container's PID 1 (sleep, as in the walkthrough) never reaps.
    state = clean_node.sh(f"ps -o stat= -p {engine[0]} || true").stdout.strip()
    assert state == "" or state.startswith("Z"), f"the old engine still runs (state {state})"

    # Again, then a stop of the worker alone: check mode says what it would stop and stops nothing, then it stops it.
    engine = clean_node.sh("pgrep -f -- '-m sglang[.]launch_server '").stdout.split()
    clean_node.sh("pkill -KILL -f '^python -m infera[.]engine[.]sglang '")
    rc, out = run_playbook("teardown.yml", "--tags", "worker", "--check", timeout=300)
    assert rc == 0, out[-3000:]
    assert "Would stop them (check mode) as the worker is stopped" in " ".join(out.split()), out[-3000:]
    assert clean_node.sh(f"ps -o stat= -p {engine[0]}").stdout.strip()[:1] in ("S", "R"), "check mode stopped it"
    rc, out = run_playbook("teardown.yml", "--tags", "worker", timeout=300)
    assert rc == 0, out[-3000:]
    assert "Stopping them (SIGTERM, SIGKILL after 30 s) as the worker is stopped" in " ".join(out.split()), out[-3000:]
    state = clean_node.sh(f"ps -o stat= -p {engine[0]} || true").stdout.strip()
    assert state == "" or state.startswith("Z"), f"the worker's stop left the engine running (state {state})"
    assert container_exists(clean_node), "--tags worker stops the worker, not the container"


def _registered_workers():
    """Worker registrations in the platform's etcd, read with the etcd3 client (protobuf pinned)."""
    import etcd3

    client = etcd3.client(host="127.0.0.1", port=2379)
    try:
        return [meta.key.decode() for _value, meta in client.get_prefix("/infera/workers/")]
    finally:
        client.close()


def test_teardown_deregisters_removes_the_container_and_keeps_the_hf_cache(clean_node):
    rc, out = deploy("-e", "conc=64")
    assert rc == 0, out[-3000:]
    assert any(key.endswith(f"{clean_node.address}:30000") for key in _registered_workers())

    rc, out = run_playbook("teardown.yml", timeout=300)
    assert rc == 0, out[-3000:]
    assert not any(key.endswith(f"{clean_node.address}:30000") for key in _registered_workers()), \
        "the worker did not deregister on SIGTERM"
    assert not container_exists(clean_node)
    clean_node.sh("test -f /data/hf-cache/DeepSeek-V4-Pro/tokenizer.json")
