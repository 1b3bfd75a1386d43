# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This plugin util is PRIVATE to the infera.serving collection; it may change at any time.

"""Whether a node playbook must refuse to run, before any task reaches a node: the one line that says why.

The first task of every node playbook (playbooks/tasks/require_hosts.yml, action infera.serving.require_hosts) asks
two things of the inventory, and names the first that fails:

- the play's group matches no host of the inventory within the --limit: every play would say "no hosts matched" and
  the run exit 0, having checked and changed nothing;
- ``group_vars/<group>/`` (made for vault.yml) exists beside ``group_vars/<group>.yml``: Ansible reads the folder and
  ignores the file, so every setting in it is gone, and the first check to notice would blame a missing setting.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager

EXAMPLE_LAYOUT = 'inventories/mi355x-example'


def hosts_matching(groups, pattern, loader=None):
    """The hosts of ``groups`` (the play's ``groups`` variable: group name -> host names) that ``pattern`` matches,
    as the ansible.builtin.inventory_hostnames lookup finds them: any host pattern (``a:b``, ``a:&b``, ``!a``,
    ``node[1:3]``, ``~regex``). A pattern Ansible cannot read matches nothing, as in that lookup."""
    manager = InventoryManager(loader, parse=False)
    for group, hosts in groups.items():
        manager.add_group(group)
        for host in hosts:
            manager.add_host(host, group=group)
    try:
        return [host.name for host in manager.get_hosts(pattern=pattern)]
    except AnsibleError:
        return []


def settings_roots(sources):
    """The folders whose ``group_vars/`` Ansible reads for these inventory sources, in order, each once: a source
    folder itself, the folder of any other source. A host list (``-i node1,node2,``) has no folder and is left out."""
    folders = [source for source in sources if os.path.isdir(source)]
    folders += [os.path.dirname(source) for source in sources if not os.path.isdir(source)]
    roots = []
    for folder in folders:
        if folder and folder not in roots:
            roots.append(folder)
    return roots


def hidden_settings_files(sources, group):
    """Each ``<root>/group_vars/<group>.yml`` that Ansible ignores because ``<root>/group_vars/<group>/`` exists."""
    hidden = []
    for root in settings_roots(sources):
        folder = root + '/group_vars/' + group
        if os.path.isdir(folder) and os.path.isfile(folder + '.yml'):
            hidden.append(folder + '.yml')
    return hidden


def no_host_problem(pattern, next_step, sources, limit=None):
    """The problem of a group that matches no host of the inventory (within the --limit, when one is given)."""
    within = ' within --limit %s' % limit if limit is not None else ''
    return 'no host of the inventory (%s) is in group %s%s; next step: %s' % (
        ', '.join(str(source) for source in sources), pattern, within, next_step)


def hidden_file_problem(pattern, hidden):
    """The problem of settings files that the group's folder hides (``hidden``: their paths, not empty)."""
    folders = [path[:-len('.yml')] + '/' for path in hidden]
    return ('%s is ignored: Ansible reads the folder beside it (%s) instead, so none of its settings apply; next step: '
            'move the file into that folder, e.g. as group_vars/%s/vars.yml (the layout of %s)'
            % (', '.join(hidden), ', '.join(folders), pattern, EXAMPLE_LAYOUT))


def refusal(pattern, next_step, sources, matched, limit=None, hidden=None):
    """``<pattern>: <problem>`` naming the first problem, or None when the node playbook may run.

    ``sources``: the inventory sources (``ansible_inventory_sources``); ``matched``: the hosts the pattern matches
    within the play's hosts (what the node play will run on); ``limit``: ``ansible_limit``, None without --limit;
    ``hidden``: the hidden settings files, read from the sources' folders when not given.
    """
    if not matched:
        return '%s: %s' % (pattern, no_host_problem(pattern, next_step, sources, limit))
    if hidden is None:
        hidden = hidden_settings_files(sources, pattern)
    if hidden:
        return '%s: %s' % (pattern, hidden_file_problem(pattern, hidden))
    return None
