# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rehearsal platform's node inventory: community.docker.docker_containers, listed again when a
container goes away between Docker's list and its inspect.

The tests share one Docker engine: molecule's scenarios, the platform's own test and the fleet's
lost-node test create and remove containers while other tests start playbooks. The docker_containers
plugin lists every container, then inspects each one; one removed in between fails the whole parse
(``Error inspecting container ... No such container``), and without
``[inventory] any_unparsed_is_failed`` (ansible.cfg) every play then reported "no hosts matched" and
the run exited 0 having done nothing. This plugin is that plugin, run again (a fresh list) when the
only fault is such a container. Nothing else differs: same options, same filters, same hosts.
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleError
from ansible.utils.display import Display
from ansible_collections.community.docker.plugins.inventory.docker_containers import (
    InventoryModule as DockerContainers,
)

DOCUMENTATION = r"""
name: rehearsal_nodes
short_description: community.docker.docker_containers, listed again when a container goes away mid-list
description:
  - The rehearsal platform's nodes (tests/rehearsal/platform), found as
    P(community.docker.docker_containers#inventory) finds them.
  - When a container listed by Docker is gone by the time it is inspected (another test removed it), the
    whole list is read again, up to O(attempts) times, instead of failing the parse.
  - The configuration file's name ends with V(docker.yml) or V(docker.yaml), as for docker_containers.
extends_documentation_fragment:
  - ansible.builtin.constructed
  - community.docker.docker.api_documentation
  - community.library_inventory_filtering_v1.inventory_filter
options:
  plugin:
    description: The name of this plugin.
    type: str
    required: true
    choices: [rehearsal_nodes]
  attempts:
    description: How many times the containers are listed before a container gone mid-list fails the parse.
    type: int
    default: 5
  connection_type:
    description: As in community.docker.docker_containers.
    type: str
    default: docker-api
    choices: [ssh, docker-cli, docker-api]
  configure_docker_daemon:
    description: As in community.docker.docker_containers.
    type: bool
    default: true
  verbose_output:
    description: As in community.docker.docker_containers.
    type: bool
    default: false
  default_ip:
    description: As in community.docker.docker_containers.
    type: str
    default: 127.0.0.1
  private_ssh_port:
    description: As in community.docker.docker_containers.
    type: int
    default: 22
  add_legacy_groups:
    description: As in community.docker.docker_containers.
    type: bool
    default: false
"""

DISPLAY = Display()
GONE = "No such container"


class InventoryModule(DockerContainers):
    """docker_containers, whose list is read again when a listed container is gone before its inspect."""

    NAME = "rehearsal_nodes"

    def _populate(self, client):
        attempts = max(1, self.get_option("attempts"))
        for attempt in range(1, attempts + 1):
            try:
                return super()._populate(client)
            except AnsibleError as exc:
                if GONE not in str(exc) or attempt == attempts:
                    raise
                DISPLAY.vvv(f"rehearsal_nodes: a container went away while listed ({exc}); "
                            f"listing again ({attempt + 1}/{attempts})")
                time.sleep(0.1 * attempt)
        return None
