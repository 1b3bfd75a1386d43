"""benchmarks/vs_infera_kit: the collection and Infera's own bash kit on the same work (issue 11).

Run through benchmarks/vs_infera_kit (it brings the platform up and sets the paths). The kit is
examples/deepseek_v4/ of the pinned Infera tarball (shared/vendor); it runs on the rehearsal node as a
person runs it there (bash, Docker, curl on the node), with only the adaptations the platform forces,
each printed. The collection runs as a person runs it (ansible-playbook from the controller). Same node,
same image, same SIMULATED cold start (INFERA_SIM_TIME_SCALE), same workload. Times are wall-clock times
on one kernel: the controller stamps each output line as it arrives, a watcher on the node (or in the
kit's container) stamps the engine log's lines, 10 ms apart.

Every figure comes from the SIMULATED engine under the real Infera router and worker wrapper.
"""

import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time

from faults import READY, WATCHER, EngineFault, engine_fault, read_json, stamped_playbook, watch, watcher_args
from rehearsal import REPO, Node, platform_up

NODE = "infera-node-1"
ROUNDS = int(os.environ.get("VS_KIT_ROUNDS", "3"))
SCALE = os.environ.get("VS_KIT_SCALE", "0.05")
WORK = "/var/lib/infera/sgl_mix"
KIT_ON_NODE = "/root/infera-kit"
KIT_CASE = KIT_ON_NODE + "/engine/mix/sglang"
KIT_CTR = "dsv4_sgl_mix"          # the kit's default container name (CTR)
KIT_LOG = "/tmp/sgl_mix.log"      # engine.sh's log, in the kit's container
KIT_OUT = "/tmp/mix_sgl_out"      # bench.sh's jsonl folder, in the kit's container
KIT_STACK = "infera-main"         # the rehearsal stack whose vendored Infera holds the kit: Infera's main branch
BUILD = REPO / ".build" / "benchmarks" / "vs_infera_kit"
# The same work for both: deploy at conc 64 (nodp), a sweep of 6 points over both variants with one engine
# restart (nodp 4 8 16, dp 130 140 150: 129-255 is dp for the collection, the kit's engine.sh is told CONC=256),
# short requests so the orchestration, not the simulated decode, is what differs.
DEPLOY_CONC = 64
NODP_POINTS = (4, 8, 16)
DP_POINTS = (130, 140, 150)
ISL, OSL = 64, 8
OOM = "Capture cuda graph failed"

REGISTERED = r"registered with etcd as worker"   # Infera's wrapper, once the engine's /health answers (2 s polls)
# What the log watcher (faults.WATCHER, on the node or in the kit's container) notes besides the first line of
# the launch's log (the wrapper started): the ready line, the injected OOM, the wrapper's registration.
MARKS = {"ready_at": re.escape(READY), "oom_at": re.escape(OOM), "registered_at": REGISTERED}
UNTIL = [*MARKS, "first_line_at"]


def say(text=""):
    print(text, flush=True)


def stack_tarball(stack):
    """The vendored Infera tarball of a rehearsal stack, as tests/rehearsal/platform's STACKS table names it."""
    text = (REPO / "tests" / "rehearsal" / "platform").read_text(encoding="utf-8")
    table = re.search(r'^STACKS="\n(.*?)^"', text, re.MULTILINE | re.DOTALL).group(1)
    for row in table.splitlines():
        if row.split()[:1] == [stack]:
            return REPO.parent / "shared" / "vendor" / row.split()[1]
    raise SystemExit(f"vs_infera_kit: no stack {stack} in tests/rehearsal/platform's STACKS table")


# ---------------------------------------------------------------- the kit, adapted only where the platform forces it

