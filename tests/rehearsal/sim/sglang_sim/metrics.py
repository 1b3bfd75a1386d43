"""``GET /metrics`` (with --enable-metrics): SGLang's Prometheus series, modelled.

Names and labels are SGLang 0.5.15's. Scheduler gauges come from each scheduler that
logs stats (attention-TP rank 0): one series on plain TP, one per DP rank with
DP-attention, labelled ``model_name, engine_type, tp_rank, pp_rank, moe_ep_rank`` and
``dp_rank`` when DP-attention is on. Infera's graceful drain sums
``sglang:num_running_reqs`` and ``sglang:num_queue_reqs`` over every series.
The tokenizer's counters carry ``model_name, engine_type``.
"""

from dataclasses import dataclass

ENGINE_TYPES = {"null": "unified", "prefill": "prefill", "decode": "decode"}

GAUGES = (
    ("sglang:num_running_reqs", "The number of running requests."),
    ("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
    ("sglang:num_used_tokens", "The number of used tokens."),
    ("sglang:token_usage", "The token usage."),
    ("sglang:gen_throughput", "The generation throughput (token/s)."),
)
COUNTERS = (
    ("sglang:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
    ("sglang:generation_tokens", "Number of generation tokens processed.", "generation_tokens"),
    ("sglang:num_requests", "Number of requests processed.", "requests"),
)


@dataclass(frozen=True)
class MetricsLayout:
    model_name: str
    engine_type: str
    tp_size: int
    ep_size: int
    dp_attention_ranks: int  # 0 without DP-attention
    pool_tokens: int  # KV pool of one scheduler

    @classmethod
    def from_args(cls, args, pool_tokens):
        return cls(args.served_model_name, ENGINE_TYPES[args.disaggregation_mode],
                   args.tp_size, args.ep_size,
                   args.dp_size if args.enable_dp_attention else 0, pool_tokens)

    def scheduler_labels(self, rank):
        """Labels of the stats-logging scheduler of DP rank ``rank`` (0 without DP)."""
        tp_rank = rank * self.tp_size // max(self.dp_attention_ranks, 1)
        labels = {"model_name": self.model_name, "engine_type": self.engine_type,
                  "tp_rank": tp_rank, "pp_rank": 0,
                  "moe_ep_rank": tp_rank * self.ep_size // self.tp_size}
        if self.dp_attention_ranks:
            labels["dp_rank"] = rank
        return labels


def _escape(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series(name, labels, value):
    rendered = ",".join(f'{key}="{_escape(val)}"' for key, val in labels.items())
    return f"{name}{{{rendered}}} {float(value)!r}"


def _gauge_values(load, rank_rate, pool_tokens):
    return {
        "sglang:num_running_reqs": load.running,
        "sglang:num_queue_reqs": load.queued,
        "sglang:num_used_tokens": load.used_tokens,
        "sglang:token_usage": round(load.used_tokens / pool_tokens, 4),
        "sglang:gen_throughput": rank_rate if load.running else 0.0,
    }


def render(layout, ranks, totals, total_rate):
    """The exposition text for the engine's per-rank ``ranks`` and its ``totals``."""
    rank_rate = total_rate / len(ranks)
    values = [_gauge_values(load, rank_rate, layout.pool_tokens) for load in ranks]
    lines = []
    for name, help_text in GAUGES:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [_series(name, layout.scheduler_labels(rank), values[rank][name])
                  for rank in range(len(ranks))]
    tokenizer_labels = {"model_name": layout.model_name, "engine_type": layout.engine_type}
    for name, help_text, field in COUNTERS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter",
                  _series(f"{name}_total", tokenizer_labels, getattr(totals, field))]
    return "\n".join(lines) + "\n"
