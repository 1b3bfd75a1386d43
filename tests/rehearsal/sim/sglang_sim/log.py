"""SGLang's log lines on stderr, as the version the simulator stands in for writes them.

SGLang logs through Python's logging to stderr (sglang/srt/utils/common.py configure_logger:
``[%(asctime)s{prefix}] %(message)s``, datefmt ``%Y-%m-%d %H:%M:%S``); the launcher's prefix is
empty, a scheduler's is its ranks, built in sglang/srt/managers/scheduler.py
run_scheduler_process: `` DP<rank>`` with DP-attention, then `` TP<rank>`` when tp_size > 1 and
`` EP<rank>`` when ep_size > 1. The HTTP server is uvicorn, which logs with its own format
(uvicorn/logging.py: ``%(levelprefix)s %(message)s``, the level name and a colon padded to 9
characters) and no date. tqdm's bars are written with ``\\r`` between updates and a newline at the
end. Every line is flushed at once, so a log-watcher following the output (Infera's wrapper lets
the engine inherit its stdout and stderr) sees it as it happens.
"""

import sys
import time


def rank_prefix(dp_attention=False, tp_size=1, ep_size=1, dp_rank=0, dp_size=1):
    """The prefix of the scheduler of DP rank ``dp_rank`` (its attention-TP rank 0)."""
    tp_rank = dp_rank * tp_size // dp_size if dp_attention else 0
    prefix = f" DP{dp_rank}" if dp_attention else ""
    if tp_size > 1:
        prefix += f" TP{tp_rank}"
    if ep_size > 1:
        prefix += f" EP{tp_rank * ep_size // tp_size}"
    return prefix


class Log:
    def __init__(self, dp_attention=False, tp_size=1, ep_size=1, dp_size=1):
        self.rank = rank_prefix(dp_attention, tp_size, ep_size)
        self._ranks = (dp_attention, tp_size, ep_size, max(dp_size, 1))

    def _write(self, prefix, message):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.raw(f"[{stamp}{prefix}] {message}")

    def main(self, message):
        """A line of the launcher process, which has no rank."""
        self._write("", message)

    def scheduler(self, message, dp_rank=0):
        """A line of a scheduler: rank 0's, or that of DP rank ``dp_rank`` with DP-attention."""
        dp_attention, tp_size, ep_size, dp_size = self._ranks
        prefix = (rank_prefix(dp_attention, tp_size, ep_size, dp_rank, dp_size)
                  if dp_rank and dp_attention else self.rank)
        self._write(prefix, message)

    def uvicorn(self, level, message):
        """uvicorn's default format: ``INFO:     message`` (levelprefix padded to 9)."""
        self.raw(f"{level + ':':<9} {message}")

    @staticmethod
    def raw(text):
        """Lines printed without SGLang's prefix (a crashing library, the HIP runtime)."""
        sys.stderr.write(text.rstrip("\n") + "\n")
        sys.stderr.flush()

    @staticmethod
    def progress(text, end=False):
        """One refresh of a tqdm bar: ``\\r`` and the bar; the last one ends the line."""
        sys.stderr.write("\r" + text + ("\n" if end else ""))
        sys.stderr.flush()