def prepare_kit(node, settings):
    """Unpack the kit from the pinned tarball, adapt it, copy it to the node; returns the adaptations (printed)."""
    shutil.rmtree(BUILD / "kit", ignore_errors=True)
    (BUILD / "kit").mkdir(parents=True)
    vendor = stack_tarball(KIT_STACK)
    prefix = vendor.name[:-len(".tar.gz")] + "/examples/deepseek_v4/"
    with tarfile.open(vendor) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
        for member in members:
            member.name = member.name[len(prefix):]
            if member.name:
                archive.extract(member, BUILD / "kit")
    adaptations = []

    def edit(relative, old, new, why):
        path = BUILD / "kit" / relative
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"vs_infera_kit: {relative} no longer holds {old!r} once: the pinned kit changed, "
                             "review the adaptations")
        path.write_text(text.replace(old, new))
        adaptations.append(f"{relative}: {why}")

    edit("engine/mix/sglang/engine.sh", "$FUSED $VARIANT;", "$FUSED $VARIANT ${INFERA_SIM_ENV:-};",
         "the simulated engine's own settings (INFERA_SIM_TIME_SCALE, and INFERA_SIM_FAULT for P2b) are added to "
         "the engine's export line; the collection gets the same through infera_extra_env. A real engine has none.")
    edit("common.sh", " --ulimit memlock=-1:-1 ", " ",
         "start_container: --ulimit memlock=-1:-1 dropped: this machine's hard memlock limit is 8 MiB and no container "
         "here may raise it (no CAP_SYS_RESOURCE), so docker run fails with 'error setting rlimit type 8'; RDMA "
         "needs it, the mixed recipe does not (the walkthrough's docker run has no --ulimit)")
    edit("engine/mix/sglang/bench.sh", "--dataset-name random ", "--dataset-name random --dataset-path $DATASET ",
         "--dataset-path <the platform's staged ShareGPT file>: offline, sglang's random dataset would download "
         "ShareGPT (the collection passes the same file, infera_dataset_path)")
    adaptations.append(f"environment: ETCD_IMAGE={settings['ETCD_IMG']} (the kit's own variable): quay.io is not "
                       "reachable, so the kit's start_etcd runs the platform's build of Debian's etcd; the kit still "
                       "starts its own etcd on the node, the collection uses the platform's, already running")
    adaptations.append("node: /dev/infiniband/uverbs0 made as a placeholder device (the kit's docker run passes "
                       "--device=/dev/infiniband; a rehearsal node has no RDMA NIC, as it has fake /dev/kfd and /dev/dri)")
    adaptations.append(f"environment: INFERA_IMAGE, INFERA_MODEL, INFERA_MODEL_MOUNT={settings['HF_CACHE']} and "
                       "NODE_IP=127.0.0.1 as the kit's README asks; no registry login (the platform's registry has none)")
    node.sh(f"rm -rf {KIT_ON_NODE} && mkdir -p {KIT_ON_NODE}")
    subprocess.run(["docker", "cp", f"{BUILD / 'kit'}/.", f"{node.name}:{KIT_ON_NODE}"], check=True)
    node.sh("mkdir -p /dev/infiniband && { [ -e /dev/infiniband/uverbs0 ] || mknod -m 666 /dev/infiniband/uverbs0 c 1 3; }")
    return adaptations


def kit_env(settings, sim_env):
    return {"INFERA_IMAGE": settings["IMG"], "INFERA_MODEL": settings["MODEL"], "INFERA_MODEL_MOUNT": settings["HF_CACHE"],
            "ETCD_IMAGE": settings["ETCD_IMG"], "NODE_IP": "127.0.0.1", "DATASET": settings["DATASET"],
            "INFERA_SIM_ENV": sim_env, "ISL": str(ISL), "OSL": str(OSL), "HF_HUB_OFFLINE": "1"}


_LOGS = {"n": 0}


def keep_log(name, rc, lines):
    """Each step's output under .build/benchmarks/vs_infera_kit/logs, numbered in run order."""
    _LOGS["n"] += 1
    (BUILD / "logs").mkdir(parents=True, exist_ok=True)
    path = BUILD / "logs" / ("%03d-%s.log" % (_LOGS["n"], re.sub(r"[^\w.-]+", "_", name)[:60]))
    path.write_text("\n".join("%.3f %s" % (stamp, line) for stamp, line in lines) + "\nrc=%d\n" % rc)


def stamped(cmd, name, timeout=1800):
    """Run cmd (argv), stamping each output line as it arrives: (rc, [(time, line)], wall seconds)."""
    started = time.time()
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = []
    deadline = time.monotonic() + timeout
    for line in process.stdout:
        lines.append((time.time(), line.rstrip("\n")))
        if time.monotonic() > deadline:
            process.kill()
            break
    rc = process.wait()
    keep_log(name, rc, lines)
    return rc, lines, time.time() - started


