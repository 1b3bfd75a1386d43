"""Helpers for tests that run on the rehearsal platform (tests/rehearsal/platform).

A node is a Docker-in-Docker container; the worker container (`sgl_mix`) runs inside it,
exactly as on a real MI355X host. Everything measured here is SIMULATED.
"""

import hashlib
import json
import os
import re
import shlex
import subprocess
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLATFORM = REPO / "tests" / "rehearsal" / "platform"
WALKTHROUGH = REPO / "docs" / "reference" / "sglang-mixed-dsv4-pro-mi355x.txt"


def platform_up(nodes=1):
    """Bring the platform up with nodes 1..`nodes` (idempotent) and return its settings as a dict.

    It starts again any of those nodes that is down: a test group that owns one node calls node_up instead, or it
    would bring back a node another group's test killed on purpose (test_fleet's lost node)."""
    subprocess.run([str(PLATFORM), "up", str(nodes)], check=True)
    return _settings()


def node_up(*names):
    """Bring the platform's services and the nodes `names` up (idempotent) and return the settings as a dict.

    For a test group that owns nodes: `make test` brought every node up before the groups began, and the groups
    run at once, so a group touches no node but its own."""
    subprocess.run([str(PLATFORM), "node-up", *names], check=True)
    return _settings()


def _settings():
    out = subprocess.run([str(PLATFORM), "env"], check=True, capture_output=True, text=True).stdout
    settings = {}
    for line in out.splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            settings[key] = value.strip('"')
    return settings


class Node:
    """One simulated MI355X node."""

    def __init__(self, name):
        self.name = name
        self.address = subprocess.run(
            ["docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", name],
            check=True, capture_output=True, text=True).stdout.strip()

    def sh(self, script, env=None, check=True, timeout=600):
        """Run a bash script on the node (its own shell, its own dockerd)."""
        cmd = ["docker", "exec"]
        for key, value in (env or {}).items():
            cmd += ["-e", f"{key}={value}"]
        cmd += [self.name, "bash", "-c", script]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise AssertionError(
                f"on {self.name}: exit {result.returncode} from:\n{script}\n"
                f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")
        return result

    def remove_worker_container(self, container="sgl_mix"):
        """SIGTERM the engine and router first (they deregister), then remove the container."""
        self.sh(f"docker exec {container} pkill -TERM -f '^python -m infera[.]' >/dev/null 2>&1; "
                f"for i in $(seq 1 50); do pgrep -f '^python -m infera[.]' >/dev/null || break; sleep 0.1; done; "
                f"docker rm -f {container} >/dev/null 2>&1 || true")

    def in_container(self, container, script, env=None, check=True, detach=False, timeout=600):
        """Run a bash script inside a container on the node (`docker exec` there)."""
        exports = " ".join(f"-e {shlex.quote(f'{k}={v}')}" for k, v in (env or {}).items())
        flags = "-d" if detach else ""
        return self.sh(f"docker exec {flags} {exports} {container} bash -c {shlex.quote(script)}",
                       check=check, timeout=timeout)

    def wait_for_line(self, container, path, line, timeout=180, fatal=None):
        """Wait until `line` appears in a file in the container; fail with its tail."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.in_container(container, f"cat {path} 2>/dev/null || true").stdout
            if line in text:
                return text
            if fatal and re.search(fatal, text):
                break
            time.sleep(0.5)
        tail = "\n".join(text.splitlines()[-30:])
        raise AssertionError(f"{self.name}:{container}:{path}: no '{line}' within {timeout} s; last lines:\n{tail}")


def playbook_env(env=None):
    """The environment every ansible-playbook of the tests runs in: the repository's settings (ansible.cfg, the
    rehearsal inventory), no colour, plus env."""
    return {**os.environ, "LANG": "C.UTF-8", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
            **(env or {})}


def run_playbook(playbook, *extra, env=None, timeout=900, limit="infera-node-1"):
    """`ansible-playbook playbooks/<playbook>` with the repository's settings: (returncode, stdout + stderr).

    The rehearsal inventory holds every node the platform runs; a test runs on `limit`
    (the first node unless it says otherwise; None: all of them).
    """
    limit_args = ["--limit", limit] if limit else []
    result = subprocess.run(["ansible-playbook", f"playbooks/{playbook}", *limit_args, *extra], cwd=REPO,
                            env=playbook_env(env),
                            capture_output=True, text=True, timeout=timeout, check=False)
    return result.returncode, result.stdout + result.stderr


def router_workers(node, container, host, port=8000):
    """The worker_ids Infera's router lists (GET /v1/workers from inside the container)."""
    out = node.in_container(container, f"curl -s http://{host}:{port}/v1/workers", check=False).stdout
    try:
        return [worker["worker_id"] for worker in json.loads(out)["workers"]]
    except (ValueError, KeyError, TypeError):
        return []


def wait_for_worker(node, container, host, worker_id, timeout=60):
    """Infera's wrapper registers a few seconds after the engine's ready line: wait for the router to list it."""
    deadline = time.monotonic() + timeout
    listed = []
    while time.monotonic() < deadline:
        listed = router_workers(node, container, host)
        if worker_id in listed:
            return listed
        time.sleep(0.5)
    raise AssertionError(f"{node.name}: the router does not list {worker_id} after {timeout} s (it lists {listed})")


