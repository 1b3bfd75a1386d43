"""ansible-playbook on the controller, for the unit tests that run a playbook on local hosts (no node, no Docker):
this checkout's ansible.cfg and collections (.build/collections, made by tests/unit/conftest.py), no colour."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def ansible_env(**extra):
    """The environment such a run takes, plus extra."""
    return {**os.environ, "LANG": "C.UTF-8", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".build" / "collections"), **extra}
