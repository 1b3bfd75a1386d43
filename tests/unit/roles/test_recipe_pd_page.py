"""The PD recipe runs exactly the engine commands of Infera's 1P1D page, each leg its own.

The page is Infera's manual/examples/sglang_1p1d_dsv4.md at v0.1.1, the Infera of the image the user runs
(rocm/infera:sglang-v0.1.1), kept verbatim as docs/reference/sglang-1p1d-dsv4-pro-mi355x.md. The expected side
is parsed from the page alone, never from the collection's files, so a drift on either side fails here.
"""

import re
import shlex
from pathlib import Path

import pytest
import yaml

from ansible_collections.infera.serving.plugins.module_utils._errors import InferaServingError
from ansible_collections.infera.serving.plugins.plugin_utils._worker_plan import make_plan

REPO = Path(__file__).resolve().parents[3]
PAGE = REPO / "docs" / "reference" / "sglang-1p1d-dsv4-pro-mi355x.md"
RECIPES = REPO / "roles" / "sglang_worker" / "recipes"
ENGINE = "infera.engine.sglang"
# The page's site placeholders, rendered into the recipe as themselves; each leg's --advertise-host ($P_IP, $D_IP)
# is $HOST in the recipe, filled in by the role when it writes the launch script.
PLACEHOLDERS = {"sglang_worker_model_path": "$MODEL", "sglang_worker_etcd_endpoint": "$ETCD"}
ADVERTISED = {"prefill": "$P_IP", "decode": "$D_IP"}


def _flags(words):
    """--flag -> the values after it (none for a bare switch)."""
    flags = {}
    for word in words:
        if word.startswith("--"):
            flag = flags.setdefault(word, [])
        else:
            flag.append(word)
    return flags


def _page():
    """(shared env, {leg: (env, flags)}): the export pasted on both nodes, the bootstrap timeout the page says to
    bump, and the engine command under each leg's heading."""
    text = PAGE.read_text(encoding="utf-8")
    lines = text.splitlines()
    exported = [line for line in lines if line.startswith("export SGLANG_USE_AITER=1 ")]
    assert len(exported) == 1, "the page's fused-compress export"
    shared = dict(word.split("=", 1) for word in shlex.split(exported[0])[1:])
    bumped = re.findall(r"bump\s+`(SGLANG_\w+)=(\d+)`", text)
    assert len(bumped) == 1, "the page's bootstrap timeout note"
    shared.update(bumped)
    legs = {}
    heading = None
    for line in lines:
        found = re.match(r"\*\*(Prefill|Decode) leg", line)
        if found:
            heading = found.group(1).lower()
        if " -m %s " % ENGINE in line:
            words = shlex.split(line)
            python = words.index("-m") - 1
            env = dict(word.split("=", 1) for word in words[:python])
            legs[heading] = (env, _flags(words[python + 3:]))
    return shared, legs


SHARED_ENV, LEGS = _page()


def role_plan(render_recipe, **settings):
    """The plan the worker role makes with its defaults for a PD leg (make_plan, as the role's worker_plan step)."""
    defaults = yaml.safe_load((REPO / "roles" / "sglang_worker" / "defaults" / "main.yml").read_text())
    plane = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())["infera_dev_plane_args"]
    params = {"recipe": {}, "recipe_file": defaults["sglang_worker_recipe_file"], "recipe_dir": str(RECIPES),
              "mode": defaults["sglang_worker_mode"], "recipe_overrides": {}, "conc": 64,
              "variant": defaults["sglang_worker_variant"], "extra_args": {}, "extra_env": {},
              "cuda_graph_max_bs": defaults["sglang_worker_cuda_graph_max_bs"], "cuda_graph_bs": [],
              "plane": "dev", "plane_args": plane, "allow_missing_levers": False, "previous": {}}
    params.update(settings)
    return make_plan(params, "node-1", lambda path: render_recipe(recipe_file=path, **PLACEHOLDERS))["plan"]


def test_the_page_has_both_legs():
    assert sorted(LEGS) == ["decode", "prefill"]
    assert len(SHARED_ENV) == 21


@pytest.mark.parametrize("leg", ["prefill", "decode"])
def test_each_leg_runs_the_page_command(render_recipe, leg):
    text_env, text_flags = LEGS[leg][0], dict(LEGS[leg][1])
    plan = role_plan(render_recipe, mode=leg)
    assert plan["recipe"] == "dsv4-pro-mi355x-pd"
    assert plan["variant"] == leg
    flags = _flags(plan["argv"])
    assert flags.pop("--advertise-host") == ["$HOST"]
    assert text_flags.pop("--advertise-host") == [ADVERTISED[leg]]
    assert flags == text_flags
    assert plan["env"] == {**SHARED_ENV, **text_env}


def test_the_legs_differ_only_as_the_page_says():
    prefill, decode = LEGS["prefill"][1], LEGS["decode"][1]
    only_prefill = {flag: value for flag, value in prefill.items() if decode.get(flag) != value}
    only_decode = {flag: value for flag, value in decode.items() if prefill.get(flag) != value}
    assert only_prefill == {"--advertise-host": ["$P_IP"], "--mem-fraction-static": ["0.85"],
                            "--disaggregation-mode": ["prefill"], "--disaggregation-bootstrap-port": ["8998"]}
    assert only_decode == {"--advertise-host": ["$D_IP"], "--mem-fraction-static": ["0.90"],
                           "--disaggregation-mode": ["decode"], "--no-enable-kv-events": []}


def test_a_lowered_capture_set_reaches_both_legs(render_recipe):
    for leg in ("prefill", "decode"):
        assert _flags(role_plan(render_recipe, mode=leg, cuda_graph_max_bs=64)["argv"])["--cuda-graph-max-bs"] == ["64"]


def test_a_leg_refuses_a_mixed_variant(render_recipe):
    with pytest.raises(InferaServingError, match=r'sglang_worker_variant "dp" does not fit sglang_worker_mode decode'):
        role_plan(render_recipe, mode="decode", variant="dp")


def test_the_pd_recipe_picks_no_leg_by_concurrency(render_recipe):
    with pytest.raises(InferaServingError, match="picks no variant by concurrency"):
        role_plan(render_recipe, recipe_file=str(RECIPES / "dsv4-pro-mi355x-pd.yml"))
