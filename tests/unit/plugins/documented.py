# SPDX-License-Identifier: Apache-2.0
"""A plugin's documented options as Ansible reads them: its own, with its doc fragments' merged under them."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

FRAGMENTS = Path(__file__).resolve().parents[3] / "plugins" / "doc_fragments"


def fragment_options(name):
    """The options of one of this collection's doc fragments (infera.serving._file[.part])."""
    _namespace, _collection, *fragment = name.split(".")
    part = fragment[1].upper() if len(fragment) > 1 else "DOCUMENTATION"
    for node in ast.walk(ast.parse((FRAGMENTS / f"{fragment[0]}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == part:
            return yaml.safe_load(node.value.value).get("options") or {}
    raise AssertionError(f"doc fragment {name}: no {part}")


def documented_options(documentation):
    """The options of a DOCUMENTATION string, its fragments' included."""
    doc = yaml.safe_load(documentation)
    options = {}
    for name in doc.get("extends_documentation_fragment") or []:
        options.update(fragment_options(name))
    options.update(doc.get("options") or {})
    return options
