"""The worker's cold start: log lines in SGLang's order, a growing JIT cache, readiness."""

import re

from sim_harness import READY_LINE, free_port, worker_args

CAPTURE_LINE = re.compile(r"Capturing batches \(bs=(\d+) avail_mem=[\d.]+GB\): (\d+)/(\d+)")


def test_cold_start_logs_in_order_and_grows_jit_dir(start_worker, tmp_path):
    worker, _url = start_worker()
    worker.wait_for(READY_LINE)
    log = worker.stdout
    milestones = [
        "[simulated] throughput model: variant=nodp, levers: attention_backend=ok, "
        "fused_compress=ok",
        "Load weight begin. avail mem=",
        "Load weight end. type=DeepseekV4ForCausalLM, dtype=torch.bfloat16, avail mem=",
        "Capture cuda graph begin. This can take up to several minutes. avail mem=",
        "Capture cuda graph end. Time elapsed: ",
        "Registered in etcd",
        READY_LINE,
    ]
    positions = [log.index(milestone) for milestone in milestones]
    assert positions == sorted(positions)
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Load weight end\. .*"
                     r"mem usage=[\d.]+ GB\. elapsed=[\d.]+ s", log)
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] " + re.escape(READY_LINE) + "$",
                     log, re.MULTILINE)

    captures = [tuple(map(int, match)) for match in CAPTURE_LINE.findall(log)]
    sizes = [1, 2, 4, 8] + list(range(16, 129, 8))
    # SGLang captures the largest batch size first; the walkthrough caps it at 128.
    assert [bs for bs, _done, _total in captures] == sorted(sizes, reverse=True)
    assert [(done, total) for _bs, done, total in captures] == [
        (done, len(sizes)) for done in range(1, len(sizes) + 1)]
    capture_span = log[positions[3]:positions[4]]
    assert capture_span.count("Capturing batches") == len(sizes)

    jit_files = list((tmp_path / "jit").iterdir())
    assert len(jit_files) == len(sizes)
    assert sum(path.stat().st_size for path in jit_files) > len(sizes) * 100_000


def test_explicit_capture_list_and_missing_levers(start_worker):
    env = {"SGLANG_OPT_USE_TOPK_V2": None, "SGLANG_USE_AITER": "0"}
    worker, _url = start_worker(env=env, extra=["--attention-backend", "triton",
                                                "--cuda-graph-bs", "4", "1", "2"])
    worker.wait_for(READY_LINE)
    log = worker.stdout
    assert ("levers: attention_backend=MISSING, fused_compress=MISSING "
            "(SGLANG_USE_AITER, SGLANG_OPT_USE_TOPK_V2)") in log
    assert [int(bs) for bs, _done, _total in CAPTURE_LINE.findall(log)] == [4, 2, 1]


def test_disable_cuda_graph_skips_capture(start_worker, tmp_path):
    worker, _url = start_worker(extra=["--disable-cuda-graph"])
    worker.wait_for(READY_LINE)
    assert "Load weight end." in worker.stdout
    assert "Capture cuda graph" not in worker.stdout
    assert not (tmp_path / "jit").exists()


def test_dp_variant_reports_gatherv(start_worker):
    worker, _url = start_worker(variant="dp", env={"SGLANG_DP_USE_GATHERV": "1"},
                                extra=["--cuda-graph-max-bs", "16"])
    worker.wait_for(READY_LINE)
    assert ("variant=dp, levers: attention_backend=ok, fused_compress=ok, dp_gatherv=ok"
            in worker.stdout)
    assert " DP0 TP0] Load weight end." in worker.stdout


def test_unreachable_etcd_fails_registration(launch, sim_env, model_dir):
    etcd_endpoint = f"127.0.0.1:{free_port()}"
    worker = launch("infera.engine.sglang",
                    worker_args(model_dir, etcd_endpoint, free_port())
                    + ["--disable-cuda-graph"], sim_env)
    assert worker.wait_exit() == 1
    assert f"ERROR: cannot register in etcd ({etcd_endpoint})" in worker.stdout
    assert READY_LINE not in worker.stdout
