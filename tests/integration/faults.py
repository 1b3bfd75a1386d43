"""The fault matrix (issue 10): inject one fault on the rehearsal platform, see what a person sees.

Each case runs the real playbooks against a rehearsal node (real Docker, etcd, Infera's
router and worker wrapper; only the GPU engine is simulated) and returns a Row: when the
fault happened (measured on the node), when the play said so (measured on the controller,
each output line stamped as it arrives; both clocks are the same kernel's), the message,
and whether results already collected were kept. tests/integration/test_fault_matrix.py
asserts each outcome; benchmarks/fault_matrix prints the rows. Every time is SIMULATED.
"""

import base64
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field

from rehearsal import REPO, playbook_env as _rehearsal_env

WORK = "/var/lib/infera/sgl_mix"
SCALE = "0.05"

# The log watcher, run on a node or in a container (python3 only), started before the fault: notes when
# each named mark (a regex) first matches a line of the logs (a glob; by default only files new since the
# start), the first non-empty line (first_line_at), the last line that is not a heartbeat (progress_at,
# the engine's last progress), and when a non-empty exit file appears (exit_at). Polls every 10 ms and
# writes what it saw as JSON, until it saw everything in "until" (default: every mark) or time ran out.
WATCHER = r"""
import glob, json, os, re, sys, time
out, until, logs, opts = sys.argv[1], time.time() + float(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
marks = {name: re.compile(regex) for name, regex in opts.get('marks', {}).items()}
exits = opts.get('exits')
heartbeat = re.compile(opts['heartbeat']) if opts.get('heartbeat') else None
before = set(glob.glob(logs) + (glob.glob(exits) if exits else [])) if opts.get('new_only', True) else set()
wanted = set(opts.get('until') or marks)
seen, offsets = {}, {}
while time.time() < until and not wanted <= set(seen):
    now = time.time()
    for path in glob.glob(logs):
        if path in before:
            continue
        with open(path, errors='replace') as handle:
            handle.seek(offsets.get(path, 0))
            text = handle.read()
            offsets[path] = handle.tell()
        for line in text.splitlines():
            if line.strip():
                seen.setdefault('first_line_at', now)
                if not (heartbeat and heartbeat.search(line)):
                    seen['progress_at'] = now
            for name, regex in marks.items():
                if name not in seen and regex.search(line):
                    seen[name] = now
    if exits and 'exit_at' not in seen and [path for path in glob.glob(exits)
                                            if path not in before and os.path.getsize(path)]:
        seen['exit_at'] = now
    with open(out + '.tmp', 'w') as handle:
        json.dump(seen, handle)
    os.replace(out + '.tmp', out)
    time.sleep(0.01)
"""
# SGLang's ready line (sglang/srt/entrypoints/http_server.py), which the simulated engine prints too.
READY = "The server is fired up and ready to roll!"
# Infera's wrapper logs this every few seconds while the engine starts: not the engine's progress.
HEARTBEAT = r"waiting for SGLang HTTP on port \d+ \.\.\. \(elapsed"
ENGINE_LOGS = WORK + "/logs/engine-*.log"
ENGINE_EXITS = WORK + "/run/engine-*.exit"


def watcher_args(out, seconds, logs, marks, **options):
    """The argv after `python3 -c WATCHER`: the output file, the time limit, the log glob and the options
    (marks, exits, heartbeat, new_only, until)."""
    return [out, str(seconds), logs, json.dumps({"marks": marks, **options})]


def read_json(node, path, container=None):
    """The JSON a watcher wrote on the node (or in one of its containers), {} before it wrote any."""
    inside = f"docker exec {container} " if container else ""
    text = node.sh(f"{inside}cat {path} 2>/dev/null || echo '{{}}'", check=False).stdout
    try:
        return json.loads(text or "{}")
    except ValueError:
        return {}


@dataclass
class Row:
    case: str
    detected_after: float = None   # seconds from the fault (its log line or exit) to the play's message
    message: str = ""              # the first line of the play's failure message
    results_kept: str = "n/a"      # collected results still intact afterwards
    output: str = field(default="", repr=False)
    rc: int = 0


def playbook_env(env=None):
    """The environment ansible-playbook runs in here: rehearsal.run_playbook's, unbuffered, plus env."""
    return _rehearsal_env({"PYTHONUNBUFFERED": "1", **(env or {})})


