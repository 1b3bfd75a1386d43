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


def rank_prefix(dp_attention=False, tp_size=1, ep_size=1):
    prefix = " DP0" if dp_attention else ""
    if tp_size > 1:
        prefix += " TP0"
    if ep_size > 1:
        prefix += " EP0"
    return prefix


class Log:
    def __init__(self, dp_attention=False, tp_size=1, ep_size=1):
        self.rank = rank_prefix(dp_attention, tp_size, ep_size)

    def _write(self, prefix, message):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.raw(f"[{stamp}{prefix}] {message}")

    def main(self, message):
        """A line of the launcher process, which has no rank."""
        self._write("", message)

    def scheduler(self, message):
        self._write(self.rank, message)

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
