"""The fault matrix on the rehearsal platform (issue 10), its cases around a sweep: every case ends in a message that
names the node, the stage, the cause and the next step, followed by the tail of the relevant log, and keeps what was
already collected. The cases on a deploy (an engine failing in its cold start, a stale container, a held port) are in
test_engine_faults.py, on a node of their own, so the two halves run at once. benchmarks/fault_matrix prints every
case with its measured detection time (SIMULATED engine; times are figures, not asserted here).
"""

import json
import re
import subprocess
import time

import pytest

from conftest import node_fixture, node_name
from faults import (bench_client_killed_then_interrupted, engine_killed_mid_sweep, etcd_cases, report_time_cases,
                    results_disk_full, router_crashed_mid_sweep)
from rehearsal import router_workers

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('fault-node')

# A node of the matrix's own (tests/conftest.py: group fault-node), so it runs beside node 1's tests; the rehearsal
# inventory's isolated topology gives it an etcd prefix of its own.
NODE = node_name(5)

node = node_fixture(5)


def test_an_engine_killed_mid_sweep_aborts_the_point_keeps_the_earlier_one_and_leaves_the_router(node, tmp_path):
    """Case 5; then cases 15 and 16 on a copy of the run it measured (the report is where both are caught)."""
    row = engine_killed_mid_sweep(node, tmp_path / "results")
    assert row.rc != 0, row.output[-4000:]
    assert row.detected_after is not None, row.output[-4000:]
    assert NODE in row.message and "worker died during point c16" in row.message, row.message
    assert row.results_kept == "1 of 1 earlier point", row.output[-4000:]
    run_dir = next((tmp_path / "results").iterdir())
    manifest = json.loads((run_dir / NODE / "manifest.json").read_text())
    assert [(point["conc"], point["status"]) for point in manifest["points"]] == [(4, "ok"), (16, "aborted")]
    assert (run_dir / NODE / "bench-c16.log").exists()
    # Infera's wrapper saw its engine die and deregistered: the router lists no worker of this node.
    worker = f"{node.address}:30000"
    deadline = time.monotonic() + 40
    while worker in router_workers(node, "sgl_mix", "127.0.0.1") and time.monotonic() < deadline:
        time.sleep(1)
    assert worker not in router_workers(node, "sgl_mix", "127.0.0.1")
    # 15, 16: the report of a copy of this run flags a point whose client count is 15 % off the server's, and says
    # that targets measured at --random-range-ratio 0.8 are not this run's workload (1.0); the run itself untouched.
    tokenizer, workload = report_time_cases(tmp_path / "results", run_dir.name, tmp_path)
    assert tokenizer.rc == 0, tokenizer.output[-4000:]
    assert tokenizer.message.startswith(f"{NODE} c4 nodp: the client re-encoded the output to "), tokenizer.output[-4000:]
    assert re.search(r"\(1[45]\.\d % apart, more than 10 %\)", tokenizer.message), tokenizer.message
    assert "Next step: check that the sweep's tokenizer" in tokenizer.message, tokenizer.message
    assert workload.message.startswith("The targets were measured at `--random-range-ratio` 0.8; this run used 1.0: "
                                       "not the same workload"), workload.output[-4000:]
    assert tokenizer.results_kept == workload.results_kept == \
        "original run untouched; report, CSV and plot rebuilt from the copy"
    original = [json.loads(line) for line in (run_dir / NODE / "mix_c4.jsonl").read_text().splitlines()]
    assert original[-1]["total_output_tokens_retokenized"] != int(original[-1]["total_output_tokens"] * 1.15)


def test_a_killed_bench_client_and_an_interrupted_controller_leave_the_point_to_a_rerun_that_keeps_the_rest(
        node, tmp_path):
    killed, interrupted = bench_client_killed_then_interrupted(node, tmp_path / "results")
    rerun = "rerun ok: c4 resumed, c16 ok; c16 jsonl 1 line(s)"
    # 11: the play names the point the client died in; c4 stays valid.
    assert killed.detected_after is not None, killed.output[-4000:]
    assert NODE in killed.message and "c16" in killed.message, killed.message
    assert killed.results_kept == "1 of 1 earlier point; " + rerun, (killed.results_kept, killed.output[-4000:])
    # 12: Ctrl-C stops the play (the client it started runs on); c4 stays valid; the rerun stops the leftover
    # client before c16 runs again, so c16 is measured once and no point is lost or duplicated.
    assert interrupted.rc != 0 and interrupted.detected_after is not None, interrupted.output[-4000:]
    assert interrupted.results_kept == ("1 of 1 earlier point; client left running on the node: yes, stopped by the "
                                        "rerun: yes; " + rerun), (interrupted.results_kept, interrupted.output[-4000:])