def playbook_process(playbook, *extra, limit, env=None):
    """ansible-playbook in a session of its own, as a terminal runs it (a Ctrl-C reaches the whole group)."""
    return subprocess.Popen(["ansible-playbook", f"playbooks/{playbook}", "--limit", limit, *extra], cwd=REPO,
                            env=playbook_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True)


def stamped_playbook(playbook, *extra, limit, env=None, timeout=900, when=None):
    """ansible-playbook (playbook_process), each output line stamped as it arrives: (rc, [(time, line)]). when: (text,
    action): action() is called once, as soon as a line contains text. Past timeout, silent or not, the run's whole
    process group is killed."""
    process = playbook_process(playbook, *extra, limit=limit, env=env)
    lines = []
    reader = _Reader(process.stdout, lines, when)
    reader.start()
    try:
        rc = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        rc = process.wait()
    reader.join()
    return rc, lines


def watch(node, marks, seconds=600, logs=ENGINE_LOGS, **options):
    """Start the watcher on the node (WATCHER); returns a function that reads what it saw."""
    out = f"/tmp/fault-watch-{time.time_ns()}.json"
    node.sh(f"mkdir -p {os.path.dirname(logs)}")
    subprocess.run(["docker", "exec", "-d", node.name, "python3", "-c", WATCHER,
                    *watcher_args(out, seconds, logs, marks, **options)], check=True)
    return lambda: read_json(node, out)


def first_failure(lines):
    """(time, text) of the first line that reports a failure: Ansible's [ERROR] line or a FAILED! result."""
    for stamp, line in lines:
        if re.search(r"FAILED!|^\[ERROR\]", line):
            return stamp, line
    return None, ""


def failure_text(line):
    """The failure's own words, without Ansible's prefixes."""
    return re.sub(r"^(\[ERROR\]: )?(Task failed: )?(Module failed: )?(Action failed: )?", "", line).strip()


# ---------------------------------------------------------------- engine faults during the cold start

@dataclass(frozen=True)
class EngineFault:
    number: int
    case: str
    fault: str                 # INFERA_SIM_FAULT
    line: str                  # the engine log line that is the fault ('' for a hang: the fault is the silence)
    says: tuple                # what the play's message must name besides the node (stage, cause, next step)
    stall_timeout: int = 0     # for a hang: the deploy's sglang_worker_stall_timeout
    tail: tuple = ("Capturing batches", "Load weight")  # one of these shows the message carries the engine log's tail


ENGINE_FAULTS = (
    EngineFault(1, "the engine exits during weight loading", "crash_weight_load", r"SafetensorError",
                ("stage loading_weights", "SafetensorError", "Next step")),
    EngineFault(2, "OOM during cuda-graph capture", "oom_graph_capture", r"Capture cuda graph failed",
                ("stage capturing_cuda_graph", "out of memory", "--cuda-graph-max-bs")),
    # Longer than the 30 s between the heartbeats Infera's wrapper logs while it waits: they must not count.
    EngineFault(3, "no progress for the stall timeout", "hang", "", ("stalled", "stall_timeout 40 s", "Next step"),
                stall_timeout=40),
    EngineFault(4, "an HSA error / GPU memory-access fault", "memory_access_fault", r"Memory access fault by GPU",
                ("Memory access fault by GPU", "Next step")),
    # Ready and registered, fast, wrong: the accuracy smoke after the completion catches it. Timed from the
    # registration (the worker is in the routers from then on).
    EngineFault(14, "fast but wrong: the engine answers quickly but wrongly", "wrong_answers",
                r"registered with etcd as worker",
                ("stage verify", "accuracy smoke through the router: 0/20 gsm8k-style answers right (0 %, threshold 80 %): "
                 "below the threshold", "Cause: ", "Next step", "Wrong answers", "expected"),
                tail=("The server is fired up and ready to roll!",)),
)


