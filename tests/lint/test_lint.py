"""ansible-lint (production profile, offline) and ansible-test sanity, as tests."""

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "NO_COLOR": "1"}


def test_ansible_lint_production_profile_passes():
    result = subprocess.run(["ansible-lint", "--nocolor"], cwd=REPO, env=ENV,
                            capture_output=True, text=True, timeout=600, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "Profile 'production' was required, and it passed" in output


def test_ansible_test_sanity_passes():
    result = subprocess.run([str(REPO / "scripts" / "sanity")], cwd=REPO, env=ENV,
                            capture_output=True, text=True, timeout=1200, check=False)
    output = result.stdout + result.stderr
    failures = [line for line in output.splitlines() if line.startswith(("ERROR", "FATAL"))]
    assert result.returncode == 0, "\n".join(failures[:60]) or output[-5000:]
