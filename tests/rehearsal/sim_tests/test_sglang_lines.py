"""The simulator writes only lines the SGLang it stands in for writes, and the collection
waits for lines that SGLang and Infera really write.

Source of truth: tests/rehearsal/sglang_lines, the templates of every line of each supported
SGLang release (extracted from its wheel) and of each Infera tag the rehearsal runs
(extracted from the vendored tarball), plus the few lines of other sources a SGLang log
holds (other_sources.json). For each supported SGLang version the simulated engine runs
through a cold start and shutdown (both variants and both PD legs), every fault and the
refusals; every line it writes without ``[simulated]`` must be accounted for by a template of
that version (test_sim_pd.py holds the PD legs' failures to them too). Then each pattern the
collection matches engine logs with must match a real line of every version.
"""

import hashlib
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from sim_harness import REPO, READY_LINE, engine_args, free_port, pd_engine_args

LINES_DIR = REPO / "tests" / "rehearsal" / "sglang_lines"
VENDOR = REPO.parent / "shared" / "vendor"
sys.path.insert(0, str(LINES_DIR))
sys.path.insert(0, str(REPO / ".build" / "collections"))

import linecatalog as lines  # noqa: E402
from ansible_collections.infera.serving.plugins.module_utils import (  # noqa: E402
    _bench_wait, _readiness, _remediation)
from sglang_sim import bars  # noqa: E402
from sglang_sim.settings import SGLANG_VERSIONS  # noqa: E402

INFERA_TAGS = ("v0.1.1", "v0.2.10")
# (name, INFERA_SIM_FAULT, variant, extra flags, how it ends)
SCENARIOS = (
    ("cold start, ready, SIGTERM (nodp)", "", "nodp", (), "sigterm_when_ready"),
    ("ready, SIGTERM to the process group", "", "nodp", (), "sigterm_group_when_ready"),
    ("cold start, ready, SIGTERM (dp)", "", "dp", (), "sigterm_when_ready"),
    ("weights fail to load", "crash_weight_load", "nodp", (), "exits"),
    ("OOM in graph capture", "oom_graph_capture", "nodp", (), "exits"),
    ("GPU memory access fault", "memory_access_fault", "nodp", (), "exits"),
    ("GPU hang (HW exception)", "gpu_hang", "nodp", (), "exits"),
    ("a scheduler dies while serving", "exit_after_ready", "nodp", (), "exits"),
    ("silent hang in capture, then SIGTERM", "hang", "nodp", (), "sigterm_in_capture"),
    ("KV pool does not fit", "", "nodp", ("--mem-fraction-static", "0.3"), "exits"),
    ("a refused flag value", "", "nodp", ("--swa-full-tokens-ratio", "2"), "exits"),
    ("an unknown flag", "", "nodp", ("--no-such-flag",), "exits"),
    # The PD page's legs (docs/reference/sglang-1p1d-dsv4-pro-mi355x.md), and its decode leg with
    # the radix cache Infera appends when KV events are on.
    ("PD prefill leg, ready, SIGTERM", "", "prefill", (), "sigterm_group_when_ready"),
    ("PD decode leg, ready, SIGTERM", "", "decode", ("--cuda-graph-max-bs", "16"), "sigterm_group_when_ready"),
    ("PD decode leg with the radix cache on the SWA model", "", "decode",
     ("--cuda-graph-max-bs", "16", "--disaggregation-decode-enable-radix-cache"), "exits"),
    ("a PD refusal of SGLang's own", "", "prefill", ("--disaggregation-transfer-backend", "fake"), "exits"),
)


def run_scenario(sim_env, model_dir, tmp_path, version, fault, variant, extra, ending):
    port = free_port()
    env = {**sim_env, "INFERA_SIM_SGLANG_VERSION": version, "INFERA_SIM_FAULT": fault,
           "INFERA_SIM_FAULT_AFTER": "0.5"}
    err = tmp_path / f"engine-{version}-{fault or 'none'}-{variant}-{port}.err"
    with open(err, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "sglang.launch_server",
             *(pd_engine_args(variant, model_dir, port, free_port(), extra)
               if variant in ("prefill", "decode") else engine_args(variant, model_dir, port, extra))],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        try:
            if ending != "exits":
                wanted = "Capturing batches" if ending == "sigterm_in_capture" else READY_LINE
                _wait_for(process, err, wanted)
                if ending == "sigterm_in_capture":
                    _wait_for(process, err, "(bs=", count=3)
                if ending == "sigterm_group_when_ready":
                    os.killpg(process.pid, signal.SIGTERM)
                else:
                    process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return code, err.read_text(encoding="utf-8")


def _wait_for(process, path, text, count=1, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.read_text(encoding="utf-8", errors="replace").count(text) >= count:
            return
        assert process.poll() is None, path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} within {timeout} s:\n{path.read_text()}")


