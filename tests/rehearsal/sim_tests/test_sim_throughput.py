"""The throughput model: its shape (unit tests) and its effect on a real stream."""

import threading
import time

import pytest

from sglang_sim.recipe import FUSED_COMPRESS_ENV, capture_batch_sizes, fused_compress_missing
from sglang_sim.throughput import rate_per_gpu, recipe_rate_per_gpu
from sim_harness import READY_LINE, engine_args, free_port, sse_events

LOW = (1, 8, 16, 32, 64, 100, 128)
HIGH = (256, 384, 512, 1024)


@pytest.mark.parametrize("variant", ["nodp", "dp"])
@pytest.mark.parametrize("concurrency", LOW + HIGH)
def test_each_missing_lever_halves_rate(variant, concurrency):
    tuned = rate_per_gpu(concurrency, variant)
    assert rate_per_gpu(concurrency, variant, attention_ok=False) == pytest.approx(tuned / 2)
    assert rate_per_gpu(concurrency, variant, fused_compress_ok=False) == pytest.approx(
        tuned / 2)
    assert rate_per_gpu(concurrency, variant, False, False) == pytest.approx(tuned / 4)


def test_gatherv_matters_only_for_dp():
    assert rate_per_gpu(512, "dp", gatherv_ok=False) == pytest.approx(
        0.8 * rate_per_gpu(512, "dp"))
    assert rate_per_gpu(64, "nodp", gatherv_ok=False) == rate_per_gpu(64, "nodp")


def test_walkthrough_anchor_points():
    assert [recipe_rate_per_gpu(c, "nodp") for c in (32, 64, 128)] == [300, 520, 800]
    assert [recipe_rate_per_gpu(c, "dp") for c in (256, 512, 1024)] == [1400, 2200, 3000]


@pytest.mark.parametrize("concurrency", LOW)
def test_nodp_wins_up_to_128(concurrency):
    ratio = recipe_rate_per_gpu(concurrency, "dp") / recipe_rate_per_gpu(concurrency, "nodp")
    assert 0.75 <= ratio <= 0.85


@pytest.mark.parametrize("concurrency", HIGH)
def test_nodp_falls_off_a_cliff_from_256(concurrency):
    ratio = recipe_rate_per_gpu(concurrency, "nodp") / recipe_rate_per_gpu(concurrency, "dp")
    assert 0.45 <= ratio <= 0.55


def test_rate_grows_smoothly_in_log_concurrency():
    assert recipe_rate_per_gpu(0.5, "nodp") == recipe_rate_per_gpu(1, "nodp")
    assert recipe_rate_per_gpu(4096, "dp") == recipe_rate_per_gpu(1024, "dp")
    middle = recipe_rate_per_gpu(32 * 2 ** 0.5, "nodp")
    assert middle == pytest.approx((300 + 520) / 2)
    rates = [recipe_rate_per_gpu(c, "dp") for c in range(1, 1025)]
    assert rates == sorted(rates)


def test_fused_compress_needs_every_variable_with_its_value():
    assert fused_compress_missing(FUSED_COMPRESS_ENV) == []
    environ = {**FUSED_COMPRESS_ENV, "SGLANG_OPT_USE_FUSED_COMPRESS": "1"}
    del environ["SGLANG_USE_ROCM700A"]
    assert fused_compress_missing(environ) == ["SGLANG_OPT_USE_FUSED_COMPRESS",
                                               "SGLANG_USE_ROCM700A"]


def test_capture_list_follows_sglang():
    assert capture_batch_sizes(None, 128) == [1, 2, 4, 8] + list(range(16, 129, 8))
    assert capture_batch_sizes(None, 32) == [1, 2, 4, 8, 16, 24, 32]
    assert capture_batch_sizes([8, 1, 8], 128) == [1, 8]


def stream_tokens(url, max_tokens, results):
    _content_type, events, arrivals = sse_events(url + "/v1/completions", {
        "prompt": "measure the rate", "max_tokens": max_tokens, "stream": True,
        "ignore_eos": True, "temperature": 0})
    results.append((events[-2]["usage"]["completion_tokens"], arrivals[0], arrivals[-1]))


def start_engine(launch, env, model_dir):
    port = free_port()
    engine = launch("sglang.launch_server",
                    engine_args("nodp", model_dir, port, ["--disable-cuda-graph"]), env)
    engine.wait_for(READY_LINE)
    return f"http://127.0.0.1:{port}"


def test_measured_stream_rate_follows_model(launch, sim_env, model_dir):
    url = start_engine(launch, sim_env, model_dir)

    # One request alone: 11 tok/s/GPU x 8 GPUs = 88 tok/s.
    single = []
    stream_tokens(url, 120, single)
    tokens, first, last = single[0]
    assert 0.7 * 88 <= (tokens - 1) / (last - first) <= 1.3 * 88

    # Eight at once share 85 tok/s/GPU x 8 = 680 tok/s.
    results = []
    started = time.monotonic()
    threads = [threading.Thread(target=stream_tokens, args=(url, 120, results))
               for _request in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8
    aggregate = sum(tokens for tokens, _first, _last in results) / (time.monotonic() - started)
    assert 0.6 * 680 <= aggregate <= 1.2 * 680


def test_missing_lever_halves_a_measured_stream(launch, sim_env, model_dir):
    """The lever comes from the real variable: one fused-compress value wrong -> ~0.5x."""
    url = start_engine(launch, {**sim_env, "SGLANG_OPT_USE_FUSED_COMPRESS": "false"},
                       model_dir)
    single = []
    stream_tokens(url, 60, single)
    tokens, first, last = single[0]
    assert 0.7 * 44 <= (tokens - 1) / (last - first) <= 1.3 * 44
