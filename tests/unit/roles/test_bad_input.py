"""Bad input to the playbooks is refused on the controller's side of the first play, in one
line naming the variable, before any node is changed: run on a local host (no node, no Docker
call reached). The messages' wording is the one users see; each case fails if its check goes."""

import json
import sys

import pytest
import yaml

from local_ansible import REPO
from playbooks.runs import node_inventory, run_playbook

ACCEPTED_CONC = "expected a positive integer, a list of positive integers, or a comma/space-separated string such as '32,64,128'"
# The first tasks that change or inspect the node's containers: none may run after bad input.
NODE_STAGES = ("Container |", "Preflight |", "Router |", "Sweep | Check the router answers")


def run(tmp_path, playbook, *extra):
    inventory = node_inventory(tmp_path, sys.executable)
    # From tmp_path, as a shell started there, so the sweep's default results folder ($PWD/results) is the test's own.
    return run_playbook(tmp_path, playbook, "-i", str(inventory), *extra)


def refused(tmp_path, playbook, *extra):
    """The one error line, after checking it is alone, followed by its origin, and that no node stage ran."""
    returncode, lines = run(tmp_path, playbook, *extra)
    text = "\n".join(lines[-60:])
    assert returncode != 0, text
    errors = [index for index, line in enumerate(lines) if line.startswith("[ERROR]: Task failed")]
    assert len(errors) == 1, text
    assert lines[errors[0] + 1].startswith("Origin: "), text
    ran = [line for line in lines if line.startswith("TASK [")]
    assert not [task for task in ran if any(stage in task for stage in NODE_STAGES)], ran
    return lines[errors[0]]


@pytest.mark.parametrize("conc, expected", [
    ("0", "conc value 0 must be greater than 0; "),
    ("-1", "conc value -1 must be greater than 0; "),
    ("abc", "conc value 'abc' is not an integer; "),
    ("1.5", "conc value '1.5' is not an integer; "),
    ("1e3", "conc value '1e3' is not an integer; "),
    ("", "conc is an empty string; "),
    ([64, "x"], "conc value 'x' in conc [64, 'x'] is not an integer; "),
])
def test_a_bad_concurrency_is_refused_in_one_line(tmp_path, conc, expected):
    line = refused(tmp_path, "deploy_mixed.yml", "-e", json.dumps({"conc": conc}))
    assert line.endswith(expected + ACCEPTED_CONC), line


def test_an_unknown_variant_is_refused_in_one_line(tmp_path):
    line = refused(tmp_path, "deploy_mixed.yml", "-e", "conc=64", "-e", "variant=zz")
    assert line.endswith("variant 'zz' is not in recipe dsv4-pro-mi355x-mixed; choose one of: nodp, dp"), line


def test_a_missing_recipe_file_is_refused_in_one_line(tmp_path):
    line = refused(tmp_path, "deploy_mixed.yml", "-e", "conc=64", "-e", f"sglang_worker_recipe_file={tmp_path}/none.yml")
    assert line.endswith(f'sglang_worker_recipe_file "{tmp_path}/none.yml" is not a file on the controller: give the path of a '
                         "recipe, leave it empty for the role's recipe of sglang_worker_mode, or give the recipe itself as "
                         "sglang_worker_recipe"), line


@pytest.mark.parametrize("groups, expected", [
    ("[infera_prefill]\nnode-a\n[infera_decode]\nnode-a\n",
     "stage checks: node-a is in both infera_prefill and infera_decode: a node runs one leg (the two legs would share "
     "its 8 GPUs); take it out of one"),
    ("[infera_prefill]\nnode-a\n",
     "stage checks: the inventory group infera_decode (the decode nodes, infera_decode_group) has no host: put one "
     "node in each of infera_prefill and infera_decode (one each is 1P1D), as docs/pd.md shows"),
])
def test_a_pd_inventory_without_a_pair_is_refused_in_one_line(tmp_path, groups, expected):
    inventory = node_inventory(tmp_path, sys.executable)
    inventory.write_text(inventory.read_text() + groups)
    returncode, lines = run_playbook(tmp_path, "deploy_pd.yml", "-i", str(inventory))
    text = "\n".join(lines[-60:])
    assert returncode != 0, text
    errors = [line for line in lines if line.startswith("[ERROR]: Task failed")]
    assert errors == ["[ERROR]: Task failed: Action failed: " + expected], text
    assert not [line for line in lines if line.startswith("TASK [") and any(stage in line for stage in NODE_STAGES)]


