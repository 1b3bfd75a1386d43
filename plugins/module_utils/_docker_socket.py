# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""The Docker engine's API over its unix socket, with the standard library alone: a GET and its JSON answer, and a
container's inspect and whether its process runs."""

from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import quote


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket, the way the Docker engine answers."""

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


def inspect_container(socket_path, name, timeout):
    """Docker's inspect of the named container (GET /containers/<name>/json), None when there is none."""
    return docker_json(socket_path, '/containers/%s/json' % quote(name, safe=''), timeout)


def container_run_state(socket_path, name, timeout):
    """Whether the named container's process runs, as the engine reports it: exists, running (false too while
    Docker waits to restart it), pid, restart_count, status (Docker's word: running, restarting, exited...) and
    exit_code."""
    inspect = inspect_container(socket_path, name, timeout)
    if not inspect:
        return {'exists': False, 'running': False, 'pid': 0, 'restart_count': 0, 'status': 'gone', 'exit_code': None}
    state = inspect.get('State') or {}
    return {'exists': True, 'running': bool(state.get('Running')) and not state.get('Restarting'),
            'pid': int(state.get('Pid') or 0), 'restart_count': int(inspect.get('RestartCount') or 0),
            'status': state.get('Status', ''), 'exit_code': state.get('ExitCode')}