def engine_fault(node, spec, scale=SCALE):
    """Deploy with the simulator (at INFERA_SIM_TIME_SCALE scale) told to fail as spec says; the Row with the play's
    reaction time."""
    node.remove_worker_container()
    seen = watch(node, {"line_at": spec.line or r"(?!)"}, exits=ENGINE_EXITS, heartbeat=HEARTBEAT,
                 until=["line_at", "exit_at"])
    extra = {"infera_extra_env": {"INFERA_SIM_TIME_SCALE": scale, "INFERA_SIM_FAULT": spec.fault}}
    if spec.stall_timeout:
        # A deadline well past the stall: a hang caught by the deadline instead is a failure of the stall watch.
        extra.update(sglang_worker_stall_timeout=spec.stall_timeout, sglang_worker_ready_deadline=spec.stall_timeout * 4)
    rc, lines = stamped_playbook("deploy_mixed.yml", "-e", "conc=64", "-e", json.dumps(extra), limit=node.name)
    failed_at, failed_line = first_failure(lines)
    watched = seen()
    if spec.stall_timeout:
        # The fault is the silence: it counts from the engine's last line plus the stall timeout.
        fault_at = watched.get("progress_at", 0) + spec.stall_timeout if "progress_at" in watched else None
    else:
        fault_at = min([watched[key] for key in ("line_at", "exit_at") if key in watched], default=None)
    return Row(case="%d. %s" % (spec.number, spec.case),
               detected_after=round(failed_at - fault_at, 2) if failed_at and fault_at else None,
               message=failure_text(failed_line),
               results_kept="n/a (no results yet)", output="\n".join(line for _stamp, line in lines), rc=rc)


# ---------------------------------------------------------------- the engine killed after ready, mid-sweep

def stamp_of(lines, text, after=0.0):
    """The controller's stamp of the first output line containing text (after a time), else None."""
    return next((stamp for stamp, line in lines if stamp >= after and text in line), None)


def sweep_settings(run_id, results_dir):
    """A sweep of c4 then c16, long enough at c16 (OSL 512, 4 waves of 16 requests: ~25 s) to be hit mid-point."""
    return {"concurrencies": [4, 16], "run_id": run_id, "sweep_results_dir": str(results_dir),
            "sweep_random_input_len": 64, "sweep_random_output_len": 512, "sweep_prompts_per_conc": 4,
            "sweep_below_target": "ignore", "infera_extra_env": {"INFERA_SIM_TIME_SCALE": SCALE}}


def sweep_process(node, settings):
    """ansible-playbook sweep.yml on the node with settings (playbook_process)."""
    return playbook_process("sweep.yml", "-e", json.dumps(settings), limit=node.name)


def manifest_points(results_dir, run_id, host):
    path = results_dir / run_id / host / "manifest.json"
    return json.loads(path.read_text())["points"] if path.exists() else []


def kill_mid_sweep(node, results_dir, case, kill, reported, run_id=None, extra=None):
    """Run the c4, c16 sweep and, 3 s into c16's measurement, run the kill script on the node (or call kill with the
    controller's process; it may return the time it sent its signal, else the time it returned is the kill's). The
    Row times the first output line containing `reported` from the kill; results kept counts c4, valid on the
    controller."""
    run_id = run_id or f"fault-{case.split('.')[0]}-{time.time_ns()}"
    process = sweep_process(node, {**sweep_settings(run_id, results_dir), **(extra or {})})
    lines, killed_at = [], None
    reader = _Reader(process.stdout, lines)
    reader.start()
    deadline = time.monotonic() + 600
    while killed_at is None and time.monotonic() < deadline and process.poll() is None:
        if node.sh("pgrep -f 'sglang.bench_serving.*--max-concurrency 16 '", check=False).returncode == 0:
            time.sleep(3)  # mid-point: the client is measuring
            if callable(kill):
                # Its own stamp, taken just before the signal: the reader thread may stamp the play's answer before
                # this thread runs again (CI at 8e13744: "User interrupted execution" stamped before a stamp taken
                # after os.killpg returned, on a loaded machine, so the case read as never reported).
                stamp = kill(process)
                killed_at = stamp if stamp is not None else time.time()
            else:
                # Stamped before: the play may report the kill before `docker exec` returns on a loaded machine. The
                # time from the kill includes the exec's start (~0.1 s), never less than the play took.
                killed_at = time.time()
                node.sh(kill)
        time.sleep(0.2)
    process.wait(timeout=600)
    reader.join()
    reported_at = stamp_of(lines, reported, after=killed_at or 0)
    host_dir = results_dir / run_id / node.name
    kept = [point for point in manifest_points(results_dir, run_id, node.name)
            if point["conc"] == 4 and point["status"] in ("ok", "resumed") and (host_dir / point["file"]).exists()]
    message = next((line.strip() for _stamp, line in lines if reported in line), "")
    return Row(case=case, detected_after=round(reported_at - killed_at, 2) if reported_at and killed_at else None,
               message=failure_text(message), results_kept="%d of 1 earlier point" % len(kept),
               output="\n".join(line for _stamp, line in lines), rc=process.returncode), run_id


