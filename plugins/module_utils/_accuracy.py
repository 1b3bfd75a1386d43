# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""An accuracy smoke after a deploy: N gsm8k-style questions through the router, each answer's
last number compared with the right one, the share right compared with a threshold.

A worker can answer fast and wrong: in InferenceX's history an expert-parallel config once
scored 0 on gsm8k while its throughput looked fine. Throughput figures of such a worker are
worthless, so the deploy checks a few answers before anyone measures it.

The questions are short arithmetic word problems, made deterministically from their index
(the same N questions every run, so two runs compare), each with its arithmetic spelled out
the way gsm8k's worked answers do. A model that reads the question gets it right; a broken
kernel, a wrong expert routing or a mismatched tokenizer does not.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

_NUMBER = re.compile(r'-?\d[\d,]*(?:\.\d+)?')

# (story with {a} {b} {c}, arithmetic, answer function): all answers are whole numbers.
_TEMPLATES = (
    ('A rack holds {a} nodes and every node has {b} GPUs. {c} of its GPUs are out for repair. '
     'How many GPUs of the rack work?', '{a} * {b} - {c}', lambda a, b, c: a * b - c),
    ('A worker answered {a} requests in the morning and {b} more in the afternoon than in the morning. '
     'In the evening it answered {c}. How many requests did it answer that day?', '{a} + ({a} + {b}) + {c}',
     lambda a, b, c: a + (a + b) + c),
    ('A benchmark sends {a} prompts to each of {b} workers, then {c} more prompts in total to check the router. '
     'How many prompts does it send?', '{a} * {b} + {c}', lambda a, b, c: a * b + c),
    ('A node downloads {a} weight files of {b} GB each and deletes {c} GB of old files. '
     'By how many GB does the used disk grow?', '{a} * {b} - {c}', lambda a, b, c: a * b - c),
)


def question(index):
    """The index-th question: (prompt, right answer as int)."""
    story, arithmetic, solve = _TEMPLATES[index % len(_TEMPLATES)]
    # Small, distinct, deterministic numbers (no randomness: every run asks the same).
    a = 3 + (index * 7) % 17
    b = 2 + (index * 5) % 9
    c = 1 + (index * 3) % 11
    values = dict(a=a, b=b, c=c)
    prompt = ('Question: %s Work it out as %s. End with "The answer is N."'
              % (story.format(**values), arithmetic.format(**values)))
    return prompt, solve(a, b, c)


def last_number(text):
    """The last number in a reply (gsm8k's convention), as an int or float, or None."""
    found = _NUMBER.findall(text or '')
    if not found:
        return None
    value = found[-1].replace(',', '')
    try:
        return int(value)
    except ValueError:
        return float(value)


# The smoke's questions go all at once up to this many: one batch for the engine (20 short answers are far below its
# capture sizes), so the smoke costs about one answer's time, not one per wave.
MAX_PARALLEL = 32


def smoke(ask, count, threshold, parallel=None):
    """Ask `count` questions with ask(prompt) -> (reply text, error text or None), `parallel` at once (default: all of
    them, at most MAX_PARALLEL).

    Returns questions, correct, accuracy (0..1), threshold, passed, errors (how many requests
    failed), wrong (up to 3 examples: question, expected, reply or error), wrong_text (them,
    one per line) and line (the result in words, for summaries and reports).
    """
    items = [question(index) for index in range(count)]
    parallel = min(count, MAX_PARALLEL) if parallel is None else parallel
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, count or 1))) as pool:
        replies = list(pool.map(lambda item: ask(item[0]), items))
    correct, errors, wrong = 0, 0, []
    for (prompt, expected), (reply, error) in zip(items, replies):
        if error is None and last_number(reply) == expected:
            correct += 1
            continue
        errors += error is not None
        if len(wrong) < 3:
            wrong.append({'question': prompt, 'expected': expected,
                          'reply': (reply or '')[:200] if error is None else None, 'error': error})
    accuracy = correct / count if count else 1.0
    result = {'questions': count, 'correct': correct, 'accuracy': round(accuracy, 4), 'threshold': threshold,
              'passed': count == 0 or accuracy >= threshold, 'errors': errors, 'wrong': wrong,
              'wrong_text': wrong_text(wrong)}
    result['line'] = describe(result)
    return result


def describe(result):
    """One line for a summary: '20/20 gsm8k-style answers right (100 %, threshold 80 %)'."""
    return '%d/%d gsm8k-style answers right (%.0f %%, threshold %.0f %%)%s' % (
        result['correct'], result['questions'], 100 * result['accuracy'], 100 * result['threshold'],
        (', %d request(s) failed' % result['errors']) if result['errors'] else '')


def wrong_text(wrong):
    """The wrong answers' examples, one per line, for a failure message."""
    lines = []
    for item in wrong:
        got = json.dumps(item['reply']) if item['error'] is None else 'an error: %s' % item['error']
        lines.append('Q: %s expected %s, got %s' % (item['question'], item['expected'], got))
    return '\n'.join(lines)
