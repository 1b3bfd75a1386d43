"""sweep.yml on a rehearsal node shows where a point is: a plan, progress lines that grow, a line after it.

One point at c4 of 40 requests of 64+256 tokens: about 20 s at the simulated c4 rate (8 GPUs,
about 60 output tok/s each), so progress lines every 2 s come several times. Every number here
is SIMULATED.
"""

import json
import re
import subprocess
import time

import pytest

from conftest import NODE
from rehearsal import REPO, playbook_env

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-1')

# The rehearsal node's engine is simulated: each progress line says so after the node's name.
PROGRESS = re.compile(r"^(?P<host>\S+): \[SIMULATED engine\] point 1/1 c4 (?P<variant>\w+): main (?P<done>\d+)/(?P<total>\d+) requests, "
                      r"elapsed \d+:\d\d, ETA [^,]+, engine (?P<engine>alive|not .*)$", re.MULTILINE)


def test_a_point_longer_than_the_interval_prints_growing_progress(node, tmp_path):
    run_id = f"progress-{time.time_ns()}"
    results = tmp_path / "results"
    settings = {"concurrencies": [4], "run_id": run_id, "sweep_results_dir": str(results),
                "sweep_random_input_len": 64, "sweep_random_output_len": 256, "sweep_prompts_per_conc": 10,
                "sweep_progress_interval": 2, "sweep_below_target": "ignore"}
    play = subprocess.run(["ansible-playbook", "playbooks/sweep.yml", "--limit", "infera-node-1", "-e", json.dumps(settings)], cwd=REPO,
                          env=playbook_env(),
                          capture_output=True, text=True, timeout=900, check=False)
    out = play.stdout + play.stderr
    assert play.returncode == 0, out[-4000:]

    # The plan comes as a debug list, which the YAML callback may fold over several lines.
    flat = re.sub(r"\s+", " ", out)
    assert re.search(rf"{NODE}: sweep plan: 1 point\(s\) to run[^']*no estimate", flat), out[-4000:]
    lines = [match for match in PROGRESS.finditer(out) if match["host"] == NODE]
    assert len(lines) >= 2, f"expected two or more progress lines during the point:\n{out[-4000:]}"
    done = [int(match["done"]) for match in lines]
    assert done == sorted(done) and done[-1] > done[0], f"the completed count did not grow: {done}"
    assert all(int(match["total"]) == 40 for match in lines)
    assert all(match["engine"] == "alive" for match in lines)
    assert re.search(rf"{NODE}: point 1/1 c4 \w+ done: \[SIMULATED engine\] \d+ tok/s/GPU .*valid; sweep time \d+:\d\d:\d\d", out)
    assert re.search(rf"{NODE}: c4 \w+: \d+:\d\d:\d\d \(ok\)", out)
    manifest = json.loads((results / run_id / NODE / "manifest.json").read_text())
    assert [(point["conc"], point["status"]) for point in manifest["points"]] == [(4, "ok")]