def engine_killed_mid_sweep(node, results_dir):
    """Case 5: the engine is SIGKILLed while c16 is measured (Infera's wrapper sees it die and deregisters)."""
    row, _run_id = kill_mid_sweep(node, results_dir, "5. the engine is SIGKILLed after ready, mid-sweep",
                                  "pkill -KILL -f 'sglang[.]launch_server'", "worker died during point c16")
    return row


def rerun_outcome(node, results_dir, run_id, extra=None, when=None):
    """Rerun the same run_id: (outcome line, output). The line says the rerun's rc, every point's status in the
    manifest, and how many lines c16's jsonl holds (1: measured once, nothing appended twice). when: as
    stamped_playbook's."""
    rc, lines = stamped_playbook("sweep.yml", "-e", json.dumps({**sweep_settings(run_id, results_dir), **(extra or {})}),
                                 limit=node.name, when=when)
    points = [(point["conc"], point["status"]) for point in manifest_points(results_dir, run_id, node.name)]
    jsonl = results_dir / run_id / node.name / "mix_c16.jsonl"
    count = len(jsonl.read_text().splitlines()) if jsonl.exists() else 0
    outcome = "rerun %s: %s; c16 jsonl %d line(s)" % ("ok" if rc == 0 else "rc %d" % rc,
                                                      ", ".join("c%d %s" % point for point in points), count)
    return outcome, "\n".join(line for _stamp, line in lines)


ROUTER = "^python -m infera[.]server "


def router_crashed_mid_sweep(node, results_dir):
    """Case 6: Infera's router is SIGKILLed while c16 is measured. The point is marked aborted with the router as the
    cause, c4 is kept, and a rerun of the same run_id starts the router again and runs c16 only."""
    row, run_id = kill_mid_sweep(node, results_dir, "6. the router crashes mid-sweep", f"pkill -KILL -f '{ROUTER}'",
                                 "stopped answering during the point")
    outcome, output = rerun_outcome(node, results_dir, run_id)
    row.results_kept += "; " + outcome
    row.output += "\n--- rerun\n" + output
    return row


def results_disk_full(node, results_dir):
    """Case 13: the controller's results disk fills up while c16 is measured. results_dir must be a small file system
    of its own (the test mounts a tmpfs); a file fills it 3 s into c16. The sweep says so naming the point's file it
    cannot write, the manifest keeps c4; once the file is removed, a rerun of the same run_id runs c16 only."""
    filler = results_dir / "filler"

    def fill(_process):
        with open(filler, "wb") as handle:
            try:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            except OSError:
                pass

    row, run_id = kill_mid_sweep(node, results_dir, "13. the controller's results disk is full", fill,
                                 "(record on the controller)")
    filler.unlink()
    outcome, output = rerun_outcome(node, results_dir, run_id)
    row.results_kept += "; disk freed, " + outcome
    row.output += "\n--- rerun\n" + output
    return row


