"""Simulated ``python -m infera.engine.sglang``: the SGLang worker behind the Infera router."""
