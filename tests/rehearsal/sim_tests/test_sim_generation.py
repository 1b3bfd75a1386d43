"""Generation without a process: the text plan (and its retokenization), request
parsing, admission, timing and the /metrics text."""

import threading
import time

import pytest

from sglang_sim.generation import Engine
from sglang_sim.metrics import MetricsLayout, render
from sglang_sim.native_format import parse_generate
from sglang_sim.openai_format import parse_request
from sglang_sim.request import InvalidRequest
from sglang_sim.server_args import prepare_server_args
from sglang_sim.tokens import TokenPlanner
from sim_harness import inflight

TUNED = {"variant": "nodp", "attention_ok": True, "fused_compress_ok": True,
         "gatherv_ok": True}


@pytest.fixture(scope="module")
def planner(tokenizer):
    return TokenPlanner(tokenizer)


def retokenized(tokenizer, text):
    """What sglang.bench_serving counts: the text re-encoded with the model's tokenizer."""
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("max_tokens", [1, 7, 64, 333, 1024, 4096])
def test_generated_text_retokenizes_to_the_reported_count(planner, tokenizer, max_tokens):
    plan = planner.plan("a random benchmark prompt", max_tokens, ignore_eos=True)
    assert len(plan.ids) == max_tokens and plan.finish_reason == "length"
    assert abs(retokenized(tokenizer, planner.text(plan.ids)) - max_tokens) <= 0.1 * max_tokens


def test_streamed_pieces_join_to_the_decoded_text(planner, tokenizer):
    plan = planner.plan("anything", 200, ignore_eos=True)
    pieces = [planner.text(plan.ids[start:start + 7]) for start in range(0, 200, 7)]
    assert "".join(pieces) == tokenizer.decode(plan.ids)


def test_answers_are_deterministic_and_honour_limits(planner):
    plan = planner.plan("1+1=?", 32, ignore_eos=False)
    assert planner.text(plan.ids) == "1 + 1 = 2." and plan.finish_reason == "stop"
    assert planner.plan("1 + 1 = ?", 32, False) == plan
    plan = planner.plan("anything", 3, ignore_eos=False)
    assert (len(plan.ids), plan.finish_reason) == (3, "length")


@pytest.mark.parametrize("prompt, answer", [
    ("Question: A rack holds 7 nodes of 8 GPUs. Work it out as 7 * 8 - 10. End with the answer.", "The answer is 46."),
    ("Work it out as 10 + (10 + 7) + 4.", "The answer is 31."),
])
def test_arithmetic_questions_are_answered_right_and_wrong_under_the_fault(planner, tokenizer, prompt, answer):
    plan = planner.plan(prompt, 64, ignore_eos=False)
    assert (planner.text(plan.ids), plan.finish_reason) == (answer, "stop")
    wrong = TokenPlanner(tokenizer, wrong_answers=True).plan(prompt, 64, ignore_eos=False)
    number = int(answer.split()[-1].rstrip("."))
    assert planner.text(wrong.ids) == "The answer is %d." % (number + 7)


@pytest.mark.parametrize("expression", ["7 / 2", "__import__('os')", "2 ** 99", "1 +", ""])
def test_only_integer_arithmetic_is_worked_out(planner, expression):
    plan = planner.plan("Work it out as %s." % expression, 64, ignore_eos=False)
    assert "The answer is" not in planner.text(plan.ids)


def test_prompt_tokens_are_the_tokenizers(planner, tokenizer):
    prompt = "the model serves tokens while the router balances requests"
    request = parse_request({"prompt": prompt, "max_tokens": 5, "stream": True,
                             "ignore_eos": True}, "completion", planner)
    assert request.prompt_tokens == retokenized(tokenizer, prompt)
    assert (request.max_tokens, request.stream, request.ignore_eos) == (5, True, True)
    by_ids = parse_request({"prompt": [5, 6, 7]}, "completion", planner)
    assert (by_ids.prompt_tokens, by_ids.max_tokens) == (3, 16)


