"""The rehearsal inventory (inventories/rehearsal/nodes.docker.yml, plugin rehearsal_nodes in
tests/rehearsal/inventory_plugins/) against a Docker API that loses a container between its list and
its inspect, as the shared engine does when another test removes one; and ansible.cfg failing a run
whose inventory does not parse instead of running every play on no host and exiting 0."""

from __future__ import annotations

import subprocess

import pytest
from ansible.errors import AnsibleError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader, inventory_loader

from local_ansible import ANSIBLE_PLAYBOOK, REPO, ansible_env

CONFIG = REPO / "inventories" / "rehearsal" / "nodes.docker.yml"
NODES = ("infera-node-1", "infera-node-2")


class FlakyDocker:
    """Docker's list and inspect: `gone` is listed once more after it was removed, so its inspect fails once."""

    def __init__(self, gone=None, inspect_error=None):
        self.gone = gone
        self.inspect_error = inspect_error
        self.lists = 0

    def names(self):
        return [*NODES, *([self.gone] if self.gone and self.lists == 1 else [])]

    def get_json(self, path, *args, **kwargs):  # pylint: disable=unused-argument
        from ansible_collections.community.docker.plugins.module_utils._api.errors import APIError  # pylint: disable=import-outside-toplevel
        if path == "/containers/json":
            self.lists += 1
            return [{"Id": f"{name}-id", "Names": [f"/{name}"]} for name in self.names()]
        name = args[0][:-len("-id")]
        if self.inspect_error:
            raise APIError("500 Server Error", explanation=self.inspect_error)
        if name == self.gone:
            raise APIError("404 Client Error", explanation=f"No such container: {name}-id")
        return {"State": {"Running": True}, "Config": {"Image": "node", "Labels": {}}}


init_plugin_loader([str(REPO / ".build" / "collections")])
inventory_loader.add_directory(str(REPO / "tests" / "rehearsal" / "inventory_plugins"))


def parse(plugin_name, client, config=CONFIG):
    plugin = inventory_loader.get(plugin_name)
    plugin._create_client = lambda: client  # pylint: disable=protected-access
    inventory = InventoryData()
    plugin.parse(inventory, DataLoader(), str(config), cache=False)
    return sorted(inventory.hosts)


def test_a_container_removed_between_list_and_inspect_is_listed_again_not_a_failed_parse():
    client = FlakyDocker(gone="molecule-default")
    assert parse("rehearsal_nodes", client) == list(NODES)
    assert client.lists == 2


def test_the_upstream_plugin_fails_the_whole_parse_on_it(tmp_path):
    # Why rehearsal_nodes exists: the same Docker answers fail community.docker.docker_containers.
    upstream = tmp_path / "nodes.docker.yml"
    upstream.write_text(CONFIG.read_text().replace("plugin: rehearsal_nodes",
                                                   "plugin: community.docker.docker_containers"))
    with pytest.raises(AnsibleError, match="No such container"):
        parse("community.docker.docker_containers", FlakyDocker(gone="molecule-default"), upstream)


def test_any_other_docker_error_is_not_retried():
    client = FlakyDocker(inspect_error="driver failed")
    with pytest.raises(AnsibleError, match="driver failed"):
        parse("rehearsal_nodes", client)
    assert client.lists == 1


def test_a_run_whose_inventory_does_not_parse_fails_instead_of_doing_nothing(tmp_path):
    broken = tmp_path / "nodes.docker.yml"
    broken.write_text("plugin: rehearsal_nodes\ndocker_host: unix:///nonexistent/docker.sock\n")
    result = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(broken),
                             "playbooks/deploy_mixed.yml", "--limit", "infera-node-1", "-e", "conc=64"],
                            cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out[-3000:]
    # The cause first (the plugin's own), then the verdict.
    assert "Error connecting" in out and f"Completely failed to parse inventory source {broken}" in out, out[-3000:]
    assert "PLAY [" not in out, out[-3000:]
