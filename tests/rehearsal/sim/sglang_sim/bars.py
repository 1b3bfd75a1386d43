"""tqdm's progress bars as SGLang's cold start writes them (tqdm/std.py format_meter).

Two formats: tqdm's default ``{l_bar}{bar}{r_bar}`` (the graph-capture bar,
sglang/srt/model_executor/runner/decode_cuda_graph_runner.py) and SGLang's ``BAR_FORMAT``
``{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]``
(sglang/srt/utils/common.py, the safetensors shard bar in sglang/srt/model_loader/weight_utils.py).
Not a terminal, so the bar is 10 characters wide and tqdm writes ``\\r`` before each refresh.
"""

BLOCKS = " ▏▎▍▌▋▊▉█"
WIDTH = 10


def interval(seconds):
    """tqdm's format_interval: ``MM:SS`` or ``H:MM:SS``."""
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes:02d}:{seconds:02d}"


def _times(n, total, elapsed):
    rate = n / elapsed if n and elapsed > 0 else None
    if rate is None:
        return interval(elapsed), "?", "?it/s"
    remaining = interval((total - n) / rate)
    rate_fmt = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
    return interval(elapsed), remaining, rate_fmt


def default_bar(desc, n, total, elapsed):
    fraction = n / total if total else 0.0
    filled, partial = divmod(int(fraction * WIDTH * 8), 8)
    blocks = BLOCKS[-1] * filled
    if filled < WIDTH:
        blocks = (blocks + BLOCKS[partial]).ljust(WIDTH)
    spent, remaining, rate = _times(n, total, elapsed)
    # Without a description tqdm's l_bar is the percentage alone.
    return (f"{desc + ': ' if desc else ''}{100 * fraction:3.0f}%|{blocks}| {n}/{total} "
            f"[{spent}<{remaining}, {rate}]")


def completed_bar(desc, n, total, elapsed):
    spent, remaining, rate = _times(n, total, elapsed)
    return (f"{desc}: {100 * n / total:3.0f}% Completed | {n}/{total} "
            f"[{spent}<{remaining}, {rate}]")
