"""Command lines both simulated commands refuse, before loading anything."""

import pytest

from sim_harness import router_args, worker_args

ETCD = "127.0.0.1:2379"  # never contacted: every command here is refused first


def run(launch, module, args, env):
    process = launch(module, args, env)
    return process.wait_exit(), process


def test_router_rejects_unknown_flag(launch, sim_env, model_dir):
    status, process = run(launch, "infera.server",
                          router_args(ETCD, 8000, model_dir) + ["--bogus-flag", "1"], sim_env)
    assert status == 2
    assert "error: unrecognized arguments: --bogus-flag 1" in process.stderr


def test_worker_rejects_unknown_flag(launch, sim_env, model_dir):
    status, process = run(launch, "infera.engine.sglang",
                          worker_args(model_dir, ETCD, 30000) + ["--bogus-flag"], sim_env)
    assert status == 2
    assert "error: unrecognized arguments: --bogus-flag" in process.stderr


def test_worker_rejects_abbreviated_flag(launch, sim_env, model_dir):
    args = [arg if arg != "--disable-radix-cache" else "--disable-radix"
            for arg in worker_args(model_dir, ETCD, 30000)]
    status, process = run(launch, "infera.engine.sglang", args, sim_env)
    assert status == 2
    assert "unrecognized arguments: --disable-radix" in process.stderr


def test_worker_accepts_sglang_aliases(launch, sim_env, model_dir):
    """Aliases parse; the refusal comes later, from the dp/tp check."""
    args = worker_args(model_dir, ETCD, 30000) + [
        "--tensor-parallel-size", "8", "--dp-size", "4", "--enable-dp-attention",
        "--expert-parallel-size", "8", "--cuda-graph-bs", "1", "2", "4",
        "--kv-cache-dtype", "fp8_e4m3", "--kv-events", "off", "--watchdog-timeout", "600",
        "--served-model-name", "dsv4", "--log-level", "info", "--random-seed", "1",
        "--context-length", "8192", "--disable-cuda-graph"]
    status, process = run(launch, "infera.engine.sglang", args, sim_env)
    assert status == 1
    assert "needs --dp equal to --tp-size (got --dp 4, --tp-size 8)" in process.stderr


@pytest.mark.parametrize("extra, message", [
    (["--dp", "4", "--enable-dp-attention"], "needs --dp equal to --tp-size"),
    (["--enable-dp-attention"], "--enable-dp-attention needs --dp > 1"),
    (["--dp", "8"], "without --enable-dp-attention"),
    (["--ep-size", "3"], "--ep-size 3 must divide --tp-size 8"),
    (["--mem-fraction-static", "1.2"], "--mem-fraction-static must be between 0 and 1"),
])
def test_worker_refuses_bad_combination(launch, sim_env, model_dir, extra, message):
    status, process = run(launch, "infera.engine.sglang",
                          worker_args(model_dir, ETCD, 30000) + extra, sim_env)
    assert status == 1
    assert message in process.stderr
    assert "Load weight begin" not in process.stdout


def test_worker_names_missing_render_node(launch, sim_env, model_dir, dev_root):
    (dev_root / "dri" / "renderD131").unlink()
    status, process = run(launch, "infera.engine.sglang",
                          worker_args(model_dir, ETCD, 30000), sim_env)
    assert status == 1
    assert f"GPU 3 has no render node {dev_root}/dri/renderD131" in process.stderr


def test_worker_needs_as_many_visible_gpus_as_tp(launch, sim_env, model_dir):
    env = {**sim_env, "HIP_VISIBLE_DEVICES": "0,1,2,3"}
    status, process = run(launch, "infera.engine.sglang",
                          worker_args(model_dir, ETCD, 30000), env)
    assert status == 1
    assert "--tp-size 8 needs 8 GPUs but HIP_VISIBLE_DEVICES lists 4" in process.stderr


def test_worker_needs_kfd(launch, sim_env, model_dir, dev_root):
    (dev_root / "kfd").unlink()
    status, process = run(launch, "infera.engine.sglang",
                          worker_args(model_dir, ETCD, 30000), sim_env)
    assert status == 1
    assert "No HIP GPUs are available" in process.stderr


def test_worker_needs_model_config(launch, sim_env, tmp_path):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    status, process = run(launch, "infera.engine.sglang",
                          worker_args(empty, ETCD, 30000), sim_env)
    assert status == 1
    assert f"OSError: Can't load the configuration of '{empty}'" in process.stderr


def test_worker_needs_trust_remote_code_for_custom_model(launch, sim_env, model_dir):
    args = [arg for arg in worker_args(model_dir, ETCD, 30000) if arg != "--trust-remote-code"]
    status, process = run(launch, "infera.engine.sglang", args, sim_env)
    assert status == 1
    assert "--trust-remote-code" in process.stderr


def without_dev_flags(args):
    """Drop --discovery-backend, --request-transport and --kv-event-transport."""
    dropped = {"--discovery-backend", "--request-transport", "--kv-event-transport"}
    kept = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in dropped:
            skip_value = True
        else:
            kept.append(arg)
    return kept


@pytest.mark.parametrize("module, make_args", [
    ("infera.server", lambda model: router_args(ETCD, 8000, model)),
    ("infera.engine.sglang", lambda model: worker_args(model, ETCD, 30000)),
])
def test_dropping_dev_flags_needs_production_plane(launch, sim_env, model_dir, module,
                                                   make_args):
    status, process = run(launch, module, without_dev_flags(make_args(model_dir)), sim_env)
    assert status == 1
    assert "discovery backend 'kubernetes' needs the production plane" in process.stderr


def test_router_needs_tokenizer(launch, sim_env, tmp_path):
    missing = tmp_path / "no-tokenizer"
    missing.mkdir()
    status, process = run(launch, "infera.server", router_args(ETCD, 8000, missing), sim_env)
    assert status == 1
    assert f"Can't load tokenizer for '{missing}'" in process.stderr


def test_unknown_fault_is_refused(launch, sim_env, model_dir):
    env = {**sim_env, "INFERA_SIM_FAULT": "meteor_strike"}
    status, process = run(launch, "infera.engine.sglang",
                          worker_args(model_dir, ETCD, 30000), env)
    assert status == 1
    assert "INFERA_SIM_FAULT='meteor_strike' is not a known fault" in process.stderr
