"""Helpers for the simulator tests: processes, HTTP, and the user's command lines.

A module of its own (not conftest) so that the test modules can import it by a name no
other test directory uses.
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
SIM_ROOT = REPO / "tests" / "rehearsal" / "sim"
WALKTHROUGH = REPO / "docs" / "reference" / "sglang-mixed-dsv4-pro-mi355x.txt"
# The user's PD page (Infera's "SGLang 1P1D" example, kept verbatim) and its recipe.
PD_PAGE = REPO / "docs" / "reference" / "sglang-1p1d-dsv4-pro-mi355x.md"
PD_RECIPE = REPO / "roles" / "sglang_worker" / "recipes" / "dsv4-pro-mi355x-pd.yml"
# The two PD legs' "hosts": loopback addresses Infera's preflight takes for routable (it refuses
# 127.0.0.1 and localhost for a disaggregated worker, infera/common/disagg_preflight.py).
PD_HOSTS = {"prefill": "127.0.0.2", "decode": "127.0.0.3"}
RECIPE = REPO / "roles" / "sglang_worker" / "recipes" / "dsv4-pro-mi355x-mixed.yml"
MAKE_MODEL = REPO / "tests" / "rehearsal" / "fixtures" / "make_model.py"
READY_LINE = "The server is fired up and ready to roll!"
# One refresh of the graph-capture bar (tqdm's default format, \r between refreshes):
# "Capturing batches (bs=128 avail_mem=27.68 GB):   5%|▌         | 1/19 [00:02<00:36,  2.03s/it]".
CAPTURE_BAR = re.compile(r"Capturing batches \(bs=(\d+) avail_mem=[\d.]+ GB\):\s+\d+%\|[^|]*\| (\d+)/(\d+) \[")


def captures(log):
    """[(bs, graphs done once it was captured, total)] in capture order: the bar is described
    with the batch size before its capture and refreshed with the count after it."""
    done = {}
    for bs, count, total in CAPTURE_BAR.findall(log):
        done[int(bs)] = (int(bs), max(int(count), done.get(int(bs), (0, 0))[1]), int(total))
    return [entry for entry in done.values() if entry[1] > 0]


# SGLang's request gauges (sglang/srt/metrics/collector.py), summed over every rank's series: what Infera's drain
# reads from v0.2.10 on (infera/common/engine_metrics.py inflight_from_metrics) and what the rehearsal's default
# Infera, v0.1.1, has no reader for.
INFLIGHT_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")


def inflight(metrics_text):
    """Requests running or queued in an engine's /metrics text, parsed by prometheus_client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(sample.value for family in text_string_to_metric_families(metrics_text)
               for sample in family.samples if sample.name in INFLIGHT_GAUGES)


def infera_drains():
    """Whether the installed Infera (the rehearsal's default stack, scripts/bootstrap) drains on SIGTERM: its
    infera/engine/drain.py exists from v0.2.10 on; v0.1.1 SIGTERMs the engine's process group at once."""
    import importlib.util

    return importlib.util.find_spec("infera.engine.drain") is not None


def no_drain_args():
    """The wrapper arguments that turn its drain off, where it has one; v0.1.1 would pass them on to SGLang."""
    return ["--drain-timeout", "0"] if infera_drains() else []


GPU_COUNT = 8
# Marks every process a test starts, and so the engines the wrapper spawns from them.
TAG_VARIABLE = "INFERA_SIM_TEST_TAG"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                   "ALL_PROXY")
# The walkthrough's fused-compress block.
FUSED_COMPRESS_ENV = {
    "SGLANG_USE_AITER": "1", "AITER_BF16_FP8_MOE_BOUND": "0", "SGLANG_OPT_FP8_WO_A_GEMM": "0",
    "SGLANG_OPT_DEEPGEMM_HC_PRENORM": "0", "SGLANG_OPT_USE_AITER_INDEXER": "1",
    "SGLANG_OPT_USE_TOPK_V2": "0", "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH": "1",
    "SGLANG_OPT_USE_FUSED_PAGED_COMPRESS": "1",
    "SGLANG_HACK_FLASHMLA_BACKEND": "unified_kv_triton",
    "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP": "false", "SGLANG_ROCM_USE_MULTI_STREAM": "false",
    "SGLANG_OPT_USE_FUSED_COMPRESS": "true", "SGLANG_OPT_USE_FUSED_COMPRESS_TRITON": "true",
    "SGLANG_EAGER_INPUT_NO_COPY": "true", "SGLANG_USE_ROCM700A": "0",
    "SGLANG_OPT_USE_JIT_INDEXER_METADATA": "false", "SGLANG_OPT_USE_TILELANG_INDEXER": "false",
    "SGLANG_OPT_USE_TILELANG_MHC_PRE": "false", "SGLANG_OPT_USE_TILELANG_MHC_POST": "false",
}


