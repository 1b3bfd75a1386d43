#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_bench_wait
short_description: Wait for one sglang.bench_serving sweep point on a node, aborting it if the worker dies
version_added: 0.1.0
description:
  - Waits on the node for one point of a throughput sweep. The point is a run of the C(sglang.bench_serving) client,
    started detached inside the worker container (C(docker exec -d)) through a wrapper script. The wrapper writes into
    a host-mounted directory the client's C(--output-file) (O(output_file)), its log (O(log_path)) and, when the client
    exits, an exit file (O(exit_file)) holding the client's exit code. The module reads them from the node side.
  - The point is done when O(exit_file) appears. Exit code 0 succeeds; any other code fails the task. A client that
    failed is blamed on the engine when the engine's exit file appears within 5 seconds (a client whose requests failed
    because the engine died often exits first); an engine whose O(engine_health_url) answers 200 meanwhile is alive, and
    the client's failure is reported at once.
  - With O(router_url) it also reads the workers the router serves the point with, and checks that the router still
    answers after the point.
  - The point is aborted when the worker dies. That is when the engine's own exit file (O(engine_exit_file)) appears,
    or when O(engine_health_url) fails O(health_failures) checks in a row. It is also aborted when O(deadline) seconds
    have passed since the module started. An aborted point fails the task. First the bench processes are stopped
    (O(kill_match)), so a client cannot go on hammering a dead or restarted engine, or the next point.
  - The failure message is written to be acted on at 3 a.m. It names the node, the stage and the point (O(stage),
    O(conc)), the cause and a next step. When the worker died, the last 30 lines of the engine log (O(engine_log))
    follow it. The last 30 lines of the bench log come last.
  - It follows the client's progress in O(log_path). C(sglang.bench_serving) prints C(Starting warmup with N sequences),
    then C(Warmup completed with N sequences), then draws the main run's tqdm bar (C(k/N [elapsed<remaining])) with
    carriage returns. RV(progress) says which of these the client is in and how many requests completed.
  - With O(max_wait) the module returns after that many seconds even when the point has not ended (RV(finished=false)),
    with what the next call needs in RV(resume). The action plugin of the same name uses this to wait in slices of
    O(progress_interval) seconds and print one progress line per slice, so a point of an hour shows where it is and
    survives a dropped SSH connection. Used alone with O(max_wait=0) the module waits until the point ends.
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._sliced_wait
  - infera.serving._attributes.controller
attributes:
  check_mode:
    support: none
    details:
      - The module waits on processes that check mode does not start (the bench client is launched by an earlier
        C(command) task, which check mode skips), so it would only run into its deadline. In check mode it is skipped.
  diff_mode:
    support: N/A
    details:
      - The module only waits; stopping the processes of an aborted point is not something to diff.
  idempotent:
    support: full
    details:
      - Waiting again on a finished point returns its result at once with C(changed=false).
      - C(changed=true) only when an aborted point had bench processes to stop. Waiting again on it finds none left.
  async:
    details:
      - The action plugin already runs the wait in short slices that survive a dropped connection, and prints progress
        between them, which C(async) would hide.
