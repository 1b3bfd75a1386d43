"""docs/role-variables.md is generated from the argument specs and must match them."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "role_docs.py"


def _role_docs():
    spec = importlib.util.spec_from_file_location("role_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_role_variable_reference_is_up_to_date():
    role_docs = _role_docs()
    assert role_docs.OUTPUT.read_text() == role_docs.render(), "run: python scripts/role_docs.py"


def test_every_default_is_in_the_argument_spec():
    import yaml
    roles = SCRIPT.parents[1] / "roles"
    for defaults in roles.glob("*/defaults/main.yml"):
        specs = yaml.safe_load((defaults.parent.parent / "meta" / "argument_specs.yml").read_text())
        options = specs["argument_specs"]["main"]["options"]
        missing = set(yaml.safe_load(defaults.read_text())) - set(options)
        assert not missing, f"{defaults}: defaults without an argument spec entry: {sorted(missing)}"
