"""Each shared name is defined once, in the infera role, and nowhere else.

The container name and work directory used to be declared in four roles' defaults and the
ports were literals in a playbook and in molecule's verify, so a change in one place left
the others behind. Descriptions (argument_specs, comments) may still name the values.
"""

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SHARED = yaml.safe_load((REPO / "roles" / "infera" / "defaults" / "main.yml").read_text())
PLANE_FLAGS = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())["infera_dev_plane_args"]
# What runs: role defaults, vars, tasks, templates and recipes, playbooks, molecule scenarios.
FILES = sorted(
    path for pattern in ("roles/*/defaults/*.yml", "roles/*/vars/*.yml", "roles/*/tasks/*.yml", "roles/*/templates/*",
                         "roles/*/recipes/*.yml", "playbooks/*.yml", "extensions/molecule/*/*.yml")
    for path in REPO.glob(pattern) if "roles/infera/" not in str(path.relative_to(REPO)))


def _code_lines(path):
    """The file's lines without comments (a comment may name a value)."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        if code.strip():
            yield number, code


def test_the_shared_values_appear_only_in_the_infera_role():
    names = ("infera_container", "infera_work_dir", "infera_router_port", "infera_engine_port")
    literals = [str(SHARED[name]) for name in names]
    pattern = re.compile(r"(?<![\w/.-])(%s)(?![\w.-])" % "|".join(re.escape(literal) for literal in literals))
    found = [f"{path.relative_to(REPO)}:{number}: {code.strip()}"
             for path in FILES for number, code in _code_lines(path) if pattern.search(code)]
    assert not found, "define it once in roles/infera and refer to it:\n" + "\n".join(found)


def test_the_dev_plane_flags_appear_only_in_the_infera_role():
    found = [f"{path.relative_to(REPO)}:{number}: {code.strip()}"
             for path in FILES for number, code in _code_lines(path) for flag in PLANE_FLAGS if flag in code]
    assert not found, "the plane's flags belong to roles/infera/vars/main.yml:\n" + "\n".join(found)


def test_every_role_that_uses_a_shared_name_depends_on_the_infera_role():
    for meta in sorted(REPO.glob("roles/*/meta/main.yml")):
        role = meta.parent.parent
        if role.name == "infera":
            continue
        uses = any("infera_" in path.read_text() for path in role.glob("*/*") if path.is_file())
        dependencies = [dep.get("role") if isinstance(dep, dict) else dep
                        for dep in yaml.safe_load(meta.read_text()).get("dependencies") or []]
        assert not uses or "infera" in dependencies, f"{role.name} uses infera_* names but does not depend on infera"
