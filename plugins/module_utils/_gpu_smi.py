# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""VRAM use per GPU from amd-smi or rocm-smi: their JSON formats, running them on the node, and reading it with the
engine image's amd-smi when the node has neither (the one-shot container to run, and what it printed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

# ROCm installs its tools here, which the PATH of a non-login shell often lacks; the unit tests point it elsewhere.
ROCM_BIN = '/opt/rocm/bin'
# amd-smi takes seconds on 8 GPUs, and hangs on a wedged one.
SMI_TIMEOUT = 60
_MIB = 1024 ** 2


# ---------------------------------------------------------------- the tools' JSON

_UNIT_MIB = {'B': 1.0 / _MIB, 'KB': 1.0 / 1024, 'MB': 1.0, 'GB': 1024.0, 'TB': 1024.0 ** 2}


def _json_in(text):
    """The first JSON value in a tool's output; the tools may print warnings before it."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r'[\[{]', text):
        try:
            return decoder.raw_decode(text, match.start())[0]
        except ValueError:
            continue
    raise ValueError('no JSON in the output')


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None  # "N/A": the library could not read it


def _amd_smi_mib(field):
    """MiB from amd-smi's {"value": N, "unit": "MB"}; its MB are MiB (the library's bytes // 1024**2)."""
    if not isinstance(field, dict):
        return None
    value = _number(field.get('value'))
    scale = _UNIT_MIB.get(str(field.get('unit', 'MB')).upper())
    return None if value is None or scale is None else value * scale


def _gpu(index, used_mib, total_mib):
    percent = None
    if used_mib is not None and total_mib:
        percent = round(100.0 * used_mib / total_mib, 1)
    return {'index': index, 'used_mib': used_mib, 'total_mib': total_mib, 'used_percent': percent}


def parse_amd_smi(text):
    """The GPUs in `amd-smi metric --mem-usage --json` or `amd-smi monitor --vram-usage --json`.

    ROCm 6 prints a list of per-GPU objects; ROCm 7 wraps it as {"gpu_data": [...]} (beside cpu_data and
    core_data). metric puts the memory in mem_usage.used_vram and .total_vram, monitor in vram_used and
    vram_total; each is {"value": N, "unit": "MB"}, or "N/A" when the library could not read it.
    """
    data = _json_in(text)
    if isinstance(data, dict):
        data = data.get('gpu_data')
    if not isinstance(data, list):
        raise ValueError('no list of GPUs (or gpu_data) in the JSON')
    gpus = []
    for entry in data:
        if not isinstance(entry, dict) or 'gpu' not in entry:
            continue
        usage = entry.get('mem_usage')
        if isinstance(usage, dict):
            used, total = usage.get('used_vram'), usage.get('total_vram')
        else:
            used, total = entry.get('vram_used'), entry.get('vram_total')
        gpus.append(_gpu(int(entry['gpu']), _amd_smi_mib(used), _amd_smi_mib(total)))
    if not gpus:
        raise ValueError('no GPU in the JSON')
    return sorted(gpus, key=lambda gpu: gpu['index'])


_ROCM_SMI_CARD = re.compile(r'^card(\d+)$')


def parse_rocm_smi(text):
    """The GPUs in `rocm-smi --showmeminfo vram --json`.

    {"card0": {"VRAM Total Memory (B)": "309220868096", "VRAM Total Used Memory (B)": "297795584"}, ...}: one key
    per card, every value a string of bytes; a value the library could not read is missing or not a number.
    """
    data = _json_in(text)
    if not isinstance(data, dict):
        raise ValueError('no cardN objects in the JSON')
    gpus = []
    for key, fields in data.items():
        match = _ROCM_SMI_CARD.match(key)
        if not match or not isinstance(fields, dict):
            continue
        used = _number(fields.get('VRAM Total Used Memory (B)'))
        total = _number(fields.get('VRAM Total Memory (B)'))
        gpus.append(_gpu(int(match.group(1)), None if used is None else used / _MIB,
                         None if total is None else total / _MIB))
    if not gpus:
        raise ValueError('no cardN object in the JSON')
    return sorted(gpus, key=lambda gpu: gpu['index'])


# ---------------------------------------------------------------- on the node

