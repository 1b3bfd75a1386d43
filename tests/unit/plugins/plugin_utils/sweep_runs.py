# SPDX-License-Identifier: Apache-2.0
"""Build results/<run_id>/<host>/ folders as the sweep role writes them, for the _sweep_* tests."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / 'data' / 'sglang-bench-lines'
LINE_0_5 = DATA / 'sglang-0.5.23_random-ids_c2.jsonl'
LINE_0_4 = DATA / 'sglang-0.4.10.post2_random-ids_c2.jsonl'
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'

NODP_ARGV = ['--model-path', '/data/hf-cache/DeepSeek-V4-Pro', '--tp-size', '8', '--trust-remote-code',
             '--attention-backend', 'dsv4', '--chunked-prefill-size', '8192']
DP_ARGV = ['--model-path', '/data/hf-cache/DeepSeek-V4-Pro', '--tp-size', '8', '--attention-backend', 'dsv4',
           '--dp', '8', '--enable-dp-attention', '--ep-size', '8', '--chunked-prefill-size', '65536']
VARIANTS = {
    'nodp': {'argv': NODP_ARGV, 'env': {'SGLANG_USE_AITER': '1', 'SGLANG_OPT_USE_FUSED_COMPRESS': 'true'}},
    'dp': {'argv': DP_ARGV, 'env': {'SGLANG_USE_AITER': '1', 'SGLANG_DP_USE_GATHERV': '1'}},
}


def bench_record(conc, num_prompts=None, duration=100.0, input_tokens=None, output_tokens=None, tpot=20.0, **extra):
    """A 0.5.x-style result object; token counts default to ISL 8192 / OSL 1024 for every prompt."""
    num_prompts = conc * 10 if num_prompts is None else num_prompts
    input_tokens = 8192 * num_prompts if input_tokens is None else input_tokens
    output_tokens = 1024 * num_prompts if output_tokens is None else output_tokens
    record = {
        'backend': 'sglang-oai', 'dataset_name': 'random', 'request_rate': float('inf'), 'max_concurrency': conc,
        'random_input_len': 8192, 'random_output_len': 1024, 'random_range_ratio': 1.0,
        'duration': duration, 'completed': num_prompts,
        'total_input_tokens': input_tokens, 'total_output_tokens': output_tokens,
        'total_output_tokens_retokenized': output_tokens,
        # Deliberately wrong: the report must compute throughputs, never copy these.
        'input_throughput': 1.0, 'output_throughput': 2.0, 'total_throughput': 3.0,
    }
    for stem, base in (('ttft', 900.0), ('tpot', tpot), ('itl', tpot), ('e2e_latency', 25000.0)):
        record.update({'mean_%s_ms' % stem: base, 'median_%s_ms' % stem: base * 0.95,
                       'p99_%s_ms' % stem: base * 1.5, 'std_%s_ms' % stem: base * 0.1})
    record.update(extra)
    return record


def write_lines(path, *records):
    """Append each record as one line, as the client does (json.dumps writes Infinity like Python's json)."""
    with open(path, 'a', encoding='utf-8') as handle:
        for record in records:
            handle.write((record if isinstance(record, str) else json.dumps(record)) + '\n')


def point(conc, variant='nodp', status='ok', num_prompts=None, **extra):
    entry = {'conc': conc, 'variant': variant, 'num_prompts': conc * 10 if num_prompts is None else num_prompts,
             'warmup_requests': conc * 2, 'file': 'mix_c%d.jsonl' % conc, 'started': '2026-11-29T10:00:00Z',
             'ended': '2026-11-29T10:10:00Z', 'status': status, 'reason': ''}
    entry.update(extra)
    return entry


def write_manifest(run_dir, host, points, simulated=True, variants=None, **extra):
    host_dir = Path(run_dir) / host
    host_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        'run_id': Path(run_dir).name, 'host': host, 'simulated': simulated,
        'image': 'registry.local:5000/sglang-mi355x:v0.5.9', 'image_digest': 'sha256:' + 'ab' * 32,
        'model': '/data/hf-cache/DeepSeek-V4-Pro', 'recipe': 'dsv4-pro-mi355x-mixed',
        'variants': VARIANTS if variants is None else variants,
        'bench_args': {'random_input_len': 8192, 'random_output_len': 1024, 'random_range_ratio': 1.0,
                       'request_rate': 'inf', 'backend': 'sglang-oai', 'base_url': 'http://infera-node-1:8000',
                       'dataset_name': 'random'},
        'points': points,
    }
    manifest.update(extra)
    (host_dir / 'manifest.json').write_text(json.dumps(manifest, indent=2) + '\n', encoding='utf-8')
    return host_dir


def standard_run(run_dir, host='infera-node-1', simulated=True):
    """c32 and c64 on nodp, c256 on dp, each with a valid line; returns the host folder."""
    host_dir = write_manifest(run_dir, host, [point(32), point(64), point(256, 'dp')], simulated=simulated)
    write_lines(host_dir / 'mix_c32.jsonl', bench_record(32, duration=200.0))
    write_lines(host_dir / 'mix_c64.jsonl', bench_record(64, duration=250.0, tpot=30.0))
    write_lines(host_dir / 'mix_c256.jsonl', bench_record(256, duration=800.0, tpot=60.0))
    return host_dir


def write_targets(path, text):
    path.write_text(text, encoding='utf-8')
    return str(path)
