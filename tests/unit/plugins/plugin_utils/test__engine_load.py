# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""The in-flight count the collection's drain reads from an SGLang engine's /metrics."""

from __future__ import annotations

import pytest

from ansible_collections.infera.serving.plugins.filter.engine import FilterModule
from ansible_collections.infera.serving.plugins.plugin_utils._engine_load import inflight

# SGLang's exposition with --enable-metrics (sglang/srt/observability/metrics_collector.py: one series per rank).
TWO_RANKS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="/m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0"} 2.0
sglang:num_running_reqs{model_name="/m",engine_type="unified",tp_rank="1",pp_rank="0",dp_rank="1"} 0.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="/m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0"} 0.0
sglang:num_queue_reqs{model_name="/m",engine_type="unified",tp_rank="1",pp_rank="0",dp_rank="1"} 3.0
# HELP sglang:num_running_reqs_offline_batch The number of running low-priority offline batch requests.
# TYPE sglang:num_running_reqs_offline_batch gauge
sglang:num_running_reqs_offline_batch{model_name="/m",tp_rank="0"} 7.0
sglang:token_usage{model_name="/m",tp_rank="0"} 0.25
"""


def test_running_and_queued_requests_are_summed_over_every_rank():
    # A busy rank does not hide behind an idle one, and a gauge whose name only starts the same is not counted.
    assert inflight(TWO_RANKS) == 5.0


def test_an_idle_engine_is_zero():
    idle = TWO_RANKS.replace("} 2.0", "} 0.0").replace("} 3.0", "} 0.0")
    assert inflight(idle) == 0.0


@pytest.mark.parametrize("text", ["", "sglang:token_usage 0.5\n", "<html>404: Not Found</html>", None])
def test_a_page_without_the_gauges_is_unknown_not_idle(text):
    assert inflight(text) is None


def test_a_sample_with_a_timestamp_and_no_labels_is_read():
    assert inflight("sglang:num_running_reqs 4 1733400000000\nsglang:num_queue_reqs 1\n") == 5.0


def test_the_filter_is_the_parser():
    assert FilterModule().filters() == {"engine_inflight": inflight}
