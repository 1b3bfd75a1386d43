# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""A model checkpoint directory on the node: config.json names the expected model_type, and tokenizer.json and the
weight files resolve (a Hugging Face cache snapshot links each into blobs/, which a pruned or interrupted download
leaves dangling)."""

from __future__ import annotations

import json
import os


def file_problem(path):
    """Why path is not a readable regular file (following symlinks), or None when it is."""
    if os.path.islink(path) and not os.path.exists(path):
        return 'is a dangling symlink to %s (its target is missing: an interrupted or pruned download)' % os.readlink(path)
    if not os.path.exists(path):
        return 'is missing'
    if not os.path.isfile(path):
        return 'is not a regular file'
    if not os.access(path, os.R_OK):
        return 'is not readable by this user'
    return None


def _config_problem(path, model_types, details):
    """The problem with config.json in the directory path, or None; sets details['model_type'] once it is read."""
    config = os.path.join(path, 'config.json')
    problem = file_problem(config)
    if problem:
        return ('config.json in %s %s; next step: download the checkpoint again (huggingface-cli download) or fix the '
                'model path (infera_model_path)' % (path, problem))
    try:
        with open(config, 'r', encoding='utf-8', errors='replace') as handle:
            model_type = json.loads(handle.read()).get('model_type')
    except (ValueError, AttributeError) as error:
        return 'config.json in %s is not a JSON object (%s); next step: download the checkpoint again' % (path, error)
    details['model_type'] = model_type
    if model_type not in model_types:
        return ('config.json in %s has model_type %r, expected %s; next step: point the model path (infera_model_path) '
                'at the DeepSeek-V4-Pro checkpoint' % (path, model_type, ' or '.join(model_types)))
    return None


def checkpoint_problems(path, model_types):
    """(details, problems) of the existing checkpoint directory path: details are its path, model_type and the
    tokenizer's resolved path (None when unread); problems are one line each, naming the cause and the next step."""
    details = {'path': path, 'model_type': None, 'tokenizer': None}
    problems = []
    config = _config_problem(path, model_types, details)
    if config:
        problems.append(config)
    tokenizer = os.path.join(path, 'tokenizer.json')
    problem = file_problem(tokenizer)
    if problem:
        problems.append('tokenizer.json in %s %s; next step: download the checkpoint again so every file resolves '
                        '(huggingface-cli download)' % (path, problem))
    else:
        details['tokenizer'] = os.path.realpath(tokenizer)
    dangling = sorted(name for name in os.listdir(path)
                      if name.endswith('.safetensors') and file_problem(os.path.join(path, name)))
    if dangling:
        problems.append('%d weight file(s) in %s do not resolve (first: %s); next step: download the checkpoint again '
                        '(huggingface-cli download)' % (len(dangling), path, dangling[0]))
    return details, problems
