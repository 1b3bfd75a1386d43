# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: bench_point
short_description: Judge one sweep point's sglang.bench_serving result file on the controller
version_added: 0.1.0
author:
  - Infera serving maintainers (@infera)
description:
  - Reads the last line of a C(mix_c<C>.jsonl) file written by C(sglang.bench_serving --output-file) and says whether
    it is a usable result, so a sweep can skip points it already has (resume) and record why a point is invalid.
  - A point is invalid when the file is missing or has no line (the client writes none when every request fails), the
    last line is not a JSON object, fewer than O(num_prompts) requests completed, the duration or token counts are
    missing or zero, or the line reports another C(max_concurrency) than O(conc). A missing file is a normal answer
    (RV(_raw[].valid=false)), not an error.
  - This is the same judgement the M(infera.serving.sweep_record) action records and the M(infera.serving.sweep_report)
    action reads back.
  - The line may hold C(Infinity) or C(NaN), as the client writes for an infinite C(request_rate). They are accepted
    and returned as the strings C(Infinity) and C(NaN).
  - Paths are on the controller; a relative path is taken from the playbook's directory.
options:
  _terms:
    description: Result files (jsonl) to judge.
    type: list
    elements: path
    required: true
  num_prompts:
    description:
      - How many requests the point sent (C(--num-prompts)); fewer completed makes the point invalid.
      - V(0) only requires that at least one request completed.
    type: int
    required: true
  conc:
    description:
      - The point's concurrency (C(--max-concurrency)); a line that reports another C(max_concurrency) is a result of
        another point (a copied or renamed file) and makes the point invalid.
      - Left out, the line's concurrency is not checked.
    type: int
notes:
  - With one path, C(lookup) returns the dict itself; with several, a list of dicts (or use C(query)).
seealso:
  - module: infera.serving.sweep_record
  - module: infera.serving.sweep_report
"""

EXAMPLES = r"""
- name: sweep | Check the controller for a valid result of this point (resume)
  ansible.builtin.set_fact:
    _sweep_existing: "{{ lookup('infera.serving.bench_point', _sweep_local_dir ~ '/mix_c' ~ _sweep_conc ~ '.jsonl',
                                num_prompts=_sweep_conc * 10, conc=_sweep_conc) }}"

- name: sweep | Skip the point when it is already there
  ansible.builtin.debug:
    msg: "c{{ _sweep_conc }} already done: {{ _sweep_existing.record.completed }} requests in {{ _sweep_existing.record.duration }} s"
  when: _sweep_existing.valid
"""

RETURN = r"""
_raw:
  description: One dict per path.
  type: list
  elements: dict
  contains:
    valid:
      description: Whether the file holds a usable result.
      type: bool
      sample: false
    reason:
      description: Why the point is invalid, in one sentence; empty when valid.
      type: str
      sample: only 310 of 320 requests completed
    record:
      description: The last line's JSON object (non-finite numbers as strings), or null when there is none or it is not JSON.
      type: dict
      sample: {completed: 320, duration: 812.4, total_input_tokens: 2621440, total_output_tokens: 327680, request_rate: Infinity}
    path:
      description: The file judged, as an absolute path.
      type: str
      sample: /srv/results/20261129T100000Z/infera-node-1/mix_c32.jsonl
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.infera.serving.plugins.plugin_utils._sweep_metrics import validate_point


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        num_prompts = self.get_option('num_prompts')
        if num_prompts is None or num_prompts < 0:
            raise AnsibleLookupError('bench_point needs num_prompts=N (the --num-prompts of the point, 0 or more), got %r' % (num_prompts,))
        conc = self.get_option('conc')
        return [validate_point(self._loader.path_dwim(str(term)), num_prompts, conc) for term in terms]
