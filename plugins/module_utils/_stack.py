# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.
"""What the image runs: Infera's and SGLang's versions, and the behaviour that differs between them, decided here.

``PROBE`` runs in the worker container with its own python3 (one ``docker exec``): it imports nothing of Infera or
SGLang (the package's folder is found with importlib.util.find_spec, which runs only ``infera/__init__.py``, empty in
every release) and prints JSON facts. ``describe(facts, deadline)`` turns them into the stack the collection adapts to.
What differs, read in Infera's code (the vendored v0.1.1, v0.2.10 and main branch, the rehearsal's stack infera-main):

- The wrapper's wait for the engine: v0.1.1 ``infera/engine/sglang/worker.py`` ``_wait_ready(self, timeout: float =
  1800)`` gives up after a fixed 1,800 s (``TimeoutError: SGLang not ready after 1800s``); from v0.2.0 the limit is
  ``INFERA_ENGINE_READY_TIMEOUT``, which the collection sets to its own deadline.
- The drain on SIGTERM: ``infera/engine/drain.py`` (from v0.2.10) polls the engine's /metrics until no request is in
  flight before it stops the engine; v0.1.1 has none and SIGTERMs the engine's process group at once, cutting the
  requests in flight. Versions with the drain also append ``--enable-metrics`` to the engine's argv; v0.1.1 does not,
  so where the collection drains it appends the flag itself (``engine_flags``) to read the engine's load.

The installed version is read from the distribution's metadata (``amd-infera``, ``sglang``); a release built without
its git history says 0.0.0, so the behaviour is read from the code itself, never from the number.
"""

from __future__ import annotations

import json
import re

from ansible_collections.infera.serving.plugins.module_utils._errors import WaitError

PROBE = r'''
import importlib.metadata as metadata, importlib.util, json, os
facts = {}
for dist in ("amd-infera", "sglang"):
    try:
        facts[dist] = metadata.version(dist)
    except Exception:
        facts[dist] = None
spec = importlib.util.find_spec("infera")
root = list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None
facts["infera_root"] = root
worker = ""
if root:
    try:
        with open(os.path.join(root, "engine", "sglang", "worker.py")) as handle:
            worker = handle.read()
    except OSError:
        worker = ""
facts["wait_ready"] = [line.strip() for line in worker.splitlines() if "def _wait_ready" in line]
facts["reads_ready_timeout"] = "INFERA_ENGINE_READY_TIMEOUT" in worker
facts["appends_enable_metrics"] = "--enable-metrics" in worker
facts["has_drain"] = bool(root) and os.path.isfile(os.path.join(root, "engine", "drain.py"))
# The rehearsal's image: the GPU engine is simulated and stands in for this SGLang release.
facts["simulated_sglang"] = os.environ.get("INFERA_SIM_SGLANG_VERSION") or None
print(json.dumps(facts))
'''

_FIXED_LIMIT = re.compile(r'def _wait_ready\(self, timeout: float = (\d+(?:\.\d+)?)\)')


class StackError(WaitError):
    """The probe's output is not what PROBE prints, or the image has no Infera."""


def parse(stdout):
    """The facts PROBE printed (its last line)."""
    lines = [line for line in (stdout or '').splitlines() if line.strip()]
    try:
        facts = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise StackError('the stack probe printed no JSON: %r' % (stdout or '')[-300:])
    if not isinstance(facts, dict) or 'amd-infera' not in facts:
        raise StackError('the stack probe printed something else than its facts: %r' % lines[-1][-300:])
    return facts


def ready_limit(facts):
    """Seconds after which the image's wrapper gives up on an engine that is not ready, when it is fixed; None when
    the wrapper reads INFERA_ENGINE_READY_TIMEOUT (the collection sets it) or its code says nothing we know."""
    if facts.get('reads_ready_timeout'):
        return None
    for line in facts.get('wait_ready') or []:
        found = _FIXED_LIMIT.search(line)
        if found:
            return int(float(found.group(1)))
    return None


def describe(facts, deadline=None):
    """The stack as the collection adapts to it: versions, the wrapper's ready limit, who drains, and the warning to
    print before a launch whose deadline the wrapper would cut short."""
    if not facts.get('infera_root'):
        raise StackError('Infera is not installed in the image (python3 cannot find the infera package): the worker '
                         'runs `python -m infera.engine.sglang`; use an Infera image such as rocm/infera:sglang-v0.1.1')
    limit = ready_limit(facts)
    simulated = facts.get('simulated_sglang')
    stack = {
        'infera': facts.get('amd-infera') or 'unknown',
        'sglang': ('%s (simulated engine)' % simulated) if simulated else (facts.get('sglang') or 'unknown'),
        'ready_limit': limit,
        'drain': 'infera' if facts.get('has_drain') else 'none',
        'engine_metrics': bool(facts.get('appends_enable_metrics')),
        'warning': None,
    }
    # Where the collection drains (the image's Infera has none), it reads the engine's /metrics, which SGLang serves
    # only with --enable-metrics: the flag Infera itself appends from v0.2.10 on. The launch script adds it then.
    stack['engine_flags'] = ['--enable-metrics'] if stack['drain'] == 'none' and not stack['engine_metrics'] else []
    stack['summary'] = summary(stack)
    if limit is not None and deadline is not None and float(deadline) > limit:
        stack['warning'] = (
            "this image's Infera wrapper (amd-infera %s) gives up on the engine after a fixed %d s "
            "(infera/engine/sglang/worker.py _wait_ready; INFERA_ENGINE_READY_TIMEOUT is read only from Infera v0.2.0 "
            "on), less than sglang_worker_ready_deadline %d s: a cold start longer than %d s fails as the wrapper's "
            "limit. Remedies: an image with a newer Infera, a smaller --cuda-graph-max-bs (fewer graphs to capture), "
            "or a warm JIT cache (start the same recipe on this node once before)."
            % (stack['infera'], limit, float(deadline), limit))
    return stack


def summary(stack):
    """One line for a deploy summary or a manifest: ``Infera <v> on SGLang <v>`` and what the wrapper does."""
    limit = ('a fixed %d s ready limit' % stack['ready_limit']) if stack['ready_limit'] else \
        'ready limit INFERA_ENGINE_READY_TIMEOUT'
    drain = 'drains on SIGTERM' if stack['drain'] == 'infera' else 'no drain on SIGTERM'
    return 'Infera %s on SGLang %s (%s, %s)' % (stack['infera'], stack['sglang'], limit, drain)


ARGUMENT_SPEC = dict(
    container=dict(type='str'),
    deadline=dict(type='float'),
    node=dict(type='str', default='this node'),
)


def run_probe_here(run_command, python='python3'):
    """The facts of the Python this runs beside (the module, run where the image's python3 is)."""
    rc, out, err = run_command([python, '-c', PROBE])
    if rc != 0:
        raise StackError('the stack probe failed (exit %d): %s' % (rc, (err or out or '').strip()[-300:]))
    return parse(out)
