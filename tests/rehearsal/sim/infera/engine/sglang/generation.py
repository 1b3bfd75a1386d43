"""Token generation with modelled timing.

Every request in the engine counts towards the concurrency the throughput model is
evaluated at. The engine's total output rate (per-GPU rate x tp) is shared by the
requests that hold a running slot (at most --max-running-requests; the rest queue).
Prefill is one FIFO resource: a request's first token comes after the prompts ahead of
it and its own have been prefilled at PREFILL_TOKENS_PER_GPU x tp tokens/s. Tokens are
released on a TICK so that Python keeps up; the rates hold in wall-clock time.
"""

import contextlib
import threading
import time

from infera._sim.throughput import rate_per_gpu

PREFILL_TOKENS_PER_GPU = 20_000
TICK_SECONDS = 0.05
FILLER_TOKEN = " simulated"


def count_prompt_tokens(text):
    """About one token per 4 characters of each whitespace-separated word."""
    return sum((len(word) + 3) // 4 for word in text.split())


def answer_tokens(prompt):
    """The deterministic answer to a prompt, as tokens (the same at any temperature)."""
    if "1+1" in "".join(prompt.split()):
        return ["1", " +", " 1", " =", " 2", "."]
    return [" This", " is", " a", " simulated", " answer", " from", " the", " Infera",
            " SGLang", " simulator", "."]


def plan_completion(prompt, max_tokens, ignore_eos):
    """The tokens to emit and the finish reason, as SGLang would end the request."""
    answer = answer_tokens(prompt)
    if ignore_eos:
        tokens = (answer + [FILLER_TOKEN] * max_tokens)[:max_tokens]
        return tokens, "length"
    if len(answer) > max_tokens:
        return answer[:max_tokens], "length"
    return answer, "stop"


class Engine:
    def __init__(self, tp_size, levers, max_running_requests):
        self.tp_size = tp_size
        self.levers = levers
        self.max_running = max_running_requests
        self._state = threading.Condition()
        self.in_flight = 0
        self.running = 0
        self._prefill_free_at = 0.0

    def total_rate(self):
        """Output tokens/s of the whole engine at the current concurrency."""
        per_gpu = rate_per_gpu(max(self.in_flight, 1), self.levers["variant"],
                               self.levers["attention_ok"], self.levers["fused_compress_ok"],
                               self.levers["gatherv_ok"])
        return per_gpu * self.tp_size

    @contextlib.contextmanager
    def admitted(self):
        """Hold a running slot for the life of one request."""
        with self._state:
            self.in_flight += 1
            while self.max_running and self.running >= self.max_running:
                self._state.wait()
            self.running += 1
        try:
            yield
        finally:
            with self._state:
                self.running -= 1
                self.in_flight -= 1
                self._state.notify()

    def queued(self):
        return self.in_flight - self.running

    def prefill(self, prompt_tokens):
        """Wait until this request's prompt is prefilled (behind those queued before it)."""
        rate = PREFILL_TOKENS_PER_GPU * self.tp_size
        with self._state:
            start = max(time.monotonic(), self._prefill_free_at)
            self._prefill_free_at = start + prompt_tokens / rate
            done_at = self._prefill_free_at
        time.sleep(max(0.0, done_at - time.monotonic()))

    def decode(self, count):
        """Yield how many of ``count`` tokens are ready at each tick; the first at once."""
        if count <= 0:
            return
        yield 1
        emitted, owed, last = 1, 0.0, time.monotonic()
        while emitted < count:
            time.sleep(TICK_SECONDS)
            now = time.monotonic()
            owed += self.total_rate() / max(self.running, 1) * (now - last)
            last = now
            ready = min(int(owed), count - emitted)
            if ready:
                owed -= ready
                emitted += ready
                yield ready
