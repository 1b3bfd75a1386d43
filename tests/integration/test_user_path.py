# SPDX-License-Identifier: Apache-2.0
"""The user's path, as printed: README.md's "Install" and "On real MI355X nodes" and docs/quickstart-mi355x.md, each
command block run in order, in a user's shell, against a rehearsal node reached over SSH as a user with sudo.

Every ```bash block of those pages carries a mark just above it: `<!-- as-printed -->` (this test runs it) or
`<!-- not-run: why -->` (it needs what the rehearsal cannot have: Galaxy, Hugging Face, hours). A block without a
mark fails the test, so a new command cannot go untested by accident.

A page is run as a user would type it: a fresh HOME, PATH without this checkout's .venv, no ANSIBLE_* settings, the
working folder and the environment carried from one block to the next (a `cd` or an `export` holds). Only the
values the pages say to edit are put in, where the pages say so:
- hosts.yml: the nodes, from `tests/rehearsal/platform ssh-inventory` (addresses, port, user `infera`, key);
- group_vars/mi355x/vars.yml: image, HF cache, model, etcd and dataset, the rehearsal's;
- the vault recipe: a token in place of `hf_...`.
The README's page runs on the community.docker its install brings (4.x, in the pinned `ansible` package); the
quickstart's on community.docker 5.x, installed into the user's collections first, as a user with Galaxy gets it
(`ansible-galaxy collection install -r requirements.yml`; offline here, from scripts/bootstrap's copy): galaxy.yml
allows both majors, and each is run. One user, one controller: the README's page first, then the quickstart in a
fresh working folder (its install is the README's). The etcd is one of the test's own (the page's "etcd endpoint
every router and worker of the fleet uses"), so the deploy's router sees only this node's worker while other tests
use the platform's. pip reuses the machine's download cache (PIP_CACHE_DIR), and nothing else of the machine's.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rehearsal import PLATFORM, REPO, Node, node_up

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('ssh-node')

NODE = "infera-ssh-1"
DOCKER5 = REPO / ".build" / "collections-docker5" / "ansible_collections" / "community" / "docker"
TOKEN = "hf_rehearsalUserPathToken0123456789"
ETCD_PORT, ETCD_PEER_PORT = 23790, 23800
MARK = re.compile(r"^<!-- (as-printed|not-run: (?P<why>\S.*\S)) -->$")
# The values the pages say to put in: the exact text of the page, and what the rehearsal puts in its place.
SUBSTITUTIONS = {"'hf_...'": f"'{TOKEN}'"}


@dataclass
class Block:
    page: str
    line: int
    run: bool
    why: str
    code: str


def _section(text, heading):
    """The part of a Markdown page under `heading`, up to the next heading of the same level."""
    start = text.index(heading + "\n")
    level = heading.split(" ", 1)[0]
    rest = text[start + len(heading):]
    end = re.search(rf"^{level} ", rest, re.M)
    return text[start:start + len(heading) + (end.start() if end else len(rest))]


def blocks(page, text):
    """Every ```bash block of text with its mark (the line above it), in order."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        if line.strip() != "```bash":
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        mark = MARK.match(lines[index - 1].strip()) if index else None
        assert mark, f"{page}: the bash block after line {index} has no <!-- as-printed --> or <!-- not-run: why --> mark"
        found.append(Block(page, index + 1, mark.group(1) == "as-printed", mark.group("why") or "",
                           "\n".join(lines[index + 1:end])))
    return found


def readme_install():
    return blocks("README.md#install", _section((REPO / "README.md").read_text(), "## Install"))


def readme_real_nodes():
    return blocks("README.md#on-real-mi355x-nodes",
                  _section((REPO / "README.md").read_text(), "## On real MI355X nodes"))


def quickstart():
    return blocks("docs/quickstart-mi355x.md", (REPO / "docs" / "quickstart-mi355x.md").read_text())


def test_every_command_block_of_the_pages_is_run_or_says_why():
    pages = readme_install() + readme_real_nodes() + quickstart()
    assert sum(b.run for b in pages) >= 10, [b.code for b in pages]
    assert all(b.why for b in pages if not b.run)
    # The pages' install, first sweep, report and teardown are among the commands run.
    ran = "\n".join(b.code for b in pages if b.run)
    for command in ("ansible-galaxy collection install", "infera.serving.preflight", "infera.serving.deploy_mixed",
                    "infera.serving.sweep", "infera.serving.report", "infera.serving.teardown",
                    "ansible-vault encrypt_string"):
        assert command in ran, command
    for text in SUBSTITUTIONS:
        assert text in ran, f"the pages no longer print {text}, which this test puts a value in place of"