def loopback_env():
    """The caller's environment without proxies (all traffic stays on loopback) and
    without INFERA_* and SGLANG_* settings that would leak into the test."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("INFERA_", "SGLANG_")) and name not in PROXY_VARIABLES}
    env.update({"NO_PROXY": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1"})
    return env


def simulator_env(dev_root, jit_dir):
    """The tuned recipe's environment for the wrapper and the simulated engine."""
    return {
        **loopback_env(),
        **FUSED_COMPRESS_ENV,
        "PYTHONPATH": str(SIM_ROOT),
        "INFERA_SIM_TIME_SCALE": "0.02",
        "INFERA_SIM_DEV_ROOT": str(dev_root),
        "INFERA_SIM_JIT_DIR": str(jit_dir),
        "HIP_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in range(GPU_COUNT)),
    }


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_json(method, url, body=None, timeout=10, headers=None):
    """Return (status, parsed JSON body or None when empty) for any HTTP status."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        raw, status = error.read(), error.code
    return status, json.loads(raw) if raw else None


def http_text(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def sse_events(url, body, timeout=60, headers=None):
    """POST a streaming request; return (content type, [decoded events], arrival times)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    events, arrivals = [], []
    with urllib.request.urlopen(request, timeout=timeout) as response:
        content_type = response.headers["Content-Type"]
        for raw in response:
            line = raw.decode().strip()
            if not line:
                continue
            assert line.startswith("data: "), line
            payload = line[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
            arrivals.append(time.monotonic())
    return content_type, events, arrivals


def streamed_text(events):
    """The text of an OpenAI completions or chat stream."""
    text = ""
    for event in events[:-1]:
        choice = event["choices"][0] if event["choices"] else {}
        text += choice.get("text") or choice.get("delta", {}).get("content") or ""
    return text


def wait_until(predicate, timeout, message):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s: {message}")


def _tagged_pids(tag):
    """Pids of live processes whose environment carries ``tag``."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def process_gone(pid):
    """True once ``pid`` has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def child_pids(pid):
    children = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                    children.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return children


class Proc:
    """One command in its own session (the wrapper kills its own process group when the
    engine fails, which must not be the test runner's); output goes to files."""

    def __init__(self, argv, env, log_dir, name):
        self.tag = uuid.uuid4().hex
        self.stdout_path = log_dir / f"{name}-{self.tag[:8]}.out"
        self.stderr_path = log_dir / f"{name}-{self.tag[:8]}.err"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                argv, env={**env, TAG_VARIABLE: self.tag}, stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.process.pid

    @property
    def stdout(self):
        return self.stdout_path.read_text()

    @property
    def stderr(self):
        return self.stderr_path.read_text()

    def describe(self):
        return f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-6000:]}"

    def wait_for(self, text, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stderr or text in self.stdout:
                return
            if self.process.poll() is not None:
                raise AssertionError(f"exited {self.process.returncode} before {text!r}\n"
                                     + self.describe())
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} within {timeout} s\n" + self.describe())

    def wait_exit(self, timeout=30):
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s\n" + self.describe()) from None

    def terminate(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def kill(self):
        """SIGKILL this process and every process it started (found by its tag)."""
        for pid in _tagged_pids(self.tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def python_module(module, args):
    return [sys.executable, "-m", module, *[str(arg) for arg in args]]


def router_args(etcd_endpoint, port, tokenizer_dir):
    """The walkthrough's router command (section 3), on loopback."""
    return ["--host", "127.0.0.1", "--port", port, "--etcd-endpoint", etcd_endpoint,
            "--router-tokenizer-path", tokenizer_dir, "--router-policy", "round-robin",
            "--discovery-backend", "etcd", "--request-transport", "http",
            "--kv-event-transport", "zmq"]


def walkthrough_worker_commands():
    """{"nodp"|"dp": (env, argv)} of the walkthrough's two worker commands (section 4)."""
    commands = {}
    for line in WALKTHROUGH.read_text().splitlines():
        if "python -m infera.engine.sglang" not in line:
            continue
        words = shlex.split(line)
        start = words.index("python")
        env = dict(word.split("=", 1) for word in words[:start])
        argv = words[start + 3:]
        commands["dp" if "--enable-dp-attention" in argv else "nodp"] = (env, argv)
    assert set(commands) == {"nodp", "dp"}, f"{WALKTHROUGH} no longer has both variants"
    return commands


def substitute(argv, values):
    """Put test values for $MODEL-style shell variables."""
    return [re.sub(r"\$(\w+)", lambda match: str(values[match.group(1)]), word)
            for word in argv]


def with_values(argv, **overrides):
    """argv with the value of each ``--flag`` in ``overrides`` replaced."""
    flags = {f"--{name.replace('_', '-')}": str(value) for name, value in overrides.items()}
    result = list(argv)
    for index, word in enumerate(result[:-1]):
        if word in flags:
            result[index + 1] = flags[word]
    return result


def recipe_argvs(values):
    """{"nodp"|"dp": argv} of the shipped recipe on the dev plane (the plane's flags come
    from the infera role, as the worker role adds them), its Jinja placeholders filled in and
    the node's address in place of $HOST, as the worker role writes the launch script."""
    recipe = yaml.safe_load(RECIPE.read_text())
    plane = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())["infera_dev_plane_args"]

    def render(value):
        text = str(value)
        if text == "$HOST":
            return str(values["sglang_worker_advertise_host"])
        return re.sub(r"\{\{\s*(\w+)[^}]*\}\}", lambda match: str(values[match.group(1)]), text)

    def flags(mapping):
        argv = []
        for flag, value in mapping.items():
            argv += [flag] if value is None else [flag, render(value)]
        return argv

    return {name: flags(recipe["args"]) + flags(plane) + flags(variant["args"])
            for name, variant in recipe["variants"].items()}


def wrapper_args(variant, model_dir, etcd, port, extra=()):
    """The walkthrough's worker command for ``variant``, on loopback ports; the KV plane
    binds loopback too. Returns (the command's own environment, argv)."""
    env, argv = walkthrough_worker_commands()[variant]
    argv = substitute(argv, {"MODEL": model_dir, "HOST": "127.0.0.1", "ETCD": etcd})
    argv = with_values(argv, host="127.0.0.1", port=port)
    argv += ["--kv-events-bind", f"tcp://127.0.0.1:{free_port()}",
             "--kv-snapshot-host", "127.0.0.1", "--kv-snapshot-port", str(free_port())]
    return env, argv + [str(arg) for arg in extra]


def engine_args(variant, model_dir, port, extra=()):
    """What Infera's wrapper spawns ``sglang.launch_server`` with for ``variant``."""
    from infera.engine.sglang.args import parse_sglang_args

    _env, argv = wrapper_args(variant, model_dir, "127.0.0.1:2379", port)
    return parse_sglang_args(argv).sglang_argv + ["--enable-metrics"] + [str(a) for a in extra]


def pd_page_commands():
    """{"prefill"|"decode": (env, argv)} of the PD page's leg commands (section 4), each with the
    page's export (the fused-compress set and the DP gather) and the recipe's
    SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (the page's note) in its environment."""
    text = PD_PAGE.read_text()
    exported = next(line for line in text.splitlines() if line.startswith("export SGLANG_USE_AITER="))
    env = dict(word.split("=", 1) for word in shlex.split(exported)[1:])
    recipe_env = yaml.safe_load(PD_RECIPE.read_text())["env"]
    env["SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"] = recipe_env["SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"]
    commands = {}
    for line in text.splitlines():
        if "python -m infera.engine.sglang" not in line:
            continue
        words = shlex.split(line)
        start = words.index("python")
        leg_env = {**env, **dict(word.split("=", 1) for word in words[:start])}
        argv = words[start + 3:]
        commands[argv[argv.index("--disaggregation-mode") + 1]] = (leg_env, argv)
    assert set(commands) == {"prefill", "decode"}, f"{PD_PAGE} no longer has both legs"
    return commands


def pd_wrapper_args(leg, model_dir, etcd, port, bootstrap_port, extra=(), drop=()):
    """The page's command for ``leg`` on its loopback host and test ports (the prefill's
    bootstrap server on ``bootstrap_port``), without the words in ``drop``. Returns (env, argv)."""
    env, argv = pd_page_commands()[leg]
    host = PD_HOSTS[leg]
    argv = substitute(argv, {"MODEL": model_dir, "P_IP": PD_HOSTS["prefill"],
                             "D_IP": PD_HOSTS["decode"], "ETCD": etcd})
    argv = with_values(argv, host=host, port=port, disaggregation_bootstrap_port=bootstrap_port)
    argv = [word for word in argv if word not in drop]
    argv += ["--kv-events-bind", f"tcp://{host}:{free_port()}",
             "--kv-snapshot-host", host, "--kv-snapshot-port", str(free_port())]
    return env, argv + [str(arg) for arg in extra]


def pd_engine_args(leg, model_dir, port, bootstrap_port, extra=()):
    """What Infera's wrapper spawns ``sglang.launch_server`` with for the page's ``leg``."""
    from infera.engine.sglang.args import parse_sglang_args

    _env, argv = pd_wrapper_args(leg, model_dir, "127.0.0.1:2379", port, bootstrap_port)
    return parse_sglang_args(argv).sglang_argv + ["--enable-metrics"] + [str(a) for a in extra]
