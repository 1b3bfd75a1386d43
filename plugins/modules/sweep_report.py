#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# The work is done by the action plugin of the same name on the controller; this file only documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: sweep_report
short_description: Turn a sweep's results folder into an InferenceX-comparable CSV, a report and a plot
version_added: 0.1.0
description:
  - Reads every C(<host>/manifest.json) under O(run_dir) and the C(mix_c<C>.jsonl) file each point's
    C(sglang.bench_serving --output-file) wrote, and writes C(results.csv), C(report.md) and C(throughput.png) into O(run_dir).
  - Runs on the controller only, from the files alone, so a results folder can be rebuilt anywhere at any time.
  - Each point's status is read as M(infera.serving.sweep_record) recorded it; points the sweep marked C(invalid) or
    C(aborted) are invalid. Every other point's jsonl is checked again the same way, since a results folder may be copied
    or edited later. It is invalid when the file is missing or empty (the client writes no line when every request
    fails), the last line is not JSON, fewer than the point's C(num_prompts) requests completed, the duration or token
    counts are missing or zero, or the line reports another C(max_concurrency) than the point's.
    Invalid points are listed in the report and in RV(invalid), never put in the CSV, the table or the plot.
  - Throughputs are computed from C(total_input_tokens), C(total_output_tokens) and C(duration); the clients' own
    throughput keys differ between sglang versions. Per-GPU columns divide by the GPUs of the point, which are the
    serving workers the router listed before it ran (recorded in the manifest) times one worker's TP x PP (as InferenceX's
    C(utils/process_result.py)); DP attention does not multiply the GPU count, and a dp worker is one worker. A point
    without recorded workers (an older manifest) counts one worker.
  - A point is invalid, too, when its recorded workers cannot stand for it, for example a fleet point with fewer
    serving workers than its concurrency was scaled by, or a worker of the other variant.
  - Column names are those of the InferenceX dashboard's CSV export, for example the output throughput per GPU column
    named C(Output Throughput/GPU) with its unit in brackets. The collection's C(docs/results.md) lists every column
    and how it is computed.
  - With O(targets_file), each point gets its concurrency's target (a fleet point, C x N through one router of N workers,
    the target of C), the ratio value/target and whether it misses the target; O(below_target) decides whether a miss
    fails the task, warns or is only reported.
  - With node points of several hosts, a fleet section compares each node's token throughput per GPU at each
    concurrency with the fleet median and flags the nodes more than 10 % below it (exactly 10 % is not flagged), in the
    report, the table, RV(fleet) and a warning.
  - A point whose client re-encoded its output to a count more than 10 % away from the server's
    (C(total_output_tokens_retokenized) against C(total_output_tokens)) is flagged as a tokenizer mismatch in the report,
    the table and its CSV row (C(Tokenizer Mismatch)), because its throughput figures count tokens the client does not reproduce.
  - When any manifest says C(simulated), the report, the table and the plot title say SIMULATED, because such numbers come from
    the rehearsal simulator and are not hardware results.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.controller
attributes:
  check_mode:
    support: full
    details:
      - In check mode everything is computed and returned, nothing is written, and C(changed) says whether a file would change.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - Files are rewritten only when their content differs, so a second run on the same folder reports C(changed=false).
options:
  run_dir:
    description:
      - The results folder of one run, C(results/<run_id>), holding one C(<host>/) folder per node with its
        C(manifest.json) and C(mix_c<C>.jsonl) files. The outputs are written here.
      - A path on the controller; a relative path is taken from the directory C(ansible-playbook) runs in.
    type: path
    required: true
  targets_file:
    description:
      - "Optional YAML file of per-concurrency targets, for example
        C({metric: 'Output Throughput/GPU', targets: {32: 250.0, 64: 400.0}})."
      - C(metric) is any numeric CSV column (its unit suffix may be left off, and InferenceX keys such as
        C(output_tput_per_gpu) are accepted); it defaults to C(Output Throughput/GPU).
      - C(higher_is_better) is optional; it defaults to false for the latency columns (ms) and true for the rest.
      - A targeted concurrency that the sweep ran but that has no valid point counts as missing its target.
      - C(random_input_len), C(random_output_len) and C(random_range_ratio) are optional and say the workload the
        targets were measured at; when the run used another, the report says so beside the comparison.
      - A path on the controller; a relative path is taken from the playbook's directory.
    type: path
  below_target:
    description:
      - What a point that misses its target does. V(fail) fails the task with one message naming each such point
        (host, concurrency, variant, value, target and ratio), after the files are written. V(warn) turns that message
        into a warning. V(ignore) only reports it in RV(below) and the report.
    type: str
    choices: [fail, warn, ignore]
    default: fail
