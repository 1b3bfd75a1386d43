# SPDX-License-Identifier: Apache-2.0
"""The node preflight's checks, against fake /proc and /dev trees, a fake Docker engine on a unix
socket, local HTTP servers for etcd and a registry, fake amd-smi / rocm-smi executables printing the
tools' JSON formats, and a Hugging Face cache layout with symlinks into blobs/."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _gpu_smi, _preflight, _procs
from ansible_collections.infera.serving.plugins.module_utils._gpu_smi import parse_amd_smi, parse_rocm_smi
from ansible_collections.infera.serving.plugins.module_utils._preflight import ARGUMENT_SPEC, PreflightError, run_preflight
from ansible_collections.infera.serving.plugins.module_utils._procs import listening_ports
from ansible_collections.infera.serving.plugins.module_utils._registry import registry_host

from .health_server import LocalServer

DATA = Path(__file__).parent / 'data' / 'preflight'
REPO = Path(__file__).resolve().parents[4]
SIMULATED_AMD_SMI = REPO / 'tests' / 'rehearsal' / 'images' / 'node' / 'amd-smi'
CONTAINER = 'sgl_mix'
HOST_NAMESPACE = 'pid:[4026531836]'
CONTAINER_NAMESPACE = 'pid:[4026532577]'

# /proc/net/tcp and tcp6 as the kernel prints them: LISTEN (0A) on 0.0.0.0:8000 and 127.0.0.1:30000, an
# established connection from :8000 (01), and [::]:30000 in tcp6.
PROC_NET_TCP = (
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n'
    '   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 35015 1 '
    '0000000000000000 100 0 0 10 0\n'
    '   1: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 35016 1 '
    '0000000000000000 100 0 0 10 0\n'
    '   2: 0100007F:1F40 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 35100 1 '
    '0000000000000000 20 4 30 10 -1\n'
)
PROC_NET_TCP6 = (
    '  sl  local_address                         remote_address                        st tx_queue rx_queue tr '
    'tm->when retrnsmt   uid  timeout inode\n'
    '   0: 00000000000000000000000000000000:7530 00000000000000000000000000000000:0000 0A 00000000:00000000 '
    '00:00000000 00000000     0        0 40001 1 0000000000000000 100 0 0 10 0\n'
)


# ---------------------------------------------------------------- fakes

class DockerEngine(LocalServer):
    """A Docker engine API on a unix socket: /_ping, /info, /containers/<name>/json, /images/<ref>/json."""

    def __init__(self, ping=(200, b'OK')):
        self.directory = tempfile.mkdtemp(prefix='dock', dir='/tmp')  # a unix socket path has a 108-byte limit
        self.socket = os.path.join(self.directory, 'docker.sock')
        super().__init__(unix_socket=self.socket)
        self.ping = ping
        self.containers = {}
        self.images = {}
        self.root_dir = None

    def answer(self, path):
        if path == '/_ping':
            return self.ping
        if path == '/info':
            return 200, json.dumps({'ServerVersion': '20.10.24', 'DockerRootDir': self.root_dir}).encode()
        for prefix, table in (('/containers/', self.containers), ('/images/', self.images)):
            if path.startswith(prefix) and path.endswith('/json'):
                name = path[len(prefix):-len('/json')]
                if name in table:
                    return 200, json.dumps(table[name]).encode()
                return 404, json.dumps({'message': 'No such object: %s' % name}).encode()
        return 404, b'{"message": "page not found"}'

    def __exit__(self, *exc):
        super().__exit__(*exc)
        shutil.rmtree(self.directory, ignore_errors=True)


class HttpServer(LocalServer):
    """A local HTTP server answering every GET with one status and JSON body (changeable while running)."""

    def __init__(self, status=200, body=None):
        super().__init__()
        self.status = status
        self.body = body if body is not None else {}

    def answer(self, path):
        return self.status, json.dumps(self.body).encode()


class FakeNode:
    """A node's /proc and /dev in tmp_path, a bin directory on the PATH, and the module's arguments."""

    def __init__(self, root, monkeypatch):
        self.root = root
        self.proc = root / 'proc'
        self.dev = root / 'dev'
        self.bin = root / 'bin'
        self.rocm = root / 'opt-rocm-bin'
        for directory in (self.proc / 'net', self.dev / 'dri', self.bin, self.rocm):
            directory.mkdir(parents=True)
        (self.proc / 'net' / 'tcp').write_text(PROC_NET_TCP.splitlines(True)[0])
        (self.proc / 'net' / 'tcp6').write_text(PROC_NET_TCP6.splitlines(True)[0])
        (self.dev / 'kfd').touch()
        for index in range(8):
            (self.dev / 'dri' / ('renderD%d' % (128 + index))).touch()
        self.process(1, 'sleep infinity', namespace=HOST_NAMESPACE)
        monkeypatch.setattr(_procs, 'PROC', str(self.proc))
        monkeypatch.setattr(_preflight, 'DEV', str(self.dev))
        monkeypatch.setattr(_gpu_smi, 'ROCM_BIN', str(self.rocm))
        monkeypatch.setenv('PATH', str(self.bin))
        self.tool('amd-smi', (DATA / 'amd-smi-rocm7-metric-mem-usage.json').read_text())

    def process(self, pid, command, fds=(), namespace=HOST_NAMESPACE):
        """A /proc/<pid> with a command line, fds linking to fds' targets and a pid namespace."""
        base = self.proc / str(pid)
        (base / 'fd').mkdir(parents=True)
        (base / 'ns').mkdir()
        (base / 'cmdline').write_bytes(command.replace(' ', '\0').encode() + b'\0')
        os.symlink(namespace, str(base / 'ns' / 'pid'))
        for number, target in enumerate(fds, 3):
            os.symlink(target, str(base / 'fd' / str(number)))

    def listen(self, tcp=PROC_NET_TCP, tcp6=PROC_NET_TCP6):
        (self.proc / 'net' / 'tcp').write_text(tcp)
        (self.proc / 'net' / 'tcp6').write_text(tcp6)

    def tool(self, name, stdout='', exit_code=0, stderr='', directory=None):
        """An executable printing stdout and stderr, exiting with exit_code."""
        out = self.root / ('%s.out' % name)
        err = self.root / ('%s.err' % name)
        out.write_text(stdout)
        err.write_text(stderr)
        path = (directory or self.bin) / name
        path.write_text('#!/bin/sh\n/bin/cat %s\n/bin/cat %s >&2\nexit %d\n' % (out, err, exit_code))
        path.chmod(0o755)
        return path

    def model(self, model_type='deepseek_v4', tokenizer=True):
        """A Hugging Face cache snapshot: every file a relative symlink into ../../blobs/."""
        repo = self.root / 'hf-cache' / 'hub' / 'models--deepseek-ai--DeepSeek-V4-Pro'
        snapshot = repo / 'snapshots' / 'main'
        snapshot.mkdir(parents=True)
        (repo / 'blobs').mkdir()
        files = {'config.json': json.dumps({'model_type': model_type, 'architectures': ['DeepseekV4ForCausalLM']}),
                 'model-00001-of-00002.safetensors': 'weights'}
        if tokenizer:
            files['tokenizer.json'] = '{"version": "1.0"}'
        for name, text in files.items():
            blob = repo / 'blobs' / ('blob-' + name)
            blob.write_text(text)
            os.symlink(os.path.join('..', '..', 'blobs', blob.name), str(snapshot / name))
        return snapshot

    def params(self, docker, **overrides):
        params = {name: spec.get('default') for name, spec in ARGUMENT_SPEC.items()}
        params.update(docker_socket=docker.socket if docker else str(self.root / 'no-docker.sock'),
                      container=CONTAINER, docker_data_root=str(self.root))
        params.update(overrides)
        return params


