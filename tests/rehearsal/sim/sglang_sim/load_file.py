"""The engine's load, published for the SIMULATED amd-smi in the same container.

A real amd-smi reads each GPU's power from the GPU. The rehearsal's amd-smi
(tests/rehearsal/images/node/amd-smi, which the engine image installs as /opt/rocm/bin/amd-smi)
has no GPU, so it models each GPU's power from the load the simulated engine publishes here.

One JSON file per engine process, ``<INFERA_SIM_LOAD_DIR>/engine-<pid>.json`` (default
``/tmp/infera-sim/load``), rewritten every PUBLISH_SECONDS while the engine serves (a
temporary file renamed over it, so a reader never sees half a file)::

    {"time": 1767225600.25, "pid": 4242, "gpus": [0, 1, 2, 3, 4, 5, 6, 7],
     "running": 12, "queued": 0, "simulated": true}

``time`` is the wall clock (unix seconds) of the write; ``gpus`` the GPU indices the engine runs
on (HIP_VISIBLE_DEVICES, else 0..n-1: amd-smi's GPU i is /dev/dri/renderD<128+i>, as for the
engine); ``running`` the requests holding a running slot (summed over the DP ranks: the batch
the GPUs work on); ``queued`` those waiting for a slot or for a PD leg. The file is not removed
when the engine ends (SGLang's exit paths SIGKILL the launcher): a reader treats a file older
than STALE_SECONDS, or no file, as an idle engine. Files older than PRUNE_SECONDS are removed
when an engine starts publishing.
"""

import glob
import json
import os
import threading
import time

DEFAULT_DIR = "/tmp/infera-sim/load"
# At most a few writes a second; amd-smi is sampled once a second.
PUBLISH_SECONDS = 0.5
# What the SIMULATED amd-smi takes for a dead engine (it reads the same number).
STALE_SECONDS = 5.0
PRUNE_SECONDS = 600.0


class LoadPublisher:
    """Writes one engine's load file; ``start`` runs it in a daemon thread."""

    def __init__(self, engine, gpus, directory=DEFAULT_DIR, clock=time.time):
        self.engine = engine
        self.gpus = list(gpus)
        self.directory = directory
        self.path = os.path.join(directory, f"engine-{os.getpid()}.json")
        self.clock = clock
        self._failed = False

    def snapshot(self):
        """The file's content now."""
        ranks, _totals = self.engine.snapshot()
        return {"time": round(self.clock(), 3), "pid": os.getpid(), "gpus": self.gpus,
                "running": sum(rank.running for rank in ranks),
                "queued": sum(rank.queued for rank in ranks), "simulated": True}

    def write(self):
        """Publish the load once; raise OSError when the directory cannot take the file."""
        os.makedirs(self.directory, exist_ok=True)
        partial = f"{self.path}.{threading.get_ident()}.tmp"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(self.snapshot(), handle)
        os.replace(partial, self.path)

    def prune(self):
        """Remove the files of engines gone long ago (a rehearsal node or a test host keeps its /tmp)."""
        now = time.time()
        for path in glob.glob(os.path.join(self.directory, "engine-*.json")):
            try:
                if path != self.path and now - os.path.getmtime(path) > PRUNE_SECONDS:
                    os.remove(path)
            except OSError:
                continue

    def run(self, stop_event, log=None):
        """Publish every PUBLISH_SECONDS until ``stop_event`` is set; a failure is logged once."""
        self.prune()
        while True:
            try:
                self.write()
                self._failed = False
            except OSError as error:
                if not self._failed and log is not None:
                    log.main(f"[simulated] cannot publish the engine's load for the simulated amd-smi "
                             f"to {self.path}: {error}; its power reads idle")
                self._failed = True
            if stop_event.wait(PUBLISH_SECONDS):
                return

    def start(self, stop_event, log=None):
        threading.Thread(target=self.run, args=(stop_event, log), name="load-file",
                         daemon=True).start()
