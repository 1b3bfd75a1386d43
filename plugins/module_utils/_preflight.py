# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The node preflight: read-only checks that a node can take the SGLang worker, before anything changes.

Every check runs whatever the others find, and a problem comes back as a failure (the check's name and one
line naming the cause and the next step), never as an exception, so one run shows everything to fix on
every node. Only bad arguments raise PreflightError.

Sections: the arguments; the Docker engine's API over its unix socket; listening sockets and GPU device
holders from /proc; VRAM use from amd-smi or rocm-smi, on the node or in the engine image; the image's registry;
the checks; the run.
"""

from __future__ import annotations

import glob
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import time
from urllib.error import HTTPError
from urllib.parse import quote

from ansible.module_utils.urls import open_url

# In the order they run and report.
CHECKS = ('docker', 'devices', 'gpus', 'model', 'disk', 'ports', 'etcd', 'image')

ARGUMENT_SPEC = dict(
    docker_socket=dict(type='path', default='/var/run/docker.sock'),
    render_nodes=dict(type='int', default=8),
    vram_max_percent=dict(type='float', default=10.0),
    model_path=dict(type='path'),
    model_types=dict(type='list', elements='str', default=['deepseek_v4']),
    docker_data_root=dict(type='path'),
    min_free_gib=dict(type='float', default=50.0),
    ports=dict(type='list', elements='int', default=[]),
    container=dict(type='str'),
    etcd_endpoint=dict(type='str'),
    etcd_wait=dict(type='float', default=10.0),
    image=dict(type='str'),
    image_smi_run=dict(type='dict'),
    timeout=dict(type='float', default=5.0),
    node=dict(type='str'),
)

# Where the node's kernel views and tools are; the unit tests point these at fake trees.
PROC = '/proc'
DEV = '/dev'
# ROCm installs its tools here, which the PATH of a non-login shell often lacks.
ROCM_BIN = '/opt/rocm/bin'
# Used when Docker does not say where its data root is.
DEFAULT_DOCKER_ROOT = '/var/lib/docker'
# amd-smi takes seconds on 8 GPUs, and hangs on a wedged one.
SMI_TIMEOUT = 60
_GIB = 1024 ** 3
_MIB = 1024 ** 2
# The etcd check's clock and sleep; the unit tests inject their own.
CLOCK = time.monotonic
SLEEP = time.sleep
# How often an unhealthy etcd is asked again within etcd_wait.
ETCD_POLL = 0.5
# How many holders of one port or GPU a message names.
_NAMED_HOLDERS = 3


class PreflightError(ValueError):
    """A bad module argument: the one-line message names it and what is accepted."""


def check_arguments(params):
    """Raise PreflightError on the first argument no check could run with."""
    if params['render_nodes'] < 0:
        raise PreflightError('render_nodes must be 0 or more; got %d' % params['render_nodes'])
    if not 0 <= params['vram_max_percent'] <= 100:
        raise PreflightError('vram_max_percent must be between 0 and 100; got %s' % params['vram_max_percent'])
    if params['min_free_gib'] < 0:
        raise PreflightError('min_free_gib must be 0 or more GiB; got %s' % params['min_free_gib'])
    if params['timeout'] <= 0:
        raise PreflightError('timeout must be more than 0 seconds; got %s' % params['timeout'])
    if params['etcd_wait'] < 0:
        raise PreflightError('etcd_wait must be 0 or more seconds; got %s' % params['etcd_wait'])
    bad_ports = [port for port in params['ports'] if not 1 <= port <= 65535]
    if bad_ports:
        raise PreflightError('ports must be between 1 and 65535; got %s' % ', '.join(map(str, bad_ports)))
    endpoint = params.get('etcd_endpoint')
    if endpoint and not re.match(r'^https?://[^/]+', endpoint):
        raise PreflightError('etcd_endpoint must be an http:// or https:// URL such as http://10.0.0.5:2379; got %r'
                             % endpoint)
    if params.get('image') is not None and not params['image'].strip():
        raise PreflightError('image must not be empty')
    if params.get('image_smi_run') is not None and not params.get('image'):
        raise PreflightError('image_smi_run needs image, the engine image its amd-smi ran in')


# ---------------------------------------------------------------- the Docker engine's API

class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket, the way the Docker engine answers, with the standard library alone."""

    def __init__(self, socket_path, timeout):
        super().__init__('localhost', timeout=timeout)
        self._socket_path = socket_path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def docker_get(socket_path, path, timeout):
    """(HTTP status, body bytes) of GET path from the Docker engine; OSError or HTTPException when it does not answer."""
    connection = _UnixHTTPConnection(socket_path, timeout)
    try:
        connection.request('GET', path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def docker_json(socket_path, path, timeout):
    """The parsed JSON body of a 200 answer to GET path, or None for any other answer or none at all."""
    try:
        status, body = docker_get(socket_path, path, timeout)
        return json.loads(body) if status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None


# ---------------------------------------------------------------- /proc: listening sockets and device holders

# The TCP state LISTEN in /proc/net/tcp{,6}.
_TCP_LISTEN = '0A'


def listening_ports(table):
    """{port: set of socket inodes} of the LISTEN sockets in the text of /proc/net/tcp or /proc/net/tcp6."""
    found = {}
    for line in table.splitlines()[1:]:
        # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN or fields[9] == '0':
            continue
        port = int(fields[1].rsplit(':', 1)[1], 16)
        found.setdefault(port, set()).add(fields[9])
    return found


def _read_text(path):
    with open(path, 'r', encoding='utf-8', errors='replace') as handle:
        return handle.read()


def node_listening_ports():
    """{port: socket inodes} of every TCP LISTEN socket in this network namespace, IPv4 and IPv6."""
    found = {}
    for table in ('tcp', 'tcp6'):
        try:
            text = _read_text(os.path.join(PROC, 'net', table))
        except OSError:
            continue  # a kernel without IPv6 has no tcp6
        for port, inodes in listening_ports(text).items():
            found.setdefault(port, set()).update(inodes)
    return found


def _is_gpu_device(target):
    return target == '/dev/kfd' or target.startswith('/dev/dri/renderD')


class ProcessTable:
    """Who holds what on the node, from one pass over /proc/<pid>/fd: socket inodes and the GPU device nodes.

    Every ROCm process opens /dev/kfd, so its holders are the processes using a GPU. Another user's fds are
    readable only by root; those processes are counted in ``unreadable``.
    """

    def __init__(self):
        self.socket_holders = {}
        self.gpu_holders = []
        self.unreadable = 0
        try:
            entries = os.listdir(PROC)
        except OSError:
            entries = []
        for entry in sorted((name for name in entries if name.isdigit()), key=int):
            self._scan(int(entry))

    def _scan(self, pid):
        fd_dir = os.path.join(PROC, str(pid), 'fd')
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            self.unreadable += 1
            return
        except OSError:
            return  # exited meanwhile
        holds_gpu = False
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith('socket:[') and target.endswith(']'):
                self.socket_holders.setdefault(target[len('socket:['):-1], []).append(pid)
            elif _is_gpu_device(target):
                holds_gpu = True
        if holds_gpu:
            self.gpu_holders.append(pid)

    def holders_of(self, inodes):
        """The pids holding any of these socket inodes, each once, in order."""
        return sorted({pid for inode in inodes for pid in self.socket_holders.get(inode, ())})


def read_command_line(pid):
    """The command line of pid as pgrep -f matches it (its arguments joined by spaces); '' when it is gone, a
    kernel thread or a zombie."""
    try:
        with open(os.path.join(PROC, str(pid), 'cmdline'), 'rb') as handle:
            raw = handle.read()
    except OSError:
        return ''
    return raw.rstrip(b'\0').replace(b'\0', b' ').decode('utf-8', 'replace')


def command_line(pid):
    """The command line of pid as one string, or '?' when it is gone or unreadable."""
    return read_command_line(pid).strip() or '?'


def pid_namespace(pid):
    """The pid namespace of pid (the link /proc/<pid>/ns/pid reads, e.g. pid:[4026532577]), or None."""
    try:
        return os.readlink(os.path.join(PROC, str(pid), 'ns', 'pid'))
    except OSError:
        return None


def describe_processes(pids):
    """'pid 42 (python3 -m http.server 8000)' for the first few pids, then how many more."""
    named = ['pid %d (%s)' % (pid, command_line(pid)) for pid in pids[:_NAMED_HOLDERS]]
    if len(pids) > _NAMED_HOLDERS:
        named.append('%d more' % (len(pids) - _NAMED_HOLDERS))
    return ', '.join(named)


# ---------------------------------------------------------------- VRAM use from amd-smi or rocm-smi

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


# ---------------------------------------------------------------- VRAM use with the engine image's amd-smi

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


def image_smi_plan(image):
    """The one-shot container that reads VRAM use with image's amd-smi: community.docker.docker_container options."""
    return {
        'name': IMAGE_SMI_CONTAINER,
        'image': image,
        # amd-smi hangs on a wedged GPU and Docker's wait has no deadline: coreutils timeout (in every ROCm image,
        # which are Ubuntu) ends it as SMI_TIMEOUT ends the node's own.
        'entrypoint': ['timeout', '%g' % SMI_TIMEOUT, IMAGE_AMD_SMI],
        'command': list(IMAGE_SMI_ARGUMENTS),
        'devices': [os.path.join(DEV, 'kfd'), os.path.join(DEV, 'dri')],
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


def _gpu_figure(gpu):
    return 'GPU %d (%.1f%%, %d of %d MiB)' % (gpu['index'], gpu['used_percent'], gpu['used_mib'], gpu['total_mib'])


# ---------------------------------------------------------------- the image's registry

_DOCKER_HUB = ('docker.io', 'index.docker.io', 'registry-1.docker.io')


def registry_host(image):
    """The registry host an image reference names, or None for Docker Hub (docker's own rule: the first path
    component is a host when it has a dot or a port, or is localhost)."""
    name = image.split('@', 1)[0]
    first, slash, _rest = name.partition('/')
    if slash and ('.' in first or ':' in first or first == 'localhost') and first not in _DOCKER_HUB:
        return first
    return None


def probe_registry(host, timeout):
    """(how the registry answered GET /v2/, or None; what each try got). A 401 answers: it wants a login.

    https first; http for a registry the engine is told is insecure (--insecure-registry).
    """
    problems = []
    for scheme in ('https', 'http'):
        url = '%s://%s/v2/' % (scheme, host)
        try:
            response = open_url(url, method='GET', timeout=timeout)
            try:
                return 'HTTP %d over %s' % (response.getcode(), scheme), problems
            finally:
                response.close()
        except HTTPError as error:
            if error.code == 401:
                return 'HTTP 401 over %s (it wants a login)' % scheme, problems
            problems.append('%s: HTTP %d' % (url, error.code))
        except Exception as error:  # pylint: disable=broad-except
            problems.append('%s: %s' % (url, error))
    return None, problems


# ---------------------------------------------------------------- the checks

def _file_problem(path):
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


def _existing_ancestor(path):
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


class Preflight:
    """One node's checks: each adds failures (check, message) and details, or says why it was skipped."""

    def __init__(self, params):
        self.params = params
        self.timeout = params['timeout']
        self.failures = []
        self.details = {}
        self.docker_answers = False
        self._docker_root = None
        self._table = None
        self._container_namespace = None
        self._image_answer = None
        # Set when the node has no amd-smi but the engine image has: the role runs it and checks again.
        self.image_smi = None

    def fail(self, check, message):
        self.failures.append({'check': check, 'message': message})

    # -- shared lookups

    @property
    def table(self):
        if self._table is None:
            self._table = ProcessTable()
        return self._table

    def _find_container_namespace(self):
        """The pid namespace of the named container's init process, when it runs and has one of its own."""
        container = self.params.get('container')
        if not container or not self.docker_answers:
            return None
        inspect = docker_json(self.params['docker_socket'], '/containers/%s/json' % quote(container, safe=''),
                              self.timeout)
        state = (inspect or {}).get('State') or {}
        if not state.get('Running') or not state.get('Pid'):
            return None
        namespace = pid_namespace(state['Pid'])
        # A container run with --pid=host shares the node's namespace, which then tells nothing apart.
        if namespace is None or namespace == pid_namespace('self'):
            return None
        return namespace

    def inspect_image(self):
        """The engine's answer to GET /images/<image>/json, asked once for the gpus and the image checks: (HTTP
        status, body), or (None, the error) when the engine stopped answering."""
        if self._image_answer is None:
            path = '/images/%s/json' % quote(self.params['image'], safe='/:@')
            try:
                self._image_answer = docker_get(self.params['docker_socket'], path, self.timeout)
            except (OSError, http.client.HTTPException) as error:
                self._image_answer = (None, error)
        return self._image_answer

    def is_ours(self, pid):
        """Whether pid runs inside the named container (the same pid namespace as the container's init)."""
        return self._container_namespace is not None and pid_namespace(pid) == self._container_namespace

    def _outside(self):
        container = self.params.get('container')
        return ' outside the container %s' % container if container else ''

    # -- the checks, in CHECKS order; each returns None, or why it was skipped

    def check_docker(self):
        path = self.params['docker_socket']
        if not os.path.exists(path):
            self.fail('docker', 'the Docker engine socket %s does not exist: no engine runs; next step: start it '
                                '(systemctl start docker), then rerun' % path)
            return None
        try:
            status, body = docker_get(path, '/_ping', self.timeout)
        except PermissionError:
            self.fail('docker', 'permission denied on the Docker engine socket %s; next step: run the preflight as '
                                'root (become: true)' % path)
            return None
        except (OSError, http.client.HTTPException) as error:
            self.fail('docker', 'the Docker engine does not answer on %s (%s); next step: systemctl status docker '
                                'and journalctl -u docker, then rerun' % (path, error or type(error).__name__))
            return None
        if status != 200 or body.strip() != b'OK':
            self.fail('docker', 'the Docker engine answered GET /_ping with HTTP %d %r instead of OK; next step: '
                                'journalctl -u docker' % (status, body[:80].decode('utf-8', 'replace')))
            return None
        self.docker_answers = True
        info = docker_json(path, '/info', self.timeout) or {}
        self._docker_root = info.get('DockerRootDir')
        self._container_namespace = self._find_container_namespace()
        self.details['docker'] = {'socket': path, 'server_version': info.get('ServerVersion'),
                                  'root_dir': self._docker_root}
        return None

    def check_devices(self):
        kfd = os.path.join(DEV, 'kfd')
        render_nodes = sorted(os.path.basename(node) for node in glob.glob(os.path.join(DEV, 'dri', 'renderD*')))
        wanted = self.params['render_nodes']
        self.details['devices'] = {'kfd': os.path.exists(kfd), 'render_nodes': render_nodes}
        if not os.path.exists(kfd):
            self.fail('devices', '%s is missing: the amdgpu driver is not loaded; next step: modprobe amdgpu '
                                 '(install the ROCm kernel driver if it has none), then dmesg | grep amdgpu' % kfd)
        if len(render_nodes) < wanted:
            self.fail('devices', '%s has %d render node(s)%s, expected at least %d (one per GPU); next step: '
                                 'dmesg | grep amdgpu for a GPU that failed to come up'
                      % (os.path.join(DEV, 'dri'), len(render_nodes),
                         ' (%s)' % ' '.join(render_nodes) if render_nodes else '', wanted))
        return None

    def check_gpus(self):
        reading = self._read_gpus()
        if reading is None:
            return None
        label, source, gpus = reading
        limit = self.params['vram_max_percent']
        wanted = self.params['render_nodes']
        details = {'source': source, 'gpus': gpus, 'held_by_container': None}
        self.details['gpus'] = details
        if len(gpus) < wanted:
            self.fail('gpus', '%s lists %d GPU(s), expected at least %d; next step: amd-smi list, and dmesg | grep '
                              'amdgpu for a GPU that failed to come up' % (label, len(gpus), wanted))
        unread = [str(gpu['index']) for gpu in gpus if gpu['used_percent'] is None]
        if unread:
            self.fail('gpus', '%s gives no VRAM figures (N/A) for GPU %s, so it cannot be called idle; next step: '
                              'amd-smi metric --mem-usage on the node, and dmesg | grep amdgpu'
                      % (label, ', '.join(unread)))
        busy = [gpu for gpu in gpus if gpu['used_percent'] is not None and gpu['used_percent'] > limit]
        if busy:
            self._judge_busy_gpus(busy, limit, label, details)
        return None

    def _read_gpus(self):
        """(how messages name the reading, its source, the GPUs), from the node's own amd-smi or rocm-smi, or from
        the engine image's amd-smi when the role ran it (image_smi_run); None after failing the check."""
        run = self.params.get('image_smi_run')
        if run is not None:
            image = self.params['image']
            source, gpus, problems = read_image_vram(run, image)
            if source is None:
                self.fail('gpus', 'cannot read VRAM use: %s, and the node has no amd-smi or rocm-smi of its own; next '
                                  'step: run it by hand (docker run --rm --device /dev/kfd --device /dev/dri '
                                  '--entrypoint %s %s %s), or install amd-smi (ROCm amd-smi-lib) on the node, then '
                                  'rerun' % ('; '.join(problems), IMAGE_AMD_SMI, image, ' '.join(IMAGE_SMI_ARGUMENTS)))
                return None
            return image_smi_label(image), source, gpus
        command, gpus, problems = read_vram()
        if command is not None:
            return '`%s`' % command, command, gpus
        if problems:
            self.fail('gpus', 'cannot read VRAM use: %s; next step: run it on the node by hand and repair the '
                              'ROCm install' % '; '.join(problems))
        else:
            self._no_smi_on_node()
        return None

    def _no_smi_on_node(self):
        """Fail the check for a node without amd-smi or rocm-smi; plan a read with the image's amd-smi when the image
        is on the node (image_smi: the role runs it and checks again, with what it printed)."""
        missing = 'neither amd-smi nor rocm-smi is on the PATH or in %s, so VRAM use cannot be read' % ROCM_BIN
        image = self.params.get('image')
        if not image:
            self.fail('gpus', '%s; next step: install amd-smi (ROCm amd-smi-lib) on the node' % missing)
            return
        if not self.docker_answers:
            self.fail('gpus', "%s, nor with the amd-smi of the image %s: the Docker engine does not answer (see the "
                              "docker check); next step: install amd-smi (ROCm amd-smi-lib) on the node, or repair "
                              "Docker, then rerun" % (missing, image))
            return
        status = self.inspect_image()[0]
        if status == 200:
            self.image_smi = image_smi_plan(image)
            self.fail('gpus', '%s on the node itself, but the image %s is on the node; next step: read VRAM use with '
                              'its amd-smi (run the container image_smi describes and pass what '
                              'community.docker.docker_container returned as image_smi_run; the preflight role does), '
                              'or install amd-smi (ROCm amd-smi-lib) on the node' % (missing, image))
        else:
            where = ('is not on the node yet (the preflight runs before the pull)' if status == 404
                     else 'could not be looked up (see the image check)')
            self.fail('gpus', '%s, and the image %s, whose amd-smi could read it, %s; next step: install amd-smi (ROCm '
                              'amd-smi-lib) on the node, or pull the image onto it first (docker pull %s), then rerun'
                      % (missing, image, where, image))

    def _judge_busy_gpus(self, busy, limit, label, details):
        holders = self.table.gpu_holders
        foreign = [pid for pid in holders if not self.is_ours(pid)]
        if holders and not foreign:
            # Our own engine holds the memory: a redeploy restarts it.
            details['held_by_container'] = self.params.get('container')
            return
        headline = '%s %s more than %s%% of %s VRAM in use (%s)' % (
            ' and '.join(_gpu_figure(gpu) for gpu in busy), 'has' if len(busy) == 1 else 'have', _plain(limit),
            'its' if len(busy) == 1 else 'their', label)
        if foreign:
            self.fail('gpus', '%s; held by %s%s; next step: stop %s (kill %d) or wait for it to finish, then rerun'
                      % (headline, describe_processes(foreign), self._outside(),
                         'it' if len(foreign) == 1 else 'them', foreign[0]))
            return
        unseen = (' this user can see (%d process(es) unreadable: run the preflight as root, become: true)'
                  % self.table.unreadable) if self.table.unreadable else ''
        self.fail('gpus', '%s, and no process%s holds /dev/kfd or a render node: memory left behind by a process '
                          'that died; next step: amd-smi process, then reset the GPU (amd-smi reset -G -g %d)'
                  % (headline, unseen, busy[0]['index']))

    def check_model(self):
        path = self.params.get('model_path')
        if not path:
            return 'no model_path given'
        if not os.path.isdir(path):
            self.fail('model', 'the model directory %s does not exist; next step: mount the Hugging Face cache on the '
                               'node or fix the model path (infera_model_path)' % path)
            return None
        details = {'path': path, 'model_type': None, 'tokenizer': None}
        self.details['model'] = details
        self._check_model_config(path, details)
        tokenizer = os.path.join(path, 'tokenizer.json')
        problem = _file_problem(tokenizer)
        if problem:
            self.fail('model', 'tokenizer.json in %s %s; next step: download the checkpoint again so every file '
                               'resolves (huggingface-cli download)' % (path, problem))
        else:
            details['tokenizer'] = os.path.realpath(tokenizer)
        dangling = sorted(name for name in os.listdir(path)
                          if name.endswith('.safetensors') and _file_problem(os.path.join(path, name)))
        if dangling:
            self.fail('model', '%d weight file(s) in %s do not resolve (first: %s); next step: download the checkpoint '
                               'again (huggingface-cli download)' % (len(dangling), path, dangling[0]))
        return None

    def _check_model_config(self, path, details):
        config = os.path.join(path, 'config.json')
        problem = _file_problem(config)
        if problem:
            self.fail('model', 'config.json in %s %s; next step: download the checkpoint again (huggingface-cli '
                               'download) or fix the model path (infera_model_path)' % (path, problem))
            return
        try:
            model_type = json.loads(_read_text(config)).get('model_type')
        except (ValueError, AttributeError) as error:
            self.fail('model', 'config.json in %s is not a JSON object (%s); next step: download the checkpoint again'
                      % (path, error))
            return
        details['model_type'] = model_type
        wanted = self.params['model_types']
        if model_type not in wanted:
            self.fail('model', 'config.json in %s has model_type %r, expected %s; next step: point the model path '
                               '(infera_model_path) at the DeepSeek-V4-Pro checkpoint'
                      % (path, model_type, ' or '.join(wanted)))

    def check_disk(self):
        root = self.params.get('docker_data_root') or self._docker_root or DEFAULT_DOCKER_ROOT
        measured = _existing_ancestor(root)
        try:
            stat = os.statvfs(measured)
        except OSError as error:
            self.fail('disk', 'cannot measure free space at %s: %s; next step: check the mount' % (measured, error))
            return None
        free_gib = stat.f_bavail * stat.f_frsize / float(_GIB)
        wanted = self.params['min_free_gib']
        self.details['disk'] = {'path': root, 'free_gib': round(free_gib, 1), 'min_free_gib': wanted}
        if free_gib < wanted:
            self.fail('disk', 'the Docker data root %s has %.1f GiB free, needs at least %s GiB for the engine image '
                              'and its logs; next step: docker image prune -a (or docker system prune), or free space '
                              'on that filesystem' % (root, free_gib, _plain(wanted)))
        return None

    def check_ports(self):
        ports = self.params['ports']
        if not ports:
            return 'no ports given'
        listening = node_listening_ports()
        report = []
        self.details['ports'] = report
        for port in ports:
            inodes = listening.get(port, set())
            holders = self.table.holders_of(inodes) if inodes else []
            foreign = [pid for pid in holders if not self.is_ours(pid)]
            report.append({'port': port, 'free': not inodes, 'holders': holders,
                           'ours': bool(holders) and not foreign})
            if not inodes:
                continue
            if foreign:
                self.fail('ports', 'port %d is held by %s%s; next step: stop it (kill %d) or free port %d, then rerun'
                          % (port, describe_processes(foreign), self._outside(), foreign[0], port))
            elif not holders:
                self.fail('ports', 'port %d is in use (a listening socket) but no process this user can see holds it; '
                                   'next step: run the preflight as root (become: true), or ss -ltnp to name it' % port)
        return None

    def check_etcd(self):
        endpoint = self.params.get('etcd_endpoint')
        if not endpoint:
            return 'no etcd_endpoint given'
        url = endpoint.rstrip('/') + '/health'
        # A healthy answer ends the check at once. An unhealthy one is asked again for etcd_wait seconds: a
        # member whose disk is slow to sync answers 503 for a moment (its health read times out after 1 s),
        # and a fleet rollout should not stop on that moment. An etcd that does not answer at all fails now.
        deadline = CLOCK() + self.params['etcd_wait']
        asked = 0
        while True:
            asked += 1
            try:
                # etcd is on the cluster network: a proxy from the environment would only stand in the way.
                response = open_url(url, method='GET', timeout=self.timeout, use_proxy=False)
                try:
                    status, body = response.getcode(), response.read()
                finally:
                    response.close()
            except HTTPError as error:
                # An unhealthy etcd answers 503 with its reason in the body.
                status, body = error.code, error.read() if error.fp else b''
            except Exception as error:  # pylint: disable=broad-except
                self.fail('etcd', 'etcd at %s does not answer GET /health (%s); next step: start etcd or fix the '
                                  'endpoint (infera_etcd_endpoint), then curl %s' % (endpoint, error, url))
                return None
            try:
                answer = json.loads(body)
            except ValueError:
                answer = None
            healthy = status == 200 and isinstance(answer, dict) and answer.get('health') == 'true'
            if healthy or CLOCK() + ETCD_POLL > deadline:
                break
            SLEEP(ETCD_POLL)
        self.details['etcd'] = {'endpoint': endpoint, 'status': status, 'answer': answer, 'asked': asked}
        if not healthy:
            text = body[:200].decode('utf-8', 'replace').strip() if isinstance(body, bytes) else str(body)
            self.fail('etcd', 'etcd at %s is not healthy: GET /health answered HTTP %s %s (%d time(s) in %s s); '
                              'next step: etcdctl --endpoints %s endpoint health, and the etcd log'
                      % (endpoint, status, text, asked, self.params['etcd_wait'], endpoint))
        return None

    def check_image(self):
        image = self.params.get('image')
        if not image:
            return 'no image given'
        if not self.docker_answers:
            return 'the Docker engine does not answer (see the docker check)'
        status, body = self.inspect_image()
        if status is None:
            self.fail('image', 'the Docker engine stopped answering while looking up %s (%s); next step: systemctl '
                               'status docker' % (image, body))
            return None
        if status == 200:
            try:
                image_id = json.loads(body).get('Id')
            except (ValueError, AttributeError):
                image_id = None
            self.details['image'] = {'image': image, 'present': True, 'id': image_id}
            return None
        if status != 404:
            self.fail('image', 'the Docker engine answered HTTP %d when asked for %s; next step: docker image inspect '
                               '%s on the node' % (status, image, image))
            return None
        host = registry_host(image)
        details = {'image': image, 'present': False, 'registry': host or 'docker.io', 'registry_answer': None}
        self.details['image'] = details
        if host is None:
            details['registry_answer'] = 'not asked: Docker Hub; the image will be pulled'
            return None
        answer, problems = probe_registry(host, self.timeout)
        details['registry_answer'] = answer
        if answer is None:
            self.fail('image', '%s is not on the node and its registry %s does not answer GET /v2/ (%s); next step: '
                               'check the registry and the route to it from the node, or docker load the image'
                      % (image, host, '; '.join(problems)))
        return None


def _plain(number):
    """50.0 -> '50', 0.5 -> '0.5'."""
    return ('%f' % number).rstrip('0').rstrip('.')


# ---------------------------------------------------------------- the run

def report_line(node, failure):
    """The line a report prints for one failure: '<node>: preflight <check>: <message>'."""
    return '%s: preflight %s: %s' % (node, failure['check'], failure['message'])


def default_ipv4():
    """The node's default IPv4 address: the source address the kernel picks for a route to 8.8.8.8, the way
    Ansible's ansible_default_ipv4.address is found (ip -4 route get 8.8.8.8); a UDP connect sends nothing.
    '' when the node has no such route."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(('8.8.8.8', 53))
        return probe.getsockname()[0]
    except OSError:
        return ''
    finally:
        probe.close()


def run_preflight(params):
    """Run every check; return the module's result (changed aside). Raise PreflightError on a bad argument."""
    check_arguments(params)
    preflight = Preflight(params)
    passed, skipped = [], []
    for name in CHECKS:
        before = len(preflight.failures)
        reason = getattr(preflight, 'check_' + name)()
        if reason:
            skipped.append({'check': name, 'reason': reason})
        elif len(preflight.failures) == before:
            passed.append(name)
    node = params.get('node') or socket.gethostname()
    return {
        'node': node,
        'ready': not preflight.failures,
        'failures': preflight.failures,
        'lines': [report_line(node, failure) for failure in preflight.failures],
        'passed': passed,
        'skipped': skipped,
        'details': preflight.details,
        'image_smi': preflight.image_smi,
        # Not a check: the address the worker registers under when the inventory gives none (the deploy reads it
        # here instead of gathering the node's network facts, one node call less).
        'address': default_ipv4(),
    }
