"""The node-side shell the roles share (roles/infera/vars/main.yml), run here with the shells the node runs it with:
the worker's launch, the router's start and a sweep point's client all start through infera_start_detached; the
worker's and the router's stop through infera_stop_and_watch and infera_watch_gone."""

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
SHELL = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())


def fifo(path):
    """path made a FIFO: a detached script writing there waits for the test to read it, which it does without polling."""
    os.mkfifo(path)
    return path


def read_written(path, timeout=10.0):
    """All a detached script writes into the FIFO path, once it has closed it; timeout bounds a script that never runs."""
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks = []
    try:
        while True:
            # Until a writer opens it, a FIFO is not readable: no EOF before the script runs.
            assert select.select([reader], [], [], timeout)[0], "nothing wrote %s" % path
            chunk = os.read(reader, 4096)
            if not chunk:
                return b"".join(chunks).decode()
            chunks.append(chunk)
    finally:
        os.close(reader)


def start(script, mode, *args, stdin=None):
    # As the roles call it: docker exec <container> /bin/bash -c <snippet> <script> <write|keep> [args...]
    return subprocess.run(["/bin/bash", "-c", SHELL["infera_start_detached"], str(script), mode, *args],
                          input=stdin, capture_output=True, text=True, timeout=10, check=False)


def test_the_shell_is_plain_text_ansible_passes_unchanged():
    for name in ("infera_start_detached", "infera_stop_and_watch", "infera_watch_gone"):
        assert "{{" not in SHELL[name] and "{%" not in SHELL[name] and "{#" not in SHELL[name], name


def test_write_replaces_the_script_by_a_rename_and_runs_it_with_the_args(tmp_path):
    script = tmp_path / "engine.sh"
    script.write_text("echo old >\"$(dirname \"$0\")/ran\"\n")
    before = script.stat().st_ino
    done = fifo(tmp_path / "ran")
    result = start(script, "write", "a b", "c", stdin='printf "%s|" "$@" > "$(dirname "$0")/ran"\n')
    assert result.returncode == 0, result.stderr
    assert read_written(done) == "a b|c|"
    assert script.read_text().startswith("printf")
    assert script.stat().st_ino != before  # a new file renamed over the old one: a reader never sees half a script
    assert oct(script.stat().st_mode & 0o777) == "0o644"
    assert not (tmp_path / "engine.sh.new").exists()


def test_keep_leaves_the_script_alone_and_reads_no_stdin(tmp_path):
    script = tmp_path / "router.sh"
    script.write_text('echo kept > "$(dirname "$0")/ran"\n')
    before = script.stat()
    done = fifo(tmp_path / "ran")
    result = start(script, "keep", stdin="echo replaced\n")
    assert result.returncode == 0, result.stderr
    assert read_written(done) == "kept\n"
    assert script.read_text() == 'echo kept > "$(dirname "$0")/ran"\n'
    assert script.stat().st_ino == before.st_ino


def test_the_call_returns_while_the_script_still_runs(tmp_path):
    script = tmp_path / "bench.sh"
    # The script cannot get past reading a line from "go" until the test writes one there, after the call returned.
    go = fifo(tmp_path / "go")
    done = fifo(tmp_path / "ran")
    result = start(script, "write", stdin='read line <"$(dirname "$0")/go"; echo "$line" >"$(dirname "$0")/ran"\n')
    assert result.returncode == 0, result.stderr
    # Opened for reading and writing, a FIFO opens at once and keeps the line until the script reads it.
    line = os.open(go, os.O_RDWR)
    try:
        os.write(line, b"written after the call returned\n")
        assert read_written(done) == "written after the call returned\n"
    finally:
        os.close(line)


def test_a_full_folder_exits_3_and_keeps_the_old_script(tmp_path):
    if not Path("/dev/full").exists():
        pytest.fail("/dev/full is missing: this test needs it to make the write fail")
    folder = tmp_path / "scripts"
    folder.mkdir()
    script = folder / "engine.sh"
    script.write_text("echo old\n")
    (folder / "engine.sh.new").symlink_to("/dev/full")  # every write to the new file fails with ENOSPC
    result = start(script, "write", stdin="echo new\n" * 1000)
    assert result.returncode == 3, result.stderr
    assert script.read_text() == "echo old\n"


def stop(*patterns, snippet="infera_stop_and_watch"):
    return subprocess.run(["/bin/sh", "-c", SHELL[snippet], *patterns],
                          capture_output=True, text=True, timeout=15, check=False)


def process(marker, stdin=subprocess.PIPE, stdout=None):
    """A process that runs until a signal ends it or its stdin reaches EOF (a pipe from the test, by default).

    The roles' patterns are anchored at the command's start (^python -m infera[.]server ...), so the shell that runs
    the snippet, whose own argv holds the patterns, never matches them: these are anchored the same way.
    """
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", marker], stdin=stdin, stdout=stdout)


def end(*procs):
    for proc in procs:
        proc.kill()
        proc.wait()
        if proc.stdin:
            proc.stdin.close()


def anchored(marker):
    return "^[^ ]*python[0-9.]* -c .* %s$" % marker


def test_stop_signals_the_first_pattern_and_waits_for_the_second():
    marker = "infera-shell-test-%d" % os.getpid()
    # The engine is not signalled: it exits on its own once the wrapper is gone (EOF on the pipe the wrapper holds),
    # after the stop signalled the wrapper, and the watch waits for it.
    engine_end, wrapper_end = os.pipe()
    wrapper = process(marker + "-wrapper", stdout=wrapper_end)
    engine = process(marker + "-engine", stdin=engine_end)
    os.close(wrapper_end)
    os.close(engine_end)
    try:
        result = stop(anchored(marker + "-wrapper"), anchored(marker + "-(wrapper|engine)"))
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert result.stdout.split() == ["sent"]
        assert wrapper.wait(timeout=5) == -signal.SIGTERM
        # The watch returned once the engine had gone (exit 0 rather than 1 after its 5 s), and the engine ended on
        # its own. pgrep stops matching a process as its exit tears down its command line, a moment before its parent
        # can reap it: wait for the exit status instead of polling it once (a poll lost that race on a loaded CI).
        assert engine.wait(timeout=5) == 0
    finally:
        end(wrapper, engine)


def test_stop_still_running_after_5_s_exits_1():
    marker = "infera-shell-slow-%d" % os.getpid()
    engine = process(marker)
    try:
        result = stop(anchored("no-such-process"), anchored(marker))
        assert result.returncode == 1
        assert "sent" not in result.stdout
        assert engine.poll() is None
    finally:
        end(engine)


def test_stop_with_nothing_to_signal_says_nothing_sent():
    nothing = anchored("no-such-process-infera-%d" % os.getpid())
    result = stop(nothing, nothing)
    assert result.returncode == 0
    assert "sent" not in result.stdout


def test_watch_gone_reports_the_pids_still_running():
    marker = "infera-shell-watch-%d" % os.getpid()
    proc = process(marker)
    try:
        result = stop(anchored(marker), snippet="infera_watch_gone")
        assert result.returncode == 1
        assert str(proc.pid) in result.stdout.split()
    finally:
        end(proc)
