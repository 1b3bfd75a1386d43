"""Generated text made of the model's own tokens, so that counting agrees with re-encoding.

sglang.bench_serving reports "retokenized" output tokens: it re-encodes the text it
received with the model's tokenizer. The engine therefore generates token ids of the
model's tokenizer.json and streams their decoded text; the ids are the encoding of the
answer followed by a filler sentence repeated. Every piece starts a new pre-token (the
answer ends with a full stop, each filler sentence starts with a space), so re-encoding
the concatenated text gives back the same ids, up to the last word when ``max_tokens``
cuts one.
"""

import ast
import operator
import os
import re
from typing import List, NamedTuple

from tokenizers import Tokenizer

from .checks import StartupError

ARITHMETIC_ANSWER = "1 + 1 = 2."
DEFAULT_ANSWER = "This is a simulated answer from the Infera SGLang simulator."
# Words the rehearsal's stand-in tokenizer (tests/rehearsal/fixtures/make_model.py) knows
# whole, so the filler reads as words there; any tokenizer encodes it.
FILLER = " the model serves tokens while the router balances requests across workers."
EOS_TOKENS = ("<|end_of_sentence|>", "<｜end▁of▁sentence｜>", "</s>", "<|endoftext|>")


# A question that spells out its arithmetic ("... Work it out as 7 * 8 - 10. ..."), as the
# collection's accuracy smoke asks: the simulated model does the arithmetic and ends with
# "The answer is N." (under INFERA_SIM_FAULT=wrong_answers, a wrong N, as fast as ever).
WORK_IT_OUT = re.compile(r"Work it out as ([0-9+*() -]+?)\.(?:\s|$)")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def evaluate(expression):
    """The value of an arithmetic expression of integers, + - * and parentheses, or None."""
    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(ast.dump(node))
    try:
        return value(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, ValueError):
        return None


class Plan(NamedTuple):
    ids: List[int]
    finish_reason: str  # "stop" | "length", as OpenAI and SGLang name them


def load_tokenizer(tokenizer_path):
    """The tokenizer.json under --tokenizer-path, or the error transformers raises."""
    path = os.path.join(tokenizer_path, "tokenizer.json")
    try:
        return Tokenizer.from_file(path)
    except Exception as error:  # tokenizers raises a bare Exception on any bad file
        raise StartupError(
            "OSError",
            f"Can't load tokenizer for '{tokenizer_path}'. Make sure '{tokenizer_path}' is "
            f"the correct path to a directory containing a tokenizer.json file ({error})",
        ) from None


class TokenPlanner:
    def __init__(self, tokenizer, wrong_answers=False):
        self.tokenizer = tokenizer
        self.wrong_answers = wrong_answers
        self.filler = self.encode(FILLER)
        self.answers = {text: self.encode(text) for text in (ARITHMETIC_ANSWER, DEFAULT_ANSWER)}
        self.eos_id = next((tokenizer.token_to_id(token) for token in EOS_TOKENS
                            if tokenizer.token_to_id(token) is not None), None)
        self._pieces = {}

    def encode(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def count(self, text):
        return len(self.encode(text))

    def decode(self, ids):
        return self.tokenizer.decode(ids)

    def text(self, ids):
        """The text of consecutive generated ids, token by token (cached: it is hot)."""
        return "".join(self._piece(token) for token in ids)

    def _piece(self, token):
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.tokenizer.decode([token])
        return piece

    def answer(self, prompt):
        """The deterministic answer to a prompt, at any temperature."""
        if "1+1" in "".join(prompt.split()):
            return self.answers[ARITHMETIC_ANSWER]
        worked = WORK_IT_OUT.search(prompt)
        result = evaluate(worked.group(1)) if worked else None
        if result is not None:
            # Off by a few, the way a broken kernel is: fast, fluent and wrong.
            return self.encode("The answer is %d." % (result + 7 if self.wrong_answers else result))
        return self.answers[DEFAULT_ANSWER]

    def plan(self, prompt, max_tokens, ignore_eos):
        """The ids to emit and the finish reason, as SGLang would end the request."""
        answer = self.answer(prompt)
        if ignore_eos:
            repeats = max_tokens // len(self.filler) + 1
            return Plan((answer + self.filler * repeats)[:max_tokens], "length")
        if len(answer) > max_tokens:
            return Plan(answer[:max_tokens], "length")
        return Plan(answer, "stop")
