"""Secrets (issue 10): an HF token given through the environment or through vault reaches the engine and never
appears in the play's output at -vvv, in any node log or file, in the container's output, or in any file under the
results; the token file on the node is mode 0600 and gone after teardown. On a node of its own (tests/conftest.py:
group node-6), beside node 1's deploy tests.
"""

import json
import subprocess

import pytest

from conftest import node_fixture, node_name
from rehearsal import run_playbook

# The rehearsal nodes this file's tests use (tests/conftest.py schedules by it).
pytestmark = pytest.mark.nodes('node-6')

# The rehearsal inventory gives this node an etcd prefix of its own (inventories/rehearsal/host_vars/).
NODE = node_name(6)

node = node_fixture(6)


def test_hf_token_reaches_the_engine_but_is_never_printed(clean_node):
    secret = "hf_rehearsalSENTINEL0123456789"
    rc, out = run_playbook("deploy_mixed.yml", "-e", "conc=64", "-vvv", env={"HF_TOKEN": secret}, timeout=600,
                           limit=NODE)
    assert rc == 0, out[-3000:]
    assert secret not in out
    token_file = "/var/lib/infera/sgl_mix/run/secrets.env"
    assert clean_node.sh(f"stat -c %a {token_file}").stdout.strip() == "600"
    environ = clean_node.sh(
        "tr '\\0' '\\n' </proc/$(pgrep -f '^python -m infera[.]engine[.]sglang ')/environ").stdout
    assert f"HF_TOKEN={secret}" in environ.splitlines()
    leaked = clean_node.sh(f"grep -rl {secret} /var/lib/infera/sgl_mix/scripts /var/lib/infera/sgl_mix/logs "
                           f"/var/lib/infera/sgl_mix/results || true").stdout.strip()
    assert leaked == "", f"token written to {leaked}"
    # Teardown leaves no token behind on the node, and prints none either.
    rc, out = run_playbook("teardown.yml", "-vvv", env={"HF_TOKEN": secret}, timeout=300, limit=NODE)
    assert rc == 0, out[-3000:]
    assert secret not in out
    assert clean_node.sh(f"test -e {token_file} && echo present || echo gone").stdout.strip() == "gone"


def test_a_vault_token_never_reaches_play_output_node_logs_or_results(clean_node, tmp_path):
    """The quickstart's way (vault_hf_token in vault, infera_hf_token pointing at it), through a sweep and teardown at -vvv."""
    secret = "hf_vaultSENTINEL9876543210"
    password = tmp_path / "vault-password"
    password.write_text("rehearsal-only-vault-password\n")
    encrypted = subprocess.run(["ansible-vault", "encrypt_string", "--vault-password-file", str(password),
                                "--name", "vault_hf_token", secret],
                               capture_output=True, text=True, check=True).stdout
    vault_vars = tmp_path / "vault.yml"
    vault_vars.write_text(encrypted + 'infera_hf_token: "{{ vault_hf_token }}"\n')
    assert secret not in vault_vars.read_text()
    results = tmp_path / "results"
    settings = {"concurrencies": [4], "run_id": "vault", "sweep_results_dir": str(results),
                "sweep_random_input_len": 64, "sweep_random_output_len": 64, "sweep_below_target": "ignore"}
    vault_args = ("--vault-password-file", str(password), "-e", f"@{vault_vars}")
    no_env_token = {"HF_TOKEN": ""}
    rc, out = run_playbook("sweep.yml", "-vvv", *vault_args, "-e", json.dumps(settings), env=no_env_token,
                           limit=NODE)
    assert rc == 0, out[-3000:]
    assert secret not in out
    # The token did reach the engine (else every check below would pass for nothing).
    environ = clean_node.sh(
        "tr '\\0' '\\n' </proc/$(pgrep -f '^python -m infera[.]engine[.]sglang ')/environ").stdout
    assert f"HF_TOKEN={secret}" in environ.splitlines()
    token_file = "/var/lib/infera/sgl_mix/run/secrets.env"
    assert clean_node.sh(f"stat -c %a {token_file}").stdout.strip() == "600"
    # Every file the run wrote on the controller: jsonl, logs, manifest, CSV, report, plot.
    written = [path for path in results.rglob("*") if path.is_file()]
    assert any(path.name == "manifest.json" for path in written) and any(path.name == "report.md" for path in written)
    assert [str(path) for path in written if secret.encode() in path.read_bytes()] == []
    # The node: its whole work dir but the token file itself, and the worker container's output.
    leaked = clean_node.sh(f"grep -rl --exclude=secrets.env {secret} /var/lib/infera/sgl_mix || true").stdout.strip()
    assert leaked == "", f"token written to {leaked} on {clean_node.name}"
    # The container's own output (its main process; the engine and wrapper log to the work dir, grepped above).
    assert secret not in clean_node.sh("docker logs sgl_mix 2>&1").stdout
    rc, out = run_playbook("teardown.yml", "-vvv", *vault_args, env=no_env_token, timeout=300, limit=NODE)
    assert rc == 0, out[-3000:]
    assert secret not in out
    assert clean_node.sh(f"test -e {token_file} && echo present || echo gone").stdout.strip() == "gone"
