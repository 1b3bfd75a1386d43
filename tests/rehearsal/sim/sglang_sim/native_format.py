"""SGLang's native ``POST /generate``: request parsing and response bodies.

A body has ``text`` or ``input_ids``, ``sampling_params`` (``max_new_tokens``, default
128; ``ignore_eos``) and ``stream``. The answer is ``{"text", "output_ids",
"meta_info"}``; streamed, each event carries the text and ids so far (SGLang's default,
non-incremental streaming) and ``finish_reason`` is null until the last one, which is
``{"type": "length", "length": N}`` or ``{"type": "stop", "matched": <eos id>}``.
"""

import uuid

from .request import GenerationRequest, InvalidRequest, bootstrap_fields, prompt_of, token_limit

DEFAULT_MAX_NEW_TOKENS = 128


def parse_generate(body, planner):
    if "text" in body:
        prompt, prompt_tokens = prompt_of(body["text"], planner, "text")
    elif "input_ids" in body:
        prompt, prompt_tokens = prompt_of(body["input_ids"], planner, "input_ids")
    else:
        raise InvalidRequest("Either text or input_ids should be provided.")
    sampling = body.get("sampling_params") or {}
    if not isinstance(sampling, dict):
        raise InvalidRequest("sampling_params must be an object")
    return GenerationRequest(
        prompt=prompt,
        prompt_tokens=prompt_tokens,
        max_tokens=token_limit(sampling.get("max_new_tokens"), DEFAULT_MAX_NEW_TOKENS,
                               "max_new_tokens"),
        ignore_eos=bool(sampling.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        **bootstrap_fields(body),
    )


class NativeBuilder:
    def __init__(self, request, plan, text_of, eos_id, finish_length=None):
        self.request = request
        self.plan = plan
        self.text_of = text_of
        self.eos_id = eos_id
        self.request_id = uuid.uuid4().hex
        # A prefill leg ends its request with FINISH_LENGTH(length=0) (disaggregation/prefill.py:771).
        self.finish_length = finish_length

    def _finish_reason(self):
        if self.plan.finish_reason == "length":
            length = len(self.plan.ids) if self.finish_length is None else self.finish_length
            return {"type": "length", "length": length}
        return {"type": "stop", "matched": self.eos_id}

    def _body(self, ids, finished):
        return {
            "text": self.text_of(ids),
            "output_ids": list(ids),
            "meta_info": {
                "id": self.request_id,
                "finish_reason": self._finish_reason() if finished else None,
                "prompt_tokens": self.request.prompt_tokens,
                "completion_tokens": len(ids),
                "cached_tokens": 0,
                "weight_version": "default",
            },
            "simulated": True,
        }

    def stream_events(self, pieces):
        done = 0
        for ids in pieces:
            done += len(ids)
            yield self._body(self.plan.ids[:done], done == len(self.plan.ids))
        if not self.plan.ids:
            yield self.full()
        yield "[DONE]"

    def full(self):
        return self._body(self.plan.ids, True)