@pytest.fixture
def node(tmp_path, monkeypatch):
    return FakeNode(tmp_path, monkeypatch)


@pytest.fixture
def docker():
    with DockerEngine() as engine:
        yield engine


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ('http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY'):
        monkeypatch.delenv(name, raising=False)


def failures(result, check=None):
    return [failure['message'] for failure in result['failures'] if check in (None, failure['check'])]


# ---------------------------------------------------------------- parsers

def test_amd_smi_rocm6_list_names_the_busy_gpu():
    gpus = parse_amd_smi((DATA / 'amd-smi-rocm6-metric-mem-usage.json').read_text())
    assert [gpu['index'] for gpu in gpus] == list(range(8))
    assert gpus[0] == {'index': 0, 'used_mib': 283.0, 'total_mib': 196592.0, 'used_percent': 0.1}
    assert gpus[5]['used_percent'] == 76.8


def test_amd_smi_rocm7_gpu_data_wrapper():
    gpus = parse_amd_smi((DATA / 'amd-smi-rocm7-metric-mem-usage.json').read_text())
    assert len(gpus) == 8
    assert max(gpu['used_percent'] for gpu in gpus) == 0.1
    assert gpus[7]['used_mib'] == 291.0 and gpus[7]['total_mib'] == 294896.0


def test_amd_smi_monitor_format():
    gpus = parse_amd_smi((DATA / 'amd-smi-monitor-vram-usage.json').read_text())
    assert [gpu['index'] for gpu in gpus if gpu['used_percent'] > 10] == [2]
    assert gpus[2]['used_percent'] == 85.0


def test_rocm_smi_cards_in_bytes():
    gpus = parse_rocm_smi((DATA / 'rocm-smi-showmeminfo-vram.json').read_text())
    assert [gpu['index'] for gpu in gpus] == list(range(8))
    assert gpus[0]['total_mib'] == 294896.0 and gpus[0]['used_percent'] == 0.1
    assert gpus[7]['used_mib'] == 204800.0 and gpus[7]['used_percent'] == 69.4


def test_parsers_skip_warnings_before_the_json_and_keep_unread_values_as_none():
    text = ('WARNING: User is missing the following required groups: render, video\n'
            '[{"gpu": 1, "mem_usage": "N/A"}, {"gpu": 0, "mem_usage": {"total_vram": "N/A", '
            '"used_vram": {"value": 12, "unit": "MB"}}}]\n')
    assert parse_amd_smi(text) == [
        {'index': 0, 'used_mib': 12.0, 'total_mib': None, 'used_percent': None},
        {'index': 1, 'used_mib': None, 'total_mib': None, 'used_percent': None},
    ]
    rocm = parse_rocm_smi('{"card0": {"VRAM Total Memory (B)": "None", "VRAM Total Used Memory (B)": "None"}, '
                          '"system": {"Driver version": "6.8.5"}}')
    assert rocm == [{'index': 0, 'used_mib': None, 'total_mib': None, 'used_percent': None}]


@pytest.mark.parametrize('text', ['', 'amd-smi: no GPUs found', '{"gpu_data": []}', '{"cpu_data": []}', '[]',
                                  '{"system": {}}'])
def test_parsers_reject_output_without_gpus(text):
    with pytest.raises(ValueError):
        parse_amd_smi(text)
    with pytest.raises(ValueError):
        parse_rocm_smi(text)


