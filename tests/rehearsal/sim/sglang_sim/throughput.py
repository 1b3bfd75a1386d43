"""Simulated output throughput of one DeepSeek-V4-Pro mixed worker on 8x MI355X.

Per-GPU output tokens/s by the number of requests in flight in the engine, with the
tuned recipe (both levers present). It follows the walkthrough: pure TP8 ("nodp") wins
up to 128 in flight; from 256 on, DP-attention ("dp") wins and nodp falls off a cliff to
about half of dp.

    in flight |  nodp |   dp
    ----------+-------+------
            1 |    11 |     9
            8 |    85 |    68
           16 |   160 |   130
           32 |   300 |   240
           64 |   520 |   420
          128 |   800 |   650
          256 |   700 |  1400
          512 |  1100 |  2200
         1024 |  1500 |  3000

Between rows the rate is linear in log2(in flight); outside the table it is held at the
nearest row. Multipliers: x0.5 for each missing lever (--attention-backend dsv4; the
full fused-compress env set), x0.8 for the dp variant without SGLANG_DP_USE_GATHERV=1.
"""

import math

_TABLE = {
    "nodp": ((1, 11), (8, 85), (16, 160), (32, 300), (64, 520), (128, 800),
             (256, 700), (512, 1100), (1024, 1500)),
    "dp": ((1, 9), (8, 68), (16, 130), (32, 240), (64, 420), (128, 650),
           (256, 1400), (512, 2200), (1024, 3000)),
}

MISSING_LEVER_FACTOR = 0.5
NO_GATHERV_FACTOR = 0.8


def recipe_rate_per_gpu(in_flight, variant):
    """Per-GPU output tokens/s of the tuned recipe at ``in_flight`` requests."""
    points = _TABLE[variant]
    if in_flight <= points[0][0]:
        return float(points[0][1])
    for (low_conc, low_rate), (high_conc, high_rate) in zip(points, points[1:]):
        if in_flight <= high_conc:
            share = math.log2(in_flight / low_conc) / math.log2(high_conc / low_conc)
            return low_rate + share * (high_rate - low_rate)
    return float(points[-1][1])


def rate_per_gpu(in_flight, variant, attention_ok=True, fused_compress_ok=True,
                 gatherv_ok=True):
    """Per-GPU output tokens/s once the levers the worker was started with are applied."""
    rate = recipe_rate_per_gpu(in_flight, variant)
    if not attention_ok:
        rate *= MISSING_LEVER_FACTOR
    if not fused_compress_ok:
        rate *= MISSING_LEVER_FACTOR
    if variant == "dp" and not gatherv_ok:
        rate *= NO_GATHERV_FACTOR
    return rate
