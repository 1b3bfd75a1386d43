"""Infera's own worker lifecycle under the collection, on a rehearsal node.

The router and the worker wrapper here are the real Infera (pinned); only the GPU engine
under the wrapper is simulated. These tests prove what the collection assumes about them:
a worker counts as ready once its wrapper registered it and the router lists it (not on a
record a killed wrapper left under the same id), the record a killed wrapper left is revoked
by the next launch or stop, and a stop deregisters the worker and lets its requests in flight finish before the
engine goes.
On node 6 (tests/conftest.py: group node-6), beside node 1's deploy tests.
"""

import re
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import node_fixture, node_name
from faults import playbook_env
from rehearsal import (REPO, installed_infera_hashes, router_workers, run_playbook, send_in_flight,
                       vendored_infera_hashes)

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-6')

# The rehearsal inventory gives this node an etcd prefix of its own (inventories/rehearsal/host_vars/).
NODE = node_name(6)
CONTAINER = "sgl_mix"
LOGS = "/var/lib/infera/sgl_mix/logs"
# The request in flight must outlast the teardown's way to the drain's first look at the engine's /metrics (ansible's
# start, the node's address, the worker role's checks, the wrapper held, the lease revoked, the router checked): on
# CI's loaded 2 cores a 3500-token request (40 s) had finished before that look. 6000 tokens at one request in flight
# take about 68 s at the simulated nodp rate (88 tokens/s); the drain may take up to DRAIN_TIMEOUT of it.
DRAIN_TOKENS = 6000
DRAIN_TIMEOUT = 90

node = node_fixture(6)


def test_deploy_is_ready_only_once_the_router_lists_the_worker(clean_node):
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", limit=NODE)
    assert rc == 0, out[-3000:]
    # The default stack is the walkthrough image's: Infera v0.1.1, file for file, on SGLang 0.5.15.post1's lines.
    expected = vendored_infera_hashes("v0.1.1")
    installed = installed_infera_hashes(clean_node, CONTAINER)
    assert expected and {path: installed.get(path) for path in expected} == expected
    # Its wrapper's fixed ready limit (worker.py _wait_ready(timeout=1800)) is named before the engine starts.
    text = " ".join(out.split()).replace("''", "'")
    warning = (f"WARNING {NODE}: stage worker: this image's Infera wrapper (amd-infera 0.1.1) gives up on the engine "
               "after a fixed 1800 s")
    assert warning in text and "less than sglang_worker_ready_deadline 2700 s" in text, out[-4000:]
    assert text.index(warning) < text.index("Write the launch script if it changed and start the engine detached")
    assert ("stack: Infera 0.1.1 on SGLang 0.5.15.post1 (simulated engine) (a fixed 1800 s ready limit, no drain on "
            "SIGTERM)") in text, out[-3000:]
    # The collection drains a v0.1.1 worker by the engine's /metrics, which v0.1.1 does not enable: the launch adds
    # --enable-metrics, last, and the engine serves the gauges.
    wrapper = clean_node.sh("pgrep -af '^python -m infera[.]engine[.]sglang '").stdout.split()
    assert wrapper[-1] == "--enable-metrics" and wrapper.count("--enable-metrics") == 1, wrapper
    metrics = clean_node.sh("curl -sf http://127.0.0.1:30000/metrics").stdout
    assert "sglang:num_running_reqs" in metrics and "sglang:num_queue_reqs" in metrics
    worker_id = f"{clean_node.address}:30000"
    # The readiness wait returned only after registration: no polling needed here.
    assert router_workers(clean_node, CONTAINER, "127.0.0.1") == [worker_id]
    assert "router sees 1 worker(s)" in out
    assert "[SIMULATED engine]" in out, "the rehearsal image's label must mark the summary simulated"
    # The accuracy smoke went through the real router to the simulated engine, which works the arithmetic out.
    assert "accuracy smoke: 20/20 gsm8k-style answers right (100 %, threshold 80 %) [SIMULATED engine]" in \
        " ".join(out.split()), out[-3000:]
    log = clean_node.sh(f"cat {LOGS}/engine.log").stdout
    # SGLang 0.5.15.post1's capture line (model_runner.py), not an older one.
    assert "Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[" in log
    assert "Capture cuda graph begin" not in log
    ready_at = log.index("The server is fired up and ready to roll!")
    assert log.index(f"registered with etcd as worker {worker_id}") > ready_at, \
        "Infera's wrapper registers after the engine's ready line"


