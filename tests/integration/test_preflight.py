"""playbooks/preflight.yml on a rehearsal node: a ready node, and three problems a person must see
named in one line each before anything changes.

The node has no GPU: its image carries a SIMULATED amd-smi (tests/rehearsal/images/node/amd-smi)
that reports 8 idle MI355X GPUs in the real JSON format, and a busy one while
/etc/infera-sim/busy-gpu says so. The node's /var/lib/docker is a tmpfs of a few GiB, so the
free-disk threshold is lowered here; everything else runs with the role's defaults.
"""

import json
import re
import time

import pytest

from conftest import NODE
from rehearsal import platform_up, run_playbook

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-1')

BUSY_FILE = "/etc/infera-sim/busy-gpu"
# The rehearsal node's Docker data root is a tmpfs (half the host's memory), not a 50 GiB disk.
SMALL_DISK = json.dumps({"preflight_min_free_gib": 0.5})


def preflight(*extra):
    return run_playbook("preflight.yml", "-e", SMALL_DISK, *extra, timeout=300)


def flat(out):
    """The output with whitespace runs made one space: the YAML callback may fold a long line."""
    return re.sub(r"\s+", " ", out)


@pytest.fixture(scope="module")
def model_path(node):
    settings = platform_up(1)
    model = settings["MODEL"]
    config = json.loads(node.sh(f"cat {model}/config.json").stdout)
    # The preflight accepts DeepSeek-V4 checkpoints only (model_type deepseek_v4, as Infera's
    # examples/deepseek_v4/README.md requires); the fixture must say so too.
    assert config.get("model_type") == "deepseek_v4", (
        f"the rehearsal model {model}/config.json says model_type {config.get('model_type')!r}: "
        "tests/rehearsal/fixtures/make_model.py must write deepseek_v4")
    return model


def test_a_ready_node_passes_and_check_mode_says_the_same(clean_node, model_path):
    for mode in ((), ("--check",)):
        rc, out = preflight(*mode)
        assert rc == 0, out[-3000:]
        assert "preflight: 1/1 nodes ready for deploy" in flat(out), out[-3000:]
        assert f"{NODE}: preflight " not in out


def test_a_busy_gpu_is_named_with_its_use(clean_node, model_path):
    clean_node.sh(f"echo '3 85' > {BUSY_FILE}")
    try:
        rc, out = preflight()
    finally:
        clean_node.sh(f"rm -f {BUSY_FILE}")
    assert rc != 0
    text = flat(out)
    assert (f"{NODE}: preflight gpus: GPU 3 (85.0%, 250661 of 294896 MiB) has more than 10% of its VRAM in use "
            "(`amd-smi metric --mem-usage --json`)") in text, out[-3000:]
    assert "preflight: 0/1 nodes ready for deploy" in text
    assert "more than preflight_max_fail_percentage 0% allows" in text


def test_a_foreign_holder_of_port_8000_is_named_with_its_pid(clean_node, model_path):
    clean_node.sh("cd /tmp && setsid python3 -m http.server 8000 >/dev/null 2>&1 < /dev/null &")
    try:
        pid = ""
        for _attempt in range(50):
            pid = clean_node.sh("pgrep -f '^python3 -m http.server 8000$' || true").stdout.strip()
            if pid and clean_node.sh("ss -ltn 'sport = :8000' | grep -q LISTEN", check=False).returncode == 0:
                break
            time.sleep(0.1)
        assert pid, "the stand-in server did not start"
        rc, out = preflight()
    finally:
        clean_node.sh("pkill -f '^python3 -m http.server 8000$' || true")
    assert rc != 0
    assert (f"{NODE}: preflight ports: port 8000 is held by pid {pid} (python3 -m http.server 8000) outside the "
            f"container sgl_mix; next step: stop it (kill {pid})") in flat(out), out[-3000:]
    assert f"{NODE}: preflight ports: port 30000" not in out


def test_a_dangling_tokenizer_is_named(clean_node, model_path):
    clean_node.sh(f"mv {model_path}/tokenizer.json /root/tokenizer.json.preflight-test && "
                  f"ln -s ../blobs/missing-tokenizer-blob {model_path}/tokenizer.json")
    try:
        rc, out = preflight()
    finally:
        clean_node.sh(f"rm -f {model_path}/tokenizer.json && mv /root/tokenizer.json.preflight-test "
                      f"{model_path}/tokenizer.json")
    assert rc != 0
    assert (f"{NODE}: preflight model: tokenizer.json in {model_path} is a dangling symlink to "
            "../blobs/missing-tokenizer-blob (its target is missing") in flat(out), out[-3000:]
    assert "preflight: 0/1 nodes ready for deploy" in flat(out)


def test_a_node_without_amd_smi_is_checked_with_the_engine_image_s(clean_node, model_path):
    """A host with only the amdgpu driver has no amd-smi; the image the worker runs has one (/opt/rocm/bin/amd-smi,
    here the simulated one). The preflight runs it in a one-shot container with the GPU devices, in check mode too,
    and leaves no container; without the image on the node it names both remedies."""
    image = platform_up(1)["IMG"]
    clean_node.sh(f"docker pull -q {image}")
    clean_node.sh("mv /usr/local/bin/amd-smi /root/amd-smi.preflight-test")
    try:
        for mode in ((), ("--check",)):
            rc, out = preflight("-v", *mode)
            text = flat(out)
            assert rc == 0, out[-3000:]
            assert "preflight: 1/1 nodes ready for deploy" in text, out[-3000:]
            assert f"amd-smi metric --mem-usage --json (in {image})" in text, out[-3000:]
            assert not clean_node.sh("docker ps -aq --filter name=infera-preflight-amd-smi").stdout.strip()
        clean_node.sh(f"docker rmi {image}")
        rc, out = preflight()
        text = flat(out)
        assert rc != 0
        assert f"{NODE}: preflight gpus: " in text and "is not on the node yet" in text, out[-3000:]
        assert f"docker pull {image}" in text, out[-3000:]
    finally:
        clean_node.sh("mv /root/amd-smi.preflight-test /usr/local/bin/amd-smi")
        clean_node.sh(f"docker pull -q {image}", check=False)
