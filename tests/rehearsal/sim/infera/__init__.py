"""GPU-free simulator of the two Infera commands the walkthrough runs in the worker container.

``python -m infera.server`` (the router) and ``python -m infera.engine.sglang`` (the
SGLang mixed worker) accept the real command lines, check them strictly, print
real-looking logs, register through a real etcd and serve OpenAI-compatible HTTP with
a modelled token rate. Nothing here touches a GPU or a model; every modelled number is
marked "simulated".
"""
