#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_ready
short_description: Wait until an SGLang engine launch is ready, reporting its progress and failing fast
version_added: 0.1.0
description:
  - Watches one launch of an SGLang engine on the node until it is ready to serve. The engine runs in a container but
    writes its log and markers into a host-mounted directory, and the module reads them from the node side.
  - A launch is ready when four things hold. The ready line (O(ready_line)) is in this launch's log.
    The process is still alive (no O(exit_file), and the O(pid_file) process still exists). O(health_url) answers HTTP 200.
    Infera's worker wrapper has logged its registration of O(worker_id) in this launch's log, and the Infera router then
    lists the worker (O(worker_id) in the C(worker_id) fields of O(workers_url)). The wrapper registers in etcd only after
    the engine answers its health check, so the ready line alone is too early. The router is asked only after that
    line, because until then it may list a record that a wrapper which died (SIGKILL, OOM killer) left under the same
    host and port. That record goes when its 30 s lease runs out, and takes the worker out of the router with it.
  - It follows the launch through the phases the log prints. C(Load weight begin) and C(Load weight end) mark weight loading.
    C(Capture target decode CUDA graph begin.), then the refreshes of SGLang's tqdm bar C(Capturing batches (bs=B
    avail_mem=X GB)) with a k/N count, then C(Capture target decode CUDA graph end.) mark cuda-graph capture (SGLang
    0.5.15.post1 and 0.5.17). The ready line comes last.
  - It fails within seconds when the engine exits, when a fatal line (O(fatal_patterns)) appears, when neither the log
    nor the O(watch_dirs) have changed for O(stall_timeout) seconds, or when O(deadline) has passed since the start.
  - The failure message is written to be acted on at 3 a.m. It names the node, the stage reached, the cause (the matched
    line, the exit code, the silent seconds or the deadline) and a next step. The last 30 lines of the log follow it.
  - Progress is kept in O(state_file), so successive short calls resume where the previous one stopped. The action
    plugin of the same name uses this to run the wait in slices and print a progress line between them; see the notes.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._sliced_wait
  - infera.serving._attributes.controller
attributes:
  check_mode:
    support: full
    details:
      - The module only reads the log, the marker files, the watch dirs and the health URL, so check mode waits exactly
        like a normal run.
      - The one file it writes, in check mode too, is its own O(state_file) bookkeeping, so sliced calls can resume.
  diff_mode:
    support: N/A
    details:
      - Nothing on the node is changed, so there is nothing to diff.
  idempotent:
    support: full
    details:
      - Always reports C(changed=false); waiting again on a ready launch returns ready at once.
  async:
    details:
      - The action plugin already runs the wait in short slices; see the notes for why plain C(async) is not used.