notes:
  - Invalid points always give a warning naming each point and its reason; they never fail the task by themselves.
  - C(throughput.png) plots token throughput per GPU (left, InferenceX's default chart) and output token throughput per
    GPU (right) against interactivity, 1000 / median TPOT, as InferenceX does.
requirements:
  - matplotlib on the controller (for the plot).
seealso:
  - module: infera.serving.sweep_record
  - plugin: infera.serving.bench_point
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: sweep | Build CSV, report and plot on the controller
  infera.serving.sweep_report:
    run_dir: "{{ sweep_results_dir }}/{{ sweep_run_id }}"
    targets_file: files/targets-dsv4-pro-mi355x.yml
    below_target: fail
  delegate_to: localhost
  run_once: true
  register: sweep_report_result

- name: sweep | Print the table
  ansible.builtin.debug:
    msg: "{{ sweep_report_result.table.splitlines() }}"

- name: sweep | Rebuild an old run without targets, only warning about misses
  infera.serving.sweep_report:
    run_dir: results/20261129T100000Z
    below_target: warn
"""

RETURN = r"""
csv_path:
  description: The CSV written, one row per valid point.
  returned: always
  type: str
  sample: /srv/results/20261129T100000Z/results.csv
report_path:
  description: The Markdown report written.
  returned: always
  type: str
  sample: /srv/results/20261129T100000Z/report.md
plot_path:
  description: The PNG plot written.
  returned: always
  type: str
  sample: /srv/results/20261129T100000Z/throughput.png
simulated:
  description: Whether any host's manifest says the run was simulated.
  returned: always
  type: bool
  sample: true
hosts:
  description: The hosts found under O(run_dir).
  returned: always
  type: list
  elements: str
  sample: [infera-node-1]
target_metric:
  description: The CSV column the targets apply to, or null without O(targets_file).
  returned: always
  type: str
  sample: Output Throughput/GPU (tok/s)
rows:
  description: The CSV rows, one dict per valid point keyed by the CSV column names; empty cells are null.
  returned: always
  type: list
  elements: dict
  sample:
    - {Host: infera-node-1, Concurrency: 32, Variant: nodp, TP: 8, DP: 1, EP: 1, "Output Throughput/GPU (tok/s)": 262.4,
       Target: 250.0, Ratio: 1.05, "Below Target": false}
invalid:
  description:
    - Points left out of the CSV, each with C(host), C(conc), C(node_conc) (the concurrency of the sweep's list a fleet
      point stands for, else C(conc)), C(variant), C(status), C(file) and C(reason).
  returned: always
  type: list
  elements: dict
  sample:
    - {host: infera-node-1, conc: 256, node_conc: 256, variant: dp, status: aborted, file: mix_c256.jsonl,
       reason: "marked aborted by the sweep: engine exited; mix_c256.jsonl is missing"}
below:
  description:
    - Points that miss their target, each with C(host), C(conc), C(variant), C(metric), C(value), C(target), C(ratio)
      and C(reason).
    - A targeted point without a valid result has null C(value) and C(ratio) and says why in C(reason).
  returned: always
  type: list
  elements: dict
  sample:
    - {host: infera-node-1, conc: 64, variant: nodp, metric: Output Throughput/GPU (tok/s), value: 208.0, target: 400.0,
       ratio: 0.52, reason: ""}
untargeted:
  description: Concurrencies in O(targets_file) that the sweep did not run (informational).
  returned: always
  type: list
  elements: int
  sample: [1024]
fleet:
  description:
    - The nodes against their fleet, or null unless node points of at least two hosts are valid.
    - C(metric) (the column compared), C(threshold) (0.1), C(hosts), C(simulated_hosts), C(concurrencies) (per node
      concurrency C(node_conc), the C(values) per host, their C(median) and the C(below) entries), C(below) (every
      node more than 10 % below its median, with C(host), C(node_conc), C(value), C(median), C(shortfall)) and
      C(fleet_points) (the points of fleet sweeps, with C(host), C(conc), C(node_conc), C(variant), C(workers),
      C(value), C(simulated)).
  returned: always
  type: dict
  sample:
    metric: Throughput/GPU (tok/s)
    threshold: 0.1
    hosts: [node1, node2, node3]
    simulated_hosts: []
    concurrencies:
      - {node_conc: 32, values: {node1: 2300.0, node2: 1900.0, node3: 2280.0}, median: 2280.0,
         below: [{host: node2, node_conc: 32, value: 1900.0, median: 2280.0, shortfall: 0.167}]}
    below: [{host: node2, node_conc: 32, value: 1900.0, median: 2280.0, shortfall: 0.167}]
    fleet_points: []
table:
  description:
    - A fixed-width text table of the valid points for the play output, one line per point, followed by one
      C(INVALID ...) line per invalid point, then with several nodes the fleet lines (median per concurrency,
      C(BELOW MEDIAN ...) per flagged node). The first line says SIMULATED when the run was simulated.
    - To print it, set C(msg) to the table split into lines with the C(splitlines) string method.
  returned: always
  type: str
  sample: |-
    SIMULATED run r1: numbers from the GPU-free rehearsal simulator, not hardware results
    host           conc  variant  TP/DP/EP  tok/s/GPU  out/GPU  in/GPU  tok/s/user  TTFT p99 ms  TPOT p99 ms  target
    infera-node-1    32  nodp     8/1/1        2361.0    262.4  2098.7        25.3       1520.4         41.2  ok (1.05x)
changed_files:
  description: The output files whose content changed (in check mode, would change).
  returned: always
  type: list
  elements: str
  sample: [results.csv, report.md, throughput.png]
"""
