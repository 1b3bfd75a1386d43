# SPDX-License-Identifier: Apache-2.0
"""The accuracy smoke's questions, answer parsing and score."""

from __future__ import annotations

import re
import threading

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _accuracy


def solve(prompt):
    """What a model that reads the question answers (the arithmetic it spells out)."""
    expression = re.search(r"Work it out as ([0-9+*() -]+)\.", prompt).group(1)
    return "Let me see. The answer is %d." % eval(expression)  # noqa: S307 (test data: digits and + - * only)


def test_the_questions_are_the_same_every_run_distinct_and_right():
    first = [_accuracy.question(index) for index in range(20)]
    assert first == [_accuracy.question(index) for index in range(20)]
    assert len({prompt for prompt, _answer in first}) == 20
    for prompt, answer in first:
        assert _accuracy.last_number(solve(prompt)) == answer


@pytest.mark.parametrize("text, number", [
    ("The answer is 42.", 42), ("12 apples, then 1,234 more: 1,246", 1246), ("-3", -3), ("about 2.5", 2.5),
    ("no number", None), ("", None), (None, None),
])
def test_the_last_number_of_a_reply_is_its_answer(text, number):
    assert _accuracy.last_number(text) == number


def test_right_answers_pass_and_are_asked_in_parallel():
    lock, active, peak = threading.Lock(), [0], [0]

    def ask(prompt):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        threading.Event().wait(0.02)
        with lock:
            active[0] -= 1
        return solve(prompt), None

    result = _accuracy.smoke(ask, 20, 0.8, parallel=8)
    assert (result["questions"], result["correct"], result["accuracy"], result["passed"]) == (20, 20, 1.0, True)
    assert result["wrong"] == [] and result["errors"] == 0
    assert peak[0] > 1
    assert result["line"] == "20/20 gsm8k-style answers right (100 %, threshold 80 %)"
    assert result["wrong_text"] == ""


def test_by_default_every_question_is_asked_at_once_up_to_the_cap():
    lock, active, peak = threading.Lock(), [0], [0]
    together = [threading.Barrier(20, timeout=5)]

    def ask(prompt):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        if together[0]:
            together[0].wait()  # BrokenBarrierError unless all 20 are in flight together
        else:
            threading.Event().wait(0.3)
        with lock:
            active[0] -= 1
        return solve(prompt), None

    assert _accuracy.smoke(ask, 20, 0.8)["correct"] == 20
    assert peak[0] == 20
    peak[0], together[0] = 0, None
    assert _accuracy.smoke(ask, 40, 0.8)["correct"] == 40
    assert peak[0] == _accuracy.MAX_PARALLEL


def test_fast_wrong_answers_fail_with_examples():
    result = _accuracy.smoke(lambda prompt: ("The answer is 7.", None), 20, 0.8)
    assert result["passed"] is False and result["correct"] < 16
    assert len(result["wrong"]) == 3
    assert result["wrong_text"].count("\n") == 2
    assert result["wrong_text"].startswith("Q: Question: A rack holds 3 nodes") and '"The answer is 7."' in result["wrong_text"]


def test_the_threshold_is_inclusive_and_errors_count_as_wrong():
    answers = iter([None] * 4 + [0] * 16)

    def ask(prompt):
        return (solve(prompt), None) if next(answers) == 0 else (None, "HTTP 503")

    result = _accuracy.smoke(ask, 20, 0.8, parallel=1)
    assert (result["correct"], result["errors"], result["passed"]) == (16, 4, True)
    assert "an error: HTTP 503" in result["wrong_text"]
    assert result["line"] == "16/20 gsm8k-style answers right (80 %, threshold 80 %), 4 request(s) failed"


def test_no_questions_pass():
    assert _accuracy.smoke(lambda prompt: (None, "unused"), 0, 0.8)["passed"] is True
