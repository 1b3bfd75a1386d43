"""The fault matrix on the rehearsal platform (issue 10): every case ends in a message that names
the node, the stage, the cause and the next step, followed by the tail of the relevant log, and
keeps what was already collected. benchmarks/fault_matrix prints the same cases with their
measured detection times (SIMULATED engine; times are figures, not asserted here).
"""

import json
import time

import pytest

from conftest import NODE
from faults import ENGINE_FAULTS, bench_client_killed_mid_sweep, engine_fault, engine_killed_mid_sweep
from rehearsal import router_workers


@pytest.mark.parametrize("spec", ENGINE_FAULTS, ids=[spec.fault for spec in ENGINE_FAULTS])
def test_an_engine_fault_in_the_cold_start_names_node_stage_cause_next_step_and_log(clean_node, spec):
    row = engine_fault(clean_node, spec)
    assert row.rc != 0, row.output[-3000:]
    # Detected by the watch itself (its message), not by a timeout around it.
    assert row.detected_after is not None, row.output[-3000:]
    # One line: the node, the stage, the cause and the next step.
    assert NODE in row.message and " stage " in row.message and "Cause: " in row.message, row.message
    assert "Next step" in row.message, row.message
    message = row.output[row.output.index(row.message):]
    for words in spec.says:
        assert words in message, f"{words!r} missing from the failure:\n{message[:3000]}"
    # The tail of the engine log follows: its last lines, with the fault's own line when it has one.
    assert "Capturing batches" in message or "Load weight" in message, message[:3000]
    if spec.line:
        assert spec.line.replace("\\", "") in message


def test_an_engine_killed_mid_sweep_aborts_the_point_keeps_the_earlier_one_and_leaves_the_router(node, tmp_path):
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


def test_a_bench_client_killed_mid_point_leaves_the_point_to_a_rerun_that_keeps_the_rest(node, tmp_path):
    row = bench_client_killed_mid_sweep(node, tmp_path / "results")
    assert row.detected_after is not None, row.output[-4000:]
    assert NODE in row.message and "c16" in row.message, row.message
    assert row.results_kept == "1 of 1 earlier point; rerun ok: c4 resumed, c16 ok", row.output[-4000:]