def pd_refused(tmp_path, playbook, *extra):
    """refused() on an inventory whose one node is in both PD groups' places: node-a prefill, node-b decode."""
    inventory = node_inventory(tmp_path, sys.executable)
    text = inventory.read_text().replace("[mi355x]\nnode-a\n", "[mi355x]\nnode-a\nnode-b\n")
    inventory.write_text(text + "[infera_prefill]\nnode-a\n[infera_decode]\nnode-b\n")
    returncode, lines = run_playbook(tmp_path, playbook, "-i", str(inventory), *extra)
    text = "\n".join(lines[-60:])
    assert returncode != 0, text
    errors = [line for line in lines if line.startswith("[ERROR]: Task failed")]
    assert errors, text
    assert not [line for line in lines if line.startswith("TASK [") and any(stage in line for stage in NODE_STAGES)], text
    assert not [line for line in lines if line.startswith("PLAY [Deploy PD")], text
    return errors


def test_a_pd_sweep_s_bad_run_id_and_concurrencies_are_refused_before_the_pair_is_deployed(tmp_path):
    errors = pd_refused(tmp_path, "sweep_pd.yml", "-e", json.dumps({"run_id": "../x"}))
    assert errors[0].endswith('run_id "../x" is not a plain folder name: use up to 128 letters, digits, \'.\', \'_\' and '
                              f"'-', starting with a letter or digit, without '/' or '..' (the results go to "
                              f"{tmp_path}/results/<run_id>/)"), errors
    errors = pd_refused(tmp_path, "sweep_pd.yml", "-e", json.dumps({"concurrencies": [64, 0], "run_id": "pd"}))
    assert errors == ["[ERROR]: Task failed: Action failed: conc value 0 in conc [64, 0] must be greater than 0; "
                      + ACCEPTED_CONC], errors


def test_a_pd_leg_with_a_mixed_variant_is_refused_in_one_line(tmp_path):
    line = refused(tmp_path, "deploy_mixed.yml", "-e", "conc=64", "-e", "sglang_worker_mode=decode",
                   "-e", "sglang_worker_variant=dp")
    assert line.endswith('sglang_worker_variant "dp" does not fit sglang_worker_mode decode: a decode leg runs the '
                         "recipe's decode variant; leave sglang_worker_variant empty (it chooses between the mixed "
                         "recipe's variants)"), line


def test_a_recipe_without_a_lever_is_refused_in_one_line(tmp_path):
    recipe = REPO / "roles" / "sglang_worker" / "recipes" / "dsv4-pro-mi355x-mixed.yml"
    lines = [line for line in recipe.read_text().splitlines() if not line.strip().startswith("SGLANG_OPT_USE_FUSED_COMPRESS:")]
    (tmp_path / "recipe.yml").write_text("\n".join(lines) + "\n")
    line = refused(tmp_path, "deploy_mixed.yml", "-e", "conc=64", "-e", f"sglang_worker_recipe_file={tmp_path}/recipe.yml")
    assert line.endswith("recipe.levers.env names SGLANG_OPT_USE_FUSED_COMPRESS, but recipe.env does not set it; the lever "
                         "value comes from recipe.env"), line


