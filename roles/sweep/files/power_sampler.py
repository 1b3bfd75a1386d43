# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

"""Sample the node's GPU power with amd-smi during a sweep point, once a second, into a jsonl.

    power_sampler.py OUT_JSONL [--interval 1.0] [--amd-smi amd-smi]

Runs inside the engine container, next to the bench client (python3's standard library only).
The bench script starts it before the client and sends it SIGTERM after; it then exits 0.
Every interval it runs ``amd-smi metric --power --json`` and appends one line per GPU to
OUT_JSONL (the file is started afresh), flushed line by line::

    {"time": 1767225600.512, "gpu": 0, "watts": 842.0}

``time`` is the wall clock (unix seconds) halfway through the amd-smi call, the same for every
GPU of one call; a GPU whose socket power is "N/A" gets no line. A failing call (amd-smi
missing, exiting non-zero, hanging past AMD_SMI_TIMEOUT, printing no power) is reported on
stderr once, until a call succeeds again, and retried at the next tick: the sampler never
stops on its own. Ticks are scheduled on the monotonic clock from the start (tick k at
start + k * interval), so they do not drift; a call that outlasts the interval skips the
ticks it overran.

This script is the one owner of parsing amd-smi's power (``parse_power``). What it reads,
from the CLI's source (ROCm/amdsmi amdsmi_cli/amdsmi_commands.py ``metric_gpu``, 0ceca28
2024-10; ROCm/rocm-systems projects/amdsmi/amdsmi_cli/subcommands/metric.py and
amdsmi_logger.py ``combine_arrays_to_json``, 2025-26):

- ROCm 6.x prints a JSON list of per-GPU objects; ROCm 7.x wraps it as ``{"gpu_data": [...]}``
  (7.0 also prints empty ``cpu_data`` and ``core_data``; later releases only non-empty arrays).
- Each GPU object is ``{"gpu": N, "power": {"socket_power": ..., "gfx_voltage": ...,
  "soc_voltage": ..., "mem_voltage": ..., "throttle_status": ..., "power_management": ...}}``
  (newer CLIs add ``"ubb_power"``, the baseboard's, which is not a GPU's power).
- ``socket_power`` is ``{"value": N, "unit": "W"}`` (whole watts, the library's uint), or
  ``"N/A"`` when the library cannot read it (older CLIs may print ``{"value": "N/A", ...}``).
  ROCm 6.x takes it from ``current_socket_power`` (MI300 and later) or ``average_socket_power``.

SemiAnalysisAI/InferenceX (benchmarks/benchmark_lib.sh ``start_gpu_monitor``) samples the same
field the same way on MI355X: ``amd-smi metric -p ... -w 1`` (watch mode, CSV), every second,
with PYTHONUNBUFFERED=1 so a killed monitor loses no buffered sample. This sampler calls the
tool once per tick instead of its watch mode, so each sample has a sub-second timestamp (the
watch mode stamps whole seconds) and one failing call costs one sample, not the stream.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

# ROCm installs its tools here, which the PATH of a `docker exec` shell often lacks.
ROCM_BIN = '/opt/rocm/bin'
# amd-smi takes seconds on 8 GPUs and hangs on a wedged one (plugins/module_utils/_gpu_smi.py allows 60 s for its slower calls).
AMD_SMI_TIMEOUT = 15.0
POWER_COMMAND = ('metric', '--power', '--json')
_WATTS_PER_UNIT = {'W': 1.0, 'MW': 1e-3, 'UW': 1e-6, 'KW': 1e3}


class SamplerError(Exception):
    """One amd-smi call that gave no power reading; the message says why."""


def _json_in(text):
    """The first JSON value in the output; amd-smi may print warnings before it."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r'[\[{]', text):
        try:
            return decoder.raw_decode(text, match.start())[0]
        except ValueError:
            continue
    raise SamplerError('no JSON in the output of amd-smi %s' % ' '.join(POWER_COMMAND))


def _watts(field):
    """Watts from socket_power ({"value": N, "unit": "W"}), or None for "N/A" and anything unreadable."""
    if not isinstance(field, dict):
        return None  # "N/A"
    value = field.get('value')
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None  # {"value": "N/A", "unit": "W"}
    scale = _WATTS_PER_UNIT.get(str(field.get('unit', 'W')).strip().upper())
    if scale is None or not math.isfinite(number) or number < 0:
        return None
    return number * scale


def parse_power(text):
    """``[(gpu, watts)]`` from the output of ``amd-smi metric --power --json``, in its GPU order.

    Both shapes: ROCm 6's list of per-GPU objects and ROCm 7's ``{"gpu_data": [...]}``. A GPU
    whose ``power.socket_power`` is "N/A" (or missing) is left out. Raise SamplerError when the
    output holds no list of GPUs at all.
    """
    data = _json_in(text)
    if isinstance(data, dict):
        data = data.get('gpu_data')
    if not isinstance(data, list):
        raise SamplerError('no list of GPUs (or gpu_data) in the JSON of amd-smi %s' % ' '.join(POWER_COMMAND))
    readings = []
    for entry in data:
        if not isinstance(entry, dict) or isinstance(entry.get('gpu'), bool):
            continue
        try:
            gpu = int(entry.get('gpu'))
        except (TypeError, ValueError):
            continue
        power = entry.get('power')
        watts = _watts(power.get('socket_power')) if isinstance(power, dict) else None
        if watts is not None:
            readings.append((gpu, watts))
    return readings