class Session:
    """A user's terminal: the blocks run one after another in bash, the folder and environment carried over."""

    def __init__(self, root):
        # A HOME as short as a user's: SSH's ControlPath socket (~/.ansible/cp/<hash>.<random>) must fit in the
        # 108 bytes of a Unix socket's name, which a pytest-xdist tmp_path does not leave room for.
        self.home = Path(tempfile.mkdtemp(prefix="u-", dir="/tmp"))
        self.state = root / "state"
        self.state.mkdir()
        self.cwd = REPO  # "in a checkout of this repository"
        venv_bin = str(REPO / ".venv" / "bin")
        path = ":".join(p for p in os.environ["PATH"].split(":") if p and Path(p).resolve() != Path(venv_bin).resolve())
        self.env = {"HOME": str(self.home), "PATH": path, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                    "USER": os.environ.get("USER", "root"),
                    "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))}
        self.output = []

    def run(self, block, timeout=1200):
        code = block.code
        for text, value in SUBSTITUTIONS.items():
            code = code.replace(text, value)
        script = (f"set -eo pipefail\ncd {shlex.quote(str(self.cwd))}\n{code}\n"
                  f"pwd > {self.state}/cwd\nenv -0 > {self.state}/env\n")
        started = time.monotonic()
        done = subprocess.run(["bash", "-c", script], env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        self.output.append(done.stdout + done.stderr)
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-60:])
        assert done.returncode == 0, f"{block.page} line {block.line}: exit {done.returncode} from\n{block.code}\n{tail}"
        print(f"{block.page} line {block.line}: {time.monotonic() - started:.0f} s")
        self.cwd = Path((self.state / "cwd").read_text().strip())
        self.env = dict(item.split("=", 1) for item in (self.state / "env").read_text().split("\0") if "=" in item)
        return done.stdout


def _set(text, key, value):
    """vars.yml with `key` set to value, on the page's own line for it (commented or not)."""
    new, count = re.subn(rf"^(# )?{key}:.*$", f"{key}: {value}", text, flags=re.M)
    assert count == 1, f"vars.yml has {count} lines for {key}"
    return new


