"""README.md and docs/ are reference for users, not a lab notebook.

The developers' guide: no commit hashes, no per-machine or per-evening tables in README.md or
docs/; today's figures and the command that reproduces them. History is in git.

- No hex identifier in README.md or docs/**/*.md: no commit (of this repository or another
  project), no image tag, no abbreviated digest. A hex identifier is a whole word of 7-40 hex
  digits with at least one digit and one letter a-f (`1a2b3c4`, `9f8e7d6c5b4a`), or the commit
  of a git-describe version (`0.0.0+g1a2b3c4`, `v0.2.10-3-g1a2b3c4`). Name what is pinned by
  what it is ("Infera's main branch at the vendored commit, stack `infera-main`") and write a
  placeholder where a tag would be (`etcd:<tag>`); the identifiers themselves live in code
  (tests/rehearsal/platform's STACKS table). Words (`added`, `decade`, `deadbeef`), numbers
  (`1234567`) and full sha256 digests (64 digits: a checksum to compare, not an identifier) do
  not count; a prefix of this repository's own commits counts even when all digits.
  docs/reference/ (the user's walkthrough, a verbatim copy) and docs/targets/ (data) are not
  checked.
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
# A whole word of 7-40 hex digits, or the commit after a git-describe "+g"/"-g".
HEX = re.compile(r"(?:\b|(?<=[+-]g))[0-9a-fA-F]{7,40}\b")
NOT_CHECKED = ("docs/reference/", "docs/targets/")
RAW_MARKUP = re.compile(r"\b[CVOIBULM]\(")
# A results table of benchmarks/vs_infera_kit: a Markdown table with the P1 row of its figures
# ("| P1 deploy (s) | goal | kit | collection | ..."). The table that defines the figures says
# "| P1 deploy | how it is measured |" and is not one.
RESULTS_ROW = re.compile(r"^\|\s*P1 deploy \(s\)\s*\|")
FIGURES_LINE = re.compile(r"^figures: P1=[0-9]")
BENCHMARK_COMMAND = "benchmarks/vs_infera_kit"


def doc_files(root=REPO):
    """README.md and docs/**/*.md, but the verbatim copies and data of NOT_CHECKED."""
    docs = [path for path in sorted((root / "docs").rglob("*.md"))
            if not path.relative_to(root).as_posix().startswith(NOT_CHECKED)]
    return [root / "README.md", *docs]


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


def hex_identifier(token):
    """A token of HEX that identifies something: it mixes digits and letters a-f (not a word, not a number)."""
    return any(char.isdigit() for char in token) and any(char in "abcdefABCDEF" for char in token)


def hex_mentions(named_texts, commits=()):
    """(name:line, token) for each hex identifier of the texts (hex_identifier), and each token of 7-40 hex digits
    that is a prefix of one of the commits (this repository's: all digits or all letters too)."""
    prefixes = {commit[:length] for commit in commits for length in range(7, len(commit) + 1)}
    hits = []
    for name, text in named_texts:
        for number, line in enumerate(text.splitlines(), 1):
            hits += [(f"{name}:{number}", token) for token in HEX.findall(line)
                     if hex_identifier(token) or token in prefixes]
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


def named_docs():
    return [(path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8")) for path in doc_files()]


def test_no_hex_identifier_in_readme_or_docs():
    hits = hex_mentions(named_docs())
    assert not hits, ("hex identifiers in the docs (commits, image tags: name what is pinned by what it is, e.g. "
                      "\"Infera's main branch at the vendored commit (stack `infera-main`)\", write `<tag>` for a tag; "
                      "history is in git):\n" + "\n".join(f"{where}: {token}" for where, token in hits))


def test_no_commit_of_this_repository_in_readme_or_docs():
    commits = repository_commits()
    hits = hex_mentions(named_docs(), commits)
    assert not hits, ("commit hashes of this repository in the docs (history is in git; give today's fact and the "
                      "command that reproduces it):\n" + "\n".join(f"{where}: {token}" for where, token in hits))


def test_the_hex_check_finds_identifiers_and_leaves_words_numbers_and_digests_alone():
    text = ("Infera 1a2b3c4, image etcd:9f8e7d6c5b4a, amd-infera-1a2b3c4.tar.gz\n"
            "version 0.0.0+g1a2b3c4, v0.2.10-3-gabc1234, `ABCDEF0123`\n"
            "a sha256 92e48822732ad354aead1a4f027e2fe6e48fa4033fe6b59e7fade3fa5d00c8ba, `sha256:<digest>`, "
            "1234567 requests, deadbeef, added a decade, facade, 0xff, g1a2b3c4, abc123, "
            + "a1" * 21)
    assert hex_mentions([("x.md", text)]) == [
        ("x.md:1", "1a2b3c4"), ("x.md:1", "9f8e7d6c5b4a"), ("x.md:1", "1a2b3c4"),
        ("x.md:2", "1a2b3c4"), ("x.md:2", "abc1234"), ("x.md:2", "ABCDEF0123")]


def test_the_commit_check_finds_this_repository_s_commits_even_all_digits():
    commits = ["0123456789abcdef0123456789abcdef01234567", "7654321000000000000000000000000000000000"]
    text = "measured at 0123456 and 0123456789ab\nthen 7654321, 1234567 requests, words: accede, decade"
    assert hex_mentions([("x.md", text)], commits) == [
        ("x.md:1", "0123456"), ("x.md:1", "0123456789ab"), ("x.md:2", "7654321")]


def test_the_verbatim_copies_and_data_are_not_checked(tmp_path):
    for relative in ("README.md", "docs/a.md", "docs/sub/b.md", "docs/reference/walkthrough.md", "docs/targets/t.md"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x")
    assert [path.relative_to(tmp_path).as_posix() for path in doc_files(tmp_path)] == [
        "README.md", "docs/a.md", "docs/sub/b.md"]


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
