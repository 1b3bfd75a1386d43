#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# The work is done by the action plugin of the same name on the controller; this file only documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: sweep_record
short_description: Judge one sweep point and rewrite its host's manifest on the controller
version_added: 0.1.0
description:
  - Judges the point from the controller's copy of its C(mix_c<conc>.jsonl) (the last line, as
    P(infera.serving.bench_point#lookup) judges it) and adds it to O(points) with its status and the reason it is not valid.
  - Then writes C(manifest.json) in O(dest) with the run's keys and every point so far, so the manifest is complete after
    every point and nothing collected is lost when a later point fails. The file is written to a temporary file in O(dest)
    and renamed over the old one, so a failure never leaves half a manifest.
  - "The status is V(ok) (valid), V(invalid) (the point ran and its file is not valid, or its workers cannot stand for
    it), V(aborted) (O(aborted) and no valid file) or V(resumed) (O(resumed): a valid result was already on the
    controller, so the point did not run)."
  - The point records the workers that served it (C(worker_id), C(url), C(dp_size)), which are the active workers of
    O(model) in O(router_workers), the router's C(/v1/workers) answer read as the bench started, or
    O(workers) kept from the run that measured a resumed point. The report divides its per-GPU figures by their GPUs. A fleet point
    (O(fleet)) with fewer or more serving workers than its concurrency was scaled by (O(conc) = O(node_conc) x N), or
    a point served by a worker of the other variant (its C(dp_size)), is V(invalid).
  - M(infera.serving.sweep_report) reads the same file back; it leaves out any point whose status is not V(ok) or
    V(resumed) and checks every other point's file again, since a results folder may be copied or edited later.
  - Runs on the controller only; a relative O(dest) is taken from the playbook's directory.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.controller
attributes:
  check_mode:
    support: full
    details:
      - In check mode the point is judged and returned, nothing is written, and C(changed) says whether the manifest would change.
  diff_mode:
    support: full
  idempotent:
    support: none
    details:
      - Each point records when it was recorded (C(ended)), so recording a point again rewrites the manifest; the file is
        otherwise rewritten only when its content differs.
