"""benchmarks/scale_model: a first deploy measured on 1 and 3 rehearsal nodes, projected to 32 and 256 (issue 11).

Run through benchmarks/scale_model. Each measurement starts from nothing (no worker container) on nodes of the
platform's (infera-node-2.., serving topology, an etcd prefix of its own) and records, from the controller:
wall time, the controller's CPU (ansible-playbook and every fork it waited for), when the first node's engine
printed its ready line and when the last did (a watcher on each node), and the orchestration time (wall minus
the slowest engine's own launch -> ready). The projection is a model with its inputs printed, not a measurement.

Every engine here is SIMULATED (INFERA_SIM_TIME_SCALE); the router, the wrapper, etcd and Docker are real.
"""

import json
import math
import os
import re
import resource
import sys
import time

from faults import READY, stamped_playbook, watch as start_watch
from rehearsal import Node, platform_up

SCALE = os.environ.get("SCALE_MODEL_SCALE", "0.05")
FORKS = 16          # ansible.cfg
REAL_COLD_START = 30 * 60  # Infera's manual: ~30 min on 8xMI355X (weights off shared storage + graph capture)


def machine_cpu():
    """Busy CPU seconds of the whole machine (every node, engine and the controller), from /proc/stat."""
    with open("/proc/stat") as handle:
        fields = [int(value) for value in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def watch(node, seconds=900):
    """When the node's new engine log got its first line and the ready line (faults.WATCHER on the node)."""
    return start_watch(node, {"ready_at": re.escape(READY)}, seconds, until=["ready_at", "first_line_at"])


def measure(count):
    names = ["infera-node-%d" % (2 + index) for index in range(count)]
    nodes = [Node(name) for name in names]
    for node in nodes:
        node.remove_worker_container()
    watches = [watch(node) for node in nodes]
    cpu, busy, started = children_cpu(), machine_cpu(), time.time()
    rc, lines = stamped_playbook("deploy_mixed.yml", "-e", json.dumps({
        "conc": 64, "infera_fleet_etcd_prefix": "/infera/scale-model-%d/" % time.time_ns(),
        "infera_extra_env": {"INFERA_SIM_TIME_SCALE": SCALE}}), limit=",".join(names), timeout=1800)
    wall, cpu, busy = time.time() - started, children_cpu() - cpu, machine_cpu() - busy
    seen = [read() for read in watches]
    for node in nodes:
        node.remove_worker_container()
    if rc != 0 or not all("ready_at" in item for item in seen):
        tail = " | ".join(line for _stamp, line in lines[-6:])
        raise SystemExit(f"scale_model: the deploy on {count} node(s) failed (rc {rc}): {tail}")
    engine = max(item["ready_at"] - item["first_line_at"] for item in seen)
    return {"nodes": count, "wall": wall, "cpu": cpu, "busy": busy, "cores": os.cpu_count(), "first_ready": min(item["ready_at"] for item in seen) - started,
            "last_ready": max(item["ready_at"] for item in seen) - started, "engine": engine,
            "orchestration": wall - engine}


def project(one, three, count, forks, cores, cold_start):
    """The model. Ansible's linear strategy runs each task on `forks` nodes at a time and starts a task only when
    every node finished the one before, so one node's orchestration is paid once per batch of forks
    (ceil(count / forks)), before the launch as after it; the controller's CPU per node (measured: the 3-node
    figure divided by 3) is spread over its cores, and whichever is longer sets the pace. The engines are
    launched together and cold-start in parallel, so the fleet waits one cold start after the launch. First
    node ready: the orchestration before the launch (one node: first ready minus its engine's own time) for
    every batch, plus one cold start."""
    batches = math.ceil(count / forks)
    cpu_per_node = three["cpu"] / three["nodes"]
    before_launch = one["first_ready"] - one["engine"]
    share_before = before_launch / one["orchestration"]
    before = max(before_launch * batches, cpu_per_node * count * share_before / cores)
    orchestration = max(one["orchestration"] * batches, cpu_per_node * count / cores)
    return {"first_ready": before + cold_start, "fleet_ready": orchestration + cold_start,
            "cpu": cpu_per_node * count, "batches": batches}


def main():
    platform_up(4)
    print("scale model (SIMULATED engine, INFERA_SIM_TIME_SCALE %s; real Infera router and wrapper, etcd, Docker)"
          % SCALE, flush=True)
    runs = [measure(1), measure(3)]
    print("| nodes | wall (s) | controller CPU (s) | whole machine busy (s of %d cores) | first engine ready (s) | "
          "last engine ready (s) | engine launch -> ready (s) | orchestration (s) |" % runs[0]["cores"])
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        print("| %(nodes)d | %(wall).1f | %(cpu).1f | %(busy).1f | %(first_ready).1f | %(last_ready).1f | %(engine).1f | "
              "%(orchestration).1f |" % run)
    print("(the rehearsal's nodes, engines and controller share this machine's cores: a wall time near busy / cores "
          "is the machine's limit, not Ansible's)")
    one, three = runs
    print()
    print("projection (a model, not a measurement): forks F, controller cores C, cold start T")
    print("| nodes | F | C | T (s) | batches | controller CPU (s) | first node ready (s) | whole fleet ready (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for count in (1, 3, 32, 256):
        for forks, cores in ((FORKS, 2), (FORKS, 16), (64, 16)):
            for cold in (one["engine"], REAL_COLD_START):
                if count <= 3 and (forks, cores) != (FORKS, 2):
                    continue
                item = project(one, three, count, forks, cores, cold)
                print("| %d | %d | %d | %.0f | %d | %.0f | %.0f | %.0f |" % (
                    count, forks, cores, cold, item["batches"], item["cpu"], item["first_ready"],
                    item["fleet_ready"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