def test_the_simulated_amd_smi_prints_what_the_parser_reads(tmp_path):
    dri = tmp_path / 'dri'
    dri.mkdir()
    for index in range(8):
        (dri / ('renderD%d' % (128 + index))).touch()
    busy = tmp_path / 'busy-gpu'
    env = dict(os.environ, INFERA_SIM_DRI_DIR=str(dri), INFERA_SIM_BUSY_GPU_FILE=str(busy))

    def run(*arguments):
        return subprocess.run(['/bin/sh', str(SIMULATED_AMD_SMI)] + list(arguments), env=env,
                              capture_output=True, text=True, check=False)

    idle = run('metric', '--mem-usage', '--json')
    assert idle.returncode == 0 and 'SIMULATED' in idle.stderr
    assert [gpu['used_percent'] for gpu in parse_amd_smi(idle.stdout)] == [0.1] * 8
    busy.write_text('3 85\n')
    gpus = parse_amd_smi(run('metric', '--mem-usage', '--json').stdout)
    assert [(gpu['index'], gpu['used_percent']) for gpu in gpus if gpu['used_percent'] > 10] == [(3, 85.0)]
    assert [gpu['index'] for gpu in parse_amd_smi(run('monitor', '--vram-usage', '--json', '-g', '3').stdout)] == [3]
    assert 'SIMULATED' in run('--help').stdout
    assert run('metric', '--power').returncode == 2


# ---------------------------------------------------------------- /proc

def test_listening_ports_reads_listen_sockets_only():
    assert listening_ports(PROC_NET_TCP) == {8000: {'35015'}, 30000: {'35016'}}
    assert listening_ports(PROC_NET_TCP6) == {30000: {'40001'}}
    assert listening_ports('') == {}


