# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""The requests an SGLang engine has in flight, read from its Prometheus /metrics text (``--enable-metrics``).

The gauges are SGLang's own (sglang/srt/observability/metrics_collector.py in 0.5.15.post1 and 0.5.17:
``sglang:num_running_reqs`` and ``sglang:num_queue_reqs``), one series per rank (tp_rank, dp_rank, ...). Their sum over
every series is zero exactly when every rank is idle, which is what Infera's own drain reads from v0.2.10 on
(infera/common/engine_metrics.py inflight_from_metrics). The collection reads it where the image's Infera has no drain.
"""

from __future__ import annotations

import re

INFLIGHT_GAUGES = ('sglang:num_running_reqs', 'sglang:num_queue_reqs')

# One sample line of the text exposition format: name, optional {labels}, value, optional timestamp.
_SAMPLE = re.compile(r'^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)(?:\s+-?\d+)?\s*$')


def inflight(text):
    """Requests running plus queued over every series of the engine's /metrics text, or None when neither gauge is
    there (an engine without --enable-metrics, or a page that is not SGLang's): unknown is not idle."""
    total, seen = 0.0, False
    for line in (text or '').splitlines():
        if not line or line.startswith('#'):
            continue
        found = _SAMPLE.match(line)
        if not found or found.group('name') not in INFLIGHT_GAUGES:
            continue
        try:
            total += float(found.group('value'))
        except ValueError:
            continue
        seen = True
    return total if seen else None
