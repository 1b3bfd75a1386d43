"""The worker's etcd registration: a key bound to a lease kept alive every TTL/3."""

import threading

from infera._sim.etcd import EtcdError


class Registration:
    def __init__(self, client, key, value, ttl, log):
        self.client = client
        self.key = key
        self.value = value
        self.ttl = ttl
        self.log = log
        self.lease_id = None
        self._stopped = threading.Event()

    def register(self):
        """Grant a lease and put the key; raise EtcdError when etcd is unreachable."""
        self.lease_id = self.client.grant_lease(self.ttl)
        self.client.put(self.key, self.value, self.lease_id)
        self.log.main(f"Registered in etcd at {self.client.endpoint}: key={self.key} "
                      f"lease={self.lease_id} ttl={self.ttl}s")

    def start_keepalive(self):
        threading.Thread(target=self._keep_alive, name="etcd-keepalive", daemon=True).start()

    def _keep_alive(self):
        while not self._stopped.wait(self.ttl / 3):
            try:
                if self.client.keep_alive(self.lease_id) > 0:
                    continue
                # The lease expired (etcd was away longer than the TTL): register anew
                # so the router finds this worker again.
                self.log.main(f"etcd lease {self.lease_id} expired; registering again")
                self.register()
            except EtcdError as error:
                self.log.main(f"WARNING: etcd keep-alive failed: {error}")

    def deregister(self):
        self._stopped.set()
        try:
            self.client.revoke_lease(self.lease_id)
            self.log.main(f"Deregistered from etcd: revoked lease {self.lease_id}, "
                          f"key {self.key} removed")
        except EtcdError as error:
            self.log.main(f"WARNING: could not revoke the etcd lease ({error}); "
                          f"the key goes when the lease expires")