def test_a_real_listening_socket_is_found_with_its_holder_in_the_real_proc(monkeypatch):
    """This test process listens on a port; the real /proc names it as the holder."""
    monkeypatch.setattr(_procs, 'PROC', '/proc')
    with socket.socket() as listener:
        listener.bind(('127.0.0.1', 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        inodes = _procs.node_listening_ports()[port]
        assert _procs.ProcessTable().holders_of(inodes) == [os.getpid()]
        assert 'python' in _procs.command_line(os.getpid())


# ---------------------------------------------------------------- all pass, and every check runs

def test_a_ready_node_passes_every_check(node, docker):
    model = node.model()
    docker.images['registry.example.com/infera/sglang-rocm:dsv4'] = {'Id': 'sha256:abc'}
    with HttpServer(body={'health': 'true'}) as etcd:
        result = run_preflight(node.params(docker, model_path=str(model), ports=[8000, 30000],
                                           etcd_endpoint='http://%s' % etcd.address, node='node1',
                                           image='registry.example.com/infera/sglang-rocm:dsv4', min_free_gib=0))
    assert result['failures'] == [], result['failures']
    assert result['ready'] is True and result['lines'] == []
    assert result['passed'] == list(_preflight.CHECKS)
    assert result['skipped'] == []
    assert result['node'] == 'node1'
    details = result['details']
    assert details['docker']['server_version'] == '20.10.24'
    assert details['gpus']['source'] == 'amd-smi metric --mem-usage --json'
    assert details['model']['model_type'] == 'deepseek_v4'
    assert details['model']['tokenizer'].endswith('/blobs/blob-tokenizer.json')
    assert details['image'] == {'image': 'registry.example.com/infera/sglang-rocm:dsv4', 'present': True,
                                'id': 'sha256:abc'}
    assert [entry['free'] for entry in details['ports']] == [True, True]


def test_every_check_runs_and_each_failure_is_one_line_with_a_next_step(node):
    node.listen()
    node.process(4242, 'python3 -m http.server 8000', fds=['socket:[35015]'])
    result = run_preflight(node.params(None, model_path=str(node.root / 'missing-model'), ports=[8000],
                                       etcd_endpoint='http://127.0.0.1:9', image='example.com/x:1',
                                       min_free_gib=10 ** 9, render_nodes=9, node='node1'))
    assert result['ready'] is False
    assert [failure['check'] for failure in result['failures']] == [
        'docker', 'devices', 'gpus', 'model', 'disk', 'ports', 'etcd']
    assert result['skipped'] == [{'check': 'image', 'reason': 'the Docker engine does not answer (see the docker check)'}]
    for failure in result['failures']:
        assert '\n' not in failure['message'] and 'next step: ' in failure['message'], failure
    assert result['lines'][0] == 'node1: preflight docker: ' + result['failures'][0]['message']


def test_checks_without_their_input_are_skipped(node, docker):
    result = run_preflight(node.params(docker, min_free_gib=0))
    assert [entry['check'] for entry in result['skipped']] == ['model', 'ports', 'etcd', 'image']
    assert result['passed'] == ['docker', 'devices', 'gpus', 'disk']
    assert result['ready'] is True


# ---------------------------------------------------------------- docker

def test_no_docker_socket(node):
    result = run_preflight(node.params(None))
    assert failures(result, 'docker') == [
        'the Docker engine socket %s does not exist: no engine runs; next step: start it (systemctl start docker), '
        'then rerun' % (node.root / 'no-docker.sock')]


def test_a_socket_nobody_listens_on(node, tmp_path):
    dead = tempfile.mkdtemp(dir='/tmp')
    path = os.path.join(dead, 'docker.sock')
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.close()  # the file stays, nothing listens: connection refused
    try:
        result = run_preflight(node.params(None, docker_socket=path))
    finally:
        shutil.rmtree(dead)
    message, = failures(result, 'docker')
    assert message.startswith('the Docker engine does not answer on %s (' % path)
    assert 'systemctl status docker' in message


def test_permission_denied_on_the_socket_says_become(node, docker, monkeypatch):
    def denied(*args):
        raise PermissionError(13, 'Permission denied')

    monkeypatch.setattr(_preflight, 'docker_get', denied)
    message, = failures(run_preflight(node.params(docker)), 'docker')
    assert message == ('permission denied on the Docker engine socket %s; next step: run the preflight as root '
                       '(become: true)' % docker.socket)


def test_an_engine_answering_ping_with_an_error(node):
    with DockerEngine(ping=(500, b'{"message": "starting"}')) as engine:
        result = run_preflight(node.params(engine, image='example.com/x:1'))
    message, = failures(result, 'docker')
    assert message.startswith('the Docker engine answered GET /_ping with HTTP 500')
    assert result['skipped'][-1]['check'] == 'image'


# ---------------------------------------------------------------- devices

def test_missing_kfd_and_too_few_render_nodes(node, docker):
    (node.dev / 'kfd').unlink()
    for index in (6, 7):
        (node.dev / 'dri' / ('renderD%d' % (128 + index))).unlink()
    result = run_preflight(node.params(docker))
    assert failures(result, 'devices') == [
        '%s is missing: the amdgpu driver is not loaded; next step: modprobe amdgpu (install the ROCm kernel driver '
        'if it has none), then dmesg | grep amdgpu' % (node.dev / 'kfd'),
        '%s has 6 render node(s) (renderD128 renderD129 renderD130 renderD131 renderD132 renderD133), expected at '
        'least 8 (one per GPU); next step: dmesg | grep amdgpu for a GPU that failed to come up' % (node.dev / 'dri'),
    ]
    assert result['details']['devices']['kfd'] is False


# ---------------------------------------------------------------- gpus

def test_a_busy_gpu_is_named_with_its_use_and_its_foreign_holder(node, docker):
    node.tool('amd-smi', (DATA / 'amd-smi-rocm6-metric-mem-usage.json').read_text())
    node.process(4242, 'python3 train.py --gpus 5', fds=['/dev/null', '/dev/kfd', '/dev/dri/renderD133'])
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert message == (
        'GPU 5 (76.8%, 150944 of 196592 MiB) has more than 10% of its VRAM in use (`amd-smi metric --mem-usage '
        '--json`); held by pid 4242 (python3 train.py --gpus 5) outside the container sgl_mix; next step: stop it '
        '(kill 4242) or wait for it to finish, then rerun')


def test_busy_gpus_held_only_by_our_container_pass(node, docker):
    """A redeploy: our own engine holds the VRAM, and the deploy restarts it."""
    node.tool('amd-smi', (DATA / 'amd-smi-monitor-vram-usage.json').read_text())
    node.process(77, 'sleep infinity', namespace=CONTAINER_NAMESPACE)
    node.process(300, 'python3 -m sglang.launch_server', fds=['/dev/kfd'], namespace=CONTAINER_NAMESPACE)
    docker.containers[CONTAINER] = {'State': {'Running': True, 'Pid': 77}}
    result = run_preflight(node.params(docker, vram_max_percent=50))
    assert failures(result, 'gpus') == []
    assert result['details']['gpus']['held_by_container'] == CONTAINER


def test_a_stopped_container_does_not_make_a_holder_ours(node, docker):
    node.tool('amd-smi', (DATA / 'amd-smi-monitor-vram-usage.json').read_text())
    node.process(77, 'sleep infinity', namespace=CONTAINER_NAMESPACE)
    node.process(300, 'python3 -m sglang.launch_server', fds=['/dev/kfd'], namespace=CONTAINER_NAMESPACE)
    docker.containers[CONTAINER] = {'State': {'Running': False, 'Pid': 0}}
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert 'held by pid 300 (python3 -m sglang.launch_server) outside the container sgl_mix' in message


def test_busy_vram_that_no_process_holds_is_called_a_leak(node, docker):
    node.tool('amd-smi', (DATA / 'amd-smi-monitor-vram-usage.json').read_text())
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert message.startswith('GPU 2 (85.0%, 250675 of 294896 MiB) has more than 10% of its VRAM in use '
                              '(`amd-smi metric --mem-usage --json`), and no process holds /dev/kfd')
    assert message.endswith('next step: amd-smi process, then reset the GPU (amd-smi reset -G -g 2)')


def test_unreadable_processes_are_counted_in_the_message(node, docker, monkeypatch):
    node.tool('amd-smi', (DATA / 'amd-smi-monitor-vram-usage.json').read_text())
    node.process(500, 'secret')
    real_listdir = os.listdir

    def listdir(path):
        if str(path).endswith('/500/fd'):
            raise PermissionError(13, 'Permission denied')
        return real_listdir(path)

    monkeypatch.setattr(_procs.os, 'listdir', listdir)
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert 'no process this user can see (1 process(es) unreadable: run the preflight as root, become: true)' in message


def test_two_busy_gpus_in_one_line(node, docker):
    data = json.loads((DATA / 'amd-smi-rocm7-metric-mem-usage.json').read_text())
    for index in (1, 6):
        data['gpu_data'][index]['mem_usage']['used_vram']['value'] = 147448
    node.tool('amd-smi', json.dumps(data))
    node.process(4242, 'python3 bench.py', fds=['/dev/kfd'])
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert message.startswith('GPU 1 (50.0%, 147448 of 294896 MiB) and GPU 6 (50.0%, 147448 of 294896 MiB) have '
                              'more than 10% of their VRAM in use')


def test_rocm_smi_answers_when_amd_smi_fails(node, docker):
    node.tool('amd-smi', '', exit_code=1, stderr='ERROR: AMD SMI library not initialised')
    node.tool('rocm-smi', (DATA / 'rocm-smi-showmeminfo-vram.json').read_text(), directory=node.rocm)
    result = run_preflight(node.params(docker))
    message, = failures(result, 'gpus')
    assert result['details']['gpus']['source'] == 'rocm-smi --showmeminfo vram --json'
    assert message.startswith('GPU 7 (69.4%, 204800 of 294896 MiB) has more than 10% of its VRAM in use')


def test_no_tool_at_all(node, docker):
    (node.bin / 'amd-smi').unlink()
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert message == ('neither amd-smi nor rocm-smi is on the PATH or in %s, so VRAM use cannot be read; next step: '
                       'install amd-smi (ROCm amd-smi-lib) on the node' % node.rocm)


IMAGE = 'rocm/infera:sglang-v0.1.1'


def test_a_node_without_a_tool_plans_a_read_with_the_image_s_amd_smi_when_the_image_is_there(node, docker):
    (node.bin / 'amd-smi').unlink()
    docker.images[IMAGE] = {'Id': 'sha256:abc'}
    result = run_preflight(node.params(docker, image=IMAGE))
    message, = failures(result, 'gpus')
    assert message.startswith('neither amd-smi nor rocm-smi is on the PATH or in %s, so VRAM use cannot be read on the '
                              'node itself, but the image %s is on the node; next step: read VRAM use with its amd-smi '
                              % (node.rocm, IMAGE))
    assert result['image_smi'] == {
        'name': 'infera-preflight-amd-smi', 'image': IMAGE,
        'entrypoint': ['timeout', '60', '/opt/rocm/bin/amd-smi'], 'command': ['metric', '--mem-usage', '--json'],
        'devices': [str(node.dev / 'kfd'), str(node.dev / 'dri')],
        'source': 'amd-smi metric --mem-usage --json (in %s)' % IMAGE}
    assert 'image' in result['passed']
    # The gpus and the image checks share one look at the image.
    assert docker.paths.count('/images/%s/json' % IMAGE) == 1


class _ImageLookupFails(DockerEngine):
    def answer(self, path):
        return (500, b'{"message": "layer store broken"}') if path.startswith('/images/') else super().answer(path)


@pytest.mark.parametrize('engine, expected', [
    (DockerEngine, 'is not on the node yet (the preflight runs before the pull); next step: install amd-smi (ROCm '
                   'amd-smi-lib) on the node, or pull the image onto it first (docker pull %s), then rerun' % IMAGE),
    (_ImageLookupFails, 'could not be looked up (see the image check); next step: install amd-smi'),
])
def test_a_node_without_a_tool_or_the_image_names_both_remedies(node, engine, expected):
    (node.bin / 'amd-smi').unlink()
    with engine() as docker:
        result = run_preflight(node.params(docker, image=IMAGE))
    message, = failures(result, 'gpus')
    assert ('so VRAM use cannot be read, and the image %s, whose amd-smi could read it, %s' % (IMAGE, expected)
            in message)
    assert result['image_smi'] is None


def test_a_node_without_a_tool_or_docker_says_so(node):
    (node.bin / 'amd-smi').unlink()
    result = run_preflight(node.params(None, image=IMAGE))
    assert failures(result, 'gpus') == [
        'neither amd-smi nor rocm-smi is on the PATH or in %s, so VRAM use cannot be read, nor with the amd-smi of the '
        'image %s: the Docker engine does not answer (see the docker check); next step: install amd-smi (ROCm '
        'amd-smi-lib) on the node, or repair Docker, then rerun' % (node.rocm, IMAGE)]
    assert result['image_smi'] is None


def _ran(output, status=0):
    """What community.docker.docker_container returns for a run that ended (detach=false, cleanup=true)."""
    return {'changed': True, 'status': status, 'container': {'Id': 'c0ffee', 'Output': output}}


def test_the_image_s_amd_smi_output_is_judged_like_the_node_s_own(node, docker):
    # The node's tool is not run: it has none (here: one that would fail, to show it is not asked).
    node.tool('amd-smi', '', exit_code=1, stderr='must not run')
    output = 'AMDSMI: SIMULATED (stderr comes first)\n' + (DATA / 'amd-smi-rocm7-metric-mem-usage.json').read_text()
    result = run_preflight(node.params(docker, image=IMAGE, image_smi_run=_ran(output)))
    assert result['details']['gpus']['source'] == 'amd-smi metric --mem-usage --json (in %s)' % IMAGE
    assert [gpu['index'] for gpu in result['details']['gpus']['gpus']] == list(range(8))
    assert 'gpus' in result['passed'] and result['image_smi'] is None


def test_a_busy_gpu_read_in_the_image_names_the_image(node, docker):
    data = json.loads((DATA / 'amd-smi-rocm7-metric-mem-usage.json').read_text())
    data['gpu_data'][3]['mem_usage']['used_vram'] = {'value': 250661, 'unit': 'MB'}
    result = run_preflight(node.params(docker, image=IMAGE, image_smi_run=_ran(json.dumps(data))))
    message, = failures(result, 'gpus')
    assert message.startswith('GPU 3 (85.0%%, 250661 of %d MiB) has more than 10%% of its VRAM in use '
                              '(`amd-smi metric --mem-usage --json` in %s)'
                              % (data['gpu_data'][3]['mem_usage']['total_vram']['value'], IMAGE))


@pytest.mark.parametrize('run, cause', [
    ({'failed': True, 'msg': 'Error starting container c0ffee: 500 Server Error: error gathering device information '
                             'while adding custom device "/dev/kfd": no such file or directory'},
     '`amd-smi metric --mem-usage --json` in %s could not start: Error starting container c0ffee: 500 Server Error: '
     'error gathering device information while adding custom device "/dev/kfd": no such file or directory' % IMAGE),
    (_ran('', status=124), '`amd-smi metric --mem-usage --json` in %s did not finish within 60 s' % IMAGE),
    (_ran("timeout: failed to run command '/opt/rocm/bin/amd-smi': No such file or directory\n", status=127),
     "%s has no /opt/rocm/bin/amd-smi (exit 127: timeout: failed to run command '/opt/rocm/bin/amd-smi': No such "
     "file or directory)" % IMAGE),
    (_ran('ERROR: AMD SMI library not initialised\n', status=1),
     '`amd-smi metric --mem-usage --json` in %s exited 1: ERROR: AMD SMI library not initialised' % IMAGE),
    (_ran('no GPUs found'), '`amd-smi metric --mem-usage --json` in %s printed no VRAM figures: no JSON in the output'
     % IMAGE),
])
def test_a_failed_read_in_the_image_names_the_cause_and_both_ways_out(node, docker, run, cause):
    message, = failures(run_preflight(node.params(docker, image=IMAGE, image_smi_run=run)), 'gpus')
    assert message == (
        'cannot read VRAM use: %s, and the node has no amd-smi or rocm-smi of its own; next step: run it by hand '
        '(docker run --rm --device /dev/kfd --device /dev/dri --entrypoint /opt/rocm/bin/amd-smi %s metric '
        '--mem-usage --json), or install amd-smi (ROCm amd-smi-lib) on the node, then rerun' % (cause, IMAGE))


def test_every_tool_failing_is_named(node, docker):
    node.tool('amd-smi', 'not json', exit_code=0)
    node.tool('rocm-smi', '', exit_code=2, stderr='rocm-smi: error\nERROR: GPU[0] driver not loaded')
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert message == (
        'cannot read VRAM use: `amd-smi metric --mem-usage --json` printed no VRAM figures: no JSON in the output; '
        '`amd-smi monitor --vram-usage --json` printed no VRAM figures: no JSON in the output; '
        '`rocm-smi --showmeminfo vram --json` exited 2: ERROR: GPU[0] driver not loaded; next step: run it on the '
        'node by hand and repair the ROCm install')


def test_a_hanging_tool_is_cut_off(node, docker, monkeypatch):
    monkeypatch.setattr(_gpu_smi, 'SMI_TIMEOUT', 0.5)
    hang = node.bin / 'amd-smi'
    hang.write_text('#!/bin/sh\nexec /bin/sleep 30\n')
    message, = failures(run_preflight(node.params(docker)), 'gpus')
    assert '`amd-smi metric --mem-usage --json` did not finish within 0.5 s' in message


def test_fewer_gpus_than_render_nodes_and_unread_figures(node, docker):
    data = json.loads((DATA / 'amd-smi-rocm7-metric-mem-usage.json').read_text())
    data['gpu_data'] = data['gpu_data'][:7]
    data['gpu_data'][4]['mem_usage'] = 'N/A'
    node.tool('amd-smi', json.dumps(data))
    assert failures(run_preflight(node.params(docker)), 'gpus') == [
        '`amd-smi metric --mem-usage --json` lists 7 GPU(s), expected at least 8; next step: amd-smi list, and dmesg '
        '| grep amdgpu for a GPU that failed to come up',
        '`amd-smi metric --mem-usage --json` gives no VRAM figures (N/A) for GPU 4, so it cannot be called idle; next '
        'step: amd-smi metric --mem-usage on the node, and dmesg | grep amdgpu',
    ]


# ---------------------------------------------------------------- model

def test_a_dangling_tokenizer_symlink_names_its_missing_blob(node, docker):
    model = node.model()
    blob = model.parent.parent / 'blobs' / 'blob-tokenizer.json'
    blob.unlink()
    message, = failures(run_preflight(node.params(docker, model_path=str(model))), 'model')
    assert message == (
        'tokenizer.json in %s is a dangling symlink to ../../blobs/blob-tokenizer.json (its target is missing: an '
        'interrupted or pruned download); next step: download the checkpoint again so every file resolves '
        '(huggingface-cli download)' % model)


def test_a_missing_tokenizer_and_a_dangling_weight_file(node, docker):
    model = node.model(tokenizer=False)
    (model.parent.parent / 'blobs' / 'blob-model-00001-of-00002.safetensors').unlink()
    assert failures(run_preflight(node.params(docker, model_path=str(model))), 'model') == [
        'tokenizer.json in %s is missing; next step: download the checkpoint again so every file resolves '
        '(huggingface-cli download)' % model,
        '1 weight file(s) in %s do not resolve (first: model-00001-of-00002.safetensors); next step: download the '
        'checkpoint again (huggingface-cli download)' % model,
    ]


def test_another_model_type(node, docker):
    model = node.model(model_type='deepseek_v3')
    message, = failures(run_preflight(node.params(docker, model_path=str(model))), 'model')
    assert message == ("config.json in %s has model_type 'deepseek_v3', expected deepseek_v4; next step: point the "
                       "model path (infera_model_path) at the DeepSeek-V4-Pro checkpoint" % model)
    assert failures(run_preflight(node.params(docker, model_path=str(model),
                                              model_types=['deepseek_v4', 'deepseek_v3'])), 'model') == []


def test_a_missing_or_broken_config(node, docker):
    model = node.model()
    (model / 'config.json').unlink()
    message, = failures(run_preflight(node.params(docker, model_path=str(model))), 'model')
    assert message.startswith('config.json in %s is missing; next step' % model)
    (model / 'config.json').write_text('[1, 2')
    message, = failures(run_preflight(node.params(docker, model_path=str(model))), 'model')
    assert message.startswith('config.json in %s is not a JSON object' % model)


def test_no_model_directory(node, docker):
    message, = failures(run_preflight(node.params(docker, model_path=str(node.root / 'nowhere'))), 'model')
    assert message == ('the model directory %s does not exist; next step: mount the Hugging Face cache on the node or '
                       'fix the model path (infera_model_path)' % (node.root / 'nowhere'))


# ---------------------------------------------------------------- disk

def test_too_little_free_disk_names_the_figures(node, docker):
    result = run_preflight(node.params(docker, min_free_gib=10 ** 9))
    message, = failures(result, 'disk')
    assert message.startswith('the Docker data root %s has ' % node.root)
    assert 'GiB free, needs at least 1000000000 GiB for the engine image and its logs; next step: docker image ' \
           'prune -a' in message


def test_the_data_root_docker_reports_is_measured_even_before_it_exists(node, docker):
    docker.root_dir = str(node.root / 'data' / 'docker')
    result = run_preflight(node.params(docker, docker_data_root=None, min_free_gib=0))
    assert result['details']['disk']['path'] == docker.root_dir
    assert failures(result, 'disk') == []


# ---------------------------------------------------------------- ports

def test_a_foreign_holder_of_a_port_is_named_with_its_pid_and_command_line(node, docker):
    node.listen()
    node.process(4242, 'python3 -m http.server 8000', fds=['/dev/null', 'socket:[35015]'])
    result = run_preflight(node.params(docker, ports=[8000, 30000, 8080]))
    assert failures(result, 'ports') == [
        'port 8000 is held by pid 4242 (python3 -m http.server 8000) outside the container sgl_mix; next step: stop '
        'it (kill 4242) or free port 8000, then rerun',
        'port 30000 is in use (a listening socket) but no process this user can see holds it; next step: run the '
        'preflight as root (become: true), or ss -ltnp to name it',
    ]
    assert result['details']['ports'][0] == {'port': 8000, 'free': False, 'holders': [4242], 'ours': False}
    assert result['details']['ports'][2] == {'port': 8080, 'free': True, 'holders': [], 'ours': False}


def test_ports_held_inside_our_container_pass(node, docker):
    node.listen()
    node.process(77, 'sleep infinity', namespace=CONTAINER_NAMESPACE)
    node.process(900, 'python -m infera.server --port 8000', fds=['socket:[35015]'], namespace=CONTAINER_NAMESPACE)
    node.process(901, 'python -m sglang.launch_server --port 30000', fds=['socket:[35016]', 'socket:[40001]'],
                 namespace=CONTAINER_NAMESPACE)
    docker.containers[CONTAINER] = {'State': {'Running': True, 'Pid': 77}}
    result = run_preflight(node.params(docker, ports=[8000, 30000]))
    assert failures(result, 'ports') == []
    assert [entry['ours'] for entry in result['details']['ports']] == [True, True]
    assert '/containers/sgl_mix/json' in docker.paths


def test_a_container_sharing_the_node_pid_namespace_makes_nothing_ours(node, docker, monkeypatch):
    """With --pid=host the container's namespace is the node's: it cannot tell its processes apart."""
    node.listen()
    node.process(77, 'sleep infinity')
    node.process(4242, 'python3 -m http.server 8000', fds=['socket:[35015]'])
    os.symlink('77', str(node.proc / 'self'))
    docker.containers[CONTAINER] = {'State': {'Running': True, 'Pid': 77}}
    message, = failures(run_preflight(node.params(docker, ports=[8000])), 'ports')
    assert message.startswith('port 8000 is held by pid 4242')


# ---------------------------------------------------------------- etcd

@pytest.fixture
def etcd_clock(monkeypatch):
    """The etcd check's clock and sleep, injected: each wait advances the clock, whatever the machine's load."""
    now = [0.0]
    monkeypatch.setattr(_preflight, 'CLOCK', lambda: now[0])
    monkeypatch.setattr(_preflight, 'SLEEP', lambda seconds: now.__setitem__(0, now[0] + seconds))
    return now


def test_a_healthy_etcd_is_asked_without_the_environment_proxy(node, docker, monkeypatch):
    monkeypatch.setenv('http_proxy', 'http://127.0.0.1:9')
    with HttpServer(body={'health': 'true', 'reason': ''}) as etcd:
        result = run_preflight(node.params(docker, etcd_endpoint='http://%s/' % etcd.address))
    assert failures(result, 'etcd') == []
    assert etcd.paths == ['/health']
    assert result['details']['etcd']['answer'] == {'health': 'true', 'reason': ''}


def test_an_unhealthy_etcd_is_asked_again_for_etcd_wait_then_shows_its_answer(node, docker, etcd_clock):
    with HttpServer(status=503, body={'health': 'false', 'reason': 'RAFT NO LEADER'}) as etcd:
        result = run_preflight(node.params(docker, etcd_endpoint='http://%s' % etcd.address, etcd_wait=1.2))
    message, = failures(result, 'etcd')
    assert message == ('etcd at http://%s is not healthy: GET /health answered HTTP 503 {"health": "false", "reason": '
                       '"RAFT NO LEADER"} (3 time(s) in 1.2 s); next step: etcdctl --endpoints http://%s endpoint '
                       'health, and the etcd log' % (etcd.address, etcd.address))
    # Asked at 0, 0.5 and 1.0 s: a fourth ask at 1.5 s would be past the 1.2 s window.
    assert etcd.paths == ['/health'] * 3
    assert result['details']['etcd']['asked'] == 3


class _EtcdBusyAtFirst(HttpServer):
    """etcd whose health read times out (503) on the first `busy` asks, then answers healthy."""

    def __init__(self, busy):
        super().__init__(status=503, body={'health': 'false'})
        self.busy = busy

    def answer(self, path):
        if len(self.paths) > self.busy:
            return 200, b'{"health":"true"}'
        return super().answer(path)


def test_an_etcd_unhealthy_for_a_moment_passes(node, docker, etcd_clock):
    # What the CI's shared etcd did under load: one 503 while the molecule scenario's second run preflighted.
    with _EtcdBusyAtFirst(busy=2) as etcd:
        result = run_preflight(node.params(docker, etcd_endpoint='http://%s' % etcd.address))
    assert failures(result, 'etcd') == []
    assert result['details']['etcd'] == {'endpoint': 'http://%s' % etcd.address, 'status': 200,
                                         'answer': {'health': 'true'}, 'asked': 3}


def test_etcd_wait_0_asks_once(node, docker, etcd_clock):
    with _EtcdBusyAtFirst(busy=1) as etcd:
        result = run_preflight(node.params(docker, etcd_endpoint='http://%s' % etcd.address, etcd_wait=0))
    assert len(failures(result, 'etcd')) == 1
    assert etcd.paths == ['/health']


def test_an_etcd_that_does_not_answer(node, docker):
    message, = failures(run_preflight(node.params(docker, etcd_endpoint='http://127.0.0.1:9')), 'etcd')
    assert message.startswith('etcd at http://127.0.0.1:9 does not answer GET /health (')
    assert message.endswith('next step: start etcd or fix the endpoint (infera_etcd_endpoint), then curl '
                            'http://127.0.0.1:9/health')


# ---------------------------------------------------------------- image

@pytest.mark.parametrize('image, host', [
    ('registry.example.com/infera/sglang-rocm:dsv4', 'registry.example.com'),
    ('172.17.0.1:5000/infera-rehearsal-engine:abc', '172.17.0.1:5000'),
    ('localhost/x', 'localhost'),
    ('lmsysorg/sglang:v0.5.4-rocm700-mi35x', None),
    ('ubuntu', None),
    ('docker.io/rocm/sgl-dev:latest', None),
    ('registry.example.com/x@sha256:' + '0' * 64, 'registry.example.com'),
])
def test_registry_host_follows_dockers_rule(image, host):
    assert registry_host(image) == host


def test_an_absent_image_whose_registry_answers_passes(node, docker):
    with HttpServer(status=200) as registry:
        image = '%s/infera-rehearsal-engine:abc' % registry.address
        result = run_preflight(node.params(docker, image=image))
    assert failures(result, 'image') == []
    assert '/images/%s/json' % image in docker.paths
    assert result['details']['image'] == {'image': image, 'present': False, 'registry': registry.address,
                                          'registry_answer': 'HTTP 200 over http'}
    assert registry.paths[-1] == '/v2/'


def test_a_registry_that_wants_a_login_answers(node, docker):
    with HttpServer(status=401, body={'errors': [{'code': 'UNAUTHORIZED'}]}) as registry:
        result = run_preflight(node.params(docker, image='%s/x:1' % registry.address))
    assert failures(result, 'image') == []
    assert result['details']['image']['registry_answer'] == 'HTTP 401 over http (it wants a login)'


def test_an_absent_image_whose_registry_does_not_answer(node, docker):
    message, = failures(run_preflight(node.params(docker, image='127.0.0.1:9/x:1', timeout=2)), 'image')
    assert message.startswith('127.0.0.1:9/x:1 is not on the node and its registry 127.0.0.1:9 does not answer GET /v2/ '
                              '(https://127.0.0.1:9/v2/: ')
    assert 'http://127.0.0.1:9/v2/: ' in message
    assert message.endswith('next step: check the registry and the route to it from the node, or docker load the image')


def test_an_absent_docker_hub_image_will_be_pulled(node, docker):
    result = run_preflight(node.params(docker, image='lmsysorg/sglang:latest'))
    assert failures(result, 'image') == []
    assert result['details']['image']['registry_answer'] == 'not asked: Docker Hub; the image will be pulled'


# ---------------------------------------------------------------- arguments

@pytest.mark.parametrize('overrides, expected', [
    ({'render_nodes': -1}, 'render_nodes must be 0 or more; got -1'),
    ({'vram_max_percent': 101}, 'vram_max_percent must be between 0 and 100; got 101'),
    ({'min_free_gib': -5}, 'min_free_gib must be 0 or more GiB; got -5'),
    ({'timeout': 0}, 'timeout must be more than 0 seconds; got 0'),
    ({'etcd_wait': -1}, 'etcd_wait must be 0 or more seconds; got -1'),
    ({'ports': [8000, 0, 70000]}, 'ports must be between 1 and 65535; got 0, 70000'),
    ({'etcd_endpoint': '10.0.0.5:2379'}, "etcd_endpoint must be an http:// or https:// URL such as http://10.0.0.5:2379; "
                                         "got '10.0.0.5:2379'"),
    ({'image': ' '}, 'image must not be empty'),
    ({'image_smi_run': {'status': 0}}, 'image_smi_run needs image, the engine image its amd-smi ran in'),
])
def test_bad_arguments_raise(node, overrides, expected):
    with pytest.raises(PreflightError) as raised:
        run_preflight(node.params(None, **overrides))
    assert str(raised.value) == expected


# ---------------------------------------------------------------- the node's default address

class _Probe:
    """socket.socket for default_ipv4: a UDP socket whose connect picks a source address, or finds no route."""

    def __init__(self, source, calls):
        self.source, self.calls = source, calls

    def __call__(self, family, kind):
        self.calls.append(('socket', family, kind))
        return self

    def connect(self, address):
        self.calls.append(('connect', address))
        if self.source is None:
            raise OSError(101, 'Network is unreachable')

    def getsockname(self):
        return (self.source, 40000)

    def close(self):
        self.calls.append(('close',))


@pytest.mark.parametrize('source, expected', [('10.0.0.11', '10.0.0.11'), (None, '')])
def test_the_default_address_is_the_source_of_the_route_to_8_8_8_8(monkeypatch, source, expected):
    calls = []
    monkeypatch.setattr(_preflight.socket, 'socket', _Probe(source, calls))
    assert _preflight.default_ipv4() == expected
    # A UDP connect: it picks the route and sends nothing; the socket is closed either way.
    assert calls[:2] == [('socket', socket.AF_INET, socket.SOCK_DGRAM), ('connect', ('8.8.8.8', 53))]
    assert calls[-1] == ('close',)


def test_the_result_carries_the_default_address(node, docker, monkeypatch):
    monkeypatch.setattr(_preflight, 'default_ipv4', lambda: '10.0.0.11')
    assert run_preflight(node.params(docker))['address'] == '10.0.0.11'
