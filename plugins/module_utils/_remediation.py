# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""What a failed wait tells a person: the cause, the next step and the whole failure message.

The readiness wait and the bench-point wait each hand in their checked options and what they
saw; nothing here reads a file or asks a URL. A message names the node, the stage, the cause and
a next step, then the last lines of the log that shows it.
"""

from __future__ import annotations

import re

# Outcomes of a bench point in which the worker died under it.
WORKER_DEATHS = ('engine_exited', 'unhealthy')

# Next steps for a fatal line, by what the line says (custom patterns get these too).
_OOM = re.compile(r'out of memory|OutOfMemoryError|Capture cuda graph failed', re.IGNORECASE)
_GPU_FAULT = re.compile(r'HSA_STATUS_ERROR|Memory access fault by GPU|HW Exception by GPU')
_BAD_FLAG = re.compile(r'unrecognized arguments')
_SCHEDULER = re.compile(r'Scheduler hit an exception')
_SIGQUIT = re.compile(r'Received sigquit', re.IGNORECASE)
# Infera's wrapper at its own ready limit (infera/engine/sglang/worker.py _wait_ready, every release: raise
# TimeoutError(f"SGLang not ready after {timeout}s"); v0.1.1's limit is a fixed 1800 s, later ones read
# INFERA_ENGINE_READY_TIMEOUT). It then stops the engine and kills its own process group.
_WRAPPER_LIMIT = re.compile(r'SGLang not ready after (\d+(?:\.\d+)?)s')


# ---------------------------------------------------------------- shared

def format_duration(seconds):
    seconds = max(int(seconds), 0)
    return '%02d:%02d' % (seconds // 60, seconds % 60)


def seconds(value, whole_from=10):
    """Seconds as a person reads them: 900, 12, 0.6; from whole_from up (None: never) a fraction is dropped."""
    if value == int(value) or (whole_from is not None and value >= whole_from):
        return '%d' % value
    return '%.1f' % value


def _who(options):
    """The node as messages name it; the machine's hostname too when it is another name."""
    if options.node == options.hostname:
        return options.node
    return '%s (host %s)' % (options.node, options.hostname)


# ---------------------------------------------------------------- readiness

def wrapper_limit(tail):
    """The seconds of the wrapper's ready limit when the log tail shows the wrapper gave up at it, else None."""
    for line in tail or ():
        found = _WRAPPER_LIMIT.search(line)
        if found:
            return float(found.group(1))
    return None


def readiness_cause(options, state, now, kind, exited, tail=None):
    """Why a readiness wait failed, in one sentence."""
    limit = wrapper_limit(tail) if kind == 'exited' else None
    if limit is not None:
        return ('Infera\'s wrapper gave up on the engine at its own ready limit ("SGLang not ready after %ss", '
                '%s after the start) and stopped it: the wrapper\'s limit, not this wait\'s deadline (%s s), ended '
                'the cold start' % (seconds(limit), format_duration(now - state['started_at']),
                                    seconds(options.deadline)))
    if kind == 'failed':
        fatal = state['fatal']
        text = 'log line matched %r: %s' % (fatal['pattern'], fatal['line'])
        return text + ('; then the engine exited (%s)' % exited['how'] if exited else '')
    if kind == 'exited':
        return 'the engine process exited: %s' % exited['how']
    if kind == 'timed_out':
        return 'not ready %s after the start (deadline %s s)' % (format_duration(now - state['started_at']),
                                                                 seconds(options.deadline))
    quiet = seconds(now - state['last_progress_at'])
    if state['log_size_seen'] is None:
        return 'the log %s has not appeared for %s s' % (options.log_path, quiet)
    if state['stage'] == 'registering':
        registration = state['registration']
        if not registration['logged']:
            # The router is not asked before: a record a dead wrapper left under this host:port would answer for it.
            return ('the engine is ready but Infera\'s wrapper has not logged its registration of worker %s for %s s '
                    '(no "registered with etcd as worker %s" line in %s)'
                    % (options.worker_id, quiet, options.worker_id, options.log_path))
        seen = registration['error'] or 'it lists %s' % (', '.join(registration['listed']) or 'no worker')
        return ('the engine is ready and Infera\'s wrapper registered it, but the router (%s) has not listed worker %s '
                'for %s s (%s)' % (options.workers_url, options.worker_id, quiet, seen))
    if state['ready_line_seen']:
        health = state['health']
        return ('the ready line was logged but %s has not answered 200 for %s s (last: %s)'
                % (options.health_url, quiet, health['status'] or health['error']))
    watched = ' and no change in %s' % ', '.join(options.watch_dirs) if options.watch_dirs else ''
    return ('no new log output from the engine%s for %s s (stall_timeout %s s; the wrapper\'s "waiting for SGLang HTTP" '
            'lines do not count)' % (watched, quiet, seconds(options.stall_timeout)))