@pytest.fixture(scope="module")
def logs(sim_env_module, model_dir, tmp_path_factory):
    """{version: {scenario name: (exit code, stderr)}}, each scenario run once."""
    tmp_path = tmp_path_factory.mktemp("lines")
    return {version: {name: run_scenario(sim_env_module, model_dir, tmp_path, version, fault,
                                         variant, extra, ending)
                      for name, fault, variant, extra, ending in SCENARIOS}
            for version in SGLANG_VERSIONS}


@pytest.fixture(scope="module")
def sim_env_module(dev_root, tmp_path_factory):
    from sim_harness import simulator_env

    return simulator_env(dev_root, tmp_path_factory.mktemp("jit"))


def describe(unmatched):
    return "\n".join("no template for: " + "\n  | ".join(record["lines"])[:1500]
                     for record in unmatched)


# ------------------------------------------------------------------ the extracts themselves

def test_the_simulator_speaks_exactly_the_versions_with_an_extract():
    assert list(SGLANG_VERSIONS) == lines.supported_versions()


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_each_sglang_extract_names_its_wheel_and_is_the_one_recorded(version):
    path = LINES_DIR / f"sglang-{version}.jsonl"
    header, entries = lines.read_extract(path)
    assert header["sglang"] == version and header["source"].startswith(f"sglang-{version}-")
    assert re.fullmatch(r"[0-9a-f]{64}", header["sha256"])
    assert f"pip download --no-deps sglang=={version}" in header["command"]
    assert header["templates"] == len(entries) > 1000
    recorded = dict(line.split()[::-1] for line in
                    (LINES_DIR / "SHA256SUMS").read_text().splitlines())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded[path.name], (
        f"{path.name} differs from the extract recorded in SHA256SUMS: regenerate it with the "
        "command in its first line, never by hand")


@pytest.mark.parametrize("tag", INFERA_TAGS)
def test_each_infera_extract_is_what_the_extractor_makes_of_the_vendored_tarball(tag, tmp_path):
    tarball = VENDOR / f"amd-infera-{tag}.tar.gz"
    out = tmp_path / "extract.jsonl"
    subprocess.run([sys.executable, str(LINES_DIR / "extract.py"), str(tarball), "-o", str(out)],
                   check=True, capture_output=True)
    assert out.read_bytes() == (LINES_DIR / f"infera-{tag}.jsonl").read_bytes()


# ------------------------------------------------------------------ the simulator's lines

@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_every_line_the_simulator_writes_is_a_line_of_the_sglang_it_stands_for(logs, version):
    catalog = lines.catalog(version)
    for name, (code, text) in logs[version].items():
        assert catalog.records(text), f"{name}: the engine wrote nothing"
        assert not catalog.unmatched(text), f"{version}, {name} (exit {code}):\n" + describe(
            catalog.unmatched(text))


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_the_engine_ends_as_sglang_does(logs, version):
    """kill_process_tree SIGKILLs the launcher itself; a fault in the launch exits 1."""
    ends = {name: code for name, (code, _text) in logs[version].items()}
    for name in ("cold start, ready, SIGTERM (nodp)", "cold start, ready, SIGTERM (dp)",
                 "ready, SIGTERM to the process group",
                 "weights fail to load", "OOM in graph capture", "a scheduler dies while serving",
                 "KV pool does not fit", "PD prefill leg, ready, SIGTERM", "PD decode leg, ready, SIGTERM",
                 "PD decode leg with the radix cache on the SWA model"):
        assert ends[name] == -signal.SIGKILL, (name, ends[name])
    assert ends["GPU memory access fault"] == ends["GPU hang (HW exception)"] == 1
    assert ends["silent hang in capture, then SIGTERM"] == -signal.SIGTERM
    assert ends["an unknown flag"] == 2 and ends["a refused flag value"] == 1
    assert ends["a PD refusal of SGLang's own"] == 1


def test_a_sigterm_drains_while_one_to_the_process_group_kills_the_scheduler(logs):
    """SGLang's own drain on SIGTERM to the launcher (tokenizer_manager.py sigterm_watchdog), and the crash path when
    the scheduler dies of a SIGTERM to the whole group, as Infera sends it (watchdog.py, then kill_process_tree)."""
    drained = logs["0.5.15.post1"]["cold start, ready, SIGTERM (nodp)"][1]
    assert "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]." in drained
    assert "crashed with exit code" not in drained
    killed = logs["0.5.15.post1"]["ready, SIGTERM to the process group"][1]
    assert re.search(r"Subprocess scheduler_0 \(pid=\d+\) crashed with exit code -15\. Triggering SIGQUIT", killed)
    assert "Gracefully exiting" not in killed


def test_the_capture_line_is_the_version_s_own(logs):
    begin = {version: next(line for line in logs[version]["cold start, ready, SIGTERM (nodp)"][1]
                           .splitlines() if "graph begin" in line)
             for version in SGLANG_VERSIONS}
    assert "Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[" \
        in begin["0.5.15.post1"]
    assert "num_tokens_per_req=1, bs=[" in begin["0.5.17"]
    # Each version refuses the other's line: the check has teeth.
    assert lines.catalog("0.5.17").unmatched(begin["0.5.15.post1"])
    assert lines.catalog("0.5.15.post1").unmatched(begin["0.5.17"])


