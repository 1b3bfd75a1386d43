"""What generation needs from a request, whichever API it came through."""

from dataclasses import dataclass
from typing import Optional


class InvalidRequest(ValueError):
    """The body is not a request this endpoint can serve (HTTP 400)."""


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str  # the text the answer is chosen by
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool = False
    # PD disaggregation: where the prefill leg's bootstrap server is and which room
    # (sglang/srt/entrypoints/openai/protocol.py:763-766, managers/io_struct.py:242-247).
    bootstrap_host: Optional[str] = None
    bootstrap_port: Optional[int] = None
    bootstrap_room: Optional[int] = None


def prompt_of(value, planner, field):
    """(text, token count) of a prompt given as text, a list of one text, or token ids."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if isinstance(value, str):
        return value, planner.count(value)
    if (isinstance(value, list) and value
            and all(isinstance(item, int) and not isinstance(item, bool) for item in value)):
        return planner.decode(value), len(value)
    raise InvalidRequest(f"{field} must be a string, a list of one string or a list of token ids")


def token_limit(value, default, field):
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidRequest(f"{field} must be a non-negative integer")
    return value


def bootstrap_fields(body):
    """bootstrap_host, bootstrap_port and bootstrap_room of one request (not a batch)."""
    host, port, room = (body.get(name)
                        for name in ("bootstrap_host", "bootstrap_port", "bootstrap_room"))
    if host is not None and not isinstance(host, str):
        raise InvalidRequest("bootstrap_host must be a string (batches are not simulated)")
    for name, value in (("bootstrap_port", port), ("bootstrap_room", room)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise InvalidRequest(f"{name} must be an integer (batches are not simulated)")
    return {"bootstrap_host": host, "bootstrap_port": port, "bootstrap_room": room}
