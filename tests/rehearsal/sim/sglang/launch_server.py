"""``python -m sglang.launch_server``: the simulated engine Infera's wrapper spawns.

Thin on purpose: in the engine image only this file and ``sglang/srt/server_args.py`` are
laid over the real sglang wheel, so everything lives in the ``sglang_sim`` package.
"""

import sys

from sglang_sim.launch import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
