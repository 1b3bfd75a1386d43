"""argument_specs defaults are the real values, never prose.

ansible-doc shows `default:` as the value; several specs used to hold text there ("the
router tokenizer path", "computed (see defaults/main.yml)"). A default computed by Jinja
is described in the description instead, with no `default:`.
"""

from pathlib import Path

import pytest
import yaml

ROLES = sorted(path.parent.parent for path in (Path(__file__).resolve().parents[2] / "roles").glob("*/meta/argument_specs.yml"))


def defaults_and_options(role):
    """The role's defaults/main.yml and its main entry point's argument-spec options."""
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    return defaults, options


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_spec_defaults_equal_the_role_defaults(role):
    defaults, options = defaults_and_options(role)
    problems = []
    for name, spec in options.items():
        value = defaults.get(name)
        computed = isinstance(value, str) and "{{" in value
        if spec.get("required"):
            continue
        if computed and "default" in spec:
            problems.append(f"{name}: the default is computed ({value}); say so in the description, not in default:")
        elif not computed and name in defaults and spec.get("default") != value:
            problems.append(f"{name}: argument_specs default {spec.get('default')!r}, defaults/main.yml {value!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_a_required_option_has_no_role_default(role):
    # Ansible's argument-spec check counts a value in defaults/main.yml as given, so a required option with a default
    # (even "") is never reported missing: the role would run on the empty value instead of failing at the door.
    defaults, options = defaults_and_options(role)
    shadowed = sorted(name for name, spec in options.items() if spec.get("required") and name in defaults)
    assert not shadowed, f"{role.name}: required but given a default in defaults/main.yml: {', '.join(shadowed)}"