options:
  log_path:
    description:
      - The engine log of this launch, as a path on the node (the host side of the mounted log directory).
      - Each launch should write a new file, so that a ready line from an older launch can never count.
      - The file may not exist yet; it is waited for.
    type: path
    required: true
  log_offset:
    description:
      - Byte offset in O(log_path) where this launch's output starts; anything before it is ignored.
      - For a log that several launches append to, record its size before the launch and pass it here.
    type: int
    default: 0
  exit_file:
    description:
      - A file the launch wrapper writes when the engine process exits, containing the exit code. Its appearance means
        the engine exited, which fails the wait.
      - The wrapper must remove a stale one before it starts the engine.
    type: path
  pid_file:
    description:
      - A file holding the engine's process id as seen from the node. When that process is gone (or a zombie) the engine
        has exited. A missing or empty pid file is not an exit, since the wrapper may not have written it yet.
    type: path
  health_url:
    description:
      - The engine's health URL, for example V(http://127.0.0.1:30000/health), asked once the ready line is seen.
        Ready needs HTTP 200. Without it the ready line and a live process are enough.
    type: str
  workers_url:
    description:
      - The Infera router's worker list, for example V(http://127.0.0.1:8000/v1/workers), asked once the engine is
        healthy and Infera's wrapper has logged its registration (C(registered with etcd as worker <worker_id>), or
        the Kubernetes backend's C(registered via k8s Pod annotation) line with C(worker=<worker_id>)) in this
        launch's log. Ready needs O(worker_id)
        among the C(worker_id) fields of its C(workers). Without it the wait ends at the engine's health. Requires
        O(worker_id).
    type: str
  worker_id:
    description:
      - The id Infera's wrapper registers the worker under, C(<advertise host>:<engine port>), for example
        V(10.0.0.5:30000). Requires O(workers_url).
    type: str
  ready_line:
    description: Text (not a regular expression) whose appearance in the log means the server says it is ready.
    type: str
    default: The server is fired up and ready to roll!
  fatal_patterns:
    description:
      - Regular expressions (Python C(re.search)) that fail the wait as soon as a log line matches.
        The wait then reads on for up to 1.5 seconds, or until the engine exits, so that the rest of the
        error (the OOM advice, a traceback) is in the log tail.
      - A traceback alone is not fatal, because SGLang logs recoverable ones.
      - Setting this replaces the defaults; use O(extra_fatal_patterns) to add to them.
    type: list
    elements: str
    default:
      - Capture cuda graph failed
      - out of memory
      - OutOfMemoryError
      - HSA_STATUS_ERROR
      - Memory access fault by GPU
      - HW Exception by GPU
      - Scheduler hit an exception
      - Received sigquit
      - scheduler died during initialization
      - unrecognized arguments
  extra_fatal_patterns:
    description: More regular expressions checked after O(fatal_patterns).
    type: list
    elements: str
    default: []
  watch_dirs:
    description:
      - Directories on the node whose growth counts as progress even while the log is quiet. A change in their total
        size or file count counts, for example the JIT and graph caches (V(/sgl-workspace/aiter/aiter/jit) as mounted on
        the node, V(~/.cache/flashinfer)).
      - A directory that does not exist counts as empty. They are scanned at most every 5 seconds.
    type: list
    elements: path
    default: []
  stall_timeout:
    description:
      - Seconds without any log growth and without any change in O(watch_dirs) after which the launch is declared
        stalled and the wait fails.
    type: float
    default: 900
  deadline:
    description:
      - Seconds from the start (O(started_at)) after which a launch that is not ready fails. Cold start of
        DeepSeek-V4-Pro on 8xMI355X is about 30 minutes, mostly cuda-graph capture.
    type: float
    default: 2700
  started_at:
    description:
      - Epoch seconds (node clock) when the launch started, for O(deadline), RV(elapsed) and RV(phases).
      - By default the time of the first call for this launch, kept in O(state_file).
    type: float
  max_wait:
    description:
      - Return after this many seconds even if the outcome is not known yet. The result is not failed, has RV(ready=false)
        and shows the progress so far. V(0) waits until ready or failed.
      - Through the action plugin this caps the whole task; the module itself gets slices of O(progress_interval).
    type: float
    default: 0
  state_file:
    description:
      - JSON file on the node where progress is kept between calls. It holds the offset read so far, the phases seen
        with timestamps, the last time anything grew, the start time and the log tail.
      - State written for another O(log_path) or O(log_offset) is ignored, and so is state for a log file that has been
        replaced or truncated since.
      - Defaults to O(log_path) with C(.ready-state.json) appended.
    type: path
  poll_interval:
    description: Seconds between two looks at the log, the markers and the health URL (more than 0, at most 5).
    type: float
    default: 0.25
  node:
    description:
      - The name used for the node in messages. The action plugin passes the inventory hostname.
      - Defaults to the machine's hostname. When the two differ, messages show both.
    type: str
notes:
  - "How the waiting works: the C(sglang_ready) action plugin runs on the controller. It calls this module on the node
    again and again, each call waiting at most O(progress_interval) seconds, all with the same O(state_file). After each
    call it prints one line such as 'node1: capturing_cuda_graph graph 7/20 (bs=64) elapsed 12:31, log +5120'
    (the phase, the cuda-graph count and batch size, the time since the start and the log growth since the last line),
    so a cold start of half an hour shows progress at least once a minute."
  - "Why not plain C(async) with C(async_status): polling an async job tells nothing about the phase until it ends,
    so half an hour of cuda-graph capture looks like a hang. Separate short calls also survive a dropped SSH
    connection. A lost slice is retried (O(reconnect_retries)) and resumes from O(state_file), while the engine, which
    does not depend on the connection, keeps starting."
  - The timestamps in RV(phases) are when the module first saw each line (node clock), not the log's own timestamps.
  - A slice cut off by a dropped connection may still finish on the node; its state writes are atomic, and reading a
    line twice changes nothing.
  - Only Python's standard library and Ansible's own module utilities are needed on the node.
requirements:
  - Python 3 on the node.
seealso:
  - module: infera.serving.sglang_variant
"""

EXAMPLES = r"""
- name: sglang_worker | Wait for the engine and its registration with the router (progress every 30 s)
  infera.serving.sglang_ready:
    log_path: /var/lib/infera/sgl_mix/logs/engine-20261130T054100Z.log
    exit_file: /var/lib/infera/sgl_mix/run/engine-20261130T054100Z.exit
    health_url: http://127.0.0.1:30000/health
    workers_url: http://127.0.0.1:8000/v1/workers
    worker_id: "{{ ansible_default_ipv4.address }}:30000"
    watch_dirs:
      - /sgl-workspace/aiter/aiter/jit
      - /root/.cache/flashinfer
    deadline: 2700
    stall_timeout: 900

