"""Helpers for the simulator tests: subprocesses, HTTP, etcd and the walkthrough's commands.

A module of its own (not conftest) so that the test modules can import it by a name no
other test directory uses.
"""

import base64
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SIM_ROOT = Path(__file__).resolve().parents[1] / "sim"
READY_LINE = "The server is fired up and ready to roll!"
GPU_COUNT = 8

# The walkthrough's fused-compress block, verbatim.
FUSED_COMPRESS_ENV = dict(item.split("=") for item in (
    "SGLANG_USE_AITER=1 AITER_BF16_FP8_MOE_BOUND=0 SGLANG_OPT_FP8_WO_A_GEMM=0 "
    "SGLANG_OPT_DEEPGEMM_HC_PRENORM=0 SGLANG_OPT_USE_AITER_INDEXER=1 SGLANG_OPT_USE_TOPK_V2=0 "
    "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH=1 SGLANG_OPT_USE_FUSED_PAGED_COMPRESS=1 "
    "SGLANG_HACK_FLASHMLA_BACKEND=unified_kv_triton SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=false "
    "SGLANG_ROCM_USE_MULTI_STREAM=false SGLANG_OPT_USE_FUSED_COMPRESS=true "
    "SGLANG_OPT_USE_FUSED_COMPRESS_TRITON=true SGLANG_EAGER_INPUT_NO_COPY=true "
    "SGLANG_USE_ROCM700A=0 SGLANG_OPT_USE_JIT_INDEXER_METADATA=false "
    "SGLANG_OPT_USE_TILELANG_INDEXER=false SGLANG_OPT_USE_TILELANG_MHC_PRE=false "
    "SGLANG_OPT_USE_TILELANG_MHC_POST=false"
).split())


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_json(method, url, body=None, timeout=10):
    """Return (status, parsed JSON body) for any HTTP status."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def sse_events(url, body, timeout=30):
    """POST a streaming request; return (content type, [decoded events], arrival times)."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
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


def wait_until(predicate, timeout, message):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s: {message}")


class Etcd:
    def __init__(self, endpoint):
        self.endpoint = endpoint

    def _call(self, path, body):
        request = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode())
        with urllib.request.urlopen(request, timeout=3) as response:
            return json.loads(response.read())

    def workers(self):
        """{key: registration} under infera/workers/."""
        answer = self._call("/v3/kv/range", {
            "key": base64.b64encode(b"infera/workers/").decode(),
            "range_end": base64.b64encode(b"infera/workers0").decode(),
        })
        return {base64.b64decode(kv["key"]).decode(): json.loads(base64.b64decode(kv["value"]))
                for kv in answer.get("kvs", [])}

    def put(self, key, value):
        self._call("/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                                  "value": base64.b64encode(value.encode()).decode()})


class SimProcess:
    """One simulator command; its stdout and stderr go to files, read as they grow."""

    def __init__(self, module, args, env, log_dir):
        self.stdout_path = log_dir / f"{module}-{id(self)}.out"
        self.stderr_path = log_dir / f"{module}-{id(self)}.err"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen([sys.executable, "-m", module, *args],
                                            env=env, stdout=out, stderr=err)

    @property
    def stdout(self):
        return self.stdout_path.read_text()

    @property
    def stderr(self):
        return self.stderr_path.read_text()

    def describe(self):
        return f"--- stdout ---\n{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-3000:]}"

    def wait_for(self, text, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stdout:
                return
            if self.process.poll() is not None and text not in self.stdout:
                raise AssertionError(f"exited {self.process.returncode} before {text!r}\n"
                                     + self.describe())
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} within {timeout} s\n" + self.describe())

    def wait_exit(self, timeout=20):
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s\n" + self.describe()) from None

    def terminate(self, timeout=10):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def router_args(etcd_endpoint, port, tokenizer_dir):
    """The walkthrough's router command (section 3)."""
    return ["--host", "127.0.0.1", "--port", port, "--etcd-endpoint", etcd_endpoint,
            "--router-tokenizer-path", tokenizer_dir, "--router-policy", "round-robin",
            "--discovery-backend", "etcd", "--request-transport", "http",
            "--kv-event-transport", "zmq"]


def worker_args(model_dir, etcd_endpoint, port, variant="nodp"):
    """The walkthrough's worker command (section 4), on loopback."""
    args = ["--model-path", model_dir, "--tp-size", "8", "--trust-remote-code",
            "--host", "127.0.0.1", "--port", port, "--advertise-host", "127.0.0.1",
            "--etcd-endpoint", etcd_endpoint, "--discovery-backend", "etcd",
            "--request-transport", "http", "--kv-event-transport", "zmq",
            "--attention-backend", "dsv4", "--disable-radix-cache", "--page-size", "256",
            "--cuda-graph-max-bs", "128", "--swa-full-tokens-ratio", "0.15",
            "--disable-shared-experts-fusion", "--mem-fraction-static", "0.90"]
    if variant == "dp":
        return args + ["--dp", "8", "--enable-dp-attention", "--ep-size", "8",
                       "--enable-prefill-delayer", "--prefill-delayer-max-delay-ms", "5000",
                       "--chunked-prefill-size", "65536", "--max-running-requests", "256"]
    return args + ["--chunked-prefill-size", "8192"]


class Router:
    def __init__(self, process, url):
        self.process = process
        self.url = url

    def get(self, path):
        return http_json("GET", self.url + path)

    def post(self, path, body, timeout=30):
        return http_json("POST", self.url + path, body, timeout)

    def worker_count(self):
        return self.get("/v1/workers")[1]["total"]

    def wait_for_workers(self, count, timeout=10):
        wait_until(lambda: self.worker_count() == count, timeout,
                   f"router never listed {count} worker(s)\n" + self.process.describe())