options:
  dest:
    description:
      - The host's results folder on the controller, C(results/<run_id>/<host>), holding the point's C(mix_c<conc>.jsonl).
        C(manifest.json) is written here.
    type: path
    required: true
  run_id:
    description: The run's name, recorded as C(run_id).
    type: str
    required: true
  host:
    description: The inventory host the point ran on, recorded as C(host).
    type: str
    required: true
  simulated:
    description: Whether the worker is the GPU-free rehearsal simulator; the report then says SIMULATED.
    type: bool
    default: false
  image:
    description: The image the worker runs.
    type: str
    default: ""
  image_digest:
    description: The image's digest, when known.
    type: str
    default: ""
  stack:
    description:
      - "What the image runs, as M(infera.serving.stack_info) read it: Infera's and SGLang's versions, the wrapper's
        ready limit and drain, and C(summary), one line of them."
    type: dict
    default: {}
  model:
    description: The model the bench client asked for.
    type: str
    default: ""
  recipe:
    description: The name of the recipe the engine argv came from.
    type: str
    default: ""
  variants:
    description:
      - "Each variant that ran so far, as C({name: {argv: [...], env: {...}}}); the report takes TP, PP, DP and EP from
        the argv."
    type: dict
    default: {}
  topology:
    description:
      - The PD pair that served the points, as the P(infera.serving.pd_pair#filter) filter reads it. The manifest records
        C(kind=pd), its C(label) (V(1P1D)), its C(prefill) and C(decode) nodes and its C(router) node; O(variants) then
        holds each leg's argv and env.
      - "Empty, the manifest records C({kind: mixed})."
    type: dict
    default: {}
  bench_args:
    description: The bench client's settings, recorded as they are (the report lists them; C(random_input_len) and C(random_output_len) fill ISL and OSL).
    type: dict
    default: {}
  files:
    description:
      - Files of the point to keep in O(dest) beside its jsonl, file name to text, written (atomically, only when they
        differ) before the manifest. The sweep role passes the point's bench script as it was sent to the node.
      - A name must be a plain file name, not C(manifest.json).
    type: dict
    default: {}
  points:
    description: The points recorded earlier in this run (the C(points) of the previous call's RV(manifest)); the new one is appended.
    type: list
    elements: dict
    default: []
  conc:
    description: The point's concurrency (the client's C(--max-concurrency)); its file is C(mix_c<conc>.jsonl) in O(dest).
    type: int
    required: true
  node_conc:
    description:
      - The concurrency of the sweep's list the point stands for; targets and the report's fleet section use it.
      - Unset, O(conc). A fleet point sends O(node_conc) x N through one router of N serving workers.
    type: int
  fleet:
    description: The point went through one router for the whole fleet (the serving topology's fleet sweep).
    type: bool
    default: false
  router_workers:
    description:
      - The C(workers) list of the router's C(/v1/workers) answer, read as the point's bench started (the sweep role
        passes RV(infera.serving.sglang_bench_wait#module:router_workers)).
      - Only the active workers of O(model) are recorded. Mutually exclusive with O(workers).
    type: list
    elements: dict
  workers:
    description:
      - The workers already recorded for the point (the sweep plan's C(workers) of a resumed point), kept as they are.
      - With neither this nor O(router_workers) the point records no workers, and the report counts one worker's GPUs.
    type: list
    elements: dict
  variant:
    description: The variant the point ran in (a key of O(variants)).
    type: str
    required: true
  num_prompts:
    description: How many requests the point sent (C(--num-prompts)); fewer completed makes the point invalid.
    type: int
    required: true
  warmup_requests:
    description: The point's C(--warmup-requests), recorded as they are.
    type: int
    default: 0
  started:
    description: When the point started (UTC, C(YYYY-MM-DDTHH:MM:SSZ)); the action records when it ended.
    type: str
    default: ""
  resumed:
    description: The resume check found a valid result on the controller, so the point was not run again.
    type: bool
    default: false
  aborted:
    description: The sweep was aborted at or before this point; without a valid file the point is V(aborted).
    type: bool
    default: false
  label:
    description:
      - How the line printed after the point names it, for example V(point 2/6 c64 nodp) (the sweep plan's label).
      - Unset, the line says C(point c<conc>).
    type: str
  restarts:
    description:
      - The engine (re)starts of the sweep so far, each with C(variant) and C(seconds) (the worker's seconds to ready),
        for RV(timings).
    type: list
    elements: dict
    default: []
requirements: []
seealso:
  - module: infera.serving.sweep_report
  - plugin: infera.serving.bench_point
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: sweep | Read the workers the router serves the point with, right before its bench starts
  ansible.builtin.uri:
    url: "{{ sweep_router_url }}/v1/workers"
    return_content: true
  register: router_workers_answer

- name: sweep | Judge the point and rewrite the run's manifest on the controller
  infera.serving.sweep_record:
    dest: "{{ sweep_results_dir }}/{{ sweep_run_id }}/{{ inventory_hostname }}"
    run_id: "{{ sweep_run_id }}"
    host: "{{ inventory_hostname }}"
    image: "{{ sweep_image }}"
    model: "{{ sweep_model }}"
    recipe: dsv4-pro-mi355x-mixed
    variants:
      nodp: {argv: [--tp-size, "8"], env: {}}
    bench_args:
      random_input_len: "{{ sweep_random_input_len }}"
      random_output_len: "{{ sweep_random_output_len }}"
    points: "{{ sweep_record_result.manifest.points | default([]) }}"
    conc: 32
    router_workers: "{{ router_workers_answer.json.workers }}"
    variant: nodp
    num_prompts: 320
    warmup_requests: 64
    started: "2026-11-29T10:00:00Z"
  delegate_to: localhost
  register: sweep_record_result

- name: sweep | Say how the point went
  ansible.builtin.debug:
    msg: "c32 {{ sweep_record_result.point.status }} {{ sweep_record_result.point.reason }}"
"""

RETURN = r"""
path:
  description: The manifest written (in check mode, that would be written).
  returned: always
  type: str
  sample: /srv/results/20261129T100000Z/infera-node-1/manifest.json
point:
  description: The point's manifest entry.
  returned: always
  type: dict
  sample:
    conc: 96
    node_conc: 32
    fleet: true
    variant: nodp
    num_prompts: 960
    warmup_requests: 192
    file: mix_c96.jsonl
    started: "2026-11-29T10:00:00Z"
    ended: "2026-11-29T10:14:08Z"
    status: invalid
    reason: only 950 of 960 requests completed
    workers:
      - {worker_id: "10.0.0.1:30000", url: "http://10.0.0.1:30000", dp_size: null}
      - {worker_id: "10.0.0.2:30000", url: "http://10.0.0.2:30000", dp_size: null}
      - {worker_id: "10.0.0.3:30000", url: "http://10.0.0.3:30000", dp_size: null}
manifest:
  description:
    - The whole manifest as written, with C(run_id), C(host), C(simulated), C(image), C(image_digest), C(stack), C(model),
      C(recipe), C(variants), C(topology), C(bench_args) and C(points).
    - Pass C(manifest.points) as O(points) of the next point.
  returned: always
  type: dict
  sample:
    run_id: "20261129T100000Z"
    host: infera-node-1
    simulated: false
    image: registry.local:5000/sglang-mi355x:v0.5.9
    image_digest: ""
    model: /data/hf-cache/DeepSeek-V4-Pro
    recipe: dsv4-pro-mi355x-mixed
    variants: {nodp: {argv: [--tp-size, "8"], env: {}}}
    topology: {kind: mixed}
    bench_args: {random_input_len: 8192, random_output_len: 1024}
    points: []
figures:
  description:
    - The judged point's figures, from the same record that made it valid; empty when it is not valid.
    - C(tput_per_gpu) and C(output_tput_per_gpu) in tok/s per GPU of the point's serving workers, C(interactivity) the median tok/s per user,
      C(ttft_p99_ms) the P99 time to first token.
  returned: always
  type: dict
  sample: {tput_per_gpu: 2256.1, output_tput_per_gpu: 250.7, interactivity: 18.2, ttft_p99_ms: 4120.5}
line:
  description: The line printed after the point (its figures, its verdict and the sweep's running time).
  returned: always
  type: str
  sample: "node1: point 2/6 c64 nodp done: 2256 tok/s/GPU (251 output), 18.2 tok/s/user, TTFT p99 4121 ms, valid; sweep time 0:41:07"
timings:
  description: One line per point recorded so far with its wall time and status, then one per engine (re)start in O(restarts).
  returned: always
  type: list
  elements: str
  sample: ["node1: c32 nodp: 0:14:08 (ok)", "node1: engine (re)start to dp: 0:29:41"]
"""