def kit(node, script, env, *args):
    """bash <kit script> on the node, in the case's folder, with env: (rc, lines, wall)."""
    exports = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    line = f"cd {KIT_CASE} && env {exports} bash {script} {' '.join(args)}"
    return stamped(["docker", "exec", node.name, "bash", "-c", line], "kit-" + script)


def container_id(node, name):
    return node.sh(f"docker inspect -f '{{{{.Id}}}}' {name} 2>/dev/null || true", check=False).stdout.strip()


class KitWatch:
    """Starts the log watcher inside the kit's container as soon as a new one runs (start_container recreates it)."""

    def __init__(self, node, seconds=900):
        self.node, self.seconds, self.out = node, seconds, f"/tmp/kit-watch-{time.time_ns()}.json"
        self.old = container_id(node, KIT_CTR)
        self.started = threading.Event()
        threading.Thread(target=self._start, daemon=True).start()

    def _start(self):
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            now = container_id(self.node, KIT_CTR)
            if now and now != self.old:
                args = watcher_args(self.out, self.seconds, KIT_LOG, MARKS, new_only=False, until=UNTIL)
                done = self.node.sh(f"docker exec -d {KIT_CTR} python3 -c {shlex.quote(WATCHER)} {shlex.join(args)}",
                                    check=False)
                if done.returncode == 0:
                    self.started.set()
                    return
            time.sleep(0.05)

    def seen(self):
        if not self.started.is_set():
            return {}
        return read_json(self.node, self.out, container=KIT_CTR)


def engine_processes(node):
    """Engine processes left on the node (what holds a real node's GPU memory): sglang's launcher and its children."""
    out = node.sh("pgrep -af 'sglang[.]launch_server|sglang::|infera[.]engine' || true", check=False).stdout
    return [line for line in out.splitlines() if line.strip() and "pgrep" not in line]


def first_after(lines, moment, pattern=None):
    """The stamp of the first output line after a moment (matching pattern when given), else None."""
    return next((stamp for stamp, line in lines if stamp > moment and (pattern is None or re.search(pattern, line))),
                None)


def clean(node):
    """Nothing of either tool on the node: the kit's containers and the collection's, engines drained first."""
    node.remove_worker_container()
    node.sh(f"docker rm -f {KIT_CTR} repro-etcd >/dev/null 2>&1 || true")


def reap_check(node, env):
    """The kit's reap (common.sh) on its running worker: does it stop the engine and free port 30000? The worker is
    brought back as it was (down.sh, run.sh) afterwards."""
    before = len(engine_processes(node))
    stamped(["docker", "exec", node.name, "bash", "-c", f"cd {KIT_CASE} && source ../../../common.sh && reap {KIT_CTR}"],
            "kit-reap")
    left = engine_processes(node)
    port = node.sh("ss -Htlnp 'sport = :30000' 2>/dev/null | head -1", check=False).stdout.strip()
    kit(node, "down.sh", env)
    kit(node, "run.sh", dict(env, CONC=str(DEPLOY_CONC)))
    if not left:
        return "reap check: the kit's reap stopped all %d engine process(es)" % before
    return ("reap check: after the kit's reap, %d of %d engine process(es) still run and port 30000 is %s: its first "
            "`pkill -9 -f 'infera.engine'` also matches the `bash -lc` running the reap, which dies before the other "
            "pkills run; the wrapper is gone but the engine (sglang.launch_server) keeps the port and, on a real node, "
            "the GPUs. A relaunch then fails with 'Address already in use'. The kit's P5 switches variants with "
            "down.sh + run.sh instead." % (len(left), before, "held" if port else "free"))