def test_a_router_crash_mid_sweep_marks_the_point_keeps_the_earlier_one_and_a_rerun_resumes(node, tmp_path):
    row = router_crashed_mid_sweep(node, tmp_path / "results")
    assert row.rc != 0, row.output[-4000:]
    assert row.detected_after is not None, row.output[-4000:]
    assert NODE in row.message and "stage sweep c16" in row.message, row.message
    message = row.output[row.output.index("stopped answering during the point"):]
    for words in ("Cause: the router process exited", "Next step: read /var/lib/infera/sgl_mix/logs/router.log",
                  "Last lines of the router log: INFO:"):
        assert words in message, f"{words!r} missing from:\n{message[:3000]}"
    # The tail is the router's own traffic: Infera's router logs its pick when a request arrives and the access line
    # only once the worker's first token is back (infera/router/mixed.py), so with 16 requests in flight the last 20
    # lines may all be picks; either line is the router's, routing to this node.
    assert (f"picked={node.address}:30000" in message or '"POST /v1/completions HTTP/1.1" 200 OK' in message), \
        f"no request line of the router in:\n{message[:3000]}"
    # c4 stayed valid; the rerun started the router again (the router role) and ran c16 once, c4 not again.
    assert row.results_kept == "1 of 1 earlier point; rerun ok: c4 resumed, c16 ok; c16 jsonl 1 line(s)", \
        row.output[-4000:]
    run_dir = next((tmp_path / "results").iterdir())
    assert (run_dir / NODE / "bench-c16.log").exists()


@pytest.fixture
def small_results_disk(tmp_path):
    """A 16 MB tmpfs as the controller's results folder (CI and the rehearsal run as root)."""
    mount = tmp_path / "results"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_results_disk_fails_clearly_keeps_the_earlier_points_and_a_rerun_resumes(node, small_results_disk):
    row = results_disk_full(node, small_results_disk)
    assert row.rc != 0, row.output[-4000:]
    assert row.detected_after is not None, row.output[-4000:]
    joined = " ".join(row.output.split())
    found = joined[joined.index(f"{NODE}: stage sweep c16 (record on the controller)"):]
    for words in ("No space left on device", "Cause: the controller cannot write the results folder",
                  "stay intact in", "manifest.json: c4", "Next step: free space (df -h", "Disk: "):
        assert words in found, f"{words!r} missing from:\n{found[:3000]}"
    assert row.results_kept == ("1 of 1 earlier point; disk freed, rerun ok: c4 resumed, c16 ok; c16 jsonl 1 line(s)"), \
        row.output[-4000:]


def test_etcd_down_at_deploy_is_named_first_and_a_restart_mid_sweep_loses_no_point(node, tmp_path):
    down, restarted, emptied = etcd_cases(node, tmp_path / "results", tmp_path)
    # 7a: preflight names the endpoint and the next step before anything changes on the node.
    assert down.rc != 0, down.output[-3000:]
    assert down.message.startswith(f"{NODE}: preflight etcd: etcd at http://"), down.output[-3000:]
    assert "next step: start etcd or fix the endpoint (infera_etcd_endpoint)" in down.message, down.message
    assert down.results_kept == "nothing started on the node", down.output[-3000:]
    # 7b, 7c: Infera's router keeps the workers it knows while its watch reconnects, so the point in flight and the
    # next finish; the worker is under its prefix with a live lease again (7c: Infera's wrapper re-registered).
    for row in (restarted, emptied):
        assert row.rc == 0, row.output[-4000:]
        assert row.detected_after is not None, row.message
        assert row.results_kept == "sweep rc 0: c4 ok, c16 ok", row.output[-4000:]
