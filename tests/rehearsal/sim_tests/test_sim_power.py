"""The engine's published load (sglang_sim/load_file.py) and the SIMULATED amd-smi's power modelled from it
(tests/rehearsal/images/node/amd-smi `metric --power --json`): it rises under requests and falls back after.

The in-process tests inject the clocks (the publisher's, and amd-smi's INFERA_SIM_NOW); the last one runs a real
engine and follows its load while a request runs."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import threading

import pytest

from sglang_sim.generation import Engine
from sglang_sim.load_file import STALE_SECONDS, LoadPublisher
from sglang_sim.settings import load_settings
from sim_harness import READY_LINE, REPO, engine_args, free_port, http_json, wait_until

AMD_SMI = REPO / "tests" / "rehearsal" / "images" / "node" / "amd-smi"
TUNED = {"variant": "nodp", "attention_ok": True, "fused_compress_ok": True, "gatherv_ok": True}
NOW = 1_800_000_000.0
# The model's figures (amd-smi's constants): an idle GPU i reads IDLE_W + 3 * (i % 4); none reads above TBP_W.
IDLE_W, TBP_W = 220, 1400


def idle_watts(gpu):
    return IDLE_W + 3 * (gpu % 4)


def read(path):
    return json.loads(path.read_text())


def amd_smi_watts(dev_root, load_dir, now=NOW, gpus=()):
    """{gpu: SIMULATED socket power} from `amd-smi metric --power --json`, at ``now``."""
    env = {**os.environ, "INFERA_SIM_DRI_DIR": str(dev_root / "dri"), "INFERA_SIM_LOAD_DIR": str(load_dir),
           "INFERA_SIM_NOW": repr(now)}
    selection = ["-g", *[str(gpu) for gpu in gpus]] if gpus else []
    done = subprocess.run(["/bin/sh", str(AMD_SMI), "metric", "--power", "--json", *selection], env=env,
                          capture_output=True, text=True, check=True)
    assert "SIMULATED socket_power" in done.stderr
    entries = json.loads(done.stdout)["gpu_data"]
    assert all(entry["power"]["socket_power"]["unit"] == "W" for entry in entries)
    return {entry["gpu"]: entry["power"]["socket_power"]["value"] for entry in entries}


def write_load(load_dir, name, running, gpus=range(8), stamp=NOW):
    load_dir.mkdir(exist_ok=True)
    (load_dir / f"engine-{name}.json").write_text(json.dumps(
        {"time": stamp, "pid": name, "gpus": list(gpus), "running": running, "queued": 0, "simulated": True}))


# ---------------------------------------------------------------- the published load

def test_the_published_load_rises_under_requests_and_falls_back(tmp_path):
    engine = Engine(8, TUNED, max_running_requests=4, dp_ranks=2)
    publisher = LoadPublisher(engine, range(8), str(tmp_path / "load"), clock=lambda: NOW)
    path = tmp_path / "load" / f"engine-{os.getpid()}.json"
    assert publisher.path == str(path)
    publisher.write()
    assert read(path) == {"time": NOW, "pid": os.getpid(), "gpus": list(range(8)), "running": 0, "queued": 0,
                          "simulated": True}
    with contextlib.ExitStack() as requests:
        requests.enter_context(engine.admitted(0, 100, 200))
        requests.enter_context(engine.admitted(1, 100, 200))
        requests.enter_context(engine.admitted(1, 100, 200))
        requests.enter_context(engine.pending(0))
        publisher.write()
        assert (read(path)["running"], read(path)["queued"]) == (3, 1)
    publisher.write()
    assert (read(path)["running"], read(path)["queued"]) == (0, 0)
    assert [entry.name for entry in (tmp_path / "load").iterdir()] == [path.name]  # no temporary file left


def test_the_publisher_loop_writes_until_stopped_and_prunes_old_files(tmp_path):
    load_dir = tmp_path / "load"
    write_load(load_dir, 1, 5)
    os.utime(load_dir / "engine-1.json", (0, 0))  # an engine gone long ago
    write_load(load_dir, 2, 5)  # a live one
    stop = threading.Event()
    stop.set()  # one write, then the loop ends
    LoadPublisher(Engine(8, TUNED, 0, 1), [4, 5], str(load_dir), clock=lambda: NOW).run(stop)
    assert sorted(entry.name for entry in load_dir.iterdir()) == sorted(["engine-2.json", f"engine-{os.getpid()}.json"])
    assert read(load_dir / f"engine-{os.getpid()}.json")["gpus"] == [4, 5]


def test_the_load_dir_is_a_setting():
    assert load_settings({}).load_dir == "/tmp/infera-sim/load"
    assert load_settings({"INFERA_SIM_LOAD_DIR": "/run/x"}).load_dir == "/run/x"


# ---------------------------------------------------------------- the SIMULATED amd-smi's power

def test_without_an_engine_every_gpu_reads_idle(dev_root, tmp_path):
    assert amd_smi_watts(dev_root, tmp_path / "none") == {gpu: idle_watts(gpu) for gpu in range(8)}


def test_power_follows_the_running_requests_up_to_near_the_tbp(dev_root, tmp_path):
    load_dir = tmp_path / "load"
    readings = []
    for running in (0, 1, 8, 64, 512, 4096):
        write_load(load_dir, 1, running)
        readings.append(amd_smi_watts(dev_root, load_dir))
    for gpu in range(8):
        watts = [reading[gpu] for reading in readings]
        assert watts[0] == idle_watts(gpu)
        assert watts[:5] == sorted(watts[:5]) and len(set(watts[:5])) == 5  # strictly rising up to saturation
        assert watts[1] > 1.5 * watts[0]  # one request wakes the GPU
        assert 0.9 * TBP_W <= watts[4] == watts[5] <= TBP_W  # saturated: near, never above, the board power


def test_the_reading_wanders_with_time_only_under_load(dev_root, tmp_path):
    load_dir = tmp_path / "load"
    write_load(load_dir, 1, 64, stamp=NOW + 2)
    busy = [amd_smi_watts(dev_root, load_dir, now=NOW + offset, gpus=[0])[0] for offset in (0.0, 1.75, 3.5)]
    assert len(set(busy)) == 3 and max(busy) <= 1.05 * min(busy)
    write_load(load_dir, 1, 0, stamp=NOW + 2)
    assert {amd_smi_watts(dev_root, load_dir, now=NOW + offset, gpus=[0])[0] for offset in (0.0, 1.75)} == {IDLE_W}


def test_only_the_engines_gpus_rise_and_engines_on_one_gpu_add_up(dev_root, tmp_path):
    load_dir = tmp_path / "load"
    write_load(load_dir, 1, 4, gpus=[0, 1, 2, 3])
    half = amd_smi_watts(dev_root, load_dir)
    assert all(half[gpu] > 2 * idle_watts(gpu) for gpu in range(4))
    assert all(half[gpu] == idle_watts(gpu) for gpu in range(4, 8))
    write_load(load_dir, 2, 60, gpus=[3])
    write_load(load_dir, 3, 64, gpus=[2])
    both = amd_smi_watts(dev_root, load_dir, gpus=[2, 3])
    assert both[3] == both[2] or abs(both[3] - both[2]) <= 0.05 * both[2]  # 4 + 60 on GPU 3, 64 on GPU 2
    assert both[3] > half[3]


@pytest.mark.parametrize("stamp", [NOW - STALE_SECONDS - 1, NOW + STALE_SECONDS + 1])
def test_a_stale_or_unreadable_file_is_an_idle_engine(dev_root, tmp_path, stamp):
    load_dir = tmp_path / "load"
    write_load(load_dir, 1, 64, stamp=stamp)
    (load_dir / "engine-2.json").write_text('{"time": ')
    (load_dir / "engine-3.json").write_text('{"time": %r, "gpus": "all", "running": 9}' % NOW)
    assert amd_smi_watts(dev_root, load_dir) == {gpu: idle_watts(gpu) for gpu in range(8)}


# ---------------------------------------------------------------- a real engine

def test_a_serving_engine_publishes_its_load_and_amd_smi_follows_it(launch, sim_env, model_dir, dev_root, tmp_path):
    load_dir = tmp_path / "load"
    port = free_port()
    engine = launch("sglang.launch_server", engine_args("nodp", model_dir, port, ["--disable-cuda-graph"]),
                    {**sim_env, "INFERA_SIM_LOAD_DIR": str(load_dir)})
    engine.wait_for(READY_LINE)
    path = load_dir / f"engine-{engine.pid}.json"

    def published():
        try:
            return read(path)
        except (OSError, ValueError):
            return None

    wait_until(lambda: published() is not None, 10, f"the engine never published {path}")
    assert (published()["gpus"], published()["running"]) == (list(range(8)), 0)

    finished = threading.Event()
    # 600 tokens alone: 11 tok/s/GPU x 8 GPUs = 88 tok/s, about 7 s (the load file is rewritten every 0.5 s).
    threading.Thread(target=lambda: (http_json("POST", f"http://127.0.0.1:{port}/v1/completions",
                                               {"prompt": "hi", "max_tokens": 600, "ignore_eos": True}, timeout=120),
                                     finished.set()), daemon=True).start()
    wait_until(lambda: (published() or {}).get("running") == 1 or finished.is_set(), 10,
               "the request never showed in the published load")
    assert not finished.is_set()
    loaded = published()
    busy = amd_smi_watts(dev_root, load_dir, now=loaded["time"])
    assert all(busy[gpu] > 1.5 * idle_watts(gpu) for gpu in range(8))

    assert finished.wait(120)
    wait_until(lambda: (published() or {}).get("running") == 0, 10, "the load never fell back")
    assert amd_smi_watts(dev_root, load_dir, now=published()["time"]) == {gpu: idle_watts(gpu) for gpu in range(8)}


SAMPLER = REPO / "roles" / "sweep" / "files" / "power_sampler.py"


def test_the_script_samples_the_simulated_amd_smi_until_sigterm(tmp_path):
    """A tiny interval, a SIGTERM once a few calls are in, exit 0; GPUs 0-3 under a simulated engine's load draw
    more than the idle 4-7. The engine's load file is rewritten as a live engine does, so it never goes stale."""
    dri = tmp_path / 'dri'
    dri.mkdir()
    for index in range(8):
        (dri / ('renderD%d' % (128 + index))).touch()
    loads = tmp_path / 'load'
    loads.mkdir()
    tool = tmp_path / 'amd-smi'
    tool.write_text('#!/bin/sh\nexec /bin/sh %s "$@"\n' % AMD_SMI)
    tool.chmod(0o755)
    out = tmp_path / 'power_c8.jsonl'
    env = dict(os.environ, INFERA_SIM_DRI_DIR=str(dri), INFERA_SIM_LOAD_DIR=str(loads),
               INFERA_SIM_BUSY_GPU_FILE=str(tmp_path / 'busy-gpu'))

    def publish():
        partial = loads / 'engine-1.tmp'
        partial.write_text(json.dumps({'time': time.time(), 'pid': 1, 'gpus': [0, 1, 2, 3], 'running': 64,
                                       'queued': 0, 'simulated': True}))
        os.replace(partial, loads / 'engine-1.json')

    def calls():
        text = out.read_text() if out.exists() else ''
        return {json.loads(line)['time'] for line in text.splitlines()[:-1]}

    publish()
    process = subprocess.Popen([sys.executable, str(SAMPLER), str(out), '--interval', '0.05', '--amd-smi', str(tool)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(calls()) < 3 and process.poll() is None and time.monotonic() < deadline:
            publish()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert stdout == '' and stderr == ''
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    by_time = {}
    for sample in samples:
        by_time.setdefault(sample['time'], {})[sample['gpu']] = sample['watts']
    assert len(by_time) >= 3
    for reading in by_time.values():
        assert sorted(reading) == list(range(8))
        assert min(reading[gpu] for gpu in range(4)) > 2 * max(reading[gpu] for gpu in range(4, 8))
        assert all(220 <= value <= 1400 for value in reading.values())
