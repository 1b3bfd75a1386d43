"""Simulated Infera engines; only the SGLang mixed worker exists here."""