class OwnEtcd:
    """An etcd of the fault's own on the host (the platform's etcd binary), so that stopping it disturbs no other test:
    listening on 127.0.0.1 and the Docker gateway the nodes reach, on a port of its own."""

    def __init__(self, data_dir, gateway, port=23791):
        self.data_dir, self.gateway, self.port = data_dir, gateway, port
        self.endpoint = f"http://{gateway}:{port}"
        self.process = None

    def start(self, keep_data=True):
        """Start it (a fresh data dir unless keep_data); returns when it answers."""
        if not keep_data:
            subprocess.run(["rm", "-rf", str(self.data_dir)], check=True)
        peer = f"http://127.0.0.1:{self.port + 10}"
        self.process = subprocess.Popen(
            ["etcd", "--name", "infera-fault", "--data-dir", str(self.data_dir),
             "--listen-client-urls", f"http://127.0.0.1:{self.port},{self.endpoint}", "--advertise-client-urls",
             self.endpoint, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"infera-fault={peer}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.healthy():
                return time.time()
            time.sleep(0.05)
        raise AssertionError(f"the fault's own etcd did not answer on {self.endpoint}")

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def post(self, path, body):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=2) as answer:
            return json.loads(answer.read() or b"{}")

    def healthy(self):
        try:
            self.post("/v3/maintenance/status", {})
            return True
        except OSError:
            return False

    def live_keys(self, worker_id):
        """The keys (under any prefix) of worker_id whose lease is alive."""
        try:
            found = self.post("/v3/kv/range", {"key": _b64("\0"), "range_end": _b64("\0")})
            keys = []
            for entry in found.get("kvs", []):
                key = base64.b64decode(entry["key"]).decode()
                lease = entry.get("lease")
                if key.endswith("/" + worker_id) and lease and int(
                        self.post("/v3/lease/timetolive", {"ID": lease}).get("TTL", "0")) > 0:
                    keys.append(key)
            return keys
        except OSError:
            return []


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _etcd_restart(etcd, keep, worker_id, back):
    """The kill for kill_mid_sweep: etcd killed and started again (with its data or empty); back gets when it answered
    and when worker_id was in it again with a live lease (None after 120 s)."""
    def restart(_process):
        etcd.kill()
        back["answered_at"] = etcd.start(keep_data=keep)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not etcd.live_keys(worker_id):
            time.sleep(0.05)
        back["registered_at"] = time.time() if etcd.live_keys(worker_id) else None
    return restart


def etcd_cases(node, results_dir, work_dir):
    """Case 7 with an etcd of its own (OwnEtcd). 7a: etcd down at deploy time: preflight says so before anything
    changes (timed from the play's start). 7b: etcd restarts mid-sweep (killed, started again with its data): the
    worker keeps its lease. 7c: etcd loses its data mid-sweep (killed, started empty): Infera's wrapper re-registers
    at its next lease keepalive (every TTL/3 = 10 s). For 7b and 7c the Row times how long after etcd answered again
    the worker was back under its prefix with a live lease, and whether the sweep finished with every point."""
    gateway = node.sh("ip route | awk '/default/ {print $3}'").stdout.strip()
    etcd = OwnEtcd(work_dir / "etcd", gateway)
    worker_id = f"{node.address}:30000"
    rows = []
    node.remove_worker_container()
    try:
        # 7a: nothing answers at the endpoint yet.
        started = time.time()
        rc, lines = stamped_playbook("deploy_mixed.yml", "-e", "conc=64", "-e",
                                     json.dumps({"infera_etcd_endpoint": etcd.endpoint}), limit=node.name)
        said_at, said = first_failure(lines)
        joined = " ".join(" ".join(line for _stamp, line in lines).split())
        found = re.search(r"%s: preflight etcd: etcd at \S+ does not answer .*?then curl \S+" % re.escape(node.name), joined)
        changed = node.sh("docker ps -q --filter name=^sgl_mix$").stdout.strip()
        rows.append(Row(case="7a. etcd is down at deploy time", message=found.group(0) if found else failure_text(said),
                        detected_after=round(said_at - started, 2) if said_at else None,
                        results_kept="nothing started on the node" if not changed else "a container runs",
                        output="\n".join(line for _stamp, line in lines), rc=rc))
        etcd.start(keep_data=False)
        for case, keep in (("7b. etcd restarts mid-sweep (data kept)", True),
                           ("7c. etcd restarts mid-sweep with its data lost", False)):
            back = {}
            settings = {"infera_etcd_endpoint": etcd.endpoint}
            row, run_id = kill_mid_sweep(node, results_dir, case, _etcd_restart(etcd, keep, worker_id, back), "PLAY RECAP",
                                         extra=settings)
            points = [(point["conc"], point["status"]) for point in manifest_points(results_dir, run_id, node.name)]
            row.detected_after = (round(back["registered_at"] - back["answered_at"], 2)
                                  if back.get("registered_at") and back.get("answered_at") else None)
            row.message = ("worker %s %s in etcd with a live lease %s" % (
                worker_id, "back" if row.detected_after is not None else "NOT back",
                "%.2f s after etcd answered again" % row.detected_after if row.detected_after is not None else "within 120 s"))
            row.results_kept = "sweep rc %d: %s" % (row.rc, ", ".join("c%d %s" % point for point in points))
            rows.append(row)
    finally:
        etcd.kill()
        node.remove_worker_container()
    return rows


def port_held(node, port=30000):
    """Case 9: a foreign process (python3 -m http.server) holds the engine's port 30000 on the node. The deploy's
    preflight names its pid and command before anything changes; the Row times the message from the play's start."""
    node.remove_worker_container()
    command = f"python3 -m http.server {port}"
    node.sh(f"cd /tmp && setsid {command} >/dev/null 2>&1 < /dev/null &")
    try:
        pid = ""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid = node.sh(f"pgrep -f '^{command}$' || true").stdout.strip()
            if pid and node.sh(f"ss -ltn 'sport = :{port}' | grep -q LISTEN", check=False).returncode == 0:
                break
            time.sleep(0.1)
        started = time.time()
        rc, lines = stamped_playbook("deploy_mixed.yml", "-e", "conc=64", limit=node.name)
    finally:
        node.sh(f"pkill -f '^{command}$' || true")
    said_at, _said = first_failure(lines)
    joined = " ".join(" ".join(line for _stamp, line in lines).split())
    found = re.search(r"%s: preflight ports: port %d is held by .*?then rerun" % (re.escape(node.name), port), joined)
    changed = node.sh("docker ps -q --filter name=^sgl_mix$").stdout.strip()
    return Row(case="9. port %d is held by a foreign process" % port, message=found.group(0) if found else "",
               detected_after=round(said_at - started, 2) if said_at else None,
               results_kept="nothing started on the node" if not changed else "a container runs",
               output="\n".join(line for _stamp, line in lines), rc=rc), pid


def bench_client_killed_then_interrupted(node, results_dir):
    """Cases 11 and 12 on one run_id (one sweep fewer than apart). 11: the bench client is SIGKILLed while c16 is
    measured; the play reports the point. 12: the rerun is interrupted (SIGINT to the controller's process group, as
    Ctrl-C in a terminal) while c16 is measured again, which leaves that client running on the node. The next rerun
    must keep c4 (resumed), stop the leftover client, and run c16 once: one line in its jsonl, each point once in the
    manifest. Returns the two Rows.

    The leftover client is paused (SIGSTOP, just before the interrupt) until the rerun says c4 is done, then resumed: it is
    still running when the rerun starts c16 however slow the machine is (on a loaded one it had finished before the
    rerun got there, and the case tested nothing)."""
    # 6 waves at c16 (~35 s): after its resume the leftover outlives the rerun's few tasks from c4's line to c16.
    longer = {"sweep_prompts_per_conc": 6}
    client = "'sglang[.]bench_serving.*--max-concurrency 16 '"
    killed, run_id = kill_mid_sweep(node, results_dir, "11. the bench client dies mid-point",
                                    f"pkill -KILL -f {client}", "during point c16", extra=longer)

    def interrupt(process):
        node.sh(f"pkill -STOP -f {client}", check=False)  # first, so the SIGINT's report comes after the kill's stamp
        stamp = time.time()
        os.killpg(process.pid, signal.SIGINT)
        return stamp

    interrupted, _run_id = kill_mid_sweep(node, results_dir, "12. the controller is interrupted (SIGINT) mid-sweep",
                                          interrupt, "User interrupted execution", run_id=run_id, extra=longer)
    leftover = node.sh(f"pgrep -f {client}", check=False).returncode == 0

    def resume():
        node.sh(f"pkill -CONT -f {client}", check=False)

    outcome, output = rerun_outcome(node, results_dir, run_id, extra=longer, when=("point 1/2 c4 nodp done", resume))
    resume()  # never leave it paused, whatever the rerun printed
    bench_log = results_dir / run_id / node.name / "bench-c16.log"
    stopped = bench_log.exists() and "stopped a bench client left running" in bench_log.read_text(errors="replace")
    killed.results_kept += "; " + outcome
    interrupted.results_kept += "; client left running on the node: %s, stopped by the rerun: %s; %s" % (
        "yes" if leftover else "no", "yes" if stopped else "no", outcome)
    for row in (killed, interrupted):
        row.output += "\n--- rerun\n" + output
    return killed, interrupted


class _Reader(threading.Thread):
    """Stamp each line of a stream as it arrives; when: (text, action), action() once, at the first line with text."""

    def __init__(self, stream, lines, when=None):
        super().__init__(daemon=True)
        self.stream, self.lines, self.when = stream, lines, when

    def run(self):
        for line in self.stream:
            self.lines.append((time.time(), line.rstrip("\n")))
            if self.when and self.when[0] in line:
                action, self.when = self.when[1], None
                action()


# ---------------------------------------------------------------- a stale worker container

def stale_container(node):
    """Case 10: sgl_mix runs with other settings (--shm-size 16G) and a serving worker. The deploy says so, drains
    that worker (deregistered by Infera or by the collection's drain) before it replaces the container, and starts the worker again in the new one.
    The Row times the message from the play's start; results kept says whether the old worker was drained first."""
    node.remove_worker_container()
    extra = {"infera_extra_env": {"INFERA_SIM_TIME_SCALE": SCALE}}
    rc, lines = stamped_playbook("deploy_mixed.yml", "-e", "conc=64", "-e", json.dumps({**extra, "container_shm_size": "16G"}),
                                 limit=node.name)
    if rc != 0:
        return Row(case="10. a stale sgl_mix with other settings", message="the setup deploy failed",
                   output="\n".join(line for _stamp, line in lines), rc=rc)
    old_log = node.sh(f"readlink -f {WORK}/logs/engine.log").stdout.strip()
    started = time.time()
    rc, lines = stamped_playbook("deploy_mixed.yml", "-e", "conc=64", "-e", json.dumps(extra), limit=node.name)
    said_at = stamp_of(lines, "stage container: sgl_mix runs")
    # The callback wraps the message over lines and doubles its quotes: read it from the joined output.
    joined = " ".join(" ".join(line for _stamp, line in lines).split()).replace("''", "'")
    found = re.search(r"\S+: stage container: sgl_mix runs .*?starts again in the new one\.", joined)
    message = found.group(0) if found else ""
    # Deregistered by Infera's own stop (v0.2.10 and later log it), or by the collection's drain on an Infera without
    # one (v0.1.1, the default stack: drain.yml revokes the lease, and SGLang logs its graceful exit).
    old = node.sh(f"cat {old_log}", check=False).stdout
    drained = (f"deregistered worker {node.address}:30000" in old
               or (re.search(r"Revoke the worker's lease \(the routers stop sending it requests\)\] \**\s*changed: "
                             + re.escape(f"[{node.name}]"), joined) is not None
                   and "Gracefully exiting... Remaining number of requests 0." in old))
    return Row(case="10. a stale sgl_mix with other settings", message=message,
               detected_after=round(said_at - started, 2) if said_at else None,
               results_kept="old worker drained (deregistered) before the replacement" if drained else "NOT drained",
               output="\n".join(line for _stamp, line in lines), rc=rc)


# ---------------------------------------------------------------- a node lost during a fleet rollout

def _engine_launches(node):
    """How many engine launches the node's work dir has logged (0 before any)."""
    out = node.in_container("sgl_mix", f"ls {WORK}/logs/ | grep -c '^engine-' || true").stdout.strip()
    return int(out or 0)


def node_lost_mid_rollout(nodes, prefix, budget=34, serving_nodp=False):
    """Case 8, on three nodes serving together under one etcd prefix, nodp -> dp with a budget of one node in
    three: the second node is SIGKILLed (docker kill: no drain, no lease revoke) as soon as the first node's new
    engine starts. Detected after: from the kill to the first play line naming the lost node's router or node as
    not answering. The nodes are deployed nodp first unless the caller says they serve it (serving_nodp). The
    caller brings the killed node back (platform up)."""
    names = ",".join(node.name for node in nodes)
    rc, lines = (0, []) if serving_nodp else stamped_playbook(
        "deploy_mixed.yml", "-e", json.dumps({"conc": 64, "infera_fleet_etcd_prefix": prefix}), limit=names, timeout=1200)
    if rc != 0:
        return Row(case="8. a node becomes unreachable during a fleet rollout", message="the first deploy failed",
                   output="\n".join(line for _stamp, line in lines), rc=rc)
    launches_before = _engine_launches(nodes[0])
    killed = {}

    def kill_the_second_node_when_the_first_restarts():
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if _engine_launches(nodes[0]) > launches_before:
                subprocess.run(["docker", "kill", nodes[1].name], check=True, capture_output=True)
                killed["at"] = time.time()
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=kill_the_second_node_when_the_first_restarts, daemon=True)
    watcher.start()
    rc, lines = stamped_playbook("deploy_mixed.yml", "-e", json.dumps({
        "conc": 256, "infera_fleet_etcd_prefix": prefix, "infera_max_fail_percentage": budget}),
        limit=names, timeout=1200)
    watcher.join(timeout=5)
    lost = nodes[1].name
    noticed = next(((stamp, line) for stamp, line in lines if stamp >= killed.get("at", 0) and lost in line
                    and "does not answer" in line), (None, ""))
    text = " ".join(" ".join(line for _stamp, line in lines).split())
    ready = re.search(r"fleet: (\d+)/(\d+) nodes ready", text)
    within = "failed their change within the failure budget (%s)" % lost in text
    kept = ("%s/%s nodes ready; " % ready.groups() if ready else "") + (
        "failure budget honoured (%d %%), the rest switched" % budget if within else "failure budget NOT honoured")
    said = re.search(r"[\w.-]+: stage [^:]+: .*", noticed[1])  # the message itself, without Ansible's "msg": framing
    return Row(case="8. a node becomes unreachable during a fleet rollout",
               detected_after=round(noticed[0] - killed["at"], 2) if noticed[0] and "at" in killed else None,
               message=said.group(0).rstrip('",') if said else failure_text(noticed[1]),
               results_kept=kept, output="\n".join(line for _stamp, line in lines), rc=rc)


