"""``sglang.srt.server_args`` for Infera's worker wrapper: the simulator's ``ServerArgs``.

Thin on purpose: in the engine image only this file and ``sglang/launch_server.py`` are
laid over the real sglang wheel, so everything lives in the ``sglang_sim`` package.
"""

from sglang_sim.server_args import ServerArgs, prepare_server_args

__all__ = ["ServerArgs", "prepare_server_args"]
