"""The shipped recipe runs exactly the walkthrough's engine commands (section 4).

The expected side is parsed from the walkthrough's text alone, never from the collection's
files, so a drift on either side fails here.
"""

import shlex
from pathlib import Path

import pytest
import yaml

from ansible_collections.infera.serving.plugins.module_utils._variant import select

REPO = Path(__file__).resolve().parents[3]
WALKTHROUGH = REPO / "docs" / "reference" / "sglang-mixed-dsv4-pro-mi355x.txt"
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


@pytest.mark.parametrize("variant", sorted(COMMANDS))
def test_each_variant_runs_the_walkthrough_command(render_recipe, variant):
    defaults = yaml.safe_load((REPO / "roles" / "sglang_worker" / "defaults" / "main.yml").read_text())
    text_env, text_flags = COMMANDS[variant]
    # The role passes its cold-start knob over the recipe's value (extra_args), so both must be the text's;
    # on the dev plane (the walkthrough's) it adds the plane's flags, which the infera role owns.
    cold_start = {"--cuda-graph-max-bs": defaults["sglang_worker_cuda_graph_max_bs"]}
    plane = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())["infera_dev_plane_args"]
    selected = select({"conc": 1, "variant": variant, "recipe": render_recipe(**PLACEHOLDERS),
                       "extra_args": {**cold_start, **plane}})
    assert _flags(selected["argv"]) == text_flags
    assert selected["env"] == {**SHARED_ENV, **text_env}
    assert text_flags["--cuda-graph-max-bs"] == ["128"]
    assert render_recipe()["args"]["--cuda-graph-max-bs"] == 128
