"""Changelog fragments are in antsibull-changelog's form, as community.docker and kubernetes.core write them.

One fragment per change: a mapping with one section key from changelogs/config.yaml, holding one entry (one
user-facing line, starting with the thing changed: ``deploy_mixed.yml - ...``), which ends with the issue it
belongs to, ``(issue <N>)``. A fragment holds no figure measured on a machine (seconds, minutes, percentages,
"~N", task or sample counts, dates): those belong to docs/performance.md, where the command that measures them
is. A number that is part of a behaviour's contract may stay, through ALLOWED below, each with its reason.

The fragments used to be named by topic and hold up to eight entries each, with timings measured the day they
were written.
"""

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "changelogs" / "config.yaml").read_text())
FRAGMENTS = sorted(path for pattern in ("*.yml", "*.yaml")
                   for path in (REPO / "changelogs" / CONFIG.get("notesdir", "fragments")).glob(pattern))

PRELUDE = CONFIG.get("prelude_section_name", "release_summary")
SECTIONS = {name for name, _title in CONFIG["sections"]} | {CONFIG.get("trivial_section_name", "trivial")}

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*\.ya?ml$")
# "thing changed - what changed", as antsibull-changelog's own docs and community.docker write an entry.
THING_FIRST = re.compile(r"^\S[^\n]*? - \S")
ISSUE_REFERENCE = re.compile(r"\(issue [1-9][0-9]*\)\.?$")
MEASURED = re.compile(
    r"\d+(?:[.,]\d+)? ?(?:ms|s|secs?|seconds?|min|mins|minutes?|h|hours?|%)(?!\w)"  # 0.7 s, 45 min, 12 %
    r"|~\s?\d"                                                                      # ~0.7
    r"|\b\d+(?:[.,]\d+)?x(?![\w])"                                                  # 1.19x
    r"|\b\d+ (?:tasks|samples|requests)\b"                                          # 103 tasks
    r"|\b\d{4}-\d{2}-\d{2}\b",                                                      # 2026-12-05
    re.IGNORECASE)

# Numbers a behaviour is defined by, not measured: the exact phrase a fragment may hold, and why.
ALLOWED = {
    "Infera v0.1.1: 1800 s": "the fixed ready limit of Infera v0.1.1's wrapper (worker.py _wait_ready), a property "
                             "of the product the role warns about, not a measurement",
    "for up to 30 s": "how long the sweep reads a timed-out router listing again (_bench_wait.ROUTER_PATIENCE)",
    "30 s lease": "the TTL of Infera's worker lease (infera/common/registration.py), which says how long a dead "
                  "wrapper's record stays listed",
    "more than 10 % below": "the threshold below the fleet median at which sweep_report flags a node",
}


def _entries(path):
    """The fragment's problems and its (section, entries) pair; entries is None when the shape is wrong."""
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or len(data) != 1:
        return ["is not a mapping with exactly one section key"], None, None
    section, entries = next(iter(data.items()))
    if section == PRELUDE:
        if isinstance(entries, str) and entries.strip():
            return [], section, [entries]
        return [f"{section} is not one string"], section, None
    if section not in SECTIONS:
        return [f"{section!r} is no section of changelogs/config.yaml ({', '.join(sorted(SECTIONS))})"], section, None
    if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], str) or not entries[0].strip():
        count = len(entries) if isinstance(entries, list) else type(entries).__name__
        return [f"{section} holds {count} entries, not one string"], section, None
    return [], section, entries


def _problems(path):
    problems, section, entries = _entries(path)
    if not NAME.match(path.name):
        problems.append("its name is not short kebab-case naming the change (worker-lease-module.yml)")
    if "playbook" in path.name:
        problems.append("ansible-lint reads a YAML file named *playbook* as a playbook: name the change without it")
    if entries is None:
        return problems
    text = " ".join(entries[0].split())
    if section != PRELUDE:
        if not THING_FIRST.match(text):
            problems.append("does not start with the thing changed (`deploy_mixed.yml - ...`)")
        if not ISSUE_REFERENCE.search(text):
            problems.append("does not end with its issue, `(issue <N>)`")
    stripped = text
    for phrase in ALLOWED:
        stripped = stripped.replace(phrase, "")
    problems.extend(f"holds a measured figure: {match.group(0)!r}" for match in MEASURED.finditer(stripped))
    return problems


def test_there_are_fragments_to_check():
    # After a release antsibull-changelog removes the fragments (keep_fragments: false); then this has nothing to say.
    if not FRAGMENTS:
        pytest.skip("no changelog fragments (removed at the last release)")
    assert SECTIONS and PRELUDE


@pytest.mark.parametrize("path", FRAGMENTS, ids=[path.name for path in FRAGMENTS])
def test_a_fragment_holds_one_entry_ending_with_its_issue_and_no_measured_figure(path):
    problems = _problems(path)
    assert not problems, f"changelogs/fragments/{path.name}:\n  " + "\n  ".join(problems)


def test_every_allowed_number_says_why():
    for phrase, reason in ALLOWED.items():
        assert MEASURED.search(phrase), f"{phrase!r} holds no figure the check would refuse: drop it from ALLOWED"
        assert len(reason.split()) >= 5, f"{phrase!r} needs its reason"


def test_the_check_refuses_what_the_old_fragments_held():
    samples = {"~0.7 s less a teardown": True, "runs 75 tasks instead of 103": True, "teardown 27.8 -> 14.5 s": True,
               "measured 2026-12-05": True, "P1=0.82 is 1.19x": True, "12 % faster": True, "45 min": True,
               "port 30000 and --tags worker": False, "community.docker 5.x (>=4.0.0,<6.0.0)": False,
               "SGLang 0.5.15.post1 on Docker 29's snapshotter": False, "-e conc=32,256": False}
    for text, refused in samples.items():
        assert bool(MEASURED.search(text)) is refused, text
