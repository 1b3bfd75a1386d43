# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The node preflight: read-only checks that a node can take the SGLang worker, before anything changes.

Every check runs whatever the others find, and a problem comes back as a failure (the check's name and one
line naming the cause and the next step), never as an exception, so one run shows everything to fix on
every node. Only bad arguments raise PreflightError.

What the checks read comes from their own files: the Docker engine (_docker_socket), the node's processes, ports and
GPU holders (_procs), VRAM use (_gpu_smi), the model checkpoint (_checkpoint), etcd's health (_etcd), the image's
registry (_registry). Here: the arguments, the checks, and the run.
"""

from __future__ import annotations

import glob
import http.client
import json
import os
import re
import socket
import time
from urllib.parse import quote

from ansible_collections.infera.serving.plugins.module_utils import _gpu_smi
from ansible_collections.infera.serving.plugins.module_utils._checkpoint import checkpoint_problems
from ansible_collections.infera.serving.plugins.module_utils._docker_socket import docker_get, docker_json
from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.module_utils._etcd import ask_until_healthy
from ansible_collections.infera.serving.plugins.module_utils._procs import (
    ProcessTable,
    command_line,
    node_listening_ports,
    pid_namespace,
)
from ansible_collections.infera.serving.plugins.module_utils._registry import probe_registry, registry_host

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

# Where the node's device nodes are; the unit tests point this at a fake tree.
DEV = '/dev'
# Used when Docker does not say where its data root is.
DEFAULT_DOCKER_ROOT = '/var/lib/docker'
_GIB = 1024 ** 3
# The etcd check's clock and sleep; the unit tests inject their own.
CLOCK = time.monotonic
SLEEP = time.sleep
# How many holders of one port or GPU a message names.
_NAMED_HOLDERS = 3


class PreflightError(InferaServingError):
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


# ---------------------------------------------------------------- how messages name processes and GPUs

def describe_processes(pids):
    """'pid 42 (python3 -m http.server 8000)' for the first few pids, then how many more."""
    named = ['pid %d (%s)' % (pid, command_line(pid)) for pid in pids[:_NAMED_HOLDERS]]
    if len(pids) > _NAMED_HOLDERS:
        named.append('%d more' % (len(pids) - _NAMED_HOLDERS))
    return ', '.join(named)


def gpu_figure(gpu):
    """A GPU as the checks name it: its index, its VRAM in use."""
    return 'GPU %d (%.1f%%, %d of %d MiB)' % (gpu['index'], gpu['used_percent'], gpu['used_mib'], gpu['total_mib'])


# ---------------------------------------------------------------- the checks

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
            source, gpus, problems = _gpu_smi.read_image_vram(run, image)
            if source is None:
                self.fail('gpus', 'cannot read VRAM use: %s, and the node has no amd-smi or rocm-smi of its own; next '
                                  'step: run it by hand (docker run --rm --device /dev/kfd --device /dev/dri '
                                  '--entrypoint %s %s %s), or install amd-smi (ROCm amd-smi-lib) on the node, then '
                                  'rerun' % ('; '.join(problems), _gpu_smi.IMAGE_AMD_SMI, image,
                                             ' '.join(_gpu_smi.IMAGE_SMI_ARGUMENTS)))
                return None
            return _gpu_smi.image_smi_label(image), source, gpus
        command, gpus, problems = _gpu_smi.read_vram()
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
        missing = 'neither amd-smi nor rocm-smi is on the PATH or in %s, so VRAM use cannot be read' % _gpu_smi.ROCM_BIN
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
            self.image_smi = _gpu_smi.image_smi_plan(image, DEV)
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
            ' and '.join(gpu_figure(gpu) for gpu in busy), 'has' if len(busy) == 1 else 'have', _plain(limit),
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
        self.details['model'], problems = checkpoint_problems(path, self.params['model_types'])
        for problem in problems:
            self.fail('model', problem)
        return None

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
        answer, asked = ask_until_healthy(url, self.timeout, self.params['etcd_wait'], CLOCK, SLEEP)
        if answer['error'] is not None:
            self.fail('etcd', 'etcd at %s does not answer GET /health (%s); next step: start etcd or fix the '
                              'endpoint (infera_etcd_endpoint), then curl %s' % (endpoint, answer['error'], url))
            return None
        self.details['etcd'] = {'endpoint': endpoint, 'status': answer['status'], 'answer': answer['answer'],
                                'asked': asked}
        if not answer['healthy']:
            body = answer['body']
            text = body[:200].decode('utf-8', 'replace').strip() if isinstance(body, bytes) else str(body)
            self.fail('etcd', 'etcd at %s is not healthy: GET /health answered HTTP %s %s (%d time(s) in %s s); '
                              'next step: etcdctl --endpoints %s endpoint health, and the etcd log'
                      % (endpoint, answer['status'], text, asked, self.params['etcd_wait'], endpoint))
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
