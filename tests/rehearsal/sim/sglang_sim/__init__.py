"""The GPU-free SGLang engine under Infera's real worker wrapper (see ../README.md)."""
