"""Simulated ``python -m infera.server``: the Infera router with etcd discovery."""
