# SPDX-License-Identifier: Apache-2.0
"""The whole node_preflight module: arguments in, exit_json/fail_json out, on a fake node.

The checks themselves are tested in tests/unit/plugins/module_utils/test__preflight.py; here the
module's contract: problems are returned (never fail_json), check mode runs the same read-only
checks, and only a bad argument fails the task.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import socketserver
import tempfile
import threading

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _gpu_smi, _preflight, _procs
from ansible_collections.infera.serving.plugins.modules import node_preflight

from .utils import run_module


IMAGE = 'rocm/infera:sglang-v0.1.1'


@pytest.fixture
def docker_socket():
    """A Docker engine that answers /_ping and knows no container and no image."""
    yield from _docker_engine(images=())


@pytest.fixture
def docker_with_image():
    """A Docker engine that answers /_ping and knows IMAGE."""
    yield from _docker_engine(images=(IMAGE,))


def _docker_engine(images):
    known = {'/images/%s/json' % image for image in images}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path == '/_ping':
                status, body = 200, b'OK'
            elif self.path in known:
                status, body = 200, b'{"Id": "sha256:abc"}'
            else:
                status, body = 404, b'{"message": "not found"}'
            self.send_response(status)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    directory = tempfile.mkdtemp(dir='/tmp')  # a unix socket path has a 108-byte limit
    server = socketserver.ThreadingUnixStreamServer(os.path.join(directory, 'docker.sock'), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    yield server.server_address
    server.shutdown()
    server.server_close()
    shutil.rmtree(directory)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """/proc with no listener and no process, /dev with kfd and 8 render nodes, an idle amd-smi, a model."""
    (tmp_path / 'proc' / 'net').mkdir(parents=True)
    (tmp_path / 'dev' / 'dri').mkdir(parents=True)
    (tmp_path / 'dev' / 'kfd').touch()
    for index in range(8):
        (tmp_path / 'dev' / 'dri' / ('renderD%d' % (128 + index))).touch()
    gpus = [{'gpu': index, 'mem_usage': {'total_vram': {'value': 294896, 'unit': 'MB'},
                                         'used_vram': {'value': 284, 'unit': 'MB'}}} for index in range(8)]
    (tmp_path / 'metric.json').write_text(json.dumps({'gpu_data': gpus}))
    (tmp_path / 'bin').mkdir()
    amd_smi = tmp_path / 'bin' / 'amd-smi'
    amd_smi.write_text('#!/bin/sh\nexec /bin/cat %s\n' % (tmp_path / 'metric.json'))
    amd_smi.chmod(0o755)
    model = tmp_path / 'model'
    model.mkdir()
    (model / 'config.json').write_text('{"model_type": "deepseek_v4"}')
    (model / 'tokenizer.json').write_text('{}')
    monkeypatch.setattr(_procs, 'PROC', str(tmp_path / 'proc'))
    monkeypatch.setattr(_preflight, 'DEV', str(tmp_path / 'dev'))
    monkeypatch.setattr(_gpu_smi, 'ROCM_BIN', str(tmp_path / 'rocm'))
    monkeypatch.setenv('PATH', str(tmp_path / 'bin'))
    return tmp_path


@pytest.mark.parametrize('check_mode', [False, True])
def test_a_ready_node_exits_unchanged_in_check_mode_too(node, docker_socket, check_mode):
    before = sorted(str(path) for path in node.rglob('*'))
    kind, result, warnings = run_module(node_preflight.main, {
        'docker_socket': docker_socket, 'model_path': str(node / 'model'), 'ports': [8000, 30000],
        'container': 'sgl_mix', 'docker_data_root': str(node), 'min_free_gib': 0, 'node': 'node1'},
        check_mode=check_mode)
    assert kind == 'exit', result
    assert result['changed'] is False
    assert result['ready'] is True
    assert result['failures'] == [] and result['lines'] == []
    assert result['passed'] == ['docker', 'devices', 'gpus', 'model', 'disk', 'ports']
    assert [entry['check'] for entry in result['skipped']] == ['etcd', 'image']
    assert result['node'] == 'node1'
    assert warnings == []
    assert sorted(str(path) for path in node.rglob('*')) == before, 'the preflight wrote on the node'


@pytest.mark.parametrize('check_mode', [False, True])
def test_a_node_without_amd_smi_is_read_with_the_image_s_in_a_second_call(node, docker_with_image, check_mode):
    (node / 'bin' / 'amd-smi').unlink()
    args = {'docker_socket': docker_with_image, 'image': IMAGE, 'docker_data_root': str(node), 'min_free_gib': 0,
            'node': 'node1'}
    kind, first, _warnings = run_module(node_preflight.main, args, check_mode=check_mode)
    assert kind == 'exit', first
    assert first['ready'] is False and [failure['check'] for failure in first['failures']] == ['gpus']
    assert first['image_smi']['image'] == IMAGE

    # What community.docker.docker_container returns when it ran first['image_smi'] (detach=false, cleanup=true).
    run = {'changed': True, 'status': 0, 'container': {'Output': (node / 'metric.json').read_text()}}
    kind, second, _warnings = run_module(node_preflight.main, dict(args, image_smi_run=run), check_mode=check_mode)
    assert kind == 'exit', second
    assert second['ready'] is True and second['changed'] is False
    assert second['details']['gpus']['source'] == 'amd-smi metric --mem-usage --json (in %s)' % IMAGE
    assert second['image_smi'] is None


def test_problems_are_returned_not_failed(node):
    (node / 'dev' / 'kfd').unlink()
    kind, result, _warnings = run_module(node_preflight.main, {
        'docker_socket': str(node / 'docker.sock'), 'model_path': str(node / 'model'),
        'model_types': ['deepseek_v3'], 'docker_data_root': str(node), 'min_free_gib': 0, 'node': 'node1'})
    assert kind == 'exit'
    assert 'failed' not in result
    assert result['ready'] is False
    assert [failure['check'] for failure in result['failures']] == ['docker', 'devices', 'model']
    assert result['lines'][1].startswith('node1: preflight devices: %s is missing' % (node / 'dev' / 'kfd'))
    assert result['lines'][2] == ("node1: preflight model: config.json in %s has model_type 'deepseek_v4', expected "
                                  "deepseek_v3; next step: point the model path (infera_model_path) at the "
                                  "DeepSeek-V4-Pro checkpoint" % (node / 'model'))


def test_the_node_name_defaults_to_the_hostname(node):
    kind, result, _warnings = run_module(node_preflight.main, {'docker_socket': str(node / 'docker.sock'),
                                                               'docker_data_root': str(node)})
    assert kind == 'exit'
    assert result['node'] == socket.gethostname()


@pytest.mark.parametrize('args, expected', [
    ({'vram_max_percent': 150}, 'vram_max_percent must be between 0 and 100; got 150'),
    ({'etcd_endpoint': 'etcd:2379'}, "etcd_endpoint must be an http:// or https:// URL"),
    ({'ports': ['http']}, 'ports'),
])
def test_a_bad_argument_fails_the_task(node, args, expected):
    kind, result, _warnings = run_module(node_preflight.main, dict(args, docker_socket=str(node / 'docker.sock')))
    assert kind == 'fail'
    assert expected in result['msg']
    assert '\n' not in result['msg']
