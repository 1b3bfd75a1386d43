# SPDX-License-Identifier: Apache-2.0
"""container_status: the container from a fake Docker engine on a unix socket, its processes from a fake /proc
(command lines, pid namespaces, NSpid) and from this machine's real /proc, files, and a token file's existence."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _procs
from ansible_collections.infera.serving.plugins.module_utils._container_status import (
    ARGUMENT_SPEC,
    ContainerStatusError,
    container_status,
    processes_in,
)

from .test__preflight import DockerEngine

WRAPPER = '^python -m infera[.]engine[.]sglang '
ENGINE = '-m sglang[.]launch_server '
NODE_NS = 'pid:[4026531836]'
CONTAINER_NS = 'pid:[4026532577]'
OTHER_NS = 'pid:[4026532999]'
WRAPPER_ARGS = ['python', '-m', 'infera.engine.sglang', '--port', '30000']
ENGINE_ARGS = ['/usr/bin/python3', '-m', 'sglang.launch_server', '--model-path', '/models/dsv4']


class FakeProc:
    """/proc/<pid>/{cmdline,status,ns/pid} under tmp_path, pointed at by _procs.PROC."""

    def __init__(self, root, monkeypatch):
        self.root = root
        root.mkdir()
        monkeypatch.setattr(_procs, 'PROC', str(root))

    def process(self, pid, args, namespace, inner_pid=None):
        base = self.root / str(pid)
        (base / 'ns').mkdir(parents=True)
        os.symlink(namespace, str(base / 'ns' / 'pid'))
        (base / 'cmdline').write_bytes(b''.join(arg.encode() + b'\0' for arg in args))
        nspid = '%d' % pid if inner_pid is None else '%d\t%d' % (pid, inner_pid)
        (base / 'status').write_text('Name:\tpython\nNSpid:\t%s\n' % nspid)


@pytest.fixture
def proc(tmp_path, monkeypatch):
    return FakeProc(tmp_path / 'proc', monkeypatch)


@pytest.fixture
def docker():
    with DockerEngine() as engine:
        yield engine


def params(docker, **overrides):
    values = {name: spec.get('default') for name, spec in ARGUMENT_SPEC.items()}
    values.update(container='sgl_mix', processes={'wrapper': WRAPPER, 'engine': ENGINE}, docker_socket=docker.socket)
    values.update(overrides)
    return values


def running(docker, pid=4000, merged='/var/lib/docker/overlay2/abc/merged'):
    docker.containers['sgl_mix'] = {'Id': 'abc123', 'Config': {'Image': 'registry:5000/sglang-sim:1'},
                                    'State': {'Running': True, 'Pid': pid}, 'GraphDriver': {'Data': {'MergedDir': merged}}}


def test_a_running_container_lists_its_own_processes_with_the_pids_it_sees(proc, docker):
    running(docker)
    proc.process(1, ['/sbin/init'], NODE_NS)
    proc.process(4000, ['sleep', 'infinity'], CONTAINER_NS, inner_pid=1)
    proc.process(4057, WRAPPER_ARGS, CONTAINER_NS, inner_pid=57)
    proc.process(4080, ENGINE_ARGS, CONTAINER_NS, inner_pid=80)
    # Another Infera container's wrapper on the same node: not ours.
    proc.process(5057, WRAPPER_ARGS, OTHER_NS, inner_pid=57)

    result = container_status(params(docker))

    assert result['container'] == {'exists': True, 'running': True, 'id': 'abc123', 'image': 'registry:5000/sglang-sim:1',
                                   'pid': 4000, 'merged_dir': '/var/lib/docker/overlay2/abc/merged',
                                   'rootfs': str(proc.root / '4000' / 'root')}
    assert result['processes'] == {
        'wrapper': ['57 python -m infera.engine.sglang --port 30000'],
        'engine': ['80 /usr/bin/python3 -m sglang.launch_server --model-path /models/dsv4']}


def test_a_missing_container_has_nothing_and_a_stopped_one_is_not_looked_into(proc, docker):
    proc.process(4000, ['sleep', 'infinity'], CONTAINER_NS)
    proc.process(4057, WRAPPER_ARGS, CONTAINER_NS)
    missing = container_status(params(docker))
    assert missing['container'] == {'exists': False, 'running': False, 'id': '', 'image': '', 'pid': 0, 'merged_dir': '',
                                    'rootfs': ''}
    assert missing['processes'] == {'wrapper': [], 'engine': []}

    # Docker keeps the last Pid of a stopped container: it may be anything by now.
    docker.containers['sgl_mix'] = {'Id': 'abc123', 'Config': {'Image': 'img'}, 'State': {'Running': False, 'Pid': 4000}}
    stopped = container_status(params(docker))
    assert (stopped['container']['exists'], stopped['container']['running']) == (True, False)
    assert stopped['processes'] == {'wrapper': [], 'engine': []}


@pytest.mark.parametrize('state, graph, rootfs', [
    # The containerd snapshotter (Docker 29's default) reports no MergedDir: the init process's root still shows it.
    ({'Running': True, 'Pid': 4000}, {'Name': 'overlayfs'}, 'proc/4000/root'),
    ({'Running': True, 'Pid': 4000}, {'Name': 'overlay2', 'Data': {'MergedDir': '/d/merged'}}, 'proc/4000/root'),
    # No process runs in it: the overlay2 merged directory when there is one, else nothing.
    ({'Running': False, 'Pid': 0}, {'Name': 'overlay2', 'Data': {'MergedDir': '/d/merged'}}, '/d/merged'),
    ({'Running': False, 'Pid': 0}, {'Name': 'overlayfs'}, ''),
    # Docker's Pid of a container that no longer runs tells nothing.
    ({'Running': False, 'Pid': 4000}, {'Name': 'overlay2', 'Data': {'MergedDir': '/d/merged'}}, '/d/merged'),
])
def test_the_root_filesystem_is_the_init_processs_root_whatever_the_storage_driver(proc, docker, state, graph, rootfs):
    docker.containers['sgl_mix'] = {'Id': 'abc123', 'Config': {'Image': 'img'}, 'State': state, 'GraphDriver': graph}
    expected = str(proc.root.parent / rootfs) if rootfs.startswith('proc/') else rootfs
    assert container_status(params(docker))['container']['rootfs'] == expected


def test_a_process_without_a_command_line_or_gone_is_skipped(proc, docker):
    running(docker)
    proc.process(4000, ['sleep', 'infinity'], CONTAINER_NS, inner_pid=1)
    proc.process(4081, [], CONTAINER_NS, inner_pid=81)  # a zombie: empty cmdline
    (proc.root / '4082').mkdir()  # exited between the listing and the read
    proc.process(4080, ENGINE_ARGS, CONTAINER_NS, inner_pid=80)
    assert container_status(params(docker))['processes']['engine'] == [
        '80 /usr/bin/python3 -m sglang.launch_server --model-path /models/dsv4']


def test_files_come_back_with_what_template_compares_and_a_token_file_with_its_existence_only(docker, tmp_path):
    script = tmp_path / 'engine.sh'
    text = '#!/bin/bash\n# recipe: dsv4-pro-mi355x; variant: dp\nset -u\nexec python -m infera.engine.sglang\n'
    script.write_text(text)
    script.chmod(0o640)
    token = tmp_path / 'secrets.env'
    token.write_text('HF_TOKEN=hf_not_to_be_read\n')

    result = container_status(params(docker, head_lines=2, files={'script': str(script), 'gone': str(tmp_path / 'none')},
                                     exists_only={'token': str(token), 'old': str(tmp_path / 'old.env')}))

    assert result['files']['script'] == {'exists': True, 'kind': 'file', 'mode': '0640',
                                         'checksum': hashlib.sha1(text.encode()).hexdigest(),
                                         'head': ['#!/bin/bash', '# recipe: dsv4-pro-mi355x; variant: dp']}
    assert result['files']['gone'] == {'exists': False, 'kind': '', 'mode': '', 'checksum': '', 'head': []}
    assert result['exists_only'] == {'token': {'exists': True}, 'old': {'exists': False}}
    assert 'hf_not_to_be_read' not in repr(result)


def test_a_directory_and_a_device_are_described_and_never_read(docker, tmp_path):
    (tmp_path / 'logs').mkdir(mode=0o755)
    result = container_status(params(docker, files={'logs': str(tmp_path / 'logs'), 'null': '/dev/null'}))
    assert result['files']['logs'] == {'exists': True, 'kind': 'directory', 'mode': '0755', 'checksum': '', 'head': []}
    assert result['files']['null'] == {'exists': True, 'kind': 'device', 'mode': '0666', 'checksum': '', 'head': []}


@pytest.mark.parametrize('overrides, message', [
    ({'processes': {'engine': '-m sglang[.launch_server'}}, r'processes\.engine is not a valid regular expression'),
    ({'files': {'script': 'scripts/engine.sh'}}, r"files\.script must be an absolute path on the node, got 'scripts/engine.sh'"),
    ({'exists_only': {'token': ''}}, r"exists_only\.token must be an absolute path on the node, got ''"),
])
def test_a_bad_argument_is_refused_by_name(docker, overrides, message):
    with pytest.raises(ContainerStatusError, match=message):
        container_status(params(docker, **overrides))


def test_the_real_proc_finds_a_process_by_its_command_line():
    """On this machine's /proc: a child in this process's pid namespace, found with its own pid."""
    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', 'container-status-probe'])
    try:
        # A loaded CI machine once listed no probe on the first look (1 run in many): look again for up to 5 s; a
        # lookup that never finds it still fails.
        for _attempt in range(50):
            found = processes_in(os.getpid(), {'probe': r'-c import time.* container-status-probe$',
                                               'none': 'no-such-process-anywhere'})
            if found['probe']:
                break
            time.sleep(0.1)
    finally:
        child.kill()
        child.wait()
    assert found == {'probe': ['%d %s -c import time; time.sleep(60) container-status-probe' % (child.pid, sys.executable)],
                     'none': []}


def test_the_image_comes_back_with_dockers_keys_and_empty_when_the_node_does_not_have_it(proc, docker):
    # The container role pulls only when this is empty, and reads the digest and labels from it otherwise.
    name = 'registry:5000/infera/sglang-sim:1'
    docker.images[name] = {'Id': 'sha256:5b1e', 'RepoTags': [name], 'RepoDigests': ['registry:5000/infera/sglang-sim@sha256:77c0'],
                           'Config': {'Labels': {'io.infera.simulated': 'true'}, 'Env': ['A=1']}, 'Size': 123}
    found = container_status(params(docker, image=name))
    assert found['image'] == {'Id': 'sha256:5b1e', 'RepoTags': [name], 'RepoDigests': ['registry:5000/infera/sglang-sim@sha256:77c0'],
                              'Config': {'Labels': {'io.infera.simulated': 'true'}}}
    assert container_status(params(docker, image='registry:5000/infera/sglang-sim:2'))['image'] == {}
    assert 'image' not in container_status(params(docker))


def test_an_image_without_labels_or_digests_comes_back_with_empty_ones(proc, docker):
    # A locally built image has no RepoDigests; Docker sends null Labels for an image without any.
    docker.images['local:1'] = {'Id': 'sha256:aa', 'RepoTags': ['local:1'], 'RepoDigests': None, 'Config': {'Labels': None}}
    assert container_status(params(docker, image='local:1'))['image'] == {
        'Id': 'sha256:aa', 'RepoTags': ['local:1'], 'RepoDigests': [], 'Config': {'Labels': {}}}