# ---------------------------------------------------------------- caught when the results are read (15, 16)

def report_time_cases(results_dir, run_id, work_dir):
    """Cases 15 and 16 on a copy of a run the platform measured: one point's client count of its output
    (total_output_tokens_retokenized) moved 15 % away from the server's, and a targets file measured at
    InferenceX's --random-range-ratio 0.8 where the run used 1.0. playbooks/report.yml rebuilds the copy's
    report. Neither is a fault in time: both are caught when the report is built (detected after: the
    report's own run time). The copy's files are left for the caller; the original run is not touched."""
    import shutil
    source = os.path.join(str(results_dir), run_id)
    copy = os.path.join(str(work_dir), run_id + "-report-cases")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    # The first valid point of the first node (the manifest says which points are valid).
    host_dir = sorted(os.path.join(copy, name) for name in os.listdir(copy)
                      if os.path.exists(os.path.join(copy, name, "manifest.json")))[0]
    with open(os.path.join(host_dir, "manifest.json")) as handle:
        conc = next(point["conc"] for point in json.load(handle)["points"] if point["status"] == "ok")
    jsonl = os.path.join(host_dir, "mix_c%d.jsonl" % conc)
    with open(jsonl) as handle:
        lines = handle.read().splitlines()
    record = json.loads(lines[-1])
    record["total_output_tokens_retokenized"] = int(record["total_output_tokens"] * 1.15)
    with open(jsonl, "w") as handle:
        handle.write("\n".join(lines[:-1] + [json.dumps(record)]) + "\n")
    targets = os.path.join(str(work_dir), "targets-ratio-0.8.yml")
    with open(targets, "w") as handle:
        handle.write("metric: Output Throughput/GPU\ntargets:\n  %d: 0.001\nrandom_input_len: %d\n"
                     "random_output_len: %d\nrandom_range_ratio: 0.8\n" % (
                         conc, record["random_input_len"], record["random_output_len"]))
    started = time.time()
    process = subprocess.run(["ansible-playbook", "playbooks/report.yml", "-e", "run_dir=" + copy,
                              "-e", "targets_file=" + targets], cwd=REPO, capture_output=True, text=True,
                             env=_rehearsal_env(), timeout=300, check=False)
    took = round(time.time() - started, 2)
    report = ""
    if os.path.exists(os.path.join(copy, "report.md")):
        with open(os.path.join(copy, "report.md")) as handle:
            report = handle.read()
    output = process.stdout + process.stderr + "\n--- report.md ---\n" + report
    mismatch = next((line for line in report.splitlines() if "the client re-encoded the output" in line), "")
    workload = next((line for line in report.splitlines() if "The targets were measured at" in line), "")
    kept = "original run untouched; report, CSV and plot rebuilt from the copy" if process.returncode == 0 else \
        "report.yml rc %d" % process.returncode
    return (Row(case="15. tokenizer mismatch: the client's output count 15 % off the server's",
                detected_after=took if mismatch else None, message=mismatch.strip("-* "), results_kept=kept,
                output=output, rc=process.returncode),
            Row(case="16. workload mismatch: targets measured at --random-range-ratio 0.8, the run at 1.0",
                detected_after=took if workload else None, message=workload.strip("-* "), results_kept=kept,
                output=output, rc=process.returncode))