@pytest.fixture(scope="module")
def platform():
    settings = node_up(NODE)
    node = Node(NODE)
    gateway = re.match(r"http://([^:/]+):", settings["ETCD"]).group(1)
    data = Path(f"/tmp/infera-user-path-etcd-{os.getpid()}")
    shutil.rmtree(data, ignore_errors=True)
    etcd = subprocess.Popen(
        ["etcd", "--name", "user-path", "--data-dir", str(data),
         "--listen-client-urls", f"http://127.0.0.1:{ETCD_PORT},http://{gateway}:{ETCD_PORT}",
         "--advertise-client-urls", f"http://{gateway}:{ETCD_PORT}",
         "--listen-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{ETCD_PEER_PORT}",
         "--initial-cluster", f"user-path=http://127.0.0.1:{ETCD_PEER_PORT}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    node.remove_worker_container()
    yield settings, node, f"http://{gateway}:{ETCD_PORT}"
    node.remove_worker_container()
    etcd.terminate()
    etcd.wait(timeout=30)
    shutil.rmtree(data, ignore_errors=True)


def ssh_inventory():
    return subprocess.run([str(PLATFORM), "ssh-inventory", NODE], check=True, capture_output=True, text=True).stdout


def test_the_ssh_inventory_has_the_example_s_shape_and_reaches_the_node_as_a_sudo_user(platform, tmp_path):
    _settings, node, _etcd = platform
    printed = yaml.safe_load(ssh_inventory())
    example = yaml.safe_load((REPO / "inventories" / "mi355x-example" / "hosts.yml").read_text())
    group, example_group = printed["all"]["children"]["mi355x"], example["all"]["children"]["mi355x"]
    assert set(printed) == set(example) and set(printed["all"]["children"]) == set(example["all"]["children"])
    assert set(group) == set(example_group) == {"hosts", "vars"}
    # Only addresses, ports, user and key differ.
    assert set(group["vars"]) - set(example_group["vars"]) == {"ansible_ssh_private_key_file", "ansible_ssh_common_args"}
    assert group["vars"]["ansible_user"] == "infera" and group["vars"]["ansible_become"] is True
    assert list(group["hosts"]) == [NODE]
    assert set(group["hosts"][NODE]) == {"ansible_host", "ansible_port"}
    assert group["hosts"][NODE]["ansible_host"] == node.address
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(ssh_inventory())
    home = Path(tempfile.mkdtemp(prefix="u-", dir="/tmp"))  # short: SSH's ControlPath socket lives under it
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    for become, expected in (("true", "root"), ("false", "infera")):
        done = subprocess.run(["ansible", "-i", str(inventory), "mi355x", "-e", f"ansible_become={become}",
                               "-m", "ansible.builtin.command", "-a", "id -un"],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0 and done.stdout.strip().endswith(expected), done.stdout + done.stderr
    shutil.rmtree(home, ignore_errors=True)


def _edit_inventory(session, settings, etcd):
    """What the pages say to edit once the example is copied: the nodes, and the walkthrough's values."""
    prod = session.cwd / "inventories" / "prod"
    (prod / "hosts.yml").write_text(ssh_inventory())
    settings_file = prod / "group_vars" / "mi355x" / "vars.yml"
    text = settings_file.read_text()
    for key, value in (("infera_image", settings["IMG"]), ("infera_hf_cache", settings["HF_CACHE"]),
                       ("infera_model_path", settings["MODEL"]), ("infera_etcd_endpoint", etcd),
                       ("infera_dataset_path", settings["DATASET"])):
        text = _set(text, key, value)
    settings_file.write_text(text)


def _run_page(session, page_blocks, settings, etcd):
    ran = []
    for block in page_blocks:
        if not block.run:
            continue
        ran.append(session.run(block))
        if (session.cwd / "inventories" / "prod" / "hosts.yml").exists() and "cp -r" in block.code:
            _edit_inventory(session, settings, etcd)
    return ran


def _check_run(session, node):
    results = session.cwd / "results" / "first"
    with open(results / "results.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["Host"], row["Concurrency"]) for row in rows] == [(NODE, "256")], rows
    assert "SIMULATED" in (results / "report.md").read_text()
    # Over SSH as the sudo user: its remote temp folder is on the node; and the teardown left no container.
    assert node.sh("test -d /home/infera/.ansible/tmp && echo yes").stdout.strip() == "yes"
    assert node.sh("docker ps -aq --filter name=^sgl_mix$").stdout.strip() == ""


@pytest.fixture
def session(tmp_path):
    """A user's terminal, its HOME (a venv of ~0.5 GB once installed) removed after the test."""
    user = Session(tmp_path)
    yield user
    shutil.rmtree(user.home, ignore_errors=True)


def test_the_readme_then_the_quickstart_run_as_printed_over_ssh(platform, session):
    """One user on one controller: README.md's Install and real-node commands, then the quickstart from a fresh
    working folder (its section 2 installs as README.md's Install, already done: one install, as a user has)."""
    settings, node, etcd = platform
    _run_page(session, readme_install() + readme_real_nodes(), settings, etcd)
    assert session.cwd == session.home / "infera"
    # Installed into the user's collections, community.docker found in the pinned `ansible` package.
    assert (session.home / ".ansible" / "collections" / "ansible_collections" / "infera" / "serving" /
            "MANIFEST.json").is_file()
    _check_run(session, node)

    # The quickstart, in a fresh working folder (the README's inventory and results set aside), on community.docker
    # 5.x as Galaxy would bring it into the user's collections.
    (session.home / "infera").rename(session.home / "infera-readme")
    (session.home / "infera").mkdir()
    session.run(Block("community.docker 5.x", 0, True, "", f"ansible-galaxy collection install --offline {DOCKER5}"))
    # The user's collections come before the `ansible` package's in the search path: the playbooks below run on 5.x.
    used = session.run(Block("community.docker 5.x", 0, True, "", "ansible-doc community.docker.docker_container | sed -n 1p"))
    assert str(session.home / ".ansible" / "collections" / "ansible_collections" / "community" / "docker") in used, used
    version = session.home / ".ansible" / "collections" / "ansible_collections" / "community" / "docker" / "MANIFEST.json"
    assert json.loads(version.read_text())["collection_info"]["version"].startswith("5."), version
    outputs = _run_page(session, quickstart(), settings, etcd)
    vault = session.cwd / "inventories" / "prod" / "group_vars" / "mi355x" / "vault.yml"
    assert "$ANSIBLE_VAULT" in vault.read_text() and TOKEN not in vault.read_text()
    _check_run(session, node)
    # The comparison with InferenceX's published figures: every row gets its target.
    with open(session.cwd / "results" / "first" / "results.csv", newline="", encoding="utf-8") as handle:
        assert all(row["Target"] for row in csv.DictReader(handle))
    assert any("inferencex-dsv4-pro-mi355x-sglang.yml" in out for out in outputs)
    assert TOKEN not in "\n".join(session.output)
    for path in (session.cwd / "results").rglob("*"):
        assert not path.is_file() or path.suffix == ".png" or TOKEN not in path.read_text(errors="replace"), path