@pytest.mark.parametrize("playbook", ["deploy_mixed.yml", "sweep.yml", "preflight.yml"])
@pytest.mark.parametrize("setting, value, expected", [
    ("infera_image", "", "infera_image is empty: give the engine image ($IMG of the walkthrough), "
                         "e.g. rocm/infera:sglang-v0.1.1, the walkthrough image"),
    ("infera_model_path", "", 'infera_model_path "" is not an absolute path: give the model directory on the node '
                              "($MODEL of the walkthrough)"),
    ("infera_model_path", "models/dsv4", 'infera_model_path "models/dsv4" is not an absolute path: give the model '
                                         "directory on the node ($MODEL of the walkthrough)"),
    ("infera_hf_cache", "hf", 'infera_hf_cache "hf" is not an absolute path: give the node\'s Hugging Face cache '
                              "($HF_CACHE of the walkthrough)"),
    ("infera_etcd_endpoint", "etcd:2379", 'etcd endpoint "etcd:2379" (infera_etcd_endpoint) is not http(s)://HOST:PORT, '
                                          "e.g. http://10.0.0.5:2379"),
    ("infera_etcd_endpoint", "http://10.0.0.5", 'etcd endpoint "http://10.0.0.5" (infera_etcd_endpoint) is not '
                                                "http(s)://HOST:PORT, e.g. http://10.0.0.5:2379"),
    ("infera_etcd_endpoint", "http://10.0.0.5:2379/v3 x", 'etcd endpoint "http://10.0.0.5:2379/v3 x" (infera_etcd_endpoint) '
                                                          "is not http(s)://HOST:PORT, e.g. http://10.0.0.5:2379"),
])
def test_a_bad_inventory_setting_is_refused_in_one_line_by_every_playbook(tmp_path, playbook, setting, value, expected):
    line = refused(tmp_path, playbook, "-e", json.dumps({"conc": 64, "run_id": "r", setting: value}))
    assert line.endswith("node-a: stage checks: " + expected), line


def test_a_recipe_with_an_unknown_key_is_refused_in_one_line(tmp_path):
    recipe = REPO / "roles" / "sglang_worker" / "recipes" / "dsv4-pro-mi355x-mixed.yml"
    (tmp_path / "recipe.yml").write_text(recipe.read_text() + "max_concurrency: 1024\n")
    line = refused(tmp_path, "deploy_mixed.yml", "-e", "conc=64", "-e", f"sglang_worker_recipe_file={tmp_path}/recipe.yml")
    assert line.endswith("recipe has unknown key(s) max_concurrency; allowed: name, description, env, args, variants, "
                         "between, levers"), line


def test_duplicated_sweep_concurrencies_are_refused_in_one_line(tmp_path):
    line = refused(tmp_path, "sweep.yml", "-e", json.dumps({"concurrencies": [64, 32, 64], "run_id": "dup"}))
    assert line.endswith("conc lists 64 more than once; each concurrency may appear only once"), line


@pytest.mark.parametrize("run_id", ["../outside", "a/b", "..", "/tmp/abs", ".hidden", "x" * 129])
def test_a_run_id_that_is_not_a_plain_folder_name_is_refused_and_nothing_is_written(tmp_path, run_id):
    line = refused(tmp_path, "sweep.yml", "-e", json.dumps({"run_id": run_id}))
    assert line.endswith(f"run_id {json.dumps(run_id)} is not a plain folder name: use up to 128 letters, digits, '.', '_' "
                         f"and '-', starting with a letter or digit, without '/' or '..' (the results go to "
                         f"{tmp_path}/results/<run_id>/)"), line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hosts.ini"]


def test_a_missing_targets_file_is_refused_before_any_node(tmp_path):
    path = tmp_path / "targets.yml"
    line = refused(tmp_path, "sweep.yml", "-e", json.dumps({"run_id": "t", "sweep_targets_file": str(path)}))
    assert line.endswith(f'sweep_targets_file "{path}" is not a file on the controller ({path}; a relative path is from the '
                         "playbook's folder): give the YAML file of metric, targets and higher_is_better (docs/results.md), "
                         "or leave it empty"), line


