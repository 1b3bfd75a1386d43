"""The shipped recipe runs exactly the walkthrough's engine commands (section 4).

The expected side is parsed from the walkthrough's text alone, never from the collection's
files, so a drift on either side fails here.
"""

import shlex
from pathlib import Path

import pytest
import yaml

from ansible_collections.infera.serving.plugins.plugin_utils._worker_plan import make_plan

REPO = Path(__file__).resolve().parents[3]
WALKTHROUGH = REPO / "docs" / "reference" / "sglang-mixed-dsv4-pro-mi355x.txt"
RECIPES = REPO / "roles" / "sglang_worker" / "recipes"
ENGINE = "infera.engine.sglang"
# The walkthrough's site placeholders, rendered into the recipe as themselves ($HOST, the node's address, is one
# in the recipe too: the role fills it in when it writes the launch script).
PLACEHOLDERS = {"sglang_worker_model_path": "$MODEL", "sglang_worker_etcd_endpoint": "$ETCD"}


def _assignments(words):
    return dict(word.split("=", 1) for word in words)


def _flags(words):
    """--flag -> the values after it (none for a bare switch)."""
    flags = {}
    for word in words:
        if word.startswith("--"):
            flag = flags.setdefault(word, [])
        else:
            flag.append(word)
    return flags


def _walkthrough():
    """(shared env, {variant: (env, flags)}) from the export block and the two engine command lines."""
    lines = WALKTHROUGH.read_text(encoding="utf-8").splitlines()
    exported = [line for line in lines if line.startswith("export SGLANG_USE_AITER=1 ")]
    assert len(exported) == 1, "the walkthrough's fused-compress export block"
    commands = {}
    for index, line in enumerate(lines):
        words = shlex.split(line) if " -m %s " % ENGINE in line else []
        if words:
            # The heading above each command names its variant: "nodp (concurrency <= 128) - ...".
            variant = lines[index - 1].split()[0]
            python = words.index("-m") - 1
            commands[variant] = (_assignments(words[:python]), _flags(words[python + 3:]))
    return _assignments(shlex.split(exported[0])[1:]), commands


SHARED_ENV, COMMANDS = _walkthrough()


def test_the_walkthrough_has_both_variants():
    assert sorted(COMMANDS) == ["dp", "nodp"]
    assert len(SHARED_ENV) == 19


def role_plan(render_recipe, recipe_file, **settings):
    """The plan the worker role makes with its defaults (plugin_utils/_worker_plan.py make_plan, as the role's
    worker_plan step calls it) from a shipped recipe, its placeholders left as the text writes them."""
    defaults = yaml.safe_load((REPO / "roles" / "sglang_worker" / "defaults" / "main.yml").read_text())
    plane = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())["infera_dev_plane_args"]
    params = {"recipe": {}, "recipe_file": defaults["sglang_worker_recipe_file"], "recipe_dir": str(RECIPES),
              "mode": defaults["sglang_worker_mode"], "recipe_overrides": {}, "conc": 1,
              "variant": defaults["sglang_worker_variant"], "extra_args": {}, "extra_env": {},
              "cuda_graph_max_bs": defaults["sglang_worker_cuda_graph_max_bs"], "cuda_graph_bs": [],
              "plane": "dev", "plane_args": plane, "allow_missing_levers": False, "previous": {}}
    params.update(settings)
    # The role's recipe file for the mode is the one read: a wrong mapping fails on the recipe's name below.
    return make_plan(params, "node-1", lambda path: render_recipe(recipe_file=path, **PLACEHOLDERS))["plan"]


@pytest.mark.parametrize("variant", sorted(COMMANDS))
def test_each_variant_runs_the_walkthrough_command(render_recipe, variant):
    text_env, text_flags = COMMANDS[variant]
    # With the role's defaults on the dev plane (the walkthrough's): the plane's flags are the infera role's, the
    # capture set the recipe's.
    plan = role_plan(render_recipe, "mixed", variant=variant)
    assert plan["recipe"] == "dsv4-pro-mi355x-mixed"
    assert _flags(plan["argv"]) == text_flags
    assert plan["env"] == {**SHARED_ENV, **text_env}
    assert text_flags["--cuda-graph-max-bs"] == ["128"]


def test_the_role_picks_the_walkthrough_variant_by_concurrency(render_recipe):
    assert role_plan(render_recipe, "mixed", conc=64)["variant"] == "nodp"
    assert role_plan(render_recipe, "mixed", conc=256)["variant"] == "dp"
