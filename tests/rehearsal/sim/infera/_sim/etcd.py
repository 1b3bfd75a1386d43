"""A small etcd v3 client over the JSON gateway (``/v3/...``), built on urllib.

The gateway speaks base64 for keys and values and returns 64-bit numbers as strings;
fields holding zero or empty values are left out of its answers.
"""

import base64
import json
import urllib.error
import urllib.request


class EtcdError(Exception):
    """etcd could not be reached or refused the call."""


def normalize_endpoint(endpoint):
    """Accept ``host:port`` as well as ``http://host:port``, as the real CLI does."""
    endpoint = endpoint.strip().rstrip("/")
    if "://" not in endpoint:
        endpoint = "http://" + endpoint
    return endpoint


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def _unb64(text):
    return base64.b64decode(text).decode()


def prefix_range_end(prefix):
    """etcd selects a prefix as [prefix, prefix with its last byte + 1)."""
    raw = prefix.encode()
    return (raw[:-1] + bytes([raw[-1] + 1])).decode()


class EtcdClient:
    def __init__(self, endpoint, timeout=3.0):
        self.endpoint = normalize_endpoint(endpoint)
        self.timeout = timeout

    def _call(self, path, body):
        request = urllib.request.Request(
            self.endpoint + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            raise EtcdError(f"etcd {path} answered HTTP {error.code}: {detail}") from error
        except (OSError, ValueError) as error:
            raise EtcdError(f"etcd at {self.endpoint} is unreachable: {error}") from error

    def get_prefix(self, prefix):
        """Return {key: value} for every key under prefix."""
        answer = self._call(
            "/v3/kv/range",
            {"key": _b64(prefix), "range_end": _b64(prefix_range_end(prefix))},
        )
        return {_unb64(kv["key"]): _unb64(kv.get("value", "")) for kv in answer.get("kvs", [])}

    def put(self, key, value, lease_id=None):
        body = {"key": _b64(key), "value": _b64(value)}
        if lease_id is not None:
            body["lease"] = lease_id
        self._call("/v3/kv/put", body)

    def grant_lease(self, ttl_seconds):
        """Return the new lease's id (a string, as the gateway gives it)."""
        return self._call("/v3/lease/grant", {"TTL": ttl_seconds})["ID"]

    def keep_alive(self, lease_id):
        """Refresh a lease once; return its remaining TTL, 0 when the lease is gone."""
        answer = self._call("/v3/lease/keepalive", {"ID": lease_id})
        return int(answer.get("result", {}).get("TTL", 0))

    def revoke_lease(self, lease_id):
        self._call("/v3/lease/revoke", {"ID": lease_id})
