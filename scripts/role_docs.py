"""Write docs/role-variables.md from every role's meta/argument_specs.yml.

The argument specs are the source of truth (ansible-doc -t role reads them too); this
keeps the markdown reference from drifting. Usage: python scripts/role_docs.py [--check]
"""

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "role-variables.md"


# Ansible's documentation markup in the specs' descriptions (ansible-doc renders it), written out
# as Markdown. O(), V(), E(), P() and RV() take backslash escapes (\) for ")", \\ for "\");
# the others end at the first ")". https://docs.ansible.com/ansible/latest/dev_guide/ansible_markup.html
_MARKUP = re.compile(r"\b(?:(?P<escaped>O|V|E|P|RV)\((?P<escaped_arg>(?:\\.|[^\\)])*)\)"
                     r"|(?P<plain>C|I|B|U|M|L)\((?P<plain_arg>[^)]*)\)"
                     r"|(?P<rule>HORIZONTALLINE)\b)")


def _code(text):
    """A Markdown code span that holds text, backticks included."""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _markdown_of(match):
    if match.group("rule"):
        return ""
    if match.group("escaped"):
        return _code(re.sub(r"\\(.)", r"\1", match.group("escaped_arg")))
    kind, arg = match.group("plain"), match.group("plain_arg")
    if kind == "I":
        return f"*{arg}*"
    if kind == "B":
        return f"**{arg}**"
    if kind == "U":
        return f"<{arg}>"
    if kind == "L":
        text, _comma, url = arg.rpartition(",")
        return f"[{text.strip()}]({url.strip()})" if text else f"<{url.strip()}>"
    return _code(arg)  # C(), M()


def markdown(text):
    """Ansible's markup in text (C(), V(), O(), I(), B(), U(), L(), M(), ...) as Markdown."""
    return _MARKUP.sub(_markdown_of, text)


def _cell(value, markup=False):
    if isinstance(value, list):
        value = " ".join(map(str, value))
    value = markdown(str(value)) if markup else str(value)
    return value.replace("|", "\\|").replace("\n", " ")


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
        lines += [f"## infera.serving.{role}", "", markdown(main["short_description"]), "",
                  "| variable | type | default | description |", "|---|---|---|---|"]
        for name, option in main["options"].items():
            kind = option.get("type", "str")
            if option.get("elements"):
                kind += f" of {option['elements']}"
            if option.get("choices"):
                kind += " (" + ", ".join(map(str, option["choices"])) + ")"
            lines.append(f"| `{name}` | {_cell(kind)} | {_cell(_default(option))} | {_cell(option['description'], markup=True)} |")
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