class Walkthrough:
    """The user's walkthrough, read as the commands a person would paste."""

    def __init__(self, text):
        self.lines = self._join_continuations(text.splitlines())

    @staticmethod
    def _join_continuations(lines):
        joined, current = [], ""
        for raw in lines:
            line = raw.rstrip()
            if line.endswith("\\"):
                current += line[:-1].rstrip() + " "
                continue
            joined.append(current + line)
            current = ""
        return joined

    def command(self, prefix):
        matches = [line for line in self.lines if line.startswith(prefix)]
        if len(matches) != 1:
            raise AssertionError(f"walkthrough: expected one command starting with {prefix!r}, found {len(matches)}")
        return matches[0]

    def commands(self, prefix):
        return [line for line in self.lines if line.startswith(prefix)]

    def block(self, first_prefix, last_line):
        start = next(i for i, line in enumerate(self.lines) if line.startswith(first_prefix))
        end = next(i for i in range(start, len(self.lines)) if self.lines[i].strip() == last_line)
        return "\n".join(self.lines[start:end + 1])

    @classmethod
    def load(cls):
        return cls(WALKTHROUGH.read_text())


def read_jsonl(text):
    """Parse bench_serving's output (one JSON object per run; may hold Infinity)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def send_in_flight(node, tokens, name="drain"):
    """One long completion through the node's router, sent from the node (not from the worker container, which a
    teardown removes) in the background; returns a function that reads (its HTTP status text, its JSON body)."""
    body = json.dumps({"model": "/data/hf-cache/DeepSeek-V4-Pro", "prompt": "drain me", "max_tokens": tokens,
                       "ignore_eos": True, "temperature": 0})
    node.sh(f"rm -f /tmp/{name}.*; (curl -s -o /tmp/{name}.json -w '%{{http_code}}' "
            f"http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' "
            f"-d '{body}' >/tmp/{name}.code 2>/tmp/{name}.err &)")

    def outcome():
        code = node.sh(f"cat /tmp/{name}.code").stdout
        text = node.sh(f"cat /tmp/{name}.json", check=False).stdout
        return code, json.loads(text) if code == "200" else text
    return outcome


def vendored_infera_hashes(release):
    """{path under infera/: sha256} of the .py files of a vendored Infera release (shared/vendor)."""
    hashes = {}
    with tarfile.open(REPO.parent / "shared" / "vendor" / f"amd-infera-{release}.tar.gz") as archive:
        for member in archive.getmembers():
            inner = member.name.split("/", 1)[-1]
            if member.isfile() and inner.startswith("infera/") and inner.endswith(".py"):
                hashes[inner] = hashlib.sha256(archive.extractfile(member).read()).hexdigest()
    return hashes


def installed_infera_hashes(node, container="sgl_mix"):
    """{path under infera/: sha256} of the .py files of the Infera a container on the node runs."""
    listed = node.sh(f"docker exec {container} sh -c 'cd \"$(python3 -c \"import infera, os; "
                     "print(os.path.dirname(infera.__file__))\")/..\" && find infera -name \"*.py\" "
                     "-exec sha256sum {} +'").stdout
    return {path: digest for digest, path in (line.split() for line in listed.splitlines())}


# Load for a rolling change: short requests through the node's router, back to back, one real client run after
# another until told to stop. Each run's exit code and its result line are kept.
LOAD_PROMPTS = 24
_LOAD = ("cd /tmp && rm -f fleet-load.jsonl fleet-load.rc fleet-load.log fleet-load.stop fleet-load.done; "
         "while [ ! -f fleet-load.stop ]; do "
         "python3 -m sglang.bench_serving --backend sglang-oai --base-url http://127.0.0.1:8000 "
         "--model {model} --tokenizer {model} --dataset-name random --dataset-path {dataset} "
         "--random-input-len 64 --random-output-len 64 --random-range-ratio 1.0 "
         f"--max-concurrency 4 --num-prompts {LOAD_PROMPTS} --request-rate inf --output-file fleet-load.jsonl "
         ">>fleet-load.log 2>&1; echo $? >>fleet-load.rc; done; touch fleet-load.done")


def start_load(node, settings):
    """Start the load in the node's worker container; return once one full client run has passed."""
    node.in_container("sgl_mix", _LOAD.format(model=settings["MODEL"], dataset=settings["DATASET"]), detach=True)
    node.wait_for_line("sgl_mix", "/tmp/fleet-load.rc", "0", timeout=120)


def stop_load(node):
    """Stop the load; (each client run's exit code, each run's result record, the log's tail and error lines)."""
    node.in_container("sgl_mix", "touch /tmp/fleet-load.stop")
    node.in_container("sgl_mix", "for i in $(seq 1 300); do [ -f /tmp/fleet-load.done ] && exit 0; sleep 1; done; "
                      "exit 1", timeout=330)
    runs = [json.loads(line) for line in node.in_container("sgl_mix", "cat /tmp/fleet-load.jsonl").stdout.splitlines()]
    codes = node.in_container("sgl_mix", "cat /tmp/fleet-load.rc").stdout.split()
    log_tail = node.in_container("sgl_mix", "tail -n 40 /tmp/fleet-load.log").stdout
    # What a failed client run said (its traceback or error lines), not just the last run's summary.
    log_tail += node.in_container("sgl_mix", "grep -n -i -B2 -A8 'traceback\\|error\\|failed' /tmp/fleet-load.log "
                                  "| tail -n 60 || true").stdout
    return codes, runs, log_tail
