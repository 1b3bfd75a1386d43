"""OpenAI-compatible request parsing and response bodies, as SGLang's server shapes them.

Streamed completions carry ``choices[0].text``; streamed chat carries
``choices[0].delta.content``. The last chunk before ``[DONE]`` has an empty text, the
finish reason and ``usage`` (sglang.bench_serving skips chunks whose text is empty, so
it can carry them safely). Every body says ``"simulated": true``.
"""

import time
import uuid

DEFAULT_MAX_TOKENS = {"completion": 16, "chat": 128}
CHAT_TOKENS_PER_MESSAGE = 4  # role markers of the chat template


class InvalidRequest(ValueError):
    """The body is not a request this endpoint can serve (HTTP 400)."""


def _prompt_text(prompt):
    if isinstance(prompt, str):
        return prompt, None
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt[0], None
    if isinstance(prompt, list) and prompt and all(isinstance(item, int) for item in prompt):
        return "", len(prompt)
    raise InvalidRequest("prompt must be a string, a list of one string or a list of token ids")


def _message_text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    raise InvalidRequest("message content must be a string or a list of parts")


def parse_request(body, kind, count_tokens):
    """Return the fields generation needs from an OpenAI completions or chat body."""
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidRequest("messages must be a non-empty list")
        texts = [_message_text(message.get("content", "")) for message in messages
                 if isinstance(message, dict)]
        prompt = texts[-1] if texts else ""
        prompt_tokens = (sum(count_tokens(text) for text in texts)
                         + CHAT_TOKENS_PER_MESSAGE * len(messages))
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        if "prompt" not in body:
            raise InvalidRequest("prompt is required")
        prompt, token_ids = _prompt_text(body["prompt"])
        prompt_tokens = token_ids if token_ids is not None else count_tokens(prompt)
        max_tokens = body.get("max_tokens")
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS[kind]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise InvalidRequest("max_tokens must be a non-negative integer")
    stream_options = body.get("stream_options") or {}
    return {
        "prompt": prompt,
        "prompt_tokens": prompt_tokens,
        "max_tokens": max_tokens,
        "ignore_eos": bool(body.get("ignore_eos", False)),
        "stream": bool(body.get("stream", False)),
        "include_usage": bool(stream_options.get("include_usage", False)),
    }


def usage(prompt_tokens, completion_tokens):
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class ResponseBuilder:
    """Bodies for one request: the same id, model and creation time throughout."""

    def __init__(self, kind, model):
        self.kind = kind
        self.model = model
        prefix = "chatcmpl" if kind == "chat" else "cmpl"
        self.request_id = f"{prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _envelope(self, object_name, choices):
        return {
            "id": self.request_id,
            "object": object_name,
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "simulated": True,
        }

    def chunk(self, text, finish_reason=None, first=False):
        if self.kind == "chat":
            delta = {"role": "assistant", "content": text} if first else {"content": text}
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return self._envelope("chat.completion.chunk", [choice])
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return self._envelope("text_completion", [choice])

    def final_chunk(self, finish_reason, usage_body):
        body = self.chunk("", finish_reason)
        body["usage"] = usage_body
        return body

    def usage_chunk(self, usage_body):
        """The separate usage-only chunk OpenAI sends for stream_options.include_usage."""
        object_name = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        body = self._envelope(object_name, [])
        body["usage"] = usage_body
        return body

    def full(self, text, finish_reason, usage_body):
        if self.kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": finish_reason}
            body = self._envelope("chat.completion", [choice])
        else:
            choice = {"index": 0, "text": text, "logprobs": None,
                      "finish_reason": finish_reason}
            body = self._envelope("text_completion", [choice])
        body["usage"] = usage_body
        return body
