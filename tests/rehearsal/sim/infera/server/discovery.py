"""Worker discovery by polling etcd: the registrations under ``infera/workers/``.

A registration disappears with its worker's lease, so each poll replaces the whole set.
Only workers that speak the router's request and KV-event transports are routable.
"""

import logging
import threading

from infera._sim.etcd import EtcdError
from infera._sim.registry import WORKERS_PREFIX, parse_worker_value

POLL_SECONDS = 1.0

log = logging.getLogger("infera.server")


def worker_from_registration(key, value):
    return {
        "id": key,
        "url": f"http://{value['host']}:{value['port']}",
        "model": value["served_model_name"],
        "variant": value["variant"],
        "registered_at": value.get("registered_at"),
        "simulated": bool(value.get("simulated", False)),
    }


class Discovery:
    def __init__(self, client, request_transport, kv_event_transport):
        self.client = client
        self.request_transport = request_transport
        self.kv_event_transport = kv_event_transport
        self._lock = threading.Lock()
        self._workers = {}
        self._warned = {}
        self.status = "starting"
        self.reason = None

    def workers(self):
        with self._lock:
            return list(self._workers.values())

    def health(self):
        with self._lock:
            body = {"status": self.status, "workers": len(self._workers), "simulated": True}
            if self.reason:
                body["reason"] = self.reason
            return body

    def run(self, stop_event):
        while True:
            self.poll_once()
            if stop_event.wait(POLL_SECONDS):
                return

    def poll_once(self):
        try:
            registrations = self.client.get_prefix(WORKERS_PREFIX)
        except EtcdError as error:
            with self._lock:
                if self.status != "degraded":
                    log.warning("etcd unreachable, keeping the last known workers: %s", error)
                self.status, self.reason = "degraded", str(error)
            return
        routable = {}
        for key, text in registrations.items():
            worker = self._routable_worker(key, text)
            if worker:
                routable[key] = worker
        with self._lock:
            if self.status == "degraded":
                log.info("etcd reachable again")
            self.status, self.reason = "healthy", None
            added = routable.keys() - self._workers.keys()
            removed = self._workers.keys() - routable.keys()
            self._workers = routable
            self._warned = {key: why for key, why in self._warned.items()
                            if key in registrations}
        for key in sorted(added):
            worker = routable[key]
            log.info("worker added: %s -> %s (model=%s, variant=%s); workers=%d",
                     key, worker["url"], worker["model"], worker["variant"], len(routable))
        for key in sorted(removed):
            log.info("worker removed: %s; workers=%d", key, len(routable))

    def _routable_worker(self, key, text):
        try:
            value = parse_worker_value(text)
        except ValueError as error:
            self._warn_once(key, f"ignoring {key}: not a worker registration ({error})")
            return None
        mismatches = []
        if value["request_transport"] != self.request_transport:
            mismatches.append(f"request_transport={value['request_transport']} "
                              f"(router: {self.request_transport})")
        if (value.get("kv_events", "on") == "on"
                and value["kv_event_transport"] != self.kv_event_transport):
            mismatches.append(f"kv_event_transport={value['kv_event_transport']} "
                              f"(router: {self.kv_event_transport})")
        if mismatches:
            self._warn_once(key, f"ignoring worker {key}: transport mismatch: "
                                 f"{', '.join(mismatches)}")
            return None
        return worker_from_registration(key, value)

    def _warn_once(self, key, message):
        if self._warned.get(key) != message:
            self._warned[key] = message
            log.warning(message)