def readiness_failure_message(options, state, now, kind, exited, result):
    """The whole message of a failed readiness wait; result holds its stage, cause and log tail."""
    graph = state['graph']
    graph_text = ' (graph %d/%d, bs=%s)' % (graph['done'], graph['total'], graph['bs']) if graph['total'] else ''
    verb = {'failed': 'failed', 'exited': 'exited', 'stalled': 'stalled', 'timed_out': 'timed out'}[kind]
    tail = result['log_tail']
    head = ('SGLang engine on %s %s during stage %s%s, %s after the start. Cause: %s. Next step: %s.'
            % (_who(options), verb, result['stage'], graph_text, format_duration(now - state['started_at']),
               result['cause'], _readiness_next_step(options, state, kind, exited, tail)))
    if not tail:
        return head + '\n(no log lines from %s)' % options.log_path
    return head + '\nLast %d lines of %s:\n%s' % (len(tail), options.log_path, '\n'.join(tail))


def _readiness_next_step(options, state, kind, exited, tail=None):
    inspect = 'inspect %s' % options.log_path
    if kind == 'exited' and wrapper_limit(tail) is not None:
        return ('use an image whose Infera reads INFERA_ENGINE_READY_TIMEOUT (v0.2.0 and later; the role sets it to '
                'sglang_worker_ready_deadline), or shorten the cold start: a smaller --cuda-graph-max-bs (fewer graphs '
                'to capture) or a warm JIT cache (rerun: the graphs compiled so far are kept); %s' % inspect)
    if kind == 'failed':
        return _after_fatal_line(options, state['fatal'], inspect)
    if kind == 'exited':
        return _after_exit(options, exited, inspect)
    if kind == 'timed_out':
        return ('if the log or the watch dirs still move, raise deadline (cold start with cuda-graph capture takes '
                '~30 min on 8xMI355X); to start faster lower --cuda-graph-max-bs; %s' % inspect)
    return _after_stall(options, state, inspect)


def _after_fatal_line(options, fatal, inspect):
    line = fatal['line']
    if _OOM.search(line):
        if fatal['stage'] in ('launching', 'loading_weights'):
            return ('lower --mem-fraction-static and check that nothing else holds GPU memory '
                    '(rocm-smi --showpids on %s), then restart the worker' % options.node)
        return 'lower --cuda-graph-max-bs or --mem-fraction-static in the recipe, then restart the worker'
    if _GPU_FAULT.search(line):
        return ('check the GPUs on %s (rocm-smi, dmesg); a GPU reset or draining the node may be needed before '
                'a restart; %s' % (options.node, inspect))
    if _BAD_FLAG.search(line):
        return 'check the flag against the recipe and against the engine\'s --help inside the image'
    if _SCHEDULER.search(line):
        return 'read the traceback that follows this line in the log tail below; %s' % inspect
    if _SIGQUIT.search(line):
        return 'a child process died: find the first error above this line in the log tail below; %s' % inspect
    return inspect


def _after_exit(options, exited, inspect):
    if exited['code'] == 137:
        return ('code 137 is SIGKILL, often the kernel OOM killer: check dmesg on %s and the container memory; %s'
                % (options.node, inspect))
    if exited['code'] == 0:
        return ('code 0 is a clean shutdown, so something stopped it (docker stop, a SIGTERM, a second launch); %s'
                % inspect)
    return inspect


def _after_stall(options, state, inspect):
    if state['log_size_seen'] is None:
        return ('check that the launch wrapper started the engine (docker ps / docker logs on %s) and that '
                'log_path is the host-side path of the mounted log' % options.node)
    if state['stage'] == 'registering':
        if not state['registration']['logged']:
            return ('check that the wrapper still runs (ps -ef in the worker container on %s) and that etcd answers '
                    'at its --etcd-endpoint, and look for a lease error or a traceback after the ready line in %s'
                    % (options.node, options.log_path))
        return ('check that the worker and the router use the same etcd endpoint and prefix and the same plane flags '
                '(--discovery-backend, --request-transport), and look for "registered with etcd as worker" or a lease '
                'error in %s' % options.log_path)
    if state['ready_line_seen']:
        return ('check that health_url matches the engine host and port (curl -v %s on %s)'
                % (options.health_url, options.node))
    if state['stage'] == 'capturing_cuda_graph':
        caches = ' '.join(options.watch_dirs) or '/sgl-workspace/aiter/aiter/jit (or wherever the JIT cache is mounted)'
        return ('capture can look like a hang: check for progress with du -sh %s on %s, then raise stall_timeout '
                'or lower --cuda-graph-max-bs to capture fewer graphs; %s' % (caches, options.node, inspect))
    if state['stage'] in ('launching', 'loading_weights'):
        return ('check that the model storage is mounted and being read on %s (the HF cache bind mount, iostat); '
                'raise stall_timeout if it is only slow; %s' % (options.node, inspect))
    return inspect


