"""The built collection is the product: what `ansible-galaxy collection build` makes holds what a user
runs and reads and nothing the rehearsal platform or development needs, and, installed offline with
only its declared dependency, its playbooks run by FQCN without this checkout's ansible.cfg."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# The collections scripts/bootstrap unpacks from the `ansible` wheel (Galaxy may be unreachable).
BUNDLED = REPO / ".build" / "collections" / "ansible_collections" / "community"
BUNDLED_DEPENDENCIES = (BUNDLED / "docker", BUNDLED / "library_inventory_filtering_v1")

# Every top-level entry the artifact may hold; CHANGELOG.rst appears once a release is cut.
SHIPPED_TOP_LEVEL = {"MANIFEST.json", "FILES.json", "README.md", "LICENSE", "CHANGELOG.rst", "requirements.txt",
                     "requirements.yml", "changelogs", "docs", "inventories", "meta", "playbooks", "plugins", "roles"}
REQUIRED = {"MANIFEST.json", "FILES.json", "README.md", "LICENSE", "requirements.txt", "requirements.yml",
            "meta/runtime.yml", "changelogs/changelog.yaml", "playbooks/deploy_mixed.yml",
            "inventories/mi355x-example/hosts.yml", "inventories/mi355x-example/group_vars/mi355x/vars.yml",
            "docs/quickstart-mi355x.md"}
# Below the top level: raw measurement logs, the rehearsal platform's inventory, unreleased fragments.
NOT_SHIPPED = ("docs/measurements/", "inventories/rehearsal/", "changelogs/fragments/")
# Every file under these ships: what the playbooks run.
SHIPPED_TREES = ("plugins", "roles", "playbooks", "meta", "inventories/mi355x-example")


def _clean_env(tmp, **extra):
    """No ANSIBLE_* from the caller (the unit conftest points ANSIBLE_COLLECTIONS_PATH into this checkout),
    and an empty configuration file instead of the checkout's ansible.cfg."""
    config = tmp / "empty.cfg"
    config.touch()
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    return {**env, "LANG": "C.UTF-8", "ANSIBLE_CONFIG": str(config), "ANSIBLE_NOCOLOR": "1", **extra}


def _run(argv, tmp, **extra):
    done = subprocess.run(argv, cwd=tmp, env=_clean_env(tmp, **extra), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    _run([BIN / "ansible-galaxy", "collection", "build", str(REPO), "--output-path", str(out)], out)
    (tarball,) = out.glob("infera-serving-*.tar.gz")
    return tarball


@pytest.fixture(scope="module")
def members(artifact):
    with tarfile.open(artifact) as tar:
        return {name.rstrip("/") for name in tar.getnames()}


def _read(artifact, name):
    with tarfile.open(artifact) as tar:
        return tar.extractfile(name).read().decode()


def test_only_what_a_user_needs_ships(members):
    top_level = {name.split("/")[0] for name in members}
    assert top_level <= SHIPPED_TOP_LEVEL, f"not for users: {sorted(top_level - SHIPPED_TOP_LEVEL)}"
    assert REQUIRED <= members, f"missing: {sorted(REQUIRED - members)}"
    leaked = sorted(name for name in members if name.startswith(NOT_SHIPPED))
    assert not leaked, f"rehearsal or development files in the artifact: {leaked[:20]}"


def test_every_file_the_playbooks_run_ships(members):
    expected = {str(path.relative_to(REPO)) for tree in SHIPPED_TREES for path in (REPO / tree).rglob("*")
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    missing = sorted(expected - members)
    assert not missing, f"missing from the artifact: {missing[:20]}"
    assert any(name.startswith("plugins/modules/") and name.endswith(".py") for name in members)
    for role in (REPO / "roles").iterdir():
        assert f"roles/{role.name}/tasks/main.yml" in members
        assert f"roles/{role.name}/meta/argument_specs.yml" in members


def test_the_license_is_apache_2(artifact, members):
    manifest = json.loads(_read(artifact, "MANIFEST.json"))["collection_info"]
    assert manifest["license"] == ["Apache-2.0"]
    assert _read(artifact, "LICENSE").split()[:4] == ["Apache", "License", "Version", "2.0,"]


def test_requirements_yml_asks_for_what_galaxy_yml_depends_on():
    dependencies = yaml.safe_load((REPO / "galaxy.yml").read_text())["dependencies"]
    requirements = yaml.safe_load((REPO / "requirements.yml").read_text())["collections"]
    assert {entry["name"]: entry["version"] for entry in requirements} == dependencies


def _role_task_files_playbook(collection, tmp):
    """A play importing every task file of every role statically. --syntax-check does not follow the
    playbooks' include_role, so only this resolves each task's module (community.docker's among them)."""
    tasks = [{"name": f"{path.parts[-3]} {path.stem}",
              "ansible.builtin.import_role": {"name": f"infera.serving.{path.parts[-3]}", "tasks_from": path.stem}}
             for path in sorted((collection / "roles").glob("*/tasks/*.yml"))]
    playbook = tmp / "every_role_task_file.yml"
    playbook.write_text(yaml.safe_dump([{"name": "Every role task file", "hosts": "mi355x", "gather_facts": False,
                                         "tasks": tasks}], sort_keys=False))
    return playbook


def test_the_installed_artifact_runs_its_playbooks_by_fqcn(artifact, tmp_path):
    missing = [str(path) for path in BUNDLED_DEPENDENCIES if not (path / "MANIFEST.json").is_file()]
    assert not missing, f"{missing} not unpacked: run scripts/bootstrap"
    collections = tmp_path / "collections"
    env = {"ANSIBLE_COLLECTIONS_PATH": str(collections)}
    # --offline: the dependency is resolved against galaxy.yml's range from the bundled copies only.
    _run([BIN / "ansible-galaxy", "collection", "install", "--offline", "-p", str(collections), str(artifact),
          *map(str, BUNDLED_DEPENDENCIES)], tmp_path, **env)
    installed = collections / "ansible_collections" / "infera" / "serving"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    mi355x:\n      hosts:\n        node1:\n")
    playbooks = sorted(f"infera.serving.{path.stem}" for path in (installed / "playbooks").glob("*.yml"))
    assert "infera.serving.deploy_mixed" in playbooks
    _run([BIN / "ansible-playbook", "--syntax-check", "-i", str(inventory), *playbooks,
          str(_role_task_files_playbook(installed, tmp_path))], tmp_path, **env)


def test_an_action_group_lists_every_module_or_there_is_none():
    """module_defaults for group/infera.serving.<group> must reach every module of the collection, or the group misleads;
    the collection sets its defaults per module (roles/preflight), so it declares no group."""
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())
    modules = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py") if path.stem != "__init__")
    for group, members in (runtime.get("action_groups") or {}).items():
        assert sorted(members) == modules, group
