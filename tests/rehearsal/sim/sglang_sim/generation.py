"""Request admission and token timing, with the load SGLang reports on /metrics.

Every request in the engine counts towards the concurrency the throughput model is
evaluated at. The engine's total output rate (per-GPU rate x GPUs) is shared by the
requests that hold a running slot (at most --max-running-requests; the rest queue).
Prefill is one FIFO resource: a request's first token comes after the prompts ahead of
it and its own have been prefilled at PREFILL_TOKENS_PER_GPU x GPUs tokens/s. Tokens are
released on a TICK so that Python keeps up; the rates hold in wall-clock time.

With DP-attention each DP rank has its own scheduler, queue and KV pool; a request goes
to the rank Infera's router names in ``X-Data-Parallel-Rank``, else round-robin.
"""

import contextlib
import itertools
import threading
import time
from dataclasses import dataclass

from .throughput import rate_per_gpu

PREFILL_TOKENS_PER_GPU = 20_000
TICK_SECONDS = 0.05


@dataclass
class RankLoad:
    running: int = 0
    queued: int = 0
    used_tokens: int = 0


@dataclass
class Totals:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0


class Engine:
    def __init__(self, gpus, levers, max_running_requests, dp_ranks):
        self.gpus = gpus
        self.levers = levers
        self.max_running = max_running_requests
        self.ranks = [RankLoad() for _rank in range(dp_ranks)]
        self.totals = Totals()
        self._state = threading.Condition()
        self._next_rank = itertools.cycle(range(dp_ranks))
        self._prefill_free_at = 0.0

    @property
    def running(self):
        return sum(rank.running for rank in self.ranks)

    @property
    def queued(self):
        return sum(rank.queued for rank in self.ranks)

    @property
    def in_flight(self):
        return self.running + self.queued

    def total_rate(self):
        """Output tokens/s of the whole engine at the current concurrency."""
        per_gpu = rate_per_gpu(max(self.in_flight, 1), self.levers["variant"],
                               self.levers["attention_ok"], self.levers["fused_compress_ok"],
                               self.levers["gatherv_ok"])
        return per_gpu * self.gpus

    def pick_rank(self, requested):
        """The DP rank a request runs on: the router's choice when it is a valid one."""
        with self._state:
            if isinstance(requested, int) and 0 <= requested < len(self.ranks):
                return requested
            return next(self._next_rank)

    def snapshot(self):
        """(per-rank load, totals), consistent with each other, for /metrics."""
        with self._state:
            return ([RankLoad(r.running, r.queued, r.used_tokens) for r in self.ranks],
                    Totals(**vars(self.totals)))

    @contextlib.contextmanager
    def admitted(self, rank, prompt_tokens, kv_tokens):
        """Hold a running slot and ``kv_tokens`` of the rank's KV pool for one request."""
        load = self.ranks[rank]
        with self._state:
            load.queued += 1
            self.totals.prompt_tokens += prompt_tokens
            while self.max_running and self.running >= self.max_running:
                self._state.wait()
            load.queued -= 1
            load.running += 1
            load.used_tokens += kv_tokens
        try:
            yield
        finally:
            with self._state:
                load.running -= 1
                load.used_tokens -= kv_tokens
                self.totals.requests += 1
                self._state.notify()

    @contextlib.contextmanager
    def pending(self, rank):
        """A PD request waiting for its other leg (bootstrap, KV transfer): queued, no slot."""
        load = self.ranks[rank]
        with self._state:
            load.queued += 1
        try:
            yield
        finally:
            with self._state:
                load.queued -= 1

    def prefill(self, prompt_tokens):
        """Wait until this request's prompt is prefilled (behind those queued before it)."""
        rate = PREFILL_TOKENS_PER_GPU * self.gpus
        with self._state:
            start = max(time.monotonic(), self._prefill_free_at)
            self._prefill_free_at = start + prompt_tokens / rate
            done_at = self._prefill_free_at
        time.sleep(max(0.0, done_at - time.monotonic()))

    def decode(self, count):
        """Yield how many of ``count`` tokens are ready at each tick; the first at once."""
        emitted, owed, last = 0, 1.0, time.monotonic()
        while emitted < count:
            ready = min(int(owed), count - emitted)
            if ready:
                owed -= ready
                emitted += ready
                self.count_generated(ready)
                yield ready
            if emitted < count:
                time.sleep(TICK_SECONDS)
                now = time.monotonic()
                owed += self.total_rate() / max(self.running, 1) * (now - last)
                last = now

    def count_generated(self, tokens):
        with self._state:
            self.totals.generation_tokens += tokens