- name: sglang_worker | Wait with a custom fatal line and a tighter stall guard
  infera.serving.sglang_ready:
    log_path: /var/lib/infera/sgl_mix/logs/engine-20261130T054100Z.log
    exit_file: /var/lib/infera/sgl_mix/run/engine-20261130T054100Z.exit
    health_url: http://127.0.0.1:30000/health
    extra_fatal_patterns:
      - "RuntimeError: NCCL error"
    stall_timeout: 600
    progress_interval: 20

- name: sglang_worker | Look once and return (no waiting)
  infera.serving.sglang_ready:
    log_path: /var/lib/infera/sgl_mix/logs/engine.log
    max_wait: 1
  register: _sglang_worker_progress
"""

RETURN = r"""
ready:
  description: Whether the launch is ready (ready line seen, process alive, health answered 200).
  returned: always
  type: bool
  sample: true
phase:
  description:
    - Where the launch is. One of V(launching), V(loading_weights), V(weights_loaded), V(capturing_cuda_graph),
      V(graph_captured), V(registering) (the engine is healthy; the wrapper has not logged its registration, or the
      router does not list the worker yet) or V(ready)
      while it progresses.
    - On failure one of V(failed) (a fatal line), V(exited), V(stalled) or V(timed_out).
  returned: always
  type: str
  sample: capturing_cuda_graph
stage:
  description: The last progress phase reached (never a failure word); on failure, the stage that failed.
  returned: always
  type: str
  sample: capturing_cuda_graph
phases:
  description:
    - For each progress phase seen, C(at) (epoch seconds on the node clock) and C(since_start) (seconds after the start).
    - V(weights_loaded) also carries C(reported_elapsed), the load time the log printed, when it printed one.
  returned: always
  type: dict
  sample:
    launching: {at: 1732900000.0, since_start: 0.0}
    loading_weights: {at: 1732900003.2, since_start: 3.2}
    weights_loaded: {at: 1732900180.5, since_start: 180.5, reported_elapsed: 176.9}
graph_progress:
  description: Cuda-graph capture progress from the last C(Capturing batches) line, as C(done), C(total) and C(bs).
  returned: always
  type: dict
  sample: {done: 7, total: 20, bs: 64}
elapsed:
  description: Seconds since the start of the launch (O(started_at)).
  returned: always
  type: float
  sample: 751.2
started_at:
  description: The start of the launch in epoch seconds, as used for O(deadline).
  returned: always
  type: float
  sample: 1732900000.0
log_tail:
  description: The last 30 lines of the log read so far, with progress bars shown as their latest redraw.
  returned: always
  type: list
  elements: str
  sample: ["Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1, 2, 4], avail mem=30.92 GB",
           "Capturing batches (bs=64 avail_mem=12.30 GB):  35%|███▌      | 7/20 [00:05<00:10,  1.20it/s]"]
log_bytes:
  description: Bytes the log holds past O(log_offset); the action plugin prints its growth between slices.
  returned: always
  type: int
  sample: 48213
health_status:
  description: HTTP status of the last health check, or null if none answered (or none was made yet).
  returned: always
  type: int
  sample: 200
worker_id:
  description: O(worker_id), or null when registration is not waited for.
  returned: always
  type: str
  sample: 10.0.0.5:30000
router_workers:
  description: The worker_ids the router listed at the last look, or null if it was not asked (or did not answer).
  returned: always
  type: list
  elements: str
  sample: ["10.0.0.5:30000"]
registration_line:
  description:
    - The line in which Infera's wrapper logged its registration of O(worker_id) in this launch's log, or null when
      it has not (yet) or registration is not waited for.
  returned: always
  type: str
  sample: >-
    INFO:infera.common.registration:registered with etcd as worker 10.0.0.5:30000 (lease=7668682686337768167, ttl=30s,
    engine=EngineType.SGLANG, disagg=DisaggMode.MIXED)
exit_code:
  description: The engine's exit code from O(exit_file) when the engine exited, else null.
  returned: always
  type: int
  sample: 137
node:
  description: The node name used in messages.
  returned: always
  type: str
  sample: node1
state_file:
  description: The state file used.
  returned: always
  type: str
  sample: /var/log/sglang/engine-1.log.ready-state.json
cause:
  description: Why the wait failed, in one sentence (the matched line, the exit, the silence or the deadline).
  returned: failure
  type: str
  sample: "log line matched 'out of memory': torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.infera.serving.plugins.module_utils._errors import run_or_fail
from ansible_collections.infera.serving.plugins.module_utils._readiness import ARGUMENT_SPEC, wait_until_ready


def main():
    # progress_interval, reconnect_retries and reconnect_delay are the action plugin's; accepted here so the
    # documented options and the argument spec agree.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    result = run_or_fail(module, wait_until_ready)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
