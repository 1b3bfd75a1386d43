# SPDX-License-Identifier: Apache-2.0
"""Make this checkout importable as ansible_collections.infera.serving, with nothing but pytest.

The collection root is the repository root, so a symlink under the ignored .build/ folder
(the same one scripts/bootstrap makes) gives it the path Ansible's import names need.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / '.build' / 'collections'
LINK = COLLECTIONS / 'ansible_collections' / 'infera' / 'serving'


def _link_collection():
    if LINK.is_symlink() and LINK.resolve() != REPO:
        LINK.unlink()
    if not LINK.exists():
        LINK.parent.mkdir(parents=True, exist_ok=True)
        try:
            LINK.symlink_to(os.path.relpath(REPO, LINK.parent), target_is_directory=True)
        except FileExistsError:
            pass  # another test process made it first
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    os.environ.setdefault('ANSIBLE_COLLECTIONS_PATH', str(COLLECTIONS))


_link_collection()

# The walkthrough's tuned DeepSeek-V4-Pro recipe on 8xMI355X, as the role keeps it (trimmed to the engine flags).
FUSED_COMPRESS_ENV = {
    'SGLANG_USE_AITER': '1',
    'AITER_BF16_FP8_MOE_BOUND': '0',
    'SGLANG_OPT_FP8_WO_A_GEMM': '0',
    'SGLANG_OPT_DEEPGEMM_HC_PRENORM': '0',
    'SGLANG_OPT_USE_AITER_INDEXER': '1',
    'SGLANG_OPT_USE_TOPK_V2': '0',
    'SGLANG_FP8_PAGED_MQA_LOGITS_TORCH': '1',
    'SGLANG_OPT_USE_FUSED_PAGED_COMPRESS': '1',
    'SGLANG_HACK_FLASHMLA_BACKEND': 'unified_kv_triton',
    'SGLANG_OPT_USE_MULTI_STREAM_OVERLAP': 'false',
    'SGLANG_ROCM_USE_MULTI_STREAM': 'false',
    'SGLANG_OPT_USE_FUSED_COMPRESS': 'true',
    'SGLANG_OPT_USE_FUSED_COMPRESS_TRITON': 'true',
    'SGLANG_EAGER_INPUT_NO_COPY': 'true',
    'SGLANG_USE_ROCM700A': '0',
    'SGLANG_OPT_USE_JIT_INDEXER_METADATA': 'false',
    'SGLANG_OPT_USE_TILELANG_INDEXER': 'false',
    'SGLANG_OPT_USE_TILELANG_MHC_PRE': 'false',
    'SGLANG_OPT_USE_TILELANG_MHC_POST': 'false',
}

RECIPE = {
    'name': 'dsv4-pro-mi355x-mixed',
    'env': FUSED_COMPRESS_ENV,
    'args': {
        '--tp-size': 8,
        '--trust-remote-code': None,
        '--attention-backend': 'dsv4',
        '--disable-radix-cache': None,
        '--page-size': 256,
        '--cuda-graph-max-bs': 128,
        '--swa-full-tokens-ratio': 0.15,
        '--disable-shared-experts-fusion': None,
        '--mem-fraction-static': 0.90,
    },
    'variants': {
        'nodp': {'max_conc': 128, 'env': {}, 'args': {'--chunked-prefill-size': 8192}},
        'dp': {
            'min_conc': 256,
            'env': {'SGLANG_DP_USE_GATHERV': '1'},
            'args': {
                '--dp': 8,
                '--enable-dp-attention': None,
                '--ep-size': 8,
                '--enable-prefill-delayer': None,
                '--prefill-delayer-max-delay-ms': 5000,
                '--chunked-prefill-size': 65536,
                '--max-running-requests': 256,
            },
        },
    },
    'between': 'dp',
    'levers': {
        'args': {'--attention-backend': 'dsv4'},
        'env': list(FUSED_COMPRESS_ENV),
    },
}


@pytest.fixture
def recipe():
    """A fresh copy of the tuned recipe for each test."""
    return copy.deepcopy(RECIPE)
