"""README.md and docs/ are reference for users, not a lab notebook.

The developers' guide: no commit hashes, no per-machine or per-evening tables in README.md or
docs/; today's figures and the command that reproduces them. History is in git.

- No commit of this repository is named in README.md or docs/**/*.md. A hash of another project
  that names what is pinned (Infera 5890f7f, a tarball's sha256, an image tag) is a fact and
  stays: only prefixes of this repository's own commits count.
- docs/role-variables.md shows Ansible's documentation markup as Markdown (its generator,
  scripts/role_docs.py, converts it; test_role_docs.py holds the file to the generator).
- docs/performance.md holds one table of the kit-and-collection benchmark's figures, labelled
  SIMULATED, with the command that reproduces it.
"""

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
RAW_MARKUP = re.compile(r"\b[CVOIBULM]\(")
# A results table of benchmarks/vs_infera_kit: a Markdown table with the P1 row of its figures
# ("| P1 deploy (s) | goal | kit | collection | ..."). The table that defines the figures says
# "| P1 deploy | how it is measured |" and is not one.
RESULTS_ROW = re.compile(r"^\|\s*P1 deploy \(s\)\s*\|")
FIGURES_LINE = re.compile(r"^figures: P1=[0-9]")
BENCHMARK_COMMAND = "benchmarks/vs_infera_kit"


def doc_files(root=REPO):
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def repository_commits():
    """Every commit of this repository's history; skips when the tree is not a git checkout."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=REPO, capture_output=True,
                             text=True, timeout=60, check=False)
    except OSError as error:
        pytest.skip(f"git is not available ({error}): cannot read this repository's commits")
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != REPO:
        pytest.skip(f"{REPO} is not a git checkout (a built collection?): no commit history to check the docs against")
    # In a shallow clone only the fetched commits are known; CI's clone has the whole history.
    listed = subprocess.run(["git", "rev-list", "--all"], cwd=REPO, capture_output=True, text=True,
                            timeout=120, check=True)
    return listed.stdout.split()


def commit_mentions(named_texts, commits):
    """(name:line, token) for each token of 7-40 hex digits that is a prefix of one of the commits."""
    prefixes = {commit[:length] for commit in commits for length in range(7, len(commit) + 1)}
    hits = []
    for name, text in named_texts:
        for number, line in enumerate(text.splitlines(), 1):
            hits += [(f"{name}:{number}", token) for token in HEX.findall(line) if token in prefixes]
    return hits


def raw_markup(text):
    """(line number, line) of each line that still holds C(, V(, O(, I(, B(, U(, L( or M(."""
    return [(number, line) for number, line in enumerate(text.splitlines(), 1) if RAW_MARKUP.search(line)]


def tables(text):
    """Each Markdown table of text as (first line number, its lines, the text from the heading above it)."""
    lines = text.splitlines()
    found, heading, number = [], 0, 0
    while number < len(lines):
        if lines[number].startswith("#"):
            heading = number
        if lines[number].startswith("|"):
            start = number
            while number < len(lines) and lines[number].startswith("|"):
                number += 1
            found.append((start + 1, lines[start:number], "\n".join(lines[heading:start])))
            continue
        number += 1
    return found


def results_tables(text):
    return [table for table in tables(text) if any(RESULTS_ROW.match(row) for row in table[1])]


def test_no_commit_of_this_repository_in_readme_or_docs():
    commits = repository_commits()
    named = [(str(path.relative_to(REPO)), path.read_text(encoding="utf-8")) for path in doc_files()]
    hits = commit_mentions(named, commits)
    assert not hits, ("commit hashes of this repository in the docs (history is in git; give today's fact and the "
                      "command that reproduces it):\n" + "\n".join(f"{where}: {token}" for where, token in hits))


def test_the_commit_check_finds_a_hash_and_leaves_other_projects_hex_alone():
    commits = ["0123456789abcdef0123456789abcdef01234567"]
    text = ("measured at 0123456 and 0123456789ab\nInfera 5890f7f, image etcd:4be6fd4ac18c, a sha256 "
            "92e48822732ad354aead1a4f027e2fe6e48fa4033fe6b59e7fade3fa5d00c8ba, 1234567 requests")
    assert commit_mentions([("x.md", text)], commits) == [("x.md:1", "0123456"), ("x.md:1", "0123456789ab")]


def test_role_variables_shows_no_raw_ansible_markup():
    path = REPO / "docs" / "role-variables.md"
    left = raw_markup(path.read_text(encoding="utf-8"))
    assert not left, "Ansible markup left in docs/role-variables.md (fix scripts/role_docs.py, then run it):\n" + \
        "\n".join(f"docs/role-variables.md:{number}: {line}" for number, line in left)


def _role_docs():
    spec = importlib.util.spec_from_file_location("role_docs", REPO / "scripts" / "role_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("markup, markdown", [
    ("C(infera_container)", "`infera_container`"),
    ("V(/var/lib/infera/sgl_mix)", "`/var/lib/infera/sgl_mix`"),
    ("O(router_state=absent)", "`router_state=absent`"),
    (r"O(a\)b) and V(c\\d)", r"`a)b` and `c\d`"),
    ("I(never) B(always)", "*never* **always**"),
    ("U(https://example.org/x)", "<https://example.org/x>"),
    ("L(the manual, https://example.org/m)", "[the manual](https://example.org/m)"),
    ("M(community.docker.docker_container)", "`community.docker.docker_container`"),
    ("C(a `b` c)", "``a `b` c``"),
    ("Defaults to C(x) (V(y)); EXEC(z) and LOG(w) are words.", "Defaults to `x` (`y`); EXEC(z) and LOG(w) are words."),
])
def test_the_generator_writes_ansible_markup_as_markdown(markup, markdown):
    assert _role_docs().markdown(markup) == markdown


def test_performance_has_one_simulated_results_table_with_its_command():
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    found = results_tables(text)
    assert len(found) == 1, ("docs/performance.md must hold one table of today's benchmark figures (the older ones are "
                             "in git history); tables with a 'P1 deploy (s)' row start at lines "
                             + ", ".join(str(table[0]) for table in found))
    before = found[0][2]
    assert "simulated" in before.lower(), "the figures' table must say its figures are the SIMULATED engine's"
    assert BENCHMARK_COMMAND in before, f"the figures' table must give the command that reproduces it ({BENCHMARK_COMMAND})"
    figures = [line for line in text.splitlines() if FIGURES_LINE.match(line)]
    assert len(figures) == 1, f"one 'figures: P1=...' line of today's figures, found {len(figures)}"
