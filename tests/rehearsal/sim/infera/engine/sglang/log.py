"""SGLang-style log lines: ``[2026-11-29 10:00:00 TP0] message``.

Every runtime line, fault messages included, goes to stdout and is flushed at once, so a
log-watcher following the container's output sees each line as it happens. Only the
refusals before start-up (bad flags, missing devices) go to stderr.
"""

import sys
import time


class Log:
    def __init__(self, dp_attention=False):
        # SGLang prefixes a scheduler's lines with its ranks; DP-attention adds the DP rank.
        self.rank = " DP0 TP0" if dp_attention else " TP0"

    def _write(self, prefix, message):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        sys.stdout.write(f"[{stamp}{prefix}] {message}\n")
        sys.stdout.flush()

    def main(self, message):
        """A line of the launcher process, which has no rank."""
        self._write("", message)

    def scheduler(self, message):
        self._write(self.rank, message)

    def raw(self, text):
        """Lines a crashing library prints itself, without SGLang's prefix."""
        sys.stdout.write(text.rstrip("\n") + "\n")
        sys.stdout.flush()
