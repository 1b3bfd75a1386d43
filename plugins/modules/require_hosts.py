#!/usr/bin/python
# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# The work is done by the action plugin of the same name on the controller; this file only documents it.

from __future__ import annotations

DOCUMENTATION = r"""
module: require_hosts
short_description: Refuse a node playbook whose group matches no host, or whose group settings file the inventory ignores
version_added: 0.2.0
description:
  - "The first task of every node playbook of the collection (C(playbooks/tasks/require_hosts.yml)), run once in a play on
    C(localhost:all) before any task reaches a node. It fails in one line, C(<pattern>: <problem>), naming the first
    problem of the two below."
  - The group matches no host of the inventory within the C(--limit). Without this check every play would say
    C(no hosts matched) and the run would exit 0, having checked and changed nothing. The line names the inventory
    sources, the C(--limit) when one is given, and O(next_step).
  - C(group_vars/<group>/) exists (made for a C(vault.yml)) beside C(group_vars/<group>.yml), in the folder of an
    inventory source or beside an inventory file. Ansible reads the folder and ignores the file, so every setting in it
    is gone, and the first check to notice would blame a missing setting. The line names each such file and its folder.
  - The hosts O(pattern) matches are found as the P(ansible.builtin.inventory_hostnames#lookup) lookup finds them, from the play's
    C(groups), and only those among the play's hosts (C(ansible_play_hosts_all)) count, since C(groups) ignores the C(--limit).
  - Runs on the controller only and reads only the play's variables and the inventory's folders.
author:
  - Infera serving maintainers (@infera)
extends_documentation_fragment:
  - infera.serving._attributes
  - infera.serving._attributes.read_only
  - infera.serving._attributes.controller
options:
  pattern:
    description:
      - The host pattern of the node play, usually its group, for example V(mi355x). Any host pattern is accepted.
      - The settings file check looks for C(group_vars/<pattern>.yml) and C(group_vars/<pattern>/).
    type: str
    required: true
  next_step:
    description:
      - What to do when no host matches, put at the end of that message after C(next step:).
    type: str
    required: true
notes:
  - Use it in a play whose hosts are C(localhost:all), with C(run_once), so that a C(--limit) narrows the play to the
    limited hosts instead of skipping it, and the play's hosts are those the node play will run on.
"""

EXAMPLES = r"""
- name: Require hosts | Refuse a group that matches no host, or whose settings file the inventory ignores
  infera.serving.require_hosts:
    pattern: mi355x
    next_step: put the nodes in group mi355x of the inventory (as inventories/mi355x-example/hosts.yml does)
  run_once: true
"""

RETURN = r"""
hosts:
  description: The hosts O(pattern) matches among the play's hosts, that is within the C(--limit).
  returned: always
  type: list
  elements: str
  sample: [infera-node-1, infera-node-2]
"""