# ---------------------------------------------------------------- bench point

def point_cause(options, kind, detail):
    """Why a bench point failed, in one sentence."""
    if kind == 'done':
        if detail is None:
            return 'the exit file %s appeared but holds no exit code' % options.exit_file
        return 'the bench client exited %d: when every request fails the client writes no result line' % detail
    if kind == 'engine_exited':
        code = 'code %d' % detail if detail is not None else 'no code in it'
        return 'the engine exit file %s appeared (%s)' % (options.engine_exit_file, code)
    if kind == 'router':
        return 'the Infera router at %s stopped answering (%s)' % (options.router_url, detail)
    if kind == 'leg':
        return 'the %s does not answer its health URL %s (last: %s)' % (
            detail['name'], detail['health_url'], detail['last'])
    if kind == 'unhealthy':
        return ('the engine health URL %s failed %d checks in a row, %s s apart (last: %s)'
                % (options.engine_health_url, options.health_failures,
                   seconds(options.health_interval, whole_from=None), detail))
    return 'the bench exit file %s did not appear within %d s' % (options.exit_file, options.deadline)


def point_failure_message(options, kind, detail, result, elapsed, denied, engine_tail=None):
    """The whole message of a failed bench point; result holds its cause, log tail and stopped pids.

    When the worker died, the engine log's tail (engine_tail) comes first, then the bench log's.
    """
    head = ('%s on %s, stage %s, %s after the start. Cause: %s. Next step: %s.'
            % (_headline(options, kind, detail), _who(options), options.stage, format_duration(elapsed),
               result['cause'], _point_next_step(options, kind, detail, result['killed_pids'], denied)))
    if kind in WORKER_DEATHS:
        if options.engine_log:
            head += _last_lines(options.engine_log, engine_tail)
        else:
            head += '\n(no engine log was given: set engine_log to show its last lines here)'
    if not options.log_path:
        return head
    return head + _last_lines(options.log_path, result['log_tail'])


def _last_lines(path, tail):
    if not tail:
        return '\n(no lines in %s)' % path
    lines = 'line' if len(tail) == 1 else '%d lines' % len(tail)
    return '\nLast %s of %s:\n%s' % (lines, path, '\n'.join(tail))


def _headline(options, kind, detail):
    if kind in WORKER_DEATHS:
        return 'worker died during %s' % options.point
    if kind == 'deadline':
        return '%s exceeded its deadline of %d s' % (options.point, options.deadline)
    if kind == 'router':
        return 'the Infera router stopped answering during %s' % options.point
    if kind == 'leg':
        return 'the %s died during %s' % (detail['name'], options.point)
    if detail is None:
        return 'the bench client of %s left no exit code' % options.point
    return 'the bench client exited %d during %s' % (detail, options.point)


def _point_next_step(options, kind, detail, killed, denied):
    log = options.log_path or 'the bench log'
    engine_log = 'the engine log %s' % options.engine_log if options.engine_log else (
        'the engine log (engine.log in the sglang_worker log dir)')
    if kind == 'done' and detail is None:
        return ('make the wrapper write the exit code into its exit file in one step (a temporary file, then a '
                'rename), and see %s for how the client ended' % log)
    if kind == 'done':
        return ('see %s for the first error of the client (the tail is below), then check that the router and the '
                'engine answer, and read %s' % (log, engine_log))
    stopped = _stopped(options, killed, denied)
    if kind in WORKER_DEATHS:
        return 'the engine died: read %s and redeploy; %s' % (engine_log, stopped)
    if kind == 'router':
        return ('read the router log on its node, then run the sweep again with the same run_id: the router is started '
                'again and this point runs again; %s' % stopped)
    if kind == 'leg':
        return ('read the engine log on that node (logs/engine.log under its work directory), then run the sweep again '
                'with the same run_id: the pair is brought up again, valid points are kept and this point runs again; '
                '%s' % stopped)
    return ('check in %s that the engine still makes progress, then raise deadline or lower --num-prompts for this '
            'concurrency; %s' % (engine_log, stopped))


def _stopped(options, killed, denied):
    if denied:
        return ('the bench processes %s could not be stopped (permission denied): run this task with become, and '
                'stop them by hand before the next point; the partial point was discarded'
                % ', '.join(str(pid) for pid in denied))
    if killed:
        return 'the bench client was stopped (pids %s) and the partial point was discarded' % ', '.join(
            str(pid) for pid in killed)
    if options.kill_match:
        return 'no bench process matched %r, so none was stopped; the partial point was discarded' % options.kill_match
    return ('the bench client was not stopped (no kill_match given), so stop it by hand before the next point; '
            'the partial point was discarded')
