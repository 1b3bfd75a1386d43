"""The router and the worker take their dev-plane flags from one setting, so they must agree."""

from pathlib import Path

import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"


def _load(path):
    return yaml.safe_load((ROLES / path).read_text())


def test_router_and_worker_recipe_use_the_same_dev_plane_flags():
    router = _load("router/vars/main.yml")["_router_dev_plane_args"]
    recipe = _load("sglang_worker/recipes/dsv4-pro-mi355x-mixed.yml")["args"]
    assert router == {flag: recipe[flag] for flag in router}


def test_production_plane_drops_exactly_the_router_dev_flags():
    router = _load("router/vars/main.yml")["_router_dev_plane_args"]
    dropped = _load("sglang_worker/vars/main.yml")["_sglang_worker_dev_plane_flags"]
    assert sorted(dropped) == sorted(router)
