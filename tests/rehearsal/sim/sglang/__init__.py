"""GPU-free stand-in for the ``sglang`` package on a host without SGLang (see ../README.md)."""
