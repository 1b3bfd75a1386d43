"""SGLang-style log lines: ``[2026-11-29 10:00:00 TP0] message``.

SGLang logs through Python's logging, whose default stream is stderr; so does the
simulator, one flushed line at a time, so a log-watcher following the output (Infera's
wrapper lets the engine inherit its stdout and stderr) sees each line as it happens.
"""

import sys
import time


class Log:
    def __init__(self, dp_attention=False):
        # SGLang prefixes a scheduler's lines with its ranks; DP-attention adds the DP rank.
        self.rank = " DP0 TP0" if dp_attention else " TP0"

    def _write(self, prefix, message):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.raw(f"[{stamp}{prefix}] {message}")

    def main(self, message):
        """A line of the launcher process, which has no rank."""
        self._write("", message)

    def scheduler(self, message):
        self._write(self.rank, message)

    @staticmethod
    def raw(text):
        """Lines printed without SGLang's prefix (progress bars, a crashing library)."""
        sys.stderr.write(text.rstrip("\n") + "\n")
        sys.stderr.flush()
