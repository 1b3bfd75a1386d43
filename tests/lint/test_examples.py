"""Module EXAMPLES use only options, variables, containers and paths that exist.

They had drifted: sglang_ready's named a role variable that does not exist, and
sglang_bench_wait's another container and another exit-file layout.
"""

import ast
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted((REPO / "plugins" / "modules").glob("*.py"))
# Variables Ansible itself provides (facts and loop names) that EXAMPLES may use.
MAGIC = {"inventory_hostname", "ansible_default_ipv4", "item", "ansible_check_mode"}


def fragment_options(name):
    """The options a doc fragment of this collection (infera.serving._file[.part]) adds, as Ansible merges them."""
    _namespace, _collection, *fragment = name.split(".")
    text = (REPO / "plugins" / "doc_fragments" / f"{fragment[0]}.py").read_text()
    part = fragment[1].upper() if len(fragment) > 1 else "DOCUMENTATION"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign) and node.targets[0].id == part:
            return yaml.safe_load(node.value.value).get("options") or {}
    raise AssertionError(f"doc fragment {name}: no {part}")


def module_docs(path):
    """DOCUMENTATION (with its fragments' options) and EXAMPLES of a module file, parsed."""
    docs = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES"):
            docs[node.targets[0].id] = yaml.safe_load(node.value.value)
    documentation = docs["DOCUMENTATION"]
    for fragment in documentation.get("extends_documentation_fragment") or []:
        documentation["options"] = {**fragment_options(fragment), **(documentation.get("options") or {})}
    return documentation, docs["EXAMPLES"]


def role_variables():
    """Every role's defaults and vars, and its argument spec's options (a required one has no default)."""
    names = set()
    for path in (REPO / "roles").glob("*/*/main.yml"):
        if path.parent.name in ("defaults", "vars"):
            names |= set(yaml.safe_load(path.read_text()) or {})
    for path in (REPO / "roles").glob("*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            names |= set(entry.get("options") or {})
    return names


def container_defaults():
    """The container name and work directory: the shared names of the infera role, which the
    container role's defaults refer to."""
    shared = yaml.safe_load((REPO / "roles" / "infera" / "defaults" / "main.yml").read_text())
    defaults = yaml.safe_load((REPO / "roles" / "container" / "defaults" / "main.yml").read_text())
    assert defaults["container_name"] == "{{ infera_container }}"
    assert defaults["container_work_dir"] == "{{ infera_work_dir }}"
    return {"container_name": shared["infera_container"], "container_work_dir": shared["infera_work_dir"]}


def strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize("path", MODULES, ids=[path.stem for path in MODULES])
def test_examples_use_what_exists(path):
    documentation, examples = module_docs(path)
    module = f"infera.serving.{path.stem}"
    options = set(documentation.get("options") or {})
    known = role_variables() | MAGIC | {task["register"] for task in examples if "register" in task}
    defaults = container_defaults()
    problems = []
    for task in examples:
        if module in task:
            problems += [f"{task['name']}: no option {name}" for name in set(task[module]) - options]
        for text in strings(task):
            for name in re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)", text):
                if name not in known:
                    problems.append(f"{task['name']}: variable {name} does not exist")
            for work_path in re.findall(r"/var/lib/infera[^\s\"']*", text):
                if not work_path.startswith(defaults["container_work_dir"] + "/"):
                    problems.append(f"{task['name']}: {work_path} is outside {defaults['container_work_dir']}")
        container = (task.get("community.docker.docker_container_exec") or {}).get("container")
        if container and container != defaults["container_name"]:
            problems.append(f"{task['name']}: container {container}, the role's is {defaults['container_name']}")
    assert not problems, "\n".join(problems)