# Tried in order until one answers with a GPU list.
SMI_COMMANDS = (
    ('amd-smi', ('metric', '--mem-usage', '--json'), parse_amd_smi),
    ('amd-smi', ('monitor', '--vram-usage', '--json'), parse_amd_smi),
    ('rocm-smi', ('--showmeminfo', 'vram', '--json'), parse_rocm_smi),
)


def find_tool(name):
    return shutil.which(name) or shutil.which(name, path=ROCM_BIN)


def _last_line(text):
    lines = [line.strip() for line in (text or '').splitlines() if line.strip()]
    return lines[-1] if lines else 'no output'


def read_vram():
    """(the command that answered or None, its GPUs, why each command tried before it did not answer)."""
    problems = []
    for tool, arguments, parse in SMI_COMMANDS:
        path = find_tool(tool)
        if not path:
            continue
        command = ' '.join((tool,) + arguments)
        try:
            done = subprocess.run([path] + list(arguments), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, errors='replace', timeout=SMI_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            problems.append('`%s` did not finish within %g s' % (command, SMI_TIMEOUT))
            continue
        except OSError as error:
            problems.append('`%s` could not run: %s' % (command, error))
            continue
        if done.returncode != 0:
            problems.append('`%s` exited %d: %s' % (command, done.returncode, _last_line(done.stderr or done.stdout)))
            continue
        try:
            return command, parse(done.stdout), problems
        except ValueError as error:
            problems.append('`%s` printed no VRAM figures: %s' % (command, error))
    return None, [], problems


# ---------------------------------------------------------------- with the engine image's amd-smi

# A node with only the amdgpu driver has no amd-smi of its own; ROCm engine images (lmsysorg/sglang's) have it here.
IMAGE_AMD_SMI = '/opt/rocm/bin/amd-smi'
IMAGE_SMI_ARGUMENTS = SMI_COMMANDS[0][1]
IMAGE_SMI_CONTAINER = 'infera-preflight-amd-smi'
_IMAGE_SMI_COMMAND = ' '.join(('amd-smi',) + IMAGE_SMI_ARGUMENTS)
# coreutils timeout's exit codes: it cut the command off; the command is not there.
_TIMED_OUT = 124
_NOT_FOUND = 127


def image_smi_source(image):
    """What details.gpus.source says of a reading from the image's amd-smi."""
    return '%s (in %s)' % (_IMAGE_SMI_COMMAND, image)


def image_smi_label(image):
    """How a message names a reading from the image's amd-smi."""
    return '`%s` in %s' % (_IMAGE_SMI_COMMAND, image)


def image_smi_plan(image, dev):
    """The one-shot container that reads VRAM use with image's amd-smi: community.docker.docker_container options.

    dev is where the node's device nodes are (/dev): the container gets its kfd and dri.
    """
    return {
        'name': IMAGE_SMI_CONTAINER,
        'image': image,
        # amd-smi hangs on a wedged GPU and Docker's wait has no deadline: coreutils timeout (in every ROCm image,
        # which are Ubuntu) ends it as SMI_TIMEOUT ends the node's own.
        'entrypoint': ['timeout', '%g' % SMI_TIMEOUT, IMAGE_AMD_SMI],
        'command': list(IMAGE_SMI_ARGUMENTS),
        'devices': [os.path.join(dev, 'kfd'), os.path.join(dev, 'dri')],
        'source': image_smi_source(image),
    }


def read_image_vram(run, image):
    """(the source or None, its GPUs, why it did not answer), like read_vram(), from what
    community.docker.docker_container returned for image_smi_plan(image): container.Output (stdout and stderr),
    status (the exit code), msg (Docker's error when the container could not start)."""
    label = image_smi_label(image)
    output = (run.get('container') or {}).get('Output')
    status = run.get('status')
    if output is None or status is None:
        return None, [], ['%s could not start: %s' % (label, _last_line(run.get('msg')))]
    if status == _TIMED_OUT:
        return None, [], ['%s did not finish within %g s' % (label, SMI_TIMEOUT)]
    if status == _NOT_FOUND:
        return None, [], ['%s has no %s (exit %d: %s)' % (image, IMAGE_AMD_SMI, status, _last_line(output))]
    if status != 0:
        return None, [], ['%s exited %d: %s' % (label, status, _last_line(output))]
    try:
        return image_smi_source(image), parse_amd_smi(output), []
    except ValueError as error:
        return None, [], ['%s printed no VRAM figures: %s' % (label, error)]