options:
  exit_file:
    description:
      - The bench wrapper's exit marker, as a path on the node. The wrapper writes the client's exit code into it when
        the client exits. Its appearance ends the wait.
      - The wrapper must remove a stale one before it starts the client, and should write it in one step (a temporary
        file, then a rename). A file that exists but holds no code for 2 seconds fails the point.
    type: path
    required: true
  output_file:
    description:
      - The client's C(--output-file) (jsonl), as a path on the node. Used to count RV(output_lines).
      - The client appends one line when it finishes, and none when every request failed.
    type: path
  log_path:
    description: The client's stdout and stderr log, as a path on the node. Its last 30 lines go into RV(log_tail) and into every failure message.
    type: path
  engine_exit_file:
    description:
      - The engine launch's exit file (for example C(<work>/run/engine-<launch>.exit)). Its appearance means the engine
        died, which aborts the point. An engine exit file present at the start aborts the point at once.
    type: path
  engine_log:
    description:
      - The engine's log, as a path on the node. When the worker dies, its last 30 lines are shown in the failure
        message, and the next step names it (also when the point runs out of time).
      - Without it no engine log lines are shown; the message says so. Nothing is derived from O(engine_exit_file).
    type: path
    aliases: [engine_log_path]
  engine_health_url:
    description:
      - The engine's health URL, for example V(http://127.0.0.1:30000/health). HTTP 200 means alive. Any other answer,
        a refused connection or no answer within 30 seconds counts as one failed check.
      - The checks run beside the wait in a thread, so a slow answer never delays noticing O(exit_file).
      - The URL is asked directly, never through a proxy set in the environment.
    type: str
  legs:
    description:
      - The other legs of a PD pair, which serve the point's requests with this node's engine, each with C(name) (how
        the failure names it, for example V(decode leg on node2)) and C(health_url) (its engine's C(/health)).
      - Each is checked as O(engine_health_url) is. O(health_failures) failed checks in a row, or no answer when the
        client ends, abort the point naming the leg.
    type: list
    elements: dict
    default: []
  router_url:
    description:
      - The Infera router the point's requests go through, for example V(http://127.0.0.1:8000).
      - The first call (no O(resume)) reads its C(GET /v1/workers) and returns the C(workers) list as
        RV(router_workers), the workers that serve the point; the client, started just before, is still starting.
        A router that does not answer with a workers list aborts the point at once.
      - When the client exits 0, the router's C(GET /health) must still answer 200, or the point fails. A router that
        died during the point failed some of the point's requests.
      - Both are asked directly, never through a proxy set in the environment, with a 10 second timeout.
    type: str
  health_failures:
    description: How many failed health checks in a row mean the worker is dead.
    type: int
    default: 3
  health_interval:
    description: Seconds between the end of one health check and the start of the next.
    type: float
    default: 5
  deadline:
    description:
      - Seconds from the module's start after which the point is aborted.
      - Size it from the point. At concurrency C, C(sglang.bench_serving) sends C(12 x C) requests
        (C(--warmup-requests 2xC), then C(--num-prompts 10xC)), C at a time.
    type: int
    default: 3600
  kill_match:
    description:
      - Text found in the bench process command line, for example the output file path. When the point is aborted,
        every process whose command line (C(/proc/<pid>/cmdline)) contains it gets a SIGTERM; those still running
        5 seconds later get a SIGKILL. The node sees the container's processes in C(/proc), so this reaches the client
        inside the worker container. The module and its parents are never matched.
      - Make it specific to this point; it must not be empty. Without it nothing is stopped on abort.
      - Stopping processes in the container needs root on the node (C(become)).
    type: str
  poll_interval:
    description: Seconds between two looks at the exit files and the clock (more than 0, at most 10).
    type: float
    default: 1
  node:
    description: The name used for the node in messages, such as the inventory hostname. Defaults to the machine's hostname.
    type: str
  conc:
    description: The concurrency of this point, for messages (C(point c64)).
    type: int
  stage:
    description: The stage of the walkthrough, for messages.
    type: str
    default: sweep
  max_wait:
    description:
      - Return after this many seconds even if the point has not ended. The result is not failed, has
        RV(finished=false), the progress so far and RV(resume). V(0) waits until the point ends.
      - Through the action plugin each slice gets O(progress_interval); the whole wait is bounded by O(deadline).
    type: float
    default: 0
  resume:
    description:
      - What the previous call returned as RV(resume), so this call continues its wait. The start time (which
        O(deadline) counts from), the failed health checks in a row, and how far O(log_path) was read.
      - The action plugin passes it from slice to slice; leave it unset in a task.
    type: dict
  label:
    description: Action plugin only. How progress lines name the point, for example V(point 2/6 c64 nodp).
    type: str
  estimate:
    description:
      - Action plugin only. The point's estimated seconds (from the sweep's plan), for an ETA before the first request
        completes. Unset, progress lines show C(ETA ?) until then.
    type: float
  return_files:
    description:
      - When the client exits 0, also return the texts of O(output_file) and O(log_path) in RV(files), so the controller
        can keep them without fetching them (a node call each).
      - A file larger than 4 MiB or not valid UTF-8 is left out of RV(files); fetch it.
      - Like every task result, RV(files) is printed with C(-v), so a sweep run with C(-v) shows each point's jsonl
        and bench log in its output.
    type: bool
    default: false
notes:
  - Only Python's standard library and Ansible's own module utilities are needed on the node.
  - A slice (O(progress_interval)) that ends while a health check waits for its answer lets it answer first (at most
    30 seconds more), so that a check is never lost between slices.
  - The module does not parse the jsonl; that is done on the controller once every point has finished.
requirements:
  - Python 3 on the node, with C(/proc) (Linux).
seealso:
  - module: infera.serving.sglang_ready
author:
  - Infera serving maintainers (@infera)
"""

EXAMPLES = r"""
- name: sweep | Start the bench client for c64 detached in the worker container
  community.docker.docker_container_exec:
    container: sgl_mix
    command: /bin/bash /var/lib/infera/sgl_mix/results/first/bench-c64.sh
    detach: true
  changed_when: true

