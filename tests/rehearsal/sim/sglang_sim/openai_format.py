"""OpenAI-compatible request parsing and response bodies, as SGLang's server shapes them.

Streamed completions carry ``choices[0].text``; streamed chat carries
``choices[0].delta.content``. The last chunk before ``[DONE]`` has an empty text, the
finish reason and ``usage`` (sglang.bench_serving skips chunks whose text is empty, so
it can carry them safely). Every body says ``"simulated": true``.
"""

import time
import uuid

from .request import GenerationRequest, InvalidRequest, bootstrap_fields, prompt_of, token_limit

DEFAULT_MAX_TOKENS = {"completion": 16, "chat": 128}
CHAT_TOKENS_PER_MESSAGE = 4  # role markers of the chat template


def _message_text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    raise InvalidRequest("message content must be a string or a list of parts")


def _chat_prompt(body, planner):
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages must be a non-empty list")
    texts = [_message_text(message.get("content", "")) for message in messages
             if isinstance(message, dict)]
    prompt_tokens = (sum(planner.count(text) for text in texts)
                     + CHAT_TOKENS_PER_MESSAGE * len(messages))
    return (texts[-1] if texts else ""), prompt_tokens


def parse_request(body, kind, planner):
    """The generation request in an OpenAI completions or chat body."""
    if kind == "chat":
        prompt, prompt_tokens = _chat_prompt(body, planner)
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        if "prompt" not in body:
            raise InvalidRequest("prompt is required")
        prompt, prompt_tokens = prompt_of(body["prompt"], planner, "prompt")
        max_tokens = body.get("max_tokens")
    stream_options = body.get("stream_options") or {}
    return GenerationRequest(
        prompt=prompt,
        prompt_tokens=prompt_tokens,
        max_tokens=token_limit(max_tokens, DEFAULT_MAX_TOKENS[kind], "max_tokens"),
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=bool(stream_options.get("include_usage", False)),
        **bootstrap_fields(body),
    )


def usage(prompt_tokens, completion_tokens):
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class ResponseBuilder:
    """Bodies for one request: the same id, model and creation time throughout."""

    def __init__(self, kind, model, request, plan, text_of):
        self.kind = kind
        self.model = model
        self.request = request
        self.plan = plan
        self.usage = usage(request.prompt_tokens, len(plan.ids))
        self.text_of = text_of
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

    def _chunk(self, text, finish_reason=None, first=False):
        if self.kind == "chat":
            delta = {"role": "assistant", "content": text} if first else {"content": text}
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return self._envelope("chat.completion.chunk", [choice])
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        return self._envelope("text_completion", [choice])

    def stream_events(self, pieces):
        """SSE payloads for the generated ``pieces`` (lists of ids), ending "[DONE]"."""
        first = True
        for ids in pieces:
            yield self._chunk(self.text_of(ids), first=first)
            first = False
        final = self._chunk("", self.plan.finish_reason)
        final["usage"] = self.usage
        yield final
        if self.request.include_usage:
            # The separate usage-only chunk OpenAI sends for stream_options.include_usage.
            object_name = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
            usage_only = self._envelope(object_name, [])
            usage_only["usage"] = self.usage
            yield usage_only
        yield "[DONE]"

    def full(self):
        text = self.text_of(self.plan.ids)
        if self.kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": self.plan.finish_reason}
            body = self._envelope("chat.completion", [choice])
        else:
            choice = {"index": 0, "text": text, "logprobs": None,
                      "finish_reason": self.plan.finish_reason}
            body = self._envelope("text_completion", [choice])
        body["usage"] = self.usage
        return body
