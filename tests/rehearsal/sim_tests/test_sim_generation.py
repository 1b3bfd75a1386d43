"""Generation helpers of the simulated worker, without a process."""

import threading
import time

import pytest

from infera.engine.sglang.generation import Engine, count_prompt_tokens, plan_completion
from infera.engine.sglang.openai_format import InvalidRequest, parse_request

TUNED = {"variant": "nodp", "attention_ok": True, "fused_compress_ok": True,
         "gatherv_ok": True}


def test_prompt_tokens_counted_from_text():
    assert count_prompt_tokens("") == 0
    assert count_prompt_tokens("a bb ccccc") == 1 + 1 + 2


def test_answers_are_deterministic_and_honour_limits():
    assert "".join(plan_completion("1+1=?", 32, False)[0]) == "1 + 1 = 2."
    assert plan_completion("1 + 1 = ?", 32, False)[1] == "stop"
    tokens, reason = plan_completion("anything", 100, True)
    assert (len(tokens), reason) == (100, "length")
    tokens, reason = plan_completion("anything", 3, False)
    assert (len(tokens), reason) == (3, "length")


def test_chat_request_counts_every_message():
    request = parse_request({"messages": [{"role": "system", "content": "be brief"},
                                          {"role": "user", "content": "1+1=?"}]},
                            "chat", count_prompt_tokens)
    assert request["prompt"] == "1+1=?"
    assert request["prompt_tokens"] == (1 + 2) + 2 + 2 * 4
    assert request["max_tokens"] == 128 and request["stream"] is False


def test_completion_request_takes_token_ids():
    request = parse_request({"prompt": [1, 2, 3], "max_tokens": 5, "stream": True,
                             "ignore_eos": True}, "completion", count_prompt_tokens)
    assert (request["prompt_tokens"], request["max_tokens"]) == (3, 5)
    assert request["stream"] and request["ignore_eos"]


@pytest.mark.parametrize("body", [{}, {"prompt": 5}, {"prompt": "x", "max_tokens": -1}])
def test_bad_completion_requests(body):
    with pytest.raises(InvalidRequest):
        parse_request(body, "completion", count_prompt_tokens)


def test_requests_beyond_max_running_queue():
    engine = Engine(8, TUNED, max_running_requests=1)
    first_admitted, release_first = threading.Event(), threading.Event()
    second_admitted, release_second = threading.Event(), threading.Event()

    def hold(admitted, release):
        with engine.admitted():
            admitted.set()
            release.wait(5)

    threading.Thread(target=hold, args=(first_admitted, release_first)).start()
    first_admitted.wait(5)
    threading.Thread(target=hold, args=(second_admitted, release_second)).start()
    time.sleep(0.2)
    assert (engine.in_flight, engine.running, engine.queued()) == (2, 1, 1)
    assert not second_admitted.is_set()
    release_first.set()
    assert second_admitted.wait(5)
    release_second.set()


def test_decode_releases_every_token_at_the_modelled_rate():
    engine = Engine(8, TUNED, max_running_requests=None)
    started = time.monotonic()
    with engine.admitted():
        emitted = list(engine.decode(45))
    elapsed = time.monotonic() - started
    assert emitted[0] == 1 and sum(emitted) == 45
    # 11 tok/s/GPU x 8 GPUs for one request: 44 tokens after the first take 0.5 s.
    assert 0.4 <= elapsed <= 0.8