def test_teardown_revokes_the_registration_then_lets_the_request_in_flight_finish(clean_node):
    """The default stack's Infera (v0.1.1, the walkthrough image's) has no drain: on SIGTERM its wrapper SIGTERMs the
    engine's process group at once, which cuts the requests in flight. The teardown drains first (drain.yml): it holds
    the wrapper, revokes its lease, sees the router drop the worker, then lets SGLang finish the request in flight.
    Without that drain the request would end in a 5xx or a cut connection. Infera's own drain (v0.2.10) is
    test_stacks.py's."""
    drain = ("-e", f"sglang_worker_drain_timeout={DRAIN_TIMEOUT}")
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", *drain, limit=NODE)
    assert rc == 0, out[-3000:]
    assert "no drain on SIGTERM" in " ".join(out.split()), "the deploy ran on another stack than v0.1.1"
    outcome = send_in_flight(clean_node, DRAIN_TOKENS)
    time.sleep(1)
    started = time.monotonic()
    rc, out = run_playbook("teardown.yml", *drain, limit=NODE)
    took = time.monotonic() - started
    assert rc == 0, out[-3000:]

    code, completion = outcome()
    assert code == "200", "the request in flight was cut by the teardown"
    assert completion["usage"]["completion_tokens"] == DRAIN_TOKENS
    # The registration goes first, and the router had dropped the worker at its first look, before the engine's
    # SIGTERM: no request reaches an engine that is draining.
    revoked = out.index("TASK [infera.serving.sglang_worker : SGLang worker | Revoke the worker's lease")
    checked = out.index("TASK [infera.serving.sglang_worker : SGLang worker | Check the router no longer lists the "
                        "worker before the engine drains")
    waited = out.index("TASK [infera.serving.sglang_worker : SGLang worker | Wait until the engine has no request "
                       "running or queued (its /metrics)")
    signalled = out.index("TASK [infera.serving.sglang_worker : SGLang worker | Send SIGTERM to the engine's launcher")
    assert revoked < checked < waited < signalled, out[-3000:]
    assert f"RETRYING: [{NODE}]: SGLang worker | Check the router no longer lists" not in out, out[checked:signalled]
    # The engine's /metrics counted the request (the launch script added --enable-metrics for v0.1.1), and the wait
    # looked again until it was done: the SIGTERM came after it. (The callback prints a task's retries before its
    # header: they sit between the router check's header and the SIGTERM's.)
    assert f"RETRYING: [{NODE}]: SGLang worker | Wait until the engine has no request running" in out[checked:signalled], \
        out[checked:signalled]
    assert "the engine still had requests in flight" not in out, out[-3000:]
    log = clean_node.sh(f"cat {LOGS}/engine.log").stdout
    # SGLang's exit on the launcher's SIGTERM found no request left; its schedulers were not killed by a SIGTERM to
    # the group (the watchdog's crash line).
    assert "Gracefully exiting... Remaining number of requests 0." in log, "\n".join(log.splitlines()[-15:])
    assert "Remaining number of requests 1." not in log, "the SIGTERM came while the request was in flight"
    assert "crashed with exit code" not in log, "the engine was stopped by a SIGTERM to its process group"
    assert took < DRAIN_TIMEOUT + 60, f"teardown took {took:.0f} s"


