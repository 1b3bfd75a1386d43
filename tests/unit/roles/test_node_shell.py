"""The node-side shell the roles share (roles/infera/vars/main.yml), run here with the shells the node runs it with:
the worker's launch, the router's start and a sweep point's client all start through infera_start_detached; the
worker's and the router's stop through infera_stop_and_watch and infera_watch_gone."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
SHELL = yaml.safe_load((REPO / "roles" / "infera" / "vars" / "main.yml").read_text())


def wait_for(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, "%s never appeared" % path
        time.sleep(0.02)
    return path.read_text()


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
    done = tmp_path / "ran"
    result = start(script, "write", "a b", "c", stdin='printf "%s|" "$@" > "$(dirname "$0")/ran"\n')
    assert result.returncode == 0, result.stderr
    assert wait_for(done) == "a b|c|"
    assert script.read_text().startswith("printf")
    assert script.stat().st_ino != before  # a new file renamed over the old one: a reader never sees half a script
    assert oct(script.stat().st_mode & 0o777) == "0o644"
    assert not (tmp_path / "engine.sh.new").exists()


def test_keep_leaves_the_script_alone_and_reads_no_stdin(tmp_path):
    script = tmp_path / "router.sh"
    script.write_text('echo kept > "$(dirname "$0")/ran"\n')
    before = script.stat()
    result = start(script, "keep", stdin="echo replaced\n")
    assert result.returncode == 0, result.stderr
    assert wait_for(tmp_path / "ran") == "kept\n"
    assert script.read_text() == 'echo kept > "$(dirname "$0")/ran"\n'
    assert script.stat().st_ino == before.st_ino


def test_the_call_returns_while_the_script_still_runs(tmp_path):
    script = tmp_path / "bench.sh"
    began = time.monotonic()
    result = start(script, "write", stdin='sleep 3; touch "$(dirname "$0")/ran"\n')
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - began < 2.0
    assert not (tmp_path / "ran").exists()


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


def sleeper(marker, seconds):
    # The roles' patterns are anchored at the command's start (^python -m infera[.]server ...), so the shell that
    # runs the snippet, whose own argv holds the patterns, never matches them: these are anchored the same way.
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(%s)" % seconds, marker])


def anchored(marker):
    return "^[^ ]*python[0-9.]* -c .* %s$" % marker


def test_stop_signals_the_first_pattern_and_waits_for_the_second():
    marker = "infera-shell-test-%d" % os.getpid()
    wrapper = sleeper(marker + "-wrapper", 30)
    engine = sleeper(marker + "-engine", 1.5)  # not signalled: exits on its own, and the watch waits for it
    try:
        time.sleep(0.3)
        began = time.monotonic()
        result = stop(anchored(marker + "-wrapper"), anchored(marker + "-(wrapper|engine)"))
        took = time.monotonic() - began
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert result.stdout.split() == ["sent"]
        assert wrapper.wait(timeout=5) == -signal.SIGTERM
        assert engine.poll() == 0
        assert 0.5 < took < 4.0  # it waited for the engine, and no longer
    finally:
        for proc in (wrapper, engine):
            proc.kill()
            proc.wait()


def test_stop_still_running_after_5_s_exits_1():
    marker = "infera-shell-slow-%d" % os.getpid()
    engine = sleeper(marker, 30)
    try:
        time.sleep(0.3)
        result = stop(anchored("no-such-process"), anchored(marker))
        assert result.returncode == 1
        assert "sent" not in result.stdout
        assert engine.poll() is None
    finally:
        engine.kill()
        engine.wait()


def test_stop_with_nothing_to_signal_says_nothing_sent():
    nothing = anchored("no-such-process-infera-%d" % os.getpid())
    result = stop(nothing, nothing)
    assert result.returncode == 0
    assert "sent" not in result.stdout


def test_watch_gone_reports_the_pids_still_running():
    marker = "infera-shell-watch-%d" % os.getpid()
    proc = sleeper(marker, 30)
    try:
        time.sleep(0.3)
        result = stop(anchored(marker), snippet="infera_watch_gone")
        assert result.returncode == 1
        assert str(proc.pid) in result.stdout.split()
    finally:
        proc.kill()
        proc.wait()
