"""Write docs/role-variables.md from every role's meta/argument_specs.yml.

The argument specs are the source of truth (ansible-doc -t role reads them too); this
keeps the markdown reference from drifting. Usage: python scripts/role_docs.py [--check]
"""

import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "role-variables.md"


def _cell(value):
    if isinstance(value, list):
        value = " ".join(map(str, value))
    return str(value).replace("|", "\\|").replace("\n", " ")


def _default(option):
    if option.get("required"):
        return "**required**"
    if "default" not in option:
        return "see description"
    return f"`{option['default']}`"


def render():
    lines = ["# Role variables", "",
             "Generated from each role's `meta/argument_specs.yml` by `scripts/role_docs.py`;",
             "`ansible-doc -t role infera.serving.<role>` shows the same. Bad values fail at the",
             "door: the specs are validated before a role's first task.", ""]
    for spec_file in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parent.parent.name
        main = yaml.safe_load(spec_file.read_text())["argument_specs"]["main"]
        lines += [f"## infera.serving.{role}", "", main["short_description"], "",
                  "| variable | type | default | description |", "|---|---|---|---|"]
        for name, option in main["options"].items():
            kind = option.get("type", "str")
            if option.get("elements"):
                kind += f" of {option['elements']}"
            if option.get("choices"):
                kind += " (" + ", ".join(map(str, option["choices"])) + ")"
            lines.append(f"| `{name}` | {_cell(kind)} | {_cell(_default(option))} | {_cell(option['description'])} |")
        lines.append("")
    return "\n".join(lines)


def main(argv):
    text = render()
    if "--check" in argv:
        if OUTPUT.read_text() != text:
            sys.exit(f"{OUTPUT} is out of date: run python scripts/role_docs.py")
        return
    OUTPUT.write_text(text)


if __name__ == "__main__":
    main(sys.argv[1:])