def test_a_router_that_outlives_its_stop_is_named_and_nothing_after_it_runs(clean_node):
    """Infera's router, held (SIGSTOP) so the teardown's SIGTERM stays pending: the stop waits router_stop_timeout,
    then fails naming the node, the stage, the pids and the next step with the router log's tail, and the container is
    not removed under it. Before, the wait ran out silently and the play went on."""
    router = "'^python -m infera[.]server '"
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", limit=NODE)
    assert rc == 0, out[-3000:]
    held = clean_node.sh(f"docker exec {CONTAINER} pgrep -f {router}").stdout.split()
    assert len(held) == 1, held
    clean_node.sh(f"docker exec {CONTAINER} pkill -STOP -f {router}")
    try:
        # The worker stop's check that the router dropped the worker is left out (router port 0): a held router
        # answers nothing, and the check would wait for its answers first.
        rc, out = run_playbook("teardown.yml", "-e", "router_stop_timeout=10", "-e", "sglang_worker_router_port=0",
                               limit=NODE, timeout=300)
    finally:
        clean_node.sh(f"docker exec {CONTAINER} pkill -CONT -f {router}", check=False)
    assert rc != 0, out[-3000:]
    said = " ".join(out.split())
    assert (f"{NODE}: stage router stop: the router is still running 10 s after SIGTERM (pids {held[0]} in "
            f"{CONTAINER}).") in said, out[-3000:]
    assert "Next step: docker exec sgl_mix ps -o pid,stat,args;" in said, out[-3000:]
    assert f"Last lines of {LOGS}/router.log:" in said, out[-3000:]
    assert "Container | Remove the worker container" not in out, "the play went on after the router's stop failed"
    assert clean_node.sh(f"docker ps -q --filter name=^{CONTAINER}$").stdout.strip(), "the container was removed"

    # Let go, the router ends on the SIGTERM it was sent; the rerun finds no router and removes the container.
    rc, out = run_playbook("teardown.yml", limit=NODE, timeout=300)
    assert rc == 0, out[-3000:]
    assert not clean_node.sh(f"docker ps -aq --filter name=^{CONTAINER}$").stdout.strip()


def test_a_redeploy_after_a_killed_wrapper_is_ready_on_its_own_registration_not_the_dead_wrappers_record(clean_node):
    """A wrapper killed with SIGKILL leaves its record (key host:port) on a lease alive for up to 30 s. The router lists
    it while the next launch comes up, under the same worker_id. The readiness wait used to take that listing for the
    new worker: the play moved on, and the router dropped the worker when the old lease ran out, before the new wrapper
    had registered (CI at 1e22424: a sweep's 20 accuracy-smoke requests got 503). Here the dead wrapper's lease is kept
    alive and the new wrapper is held (SIGSTOP) between the engine's ready line and its registration. The launch revokes
    a dead wrapper's lease when it knows the node had a launch (its log link) that did not end in Infera's own stop
    (test_a_killed_wrappers_record_is_revoked_by_the_next_launch_and_by_a_worker_stop); here the logs were removed, so
    the record stays, as it does when etcd refuses the revoke."""
    import etcd3

    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", limit=NODE)
    assert rc == 0, out[-3000:]
    worker_id = f"{clean_node.address}:30000"
    key = f"/infera/rehearsal-node-6/{worker_id}"  # the inventory's prefix for this node
    client = etcd3.client(host="127.0.0.1", port=2379)
    stop_keepalive = threading.Event()
    wrapper = None
    try:
        clean_node.sh("pkill -KILL -f '^python -m infera[.]engine[.]sglang '")
        clean_node.sh(f"rm -f {LOGS}/engine.log")
        dead_lease = client.get(key)[1].lease_id

        def keep_alive():  # as if the wrapper had died a moment ago, however slow the redeploy
            while not stop_keepalive.wait(3):
                list(client.refresh_lease(dead_lease))

        threading.Thread(target=keep_alive, daemon=True).start()
        with tempfile.TemporaryFile("w+") as output, subprocess.Popen(
                ["ansible-playbook", "playbooks/deploy_mixed.yml", "--limit", NODE, "-e", "conc=64"], cwd=REPO,
                env=playbook_env(), stdout=output, stderr=subprocess.STDOUT, text=True) as play:
            # The new wrapper, once it has started its engine (before that, stopping it would stop the launch).
            deadline = time.monotonic() + 240
            while wrapper is None and time.monotonic() < deadline and play.poll() is None:
                found = clean_node.sh("for w in $(pgrep -f '^python -m infera[.]engine[.]sglang '); do "
                                      "pgrep -P $w -f -- '-m sglang[.]launch_server ' >/dev/null && echo $w; done",
                                      check=False).stdout.split()
                wrapper = found[0] if found else None
                time.sleep(0.1)
            assert wrapper, "no new wrapper with an engine: " + (output.seek(0) or output.read())[-3000:]
            clean_node.sh(f"kill -STOP {wrapper}")
            log = clean_node.sh(f"ls -t {LOGS}/engine-*.log | head -n 1").stdout.strip()  # this launch's
            clean_node.wait_for_line(CONTAINER, log, "The server is fired up and ready to roll!")
            time.sleep(4)  # the wait polls every 0.25 s: on the dead wrapper's record it had moved on by now
            assert router_workers(clean_node, CONTAINER, "127.0.0.1") == [worker_id], "the dead wrapper's record"
            assert "registered with etcd" not in clean_node.sh(f"cat {log}").stdout
            output.seek(0)
            so_far = output.read()
            assert play.poll() is None and "Router | Verify through the routers" not in so_far, so_far[-3000:]
            # The dead wrapper's lease runs out now: its record goes, and the held wrapper registers the worker again.
            stop_keepalive.set()
            client.revoke_lease(dead_lease)
            clean_node.sh(f"kill -CONT {wrapper}")
            wrapper = None
            assert play.wait(timeout=600) == 0, (output.seek(0) or output.read())[-3000:]
        registered = re.search(rf"registered with etcd as worker {re.escape(worker_id)} \(lease=(\d+)",
                               clean_node.sh(f"cat {log}").stdout)
        assert registered and int(registered.group(1)) != dead_lease
        assert client.get(key)[1].lease_id == int(registered.group(1))
        assert router_workers(clean_node, CONTAINER, "127.0.0.1") == [worker_id]
    finally:
        stop_keepalive.set()
        if wrapper:
            clean_node.sh(f"kill -CONT {wrapper}", check=False)
        client.close()