def resolve_amd_smi(name):
    """The amd-smi to run: a path as given, else the name on PATH, else in ROCM_BIN (where ROCm puts it)."""
    if os.sep in name:
        return name
    return shutil.which(name) or shutil.which(name, path=ROCM_BIN) or name


def sample_once(amd_smi, runner=subprocess.run, timeout=AMD_SMI_TIMEOUT):
    """``[(gpu, watts)]`` of one ``amd-smi metric --power --json`` call; SamplerError when it fails."""
    command = [amd_smi] + list(POWER_COMMAND)
    try:
        done = runner(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise SamplerError('%s did not answer within %g s' % (' '.join(command), timeout)) from None
    except OSError as error:
        raise SamplerError('cannot run %s: %s' % (amd_smi, error.strerror or error)) from None
    if done.returncode != 0:
        last = (done.stderr or '').strip().splitlines()[-1:] or ['no error text']
        raise SamplerError('%s exited %d: %s' % (' '.join(command), done.returncode, last[0]))
    return parse_power(done.stdout or '')


def sample_lines(when, readings):
    """The jsonl lines of one call: one per GPU, all with the call's time."""
    stamp = round(when, 3)
    return [json.dumps({'time': stamp, 'gpu': gpu, 'watts': float(watts)}) + '\n' for gpu, watts in readings]


def open_output(out):
    """OUT_JSONL started afresh, opened for appending (each line lands whole at the end)."""
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    descriptor = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    return os.fdopen(descriptor, 'w', encoding='utf-8')


class _Reporter:
    """Writes a failure once until a call succeeds again, and the recovery once."""

    def __init__(self, stream):
        self.stream = stream
        self.failing = None

    def _write(self, text):
        try:
            self.stream.write('power_sampler: %s\n' % text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # stderr gone: keep sampling

    def failed(self, message):
        if message != self.failing:
            self._write('%s; retrying every interval' % message)
        self.failing = message

    def succeeded(self):
        if self.failing is not None:
            self._write('amd-smi answers again')
        self.failing = None


def run(out, interval, amd_smi, clock=time.monotonic, sleep=time.sleep, stop=lambda: False, wall=time.time,
        sample=None, errors=None):
    """Sample until ``stop()`` is true; return the number of lines written.

    ``out``: a path (started afresh) or an open text file. Tick k is due at ``clock()`` of the
    start + k * ``interval``; ``sleep(seconds)`` waits for the next one (it may return early when
    ``stop()`` turns true). ``sample(amd_smi)`` gives ``[(gpu, watts)]`` or raises SamplerError
    (default ``sample_once``); ``wall()`` stamps the samples; failures go to ``errors`` (stderr).
    """
    sample = sample or sample_once
    reporter = _Reporter(errors if errors is not None else sys.stderr)
    handle = open_output(out) if isinstance(out, (str, bytes, os.PathLike)) else out
    written = 0
    start = clock()
    tick = 0
    try:
        while not stop():
            before = wall()
            try:
                readings = sample(amd_smi)
            except SamplerError as error:
                reporter.failed(str(error))
            else:
                if readings:
                    reporter.succeeded()
                else:
                    reporter.failed('amd-smi printed no socket power (N/A on every GPU)')
                for line in sample_lines((before + wall()) / 2.0, readings):
                    handle.write(line)
                    handle.flush()
                    written += 1
            # The next tick still ahead of the clock: a call that outlasted the interval skips the ticks it overran.
            now = clock()
            tick = max(tick + 1, int((now - start) // interval) + 1)
            if stop():
                break
            sleep(max(0.0, start + tick * interval - now))
    finally:
        if handle is not out:
            handle.close()
    return written


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a number' % text) from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError('the interval must be more than 0 seconds, not %r' % text)
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(prog='power_sampler.py', description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('out', metavar='OUT_JSONL', help='where the samples go (started afresh)')
    parser.add_argument('--interval', type=_positive, default=1.0, help='seconds between samples (default 1.0)')
    parser.add_argument('--amd-smi', dest='amd_smi', default='amd-smi',
                        help='the amd-smi to run (default: amd-smi on PATH, else in %s)' % ROCM_BIN)
    args = parser.parse_args(argv)
    stopped = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda _signum, _frame: stopped.set())
    try:
        run(args.out, args.interval, resolve_amd_smi(args.amd_smi), stop=stopped.is_set, sleep=stopped.wait)
    except OSError as error:
        sys.stderr.write('power_sampler: cannot write %s: %s\n' % (args.out, error.strerror or error))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