def kit_round(node, settings, sim, check_reap=False):
    figures, notes = {}, []
    clean(node)
    env = kit_env(settings, sim)
    # P1, P1b, P2: run.sh from nothing (container, etcd, router, engine, smoke).
    watch = KitWatch(node)
    rc, lines, wall = kit(node, "run.sh", dict(env, CONC=str(DEPLOY_CONC)))
    seen = watch.seen()
    ok = rc == 0 and any("smoke OK" in line for _stamp, line in lines)
    if not ok:
        notes.append("kit run.sh failed (rc %d): %s" % (rc, " | ".join(line for _s, line in lines[-6:])))
    figures["P1"] = wall if ok else None
    if not ok:
        kit(node, "down.sh", env)
        return figures, notes
    if "ready_at" in seen and "first_line_at" in seen:
        engine = seen["ready_at"] - seen["first_line_at"]
        figures["P1b"] = wall - engine if ok else None
        moved = first_after(lines, seen["ready_at"])
        figures["P2"] = moved - seen["ready_at"] if moved else None
        if moved and "registered_at" in seen:
            figures["P2 registered after ready"] = seen["registered_at"] - seen["ready_at"]
    # P3: run.sh again, nothing changed: the kit recreates the container (docker rm -f), a full cold start.
    watch = KitWatch(node)
    rc, lines, wall = kit(node, "run.sh", dict(env, CONC=str(DEPLOY_CONC)))
    figures["P3"] = wall if rc == 0 else None
    figures["P3 cold start again"] = "yes" if watch.seen().get("ready_at") else "no"
    if check_reap:
        notes.append(reap_check(node, env))
    # P5: bench.sh over the nodp points; the worker restarted as dp the way that works with the kit (down.sh, then
    # run.sh CONC=256: its reap alone leaves the engine running, see the reap check); bench.sh over the dp points.
    node.sh(f"docker exec {KIT_CTR} rm -rf {KIT_OUT}", check=False)
    started = time.time()
    steps = [kit(node, "bench.sh", env, *map(str, NODP_POINTS))]
    nodp = node.sh(f"docker exec {KIT_CTR} sh -c 'cat {KIT_OUT}/*.jsonl'", check=False).stdout
    steps += [kit(node, "down.sh", env), kit(node, "run.sh", dict(env, CONC="256")),
              kit(node, "bench.sh", env, *map(str, DP_POINTS))]
    sweep_wall = time.time() - started
    dp = node.sh(f"docker exec {KIT_CTR} sh -c 'cat {KIT_OUT}/*.jsonl'", check=False).stdout
    records = [json.loads(line) for line in (nodp + dp).splitlines() if line.strip()]
    if all(step[0] == 0 for step in steps) and len(records) == len(NODP_POINTS) + len(DP_POINTS):
        figures["P5"] = (sweep_wall - sum(record["duration"] for record in records)) / len(records)
    else:
        notes.append("kit sweep: rc %s, %d jsonl records" % ([step[0] for step in steps], len(records)))
    # P6: down.sh (pkill -9, sleep 5, docker rm -f): no drain.
    rc, lines, wall = kit(node, "down.sh", env)
    left = engine_processes(node)
    figures["P6"] = wall if rc == 0 and not left else None
    figures["P6 drained"] = "no (pkill -9)"
    # P2b: an OOM during graph capture: injected line -> the kit says so.
    watch = KitWatch(node)
    rc, lines, wall = kit(node, "run.sh", dict(env, CONC=str(DEPLOY_CONC),
                                               INFERA_SIM_ENV=sim + " INFERA_SIM_FAULT=oom_graph_capture"))
    seen = watch.seen()
    said = first_after(lines, seen.get("oom_at", 0), r"engine error in|failed to become ready") if "oom_at" in seen \
        else None
    figures["P2b"] = said - seen["oom_at"] if said else None
    kit(node, "down.sh", env)
    return figures, notes


# ---------------------------------------------------------------- the collection

def node_watch(node, seconds=900):
    return watch(node, MARKS, seconds, until=UNTIL)


def recap(lines):
    """changed= of the PLAY RECAP line of the node."""
    found = [re.search(r"changed=(\d+)", line) for _stamp, line in lines if line.startswith(NODE) and "changed=" in line]
    return sum(int(match.group(1)) for match in found if match)


def engine_launches(node):
    out = node.sh(f"ls {WORK}/logs/ 2>/dev/null | grep -c '^engine-' || true", check=False).stdout.strip()
    return int(out or 0)