def test_a_killed_wrappers_record_is_revoked_by_the_next_launch_and_by_a_worker_stop(clean_node):
    """SIGKILL on Infera's wrapper revokes nothing: its record stays in etcd until the lease runs out (30 s), and the
    router keeps sending requests to a port whose engine is stopped next. The worker's stop (here --tags worker, which
    keeps the container and its router) and the next launch revoke that lease first, as Infera's own stop does. The
    dead wrapper's lease is kept alive here, so only the revoke can remove the record."""
    import etcd3

    worker_id = f"{clean_node.address}:30000"
    key = f"/infera/rehearsal-node-6/{worker_id}"  # the inventory's prefix for this node
    client = etcd3.client(host="127.0.0.1", port=2379)
    keepalives = []

    def kill_the_wrapper_and_keep_its_lease():
        clean_node.sh("pkill -KILL -f '^python -m infera[.]engine[.]sglang '")
        lease = client.get(key)[1].lease_id
        stop = threading.Event()
        keepalives.append(stop)

        def keep_alive():
            while not stop.wait(3):
                list(client.refresh_lease(lease))

        threading.Thread(target=keep_alive, daemon=True).start()
        return lease

    def router_lists():
        return router_workers(clean_node, CONTAINER, "127.0.0.1")

    try:
        rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", limit=NODE)
        assert rc == 0, out[-3000:]
        dead = kill_the_wrapper_and_keep_its_lease()
        assert router_lists() == [worker_id], "the dead wrapper's record"

        rc, out = run_playbook("teardown.yml", "--tags", "worker", "--check", limit=NODE, timeout=300)
        assert rc == 0, out[-3000:]
        said = " ".join(out.split())
        assert f"would revoke (check mode) etcd lease {dead} of {key}" in said, out[-3000:]
        assert "its launch ended with exit 137" in said, out[-3000:]
        assert client.get(key)[1].lease_id == dead, "check mode revoked the lease"

        rc, out = run_playbook("teardown.yml", "--tags", "worker", limit=NODE, timeout=300)
        assert rc == 0, out[-3000:]
        said = " ".join(out.split())
        revoked = said.index(f"revoked etcd lease {dead} of {key}")
        assert revoked < said.index("Stopping them (SIGTERM"), "the record goes before the engine"
        assert client.get(key)[0] is None, "the dead wrapper's record is still in etcd"
        deadline = time.monotonic() + 5  # the router hears of the DELETE from its etcd watch
        while router_lists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert router_lists() == []

        # The next launch after a killed wrapper: the record goes before the new wrapper registers its own.
        rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", limit=NODE)
        assert rc == 0, out[-3000:]
        dead = kill_the_wrapper_and_keep_its_lease()
        rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", limit=NODE)
        assert rc == 0, out[-3000:]
        said = " ".join(out.split())
        assert said.index(f"revoked etcd lease {dead} of {key}") < said.index("Write the launch script if it changed "
                                                                              "and start the engine"), out[-3000:]
        assert client.get(key)[1].lease_id not in (0, dead)
        assert router_lists() == [worker_id]
    finally:
        for stop in keepalives:
            stop.set()
        client.close()
