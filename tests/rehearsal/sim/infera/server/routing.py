"""Choosing a worker for a request's model under --router-policy."""

import itertools
import random
import threading


class NoWorkers(Exception):
    """No worker is registered at all."""


class ModelNotServed(Exception):
    """Workers exist, but none serves the requested model."""


class Router:
    def __init__(self, discovery, policy):
        self.discovery = discovery
        self.policy = policy
        self._lock = threading.Lock()
        self._turns = {}
        self._outstanding = {}

    def pick(self, model):
        workers = self.discovery.workers()
        if not workers:
            raise NoWorkers()
        candidates = sorted((w for w in workers if w["model"] == model), key=lambda w: w["id"])
        if not candidates:
            raise ModelNotServed(model)
        with self._lock:
            if self.policy == "random":
                return random.choice(candidates)
            if self.policy == "kv":
                # Without a KV-event plane to feed it, the KV-aware policy can only
                # balance load: fewest outstanding requests wins.
                return min(candidates, key=lambda w: self._outstanding.get(w["url"], 0))
            turn = self._turns.setdefault(model, itertools.count())
            return candidates[next(turn) % len(candidates)]

    def started(self, worker):
        with self._lock:
            self._outstanding[worker["url"]] = self._outstanding.get(worker["url"], 0) + 1

    def finished(self, worker):
        with self._lock:
            self._outstanding[worker["url"]] -= 1
