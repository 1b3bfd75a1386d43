# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This doc fragment is PRIVATE to the infera.serving collection; it may change at any time.

from __future__ import annotations


class ModuleDocFragment:
    """The options a sweep's plan is made from, shared by the sweep_plan lookup and the sweep_start module."""

    DOCUMENTATION = r"""
options:
  prompts_per_conc:
    description: C(--num-prompts) is this times the concurrency.
    type: int
    required: true
  random_input_len:
    description: Input tokens per request.
    type: int
    required: true
  random_output_len:
    description: Output tokens per request.
    type: int
    required: true
  targets_file:
    description: The sweep's targets file (YAML, as P(infera.serving.sweep_report#module) reads it), relative to the playbook; empty for none.
    type: str
    default: ""
  force:
    description: Run every point, even the ones already valid.
    type: bool
    default: false
"""
