"""The collection keeps the shape "Easy to carry on" (issue 42) gave it, so that a new maintainer finds each decision
in one place and each file's one job from its name:

- one exception root in plugins/: every exception class derives from module_utils/_errors.py's InferaServingError;
- no plugin file over 500 lines;
- decisions in Python, not in lazy vars: at most 10 templated lines in all of roles/*/vars/main.yml, and at most 13
  set_fact tasks in the roles;
- unit tests that keep no clock: at most 3 time.sleep calls in tests/unit (waits run on conftest's FakeClock);
- integration tests declare their nodes (tests/conftest.py reads the marker): no hand-kept table of test files and
  nodes in a conftest.

A change that crosses a limit fails here, with the files that cross it; raising a limit is a decision to write down.
"""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
ROOT_ERROR = "InferaServingError"


def _python(folder):
    return sorted(path for path in folder.rglob("*.py") if "__pycache__" not in path.parts)


def _exception_classes():
    """{class name: [base names]} of every class in plugins/ whose name says it is an error or exception."""
    classes = {}
    for path in _python(PLUGINS):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = ([ast.unparse(base).rsplit(".", maxsplit=1)[-1] for base in node.bases],
                                      str(path.relative_to(REPO)))
    return classes


def test_every_exception_in_plugins_derives_from_the_one_root():
    classes = _exception_classes()

    def rooted(name, seen=()):
        if name == ROOT_ERROR:
            return True
        if name not in classes or name in seen:
            return False
        return any(rooted(base, seen + (name,)) for base in classes[name][0])

    errors = {name: where for name, (bases, where) in classes.items()
              if any(base.endswith(("Error", "Exception")) for base in bases) or name.endswith(("Error", "Exception"))}
    assert classes[ROOT_ERROR][0] == ["Exception"], "the root derives from Exception alone"
    assert [f"{where}: {name}" for name, where in sorted(errors.items()) if not rooted(name)] == []


def test_no_plugin_file_is_over_500_lines():
    long = [f"{path.relative_to(REPO)}: {count}" for path in _python(PLUGINS)
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > 500]
    assert long == []


def test_role_vars_hold_at_most_10_templated_lines():
    counts = {str(path.relative_to(REPO)): sum("{{" in line for line in path.read_text(encoding="utf-8").splitlines())
              for path in sorted(REPO.glob("roles/*/vars/main.yml"))}
    assert sum(counts.values()) <= 10, counts


def test_roles_use_at_most_13_set_facts():
    uses = [f"{path.relative_to(REPO)}:{number}" for path in sorted(REPO.glob("roles/**/*.yml"))
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if re.match(r"^\s*(?:- )?(?:ansible\.builtin\.)?set_fact:", line)]
    assert len(uses) <= 13, uses


def test_unit_tests_sleep_at_most_3_times():
    sleeps = [f"{path.relative_to(REPO)}:{number}" for path in _python(REPO / "tests" / "unit")
              for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if "time.sleep(" in line and not line.lstrip().startswith("#")]
    assert len(sleeps) <= 3, sleeps


def test_no_conftest_keeps_a_table_of_test_files_and_nodes():
    # The hand-kept table mapped test file names to rehearsal nodes; the marker replaced it.
    for path in [REPO / "tests" / "conftest.py", *sorted((REPO / "tests").rglob("*/conftest.py"))]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"['\"]test_\w+\.py['\"]\s*:", text), f"{path.relative_to(REPO)} maps test files to nodes"
