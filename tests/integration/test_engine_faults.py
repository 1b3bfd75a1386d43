"""The fault matrix's cases on a deploy (issue 10), on a node of their own beside test_fault_matrix.py's sweep cases
(tests/conftest.py: group node-6): an engine failing in its cold start (weight loading, graph capture OOM, a hang, a
GPU memory-access fault, fast but wrong answers), a stale container, a foreign holder of the engine port. Each ends
in a message that names the node, the stage, the cause and the next step, followed by the tail of the relevant log.
benchmarks/fault_matrix prints the same cases with their measured detection times (SIMULATED engine).
"""

import pytest

from conftest import node_fixture, node_name
from faults import ENGINE_FAULTS, engine_fault, port_held, stale_container
from rehearsal import router_workers

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-6')

# The rehearsal inventory gives this node an etcd prefix of its own (inventories/rehearsal/host_vars/): no other
# node's router lists its worker, nor its router theirs.
NODE = node_name(6)

node = node_fixture(6)


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
    assert any(words in message for words in spec.tail), message[:3000]
    if spec.line:
        assert spec.line.replace("\\", "") in message


def test_a_stale_container_with_other_settings_is_drained_then_replaced_and_said(clean_node):
    row = stale_container(clean_node)
    assert row.rc == 0, row.output[-4000:]
    # Said, with the setting that differs, and never silently reused.
    assert f"{NODE}: stage container: sgl_mix runs other settings than the walkthrough's" in row.message, row.output[-4000:]
    assert "shm_size" in row.message, row.message
    # Infera's wrapper deregistered the old worker (SIGTERM: lease revoked, drained) before the container went.
    assert row.results_kept == "old worker drained (deregistered) before the replacement", row.output[-4000:]
    shm = clean_node.sh("docker inspect -f '{{.HostConfig.ShmSize}}' sgl_mix").stdout.strip()
    assert shm == str(32 * 1024 ** 3), shm
    assert f"{clean_node.address}:30000" in router_workers(clean_node, "sgl_mix", "127.0.0.1")


def test_a_foreign_holder_of_the_engine_port_is_named_with_its_pid_before_anything_starts(clean_node):
    row, pid = port_held(clean_node)
    assert row.rc != 0, row.output[-3000:]
    assert row.message == (f"{NODE}: preflight ports: port 30000 is held by pid {pid} (python3 -m http.server 30000) "
                           f"outside the container sgl_mix; next step: stop it (kill {pid}) or free port 30000, then "
                           "rerun"), row.output[-3000:]
    assert row.results_kept == "nothing started on the node", row.output[-3000:]
