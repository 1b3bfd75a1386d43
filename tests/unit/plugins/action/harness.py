# SPDX-License-Identifier: Apache-2.0
"""One way to build an action plugin for a unit test: a task with args, a mocked connection and play context."""

from __future__ import annotations

from unittest import mock


def make_action(plugin, name, args, check_mode=False):
    """plugin's ActionModule for a task of action `name` (infera.serving.<x>) with args."""
    task = mock.MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.action = name
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    play_context = mock.MagicMock()
    play_context.remote_addr = '10.0.0.1'
    action = plugin.ActionModule(task, connection, play_context, loader=None, templar=None, shared_loader_obj=None)
    action._load_name = name
    return action
