"""The fault matrix on the rehearsal platform (issue 10): every case ends in a message that names
the node, the stage, the cause and the next step, followed by the tail of the relevant log, and
keeps what was already collected. benchmarks/fault_matrix prints the same cases with their
measured detection times (SIMULATED engine; times are figures, not asserted here).
"""

import pytest

from conftest import NODE
from faults import ENGINE_FAULTS, engine_fault


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