@pytest.mark.parametrize("planted", [
    "[2026-12-06 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. "
    "avail mem=30.92 GB",
    "[2026-12-06 10:00:00 TP0] KV Cache is allocated. #tokens: 1000, KV size: 1.00 GB, "
    "dtype: fp8_e4m3",
    "Capturing batches (bs=16 avail_mem=30.92GB): 1/5",
    "[2026-12-06 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1, in run\n'
    "    run()\nException: Capture cuda graph failed: out of memory\n",
    "INFO: Uvicorn running on http://0.0.0.0:30000",
])
@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_an_invented_line_planted_in_a_real_log_is_found(logs, version, planted):
    text = logs[version]["cold start, ready, SIGTERM (nodp)"][1]
    catalog = lines.catalog(version)
    assert not catalog.unmatched(text)
    found = catalog.unmatched(text + planted + "\n")
    assert [record["lines"][0] for record in found] == [planted.splitlines()[0]]


# ------------------------------------------------------------------ the collection's patterns

def collection_patterns():
    """(module, name, regex) for every pattern the collection matches SGLang's log with."""
    found = [("_readiness", "DEFAULT_READY_LINE", re.compile(re.escape(_readiness.DEFAULT_READY_LINE)))]
    found += [("_readiness", "DEFAULT_FATAL_PATTERNS[%d]" % index, re.compile(pattern))
              for index, pattern in enumerate(_readiness.DEFAULT_FATAL_PATTERNS)]
    for module in (_readiness, _remediation):
        for name, value in sorted(vars(module).items()):
            if isinstance(value, re.Pattern) and name not in INFERA_PATTERNS \
                    and name not in NOT_LOG_PATTERNS:
                found.append((module.__name__.rsplit(".", 1)[-1], name, value))
    return found


# Lines of Infera's wrapper, not of SGLang: held to Infera's extracts below.
INFERA_PATTERNS = {"_WRAPPER_HEARTBEAT": _readiness, "_REGISTERED": _readiness, "_WRAPPER_LIMIT": _remediation}
# Patterns over something else than a log line (a number inside a matched line).
NOT_LOG_PATTERNS = ("_LOAD_ELAPSED",)


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_every_pattern_of_the_collection_matches_a_real_line_of_the_version(logs, version):
    real = [segment for _code, text in logs[version].values()
            for segment in lines.Catalog.segments(text) if "[simulated]" not in segment]
    # Lines of the HIP runtime no simulated fault writes (HIP's queue-error callback).
    real += [render(template.parts) for template in lines.catalog(version).templates("raw")]
    missing = [f"{module}.{name} = {pattern.pattern!r}"
               for module, name, pattern in collection_patterns()
               if not any(pattern.search(segment) for segment in real)]
    assert not missing, f"patterns that match no line SGLang {version} writes:\n" + "\n".join(missing)


def test_a_pattern_in_an_old_format_would_be_caught(logs):
    """The test above fails on a pattern of the old, invented capture line."""
    real = [segment for _code, text in logs["0.5.15.post1"].values()
            for segment in lines.Catalog.segments(text)]
    assert not any(re.search(r"Capture cuda graph begin", segment) for segment in real)


def render(parts, text="127.0.0.1:30000"):
    """A sample line of a template: each placeholder as a plausible value."""
    sample = {"s": text, "d": "30000"}
    return "".join(sample.get(part[0], "30") if lines._is_hole(part) else part for part in parts)


@pytest.mark.parametrize("tag", INFERA_TAGS)
def test_the_collection_s_infera_patterns_match_lines_infera_writes(tag):
    _header, entries = lines.read_extract(LINES_DIR / f"infera-{tag}.jsonl")
    rendered = [render(entry["parts"], text) for entry in entries if entry["kind"] in ("log", "raise")
                for text in ("127.0.0.1:30000", "1800")]
    for name, module in INFERA_PATTERNS.items():
        pattern = getattr(module, name)
        assert any(pattern.search(line) for line in rendered), (tag, name, pattern.pattern)
    registered = next(line for line in rendered if _readiness._REGISTERED.search(line))
    assert _readiness._REGISTERED.search(registered).group(1) == "127.0.0.1:30000"
    assert _remediation.wrapper_limit(["TimeoutError: " + next(
        line for line in rendered if "SGLang not ready after 1800" in line)]) == 1800


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_the_sweep_s_client_patterns_match_lines_the_client_of_the_version_writes(version):
    """The bench client's lines (sglang/benchmark/serving.py in these versions) and tqdm's bar."""
    catalog = lines.catalog(version)
    rendered = [render(template.parts, text="64") for template in catalog.templates("print", "log")]
    for name in ("_WARMUP_START", "_WARMUP_DONE", "_RESULTS"):
        pattern = getattr(_bench_wait, name)
        assert any(pattern.search(line) for line in rendered), (version, name, pattern.pattern)
    progress = bars.default_bar("", 7, 640, 65.0)
    assert not catalog.unmatched(progress)
    assert _bench_wait._BAR.search(progress).groups() == ("7", "640", "01:05")