def test_chat_request_counts_every_message(planner, tokenizer):
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "1+1=?"}]
    request = parse_request({"messages": messages}, "chat", planner)
    assert request.prompt == "1+1=?" and request.max_tokens == 128
    assert request.prompt_tokens == (retokenized(tokenizer, "be brief")
                                     + retokenized(tokenizer, "1+1=?") + 2 * 4)


def test_native_request(planner):
    request = parse_generate({"input_ids": [1, 2], "stream": True,
                              "sampling_params": {"max_new_tokens": 9, "ignore_eos": True}},
                             planner)
    assert (request.prompt_tokens, request.max_tokens, request.stream) == (2, 9, True)
    assert parse_generate({"text": "hi"}, planner).max_tokens == 128


@pytest.mark.parametrize("kind, body", [
    ("completion", {}), ("completion", {"prompt": 5}),
    ("completion", {"prompt": "x", "max_tokens": -1}), ("chat", {"messages": []}),
    ("native", {"sampling_params": {}}), ("native", {"text": "x", "sampling_params": 3}),
])
def test_bad_requests(planner, kind, body):
    with pytest.raises(InvalidRequest):
        if kind == "native":
            parse_generate(body, planner)
        else:
            parse_request(body, kind, planner)


def test_requests_beyond_max_running_queue():
    engine = Engine(8, TUNED, max_running_requests=1, dp_ranks=1)
    first_admitted, release_first = threading.Event(), threading.Event()
    second_admitted, release_second = threading.Event(), threading.Event()

    def hold(admitted, release):
        with engine.admitted(0, 10, 20):
            admitted.set()
            release.wait(5)

    threading.Thread(target=hold, args=(first_admitted, release_first)).start()
    first_admitted.wait(5)
    threading.Thread(target=hold, args=(second_admitted, release_second)).start()
    # Wait for the second request to reach the queue (polled: a fixed sleep loses on a loaded machine).
    deadline = time.monotonic() + 10
    while engine.queued < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (engine.in_flight, engine.running, engine.queued) == (2, 1, 1)
    assert engine.snapshot()[0][0].used_tokens == 20
    assert not second_admitted.is_set()
    release_first.set()
    assert second_admitted.wait(5)
    release_second.set()


def test_decode_releases_every_token_at_the_modelled_rate():
    engine = Engine(8, TUNED, max_running_requests=None, dp_ranks=1)
    started = time.monotonic()
    with engine.admitted(0, 0, 45):
        emitted = list(engine.decode(45))
    elapsed = time.monotonic() - started
    assert emitted[0] == 1 and sum(emitted) == 45
    # 11 tok/s/GPU x 8 GPUs for one request: 44 tokens after the first take 0.5 s. Never faster than the
    # model; the upper bound leaves room for sleeps that overshoot on a loaded machine.
    assert 0.4 <= elapsed <= 5
    assert engine.snapshot()[1].generation_tokens == 45


def test_router_named_rank_is_used_else_round_robin():
    engine = Engine(8, TUNED, max_running_requests=None, dp_ranks=8)
    assert engine.pick_rank(5) == 5
    assert [engine.pick_rank(None) for _request in range(3)] == [0, 1, 2]
    assert engine.pick_rank(8) == 3


def test_metrics_text_has_sglang_series_per_rank():
    from prometheus_client.parser import text_string_to_metric_families

    def parse_metric(text, name):  # the sum over every rank's series, as Infera v0.2.10's parse_metric reads it
        return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                   if sample.name == name)

    args = prepare_server_args(["--model-path", "/m", "--tp", "8", "--dp", "8",
                                "--enable-dp-attention", "--ep", "8"])
    engine = Engine(8, TUNED, max_running_requests=None, dp_ranks=8)
    layout = MetricsLayout.from_args(args, pool_tokens=1000)
    with engine.admitted(6, 50, 250):
        ranks, totals = engine.snapshot()
        text = render(layout, ranks, totals, engine.total_rate())
    assert inflight(text) == 1
    assert parse_metric(text, "sglang:token_usage") == 0.25
    assert ('sglang:num_running_reqs{model_name="/m",engine_type="unified",tp_rank="6",'
            'pp_rank="0",moe_ep_rank="6",dp_rank="6"} 1.0') in text
    assert parse_metric(text, "sglang:prompt_tokens_total") == 50