- name: sweep | Wait for point c64 (aborted if the worker dies)
  infera.serving.sglang_bench_wait:
    node: "{{ inventory_hostname }}"
    conc: 64
    exit_file: /var/lib/infera/sgl_mix/results/first/mix_c64.exit
    output_file: /var/lib/infera/sgl_mix/results/first/mix_c64.jsonl
    log_path: /var/lib/infera/sgl_mix/results/first/bench-c64.log
    engine_exit_file: /var/lib/infera/sgl_mix/run/engine-20261130T054100Z.exit
    engine_log: /var/lib/infera/sgl_mix/logs/engine-20261130T054100Z.log
    engine_health_url: http://127.0.0.1:30000/health
    kill_match: /var/lib/infera/sgl_mix/results/first/mix_c64.jsonl
    router_url: http://127.0.0.1:8000
    poll_interval: 0.25
    deadline: 7200
    label: point 2/6 c64 nodp
    estimate: 812
    progress_interval: 30

- name: sweep | Wait for a short point without engine checks
  infera.serving.sglang_bench_wait:
    exit_file: /var/lib/infera/sgl_mix/results/first/mix_c32.exit
    output_file: /var/lib/infera/sgl_mix/results/first/mix_c32.jsonl
    log_path: /var/lib/infera/sgl_mix/results/first/bench-c32.log
    deadline: 900
    conc: 32
  register: _sweep_point
"""

RETURN = r"""
rc:
  description: The bench client's exit code from O(exit_file); null when the point was aborted before the client exited.
  returned: always
  type: int
  sample: 0
elapsed:
  description: Seconds the module waited.
  returned: always
  type: float
  sample: 812.4
aborted:
  description: Whether the point was aborted (the worker died or the deadline passed) rather than finished by the client.
  returned: always
  type: bool
  sample: false
cause:
  description: Why the point failed, in one sentence.
  returned: failure
  type: str
  sample: the engine exit file /var/lib/infera/sglang/run/engine-3.exit appeared (code 137)
output_lines:
  description: The number of non-blank lines in O(output_file), 0 when it is missing. A finished point adds one.
  returned: always
  type: int
  sample: 1
log_tail:
  description: The last 30 lines of O(log_path), with a progress bar redrawn by carriage returns shown as its last redraw.
  returned: always
  type: list
  elements: str
  sample: ["Output token throughput (tok/s):         5120.33", "=================================================="]
killed_pids:
  description: The processes that were sent SIGTERM (and SIGKILL if they outlived 5 seconds) when the point was aborted.
  returned: always
  type: list
  elements: int
  sample: [41233, 41250]
finished:
  description: Whether the point ended (the client exited, or it was aborted); V(false) when O(max_wait) ran out first.
  returned: always
  type: bool
  sample: true
progress:
  description: What the bench log has shown so far.
  returned: always
  type: dict
  contains:
    stage:
      description: V(starting), V(warmup), V(main) (the measured run) or V(results) (the client printed its results).
      type: str
    warmup_requests:
      description: The warmup's request count, once the client said it starts the warmup.
      type: int
    completed:
      description: Requests the main run has completed, from its progress bar.
      type: int
    total:
      description: Requests of the main run (C(--num-prompts)), from its progress bar.
      type: int
    bar_elapsed:
      description: Seconds the main run has taken so far, from its progress bar.
      type: int
  sample: {stage: main, warmup_requests: 128, completed: 3584, total: 10240, bar_elapsed: 721}
engine:
  description: What the engine health checks say.
  returned: always
  type: dict
  contains:
    checked:
      description: Whether O(engine_health_url) is checked.
      type: bool
    alive:
      description: Whether the last check answered 200; null before the first answer or when not checked.
      type: bool
    failures:
      description: Failed checks in a row.
      type: int
    last:
      description: The last check's HTTP status, or why it got none.
      type: raw
  sample: {checked: true, alive: true, failures: 0, last: 200}
router_workers:
  description: The C(workers) list of the router's C(GET /v1/workers), read by the first call; null without O(router_url).
  returned: always
  type: list
  elements: dict
  sample: [{worker_id: "10.0.0.5:30000", url: "http://10.0.0.5:30000", model_name: "deepseek-ai/DeepSeek-V4-Pro", status: active}]
files:
  description:
    - With O(return_files), the texts of O(output_file) and O(log_path) by file name (for example C(mix_c64.jsonl)),
      byte for byte once encoded as UTF-8. A missing file, one larger than 4 MiB or one that is not UTF-8 is left out.
  returned: when O(return_files) and the client exited 0
  type: dict
  sample: {mix_c64.jsonl: "{\"completed\": 640, ...}\n", bench-c64.log: "Starting warmup with 128 sequences...\n"}
resume:
  description: What the next call needs to continue this wait (pass it as O(resume)).
  returned: when RV(finished=false)
  type: dict
  sample: {started_at: 1764480060.2, health_failures: 0, read_offset: 48213, progress: {stage: main, completed: 3584}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._bench_wait import ARGUMENT_SPEC, wait_for_point
from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False)

    result, warnings = run_or_fail(module, wait_for_point)
    for warning in warnings:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
