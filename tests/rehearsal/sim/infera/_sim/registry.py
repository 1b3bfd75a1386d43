"""The etcd key schema by which workers announce themselves to the router.

Key:   infera/workers/<model id, sanitized>/<advertise_host>:<port>
Value: a JSON object with at least the fields in ``REQUIRED_FIELDS``:
       host, port, model (the --model-path), served_model_name (the id clients send),
       variant ("nodp" | "dp"), tp, dp, ep, request_transport, kv_event_transport,
       kv_events ("on" | "off"), registered_at (ISO 8601, UTC), simulated (true), pid.
The key is bound to the worker's lease, so it disappears when the worker deregisters
or stops refreshing the lease.
"""

import json
import re

WORKERS_PREFIX = "infera/workers/"

REQUIRED_FIELDS = (
    "host",
    "port",
    "model",
    "served_model_name",
    "variant",
    "request_transport",
    "kv_event_transport",
)


def sanitize_model_id(model_id):
    """Model ids are often paths; keep the key one level deep per model."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("_") or "model"


def worker_key(model_id, advertise_host, port):
    return f"{WORKERS_PREFIX}{sanitize_model_id(model_id)}/{advertise_host}:{port}"


def parse_worker_value(text):
    """Decode a registration; raise ValueError when it is not one."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("registration is not a JSON object")
    missing = [field for field in REQUIRED_FIELDS if field not in value]
    if missing:
        raise ValueError(f"registration lacks {', '.join(missing)}")
    return value
