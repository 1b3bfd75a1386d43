"""What generation needs from a request, whichever API it came through."""

from dataclasses import dataclass


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
