# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""What the roles decide from one infera.serving.container_status look (roles/*/tasks/find.yml): whether a launch
script on the node is the one rendered now, the router's state (whether it runs, whether its script is current) and
the worker's state (its wrapper, engines left without it, the variant it runs, the last launch's exit and whether that
launch may have left a record in etcd)."""

from __future__ import annotations

import hashlib
import re

# The launch script's header line that names its variant (roles/sglang_worker/templates/engine.sh.j2).
_VARIANT_LINE = re.compile(r'variant: (\S+)')
# The mode the roles write their launch scripts with.
SCRIPT_MODE = '0644'


def script_current(file_info, text):
    """Whether the node's copy of a launch script (container_status's files.<name>: checksum, mode) is `text`, written
    with the roles' mode: an unchanged rerun then makes no node call for it."""
    info = file_info or {}
    return info.get('checksum') == hashlib.sha1(text.encode('utf-8')).hexdigest() and info.get('mode') == SCRIPT_MODE


def _part(found, *keys):
    value = found or {}
    for key in keys:
        value = (value or {}).get(key)
    return value


def worker_found(found, etcd_endpoint='', advertise_host=''):
    """The worker's state from its container_status look (roles/sglang_worker/tasks/find.yml).

    - wrapper_running: Infera's wrapper runs (the node serves);
    - engines_left: engine processes while no wrapper runs (its wrapper died; they hold the port and the GPUs);
    - running_variant: the running launch script's variant, 'none' when no wrapper runs or the script names none;
    - rootfs: the container's root filesystem, where the engine's watch dirs are;
    - last_exit: the last launch's exit code, '' when its exit file is missing (the wrapper still ran when its
      container went);
    - record_may_be_stale: a record the wrapper left in etcd may outlive it: no wrapper runs, the work directory had a
      launch (its log link is there), that launch did not end with Infera's own stop (exit 0, after the wrapper revoked
      its lease), and the worker has an etcd and an address to be listed under.
    """
    running = bool(_part(found, 'processes', 'wrapper'))
    head = _part(found, 'files', 'script', 'head') or []
    variant = _VARIANT_LINE.search(' '.join(head)) if running else None
    last_exit = ((_part(found, 'files', 'exit', 'head') or [''])[0] or '').strip()
    launched = bool(_part(found, 'exists_only', 'log', 'exists'))
    return {
        'wrapper_running': running,
        'engines_left': [] if running else list(_part(found, 'processes', 'engine') or []),
        'running_variant': variant.group(1) if variant else 'none',
        'rootfs': _part(found, 'container', 'rootfs') or '',
        'last_exit': last_exit,
        'record_may_be_stale': (not running and launched and last_exit != '0' and bool(etcd_endpoint)
                                and bool(advertise_host)),
    }


def router_found(found, script_text=None):
    """The router's state from its container_status look (roles/router/tasks/find.yml).

    - running: a router process runs in the container;
    - script_current: the node's launch script is `script_text` (script_current), None without a `script_text` (a
      stop renders no script).
    """
    return {
        'running': bool(_part(found, 'processes', 'router')),
        'script_current': None if script_text is None else script_current(_part(found, 'files', 'script'), script_text),
    }