def playbook(name, *extra):
    started = time.time()
    rc, lines = stamped_playbook(name, *extra, limit=NODE, timeout=1800)
    keep_log(name, rc, lines)
    return rc, lines, time.time() - started


def collection_round(node, settings, run_id):
    figures, notes = {}, []
    clean(node)
    sim = {"infera_extra_env": {"INFERA_SIM_TIME_SCALE": SCALE}}
    deploy = ("deploy_mixed.yml", "-e", f"conc={DEPLOY_CONC}", "-e", json.dumps(sim))
    # P1, P1b, P2: from nothing to a verified completion (and the accuracy smoke) through the router.
    seen = node_watch(node)
    rc, lines, wall = playbook(*deploy)
    watched = seen()
    figures["P1"] = wall if rc == 0 else None
    if rc != 0:
        notes.append("collection deploy failed: " + " | ".join(line for _s, line in lines[-8:]))
    if "ready_at" in watched and "first_line_at" in watched:
        figures["P1b"] = wall - (watched["ready_at"] - watched["first_line_at"]) if rc == 0 else None
        # The ready wait's own result line (the default callback prints a task's banner only with its first result).
        moved = first_after(lines, watched["ready_at"], r"^(ok|changed|fatal|failed): \[")
        figures["P2"] = moved - watched["ready_at"] if moved else None
        if moved and "registered_at" in watched:
            figures["P2 registered after ready"] = watched["registered_at"] - watched["ready_at"]
    # P3: the same command again, nothing changed.
    launches = engine_launches(node)
    rc, lines, wall = playbook(*deploy)
    figures["P3"] = wall if rc == 0 else None
    figures["P3 changed"] = recap(lines)
    figures["P3 engine restarted"] = "yes" if engine_launches(node) != launches else "no"
    # P5: the sweep, 6 points over both variants, one engine restart.
    results = BUILD / "results"
    before = engine_launches(node)
    rc, lines, wall = playbook("sweep.yml", "-e", json.dumps({
        "concurrencies": list(NODP_POINTS + DP_POINTS), "run_id": run_id, "sweep_results_dir": str(results),
        "sweep_random_input_len": ISL, "sweep_random_output_len": OSL, "sweep_below_target": "ignore", **sim}))
    records = []
    for conc in NODP_POINTS + DP_POINTS:
        path = results / run_id / NODE / f"mix_c{conc}.jsonl"
        if path.exists():
            records.append(json.loads(path.read_text().splitlines()[-1]))
    if rc == 0 and len(records) == len(NODP_POINTS) + len(DP_POINTS):
        figures["P5"] = (wall - sum(record["duration"] for record in records)) / len(records)
    else:
        tail = " | ".join(line for _s, line in lines[-8:])
        notes.append("collection sweep: rc %d, %d records: %s" % (rc, len(records), tail))
    figures["P5 engine restarts"] = engine_launches(node) - before
    # P6: teardown (SIGTERM: lease revoked, requests drained, engine stopped; the router checked; container removed).
    rc, lines, wall = playbook("teardown.yml")
    left = engine_processes(node)
    figures["P6"] = wall if rc == 0 and not left else None
    drained = node.sh(f"grep -l 'deregistered' {WORK}/logs/engine-*.log 2>/dev/null | tail -1", check=False).stdout
    figures["P6 drained"] = "yes (SIGTERM, lease revoked, drained)" if drained.strip() else "not seen in the log"
    # P2b: the same OOM during graph capture, through the fault matrix's case.
    spec = EngineFault(2, "OOM during cuda-graph capture", "oom_graph_capture", re.escape(OOM), ())
    figures["P2b"] = engine_fault(node, spec, scale=SCALE).detected_after
    node.remove_worker_container()
    return figures, notes


# ---------------------------------------------------------------- the figures