def test_a_relative_targets_file_is_looked_for_beside_the_playbook(tmp_path):
    line = refused(tmp_path, "sweep.yml", "-e", json.dumps({"run_id": "t", "sweep_targets_file": "no-such-targets.yml"}))
    assert f'sweep_targets_file "no-such-targets.yml" is not a file on the controller ({REPO}/playbooks/no-such-targets.yml;' \
        in line, line


ROLES_WITH_REQUIRED = ["container", "router", "sglang_worker", "sweep", "preflight"]


@pytest.mark.parametrize("role", ROLES_WITH_REQUIRED)
def test_a_role_used_on_its_own_without_its_required_settings_stops_at_its_argument_check(tmp_path, role):
    # A user's own play that includes the role and forgets what the playbooks pass from the inventory: the role's
    # argument check names every missing setting in one line; no task of the role itself runs on the empty value.
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    required = sorted(name for name, option in spec["argument_specs"]["main"]["options"].items() if option.get("required"))
    assert required, f"{role}: no required option to leave out"
    (tmp_path / "own.yml").write_text(
        "- name: A play of the user's own\n  hosts: mi355x\n  gather_facts: false\n  tasks:\n"
        f"    - name: The role alone\n      ansible.builtin.include_role:\n        name: infera.serving.{role}\n")
    returncode, lines = run(tmp_path, str(tmp_path / "own.yml"))
    text = "\n".join(lines[-40:])
    assert returncode != 0, text
    assert f"missing required arguments: {', '.join(required)}" in text, text
    ran = [line for line in lines if line.startswith(f"TASK [infera.serving.{role} :")]
    assert ran and all("Validating arguments against arg spec" in line for line in ran), ran


DOWNLOAD_WARNING = ("WARNING: the sweep runs the bench client with --dataset-name random and no dataset path, so the "
                    "client downloads ShareGPT_V3_unfiltered_cleaned_split.json from the Hugging Face Hub")


@pytest.mark.parametrize("extra, warned", [
    ({}, True),
    ({"infera_dataset_path": "/data/hf-cache/datasets/sharegpt.json"}, False),
    ({"sweep_dataset_path": "/data/sharegpt.json"}, False),
    ({"sweep_dataset_name": "random-ids"}, False),
])
def test_a_sweep_that_would_download_its_dataset_says_so_before_any_node(tmp_path, extra, warned):
    """An offline node would fail its first point on the client's ShareGPT download (sglang benchmark/datasets/random.py):
    said on the controller's side, before the first node stage (here the play stops at a missing targets file)."""
    settings = {"run_id": "t", "sweep_targets_file": "no-such-targets.yml", **extra}
    _returncode, lines = run(tmp_path, "sweep.yml", "-e", json.dumps(settings))
    text = " ".join(" ".join(lines).split()).replace("''", "'")
    assert (DOWNLOAD_WARNING in text) is warned, text[-3000:]
    assert refused(tmp_path, "sweep.yml", "-e", json.dumps(settings)).startswith("[ERROR]: Task failed")


@pytest.mark.parametrize("settings, expected", [
    ({"run_id": "s", "sweep_search": True, "sweep_limits": {"tpot_ms": 30}},
     "sweep_limits has unknown key(s) tpot_ms; allowed: tpot_p99_ms, ttft_p99_ms, tok_s_user_min"),
    ({"run_id": "s", "sweep_search": True, "sweep_limits": {"tpot_p99_ms": 30}, "sweep_search_band": [64, 4]},
     "sweep_search_band is [64, 4]; it must be [low, high], whole numbers with 1 <= low < high, e.g. [4, 1024]"),
    ({"sweep_search": True, "sweep_limits": {"tpot_p99_ms": 30}},
     "sweep_search reads the run's points between its rounds: give it a run_id (-e run_id=NAME) and one node "
     "(--limit NODE); it was given run_id \"\" and 1 node(s)"),
])
def test_a_search_with_bad_limits_or_without_a_run_id_is_refused_in_one_line(tmp_path, settings, expected):
    line = refused(tmp_path, "sweep.yml", "-e", json.dumps(settings))
    assert line.endswith(expected), line