FIGURES = (
    ("P1", "deploy: nothing -> a verified completion through the router (s)", "collection <= kit"),
    ("P1b", "deploy minus the engine's own launch -> ready line (s)", "<= 10 s"),
    ("P2", "ready line in the log -> the tool moves on (s)", "<= 1 s (kit: up to 10 s)"),
    ("P2 registered after ready", "of P2: ready line -> Infera's wrapper registers (its 2 s /health polls)",
     "(Infera's own time)"),
    ("P2b", "OOM line during graph capture -> failure reported (s)", "<= 2 s (kit: up to 10 s)"),
    ("P3", "rerun, nothing changed (s)", "<= 10 s, changed=0, no restart"),
    ("P5", "(sweep wall - sum of bench durations) / points (s per point)", "<= 3 s per point, one restart"),
    ("P6", "teardown until the engine is gone (s)", "kit's time, with a drain"),
)


def spread(values):
    values = [value for value in values if isinstance(value, (int, float))]
    if not values:
        return None
    return min(values), statistics.median(values), max(values)


def fmt(value):
    return "-" if value is None else ("%.2f" % value if isinstance(value, float) else str(value))


def summary(kit_rounds, collection_rounds):
    """The table (markdown lines) and the parseable figures line, from the rounds' figures."""
    rows = ["| figure | what | goal | kit min / median / max | collection min / median / max | collection / kit |",
            "|---|---|---|---|---|---|"]
    medians = {}
    for key, what, goal in FIGURES:
        kit_spread = spread([figures.get(key) for figures in kit_rounds])
        ours = spread([figures.get(key) for figures in collection_rounds])
        ratio = ours[1] / kit_spread[1] if ours and kit_spread and kit_spread[1] else None
        medians[key] = (ours[1] if ours else None, ratio)
        rows.append("| %s | %s | %s | %s | %s | %s |" % (
            key, what, goal, " / ".join(map(fmt, kit_spread)) if kit_spread else "-",
            " / ".join(map(fmt, ours)) if ours else "-", fmt(ratio)))
    line = "figures: P1=%s P1b=%s P2=%s P2b=%s P3=%s P5=%s P6=%s" % (
        fmt(medians["P1"][1]), fmt(medians["P1b"][0]), fmt(medians["P2"][0]), fmt(medians["P2b"][0]),
        fmt(medians["P3"][0]), fmt(medians["P5"][0]), fmt(medians["P6"][1]))
    return rows, line


def main():
    settings = platform_up(1)
    node = Node(NODE)
    say("vs_infera_kit: Infera's kit (examples/deepseek_v4/engine/mix/sglang, Infera's main branch: stack %s) and the "
        "collection on %s" % (KIT_STACK, NODE))
    say("SIMULATED engine (INFERA_SIM_TIME_SCALE %s) under the real Infera router and worker wrapper, real etcd and "
        "Docker; %d round(s), kit then collection in each" % (SCALE, ROUNDS))
    adaptations = prepare_kit(node, settings)
    say("adaptations of the kit (the platform forces them; nothing else is changed):")
    for item in adaptations:
        say("  - " + item)
    say("same work: deploy at conc %d; sweep nodp %s, engine restart, dp %s; ISL %d OSL %d, num-prompts 10xC, "
        "warmup 2xC" % (DEPLOY_CONC, " ".join(map(str, NODP_POINTS)), " ".join(map(str, DP_POINTS)), ISL, OSL))
    node.sh(f"docker pull -q {settings['IMG']} >/dev/null && docker pull -q {settings['ETCD_IMG']} >/dev/null")
    say("both images pulled on the node first (neither tool's time includes a pull)")
    sim = "INFERA_SIM_TIME_SCALE=" + SCALE
    kit_rounds, collection_rounds = [], []
    for number in range(1, ROUNDS + 1):
        for name in ("kit", "collection"):
            started = time.time()
            if name == "kit":
                figures, notes = kit_round(node, settings, sim, check_reap=number == 1)
                kit_rounds.append(figures)
            else:
                figures, notes = collection_round(node, settings, "vs-kit-%d-%d" % (number, time.time_ns()))
                collection_rounds.append(figures)
            shown = ", ".join("%s=%s" % (key, fmt(value)) for key, value in figures.items())
            say("round %d %s (%.0f s): %s" % (number, name, time.time() - started, shown))
            for note in notes:
                say("  note: " + note)
    clean(node)
    rows, line = summary(kit_rounds, collection_rounds)
    say()
    say("| SIMULATED engine; %d round(s) |" % ROUNDS)
    for row in rows:
        say(row)
    say()
    say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
