# SPDX-License-Identifier: Apache-2.0
"""Reading the node's files: exit and pid files, log tails (whole and incremental), jsonl lines, dir sizes."""

from __future__ import annotations

import os
import signal

import pytest

from ansible_collections.infera.serving.plugins.module_utils import _node_files
from ansible_collections.infera.serving.plugins.module_utils._node_files import (
    count_lines,
    dir_signature,
    log_tail,
    new_reading,
    read_exit_code,
    read_on,
    read_pid,
    tail_lines,
    wait_for_exit_code,
)

CHUNK = _node_files._READ_CHUNK
RESULT_LINE = '{"backend": "sglang-oai", "max_concurrency": 64, "output_throughput": 5120.3}'
PROGRESS_BAR = '%3d%%|#####     | %d/640 [00:10<00:10, 30.0it/s]'


# ---------------------------------------------------------------- exit and pid files

@pytest.mark.parametrize('text, expected', [
    ('0\n', 0),
    ('137', 137),
    ('  -15 \n', -15),
    ('', None),
    ('oops', None),
])
def test_read_exit_code(tmp_path, text, expected):
    path = tmp_path / 'bench.exit'
    path.write_text(text)
    assert read_exit_code(str(path)) == expected


def test_read_exit_code_of_a_missing_file(tmp_path):
    assert read_exit_code(str(tmp_path / 'missing.exit')) is None


def test_an_exit_file_of_bytes_that_are_not_text_holds_no_code(tmp_path):
    path = tmp_path / 'engine.exit'
    path.write_bytes(b'\xff\xfe1\x00\n')
    assert read_exit_code(str(path)) is None


def test_wait_for_exit_code_returns_a_code_already_written_at_once(tmp_path, clock):
    path = tmp_path / 'engine.exit'
    path.write_text('137\n')
    assert wait_for_exit_code(str(path), grace=60, clock=clock.time, sleep=clock.sleep) == 137
    assert clock.slept == []


def test_wait_for_exit_code_waits_for_a_code_written_just_after_the_file(tmp_path, clock):
    path = tmp_path / 'engine.exit'
    path.write_text('')
    clock.after(0.2, lambda: path.write_text('137\n'))
    assert wait_for_exit_code(str(path), grace=5, clock=clock.time, sleep=clock.sleep) == 137
    assert clock.now == pytest.approx(0.2)


def test_wait_for_exit_code_gives_up_after_the_grace(tmp_path, clock):
    path = tmp_path / 'engine.exit'
    path.write_text('')
    assert wait_for_exit_code(str(path), grace=0.3, clock=clock.time, sleep=clock.sleep) is None
    assert clock.now == pytest.approx(0.3)


def test_read_pid_says_nothing_until_the_wrapper_has_written_one(tmp_path):
    path = tmp_path / 'engine.pid'
    assert read_pid(str(path)) is None
    path.write_text('starting\n')
    assert read_pid(str(path)) is None
    path.write_text('%d\n' % os.getpid())
    assert read_pid(str(path)) == os.getpid()


# ---------------------------------------------------------------- log tails

def test_log_tail_collapses_tqdm_redraws_and_keeps_30_lines(tmp_path):
    progress_bar = '%3d%%|#####     | %d/640 [00:10<00:10, 30.0it/s]'
    path = tmp_path / 'bench.log'
    path.write_text('\n'.join('line %d' % number for number in range(40)) + '\n'
                    + ''.join('\r' + progress_bar % (k * 10, k * 64) for k in range(1, 6)) + '\n'
                    + '============ Serving Benchmark Result ============\n'
                    + ''.join('\r' + progress_bar % (k * 10, k * 64) for k in range(6, 8)))
    tail = log_tail(str(path))
    assert len(tail) == 30
    assert tail[-3:] == [progress_bar % (50, 320), '============ Serving Benchmark Result ============', progress_bar % (70, 448)]
    assert tail[0] == 'line 13'


def test_log_tail_of_a_huge_log_starts_at_a_whole_line(tmp_path):
    path = tmp_path / 'bench.log'
    path.write_text('x' * 300000 + '\nlast line\n')
    assert log_tail(str(path)) == ['last line']


def test_log_tail_of_a_missing_or_unset_log(tmp_path):
    assert log_tail(str(tmp_path / 'missing.log')) == []
    assert log_tail(None) == []


def test_long_lines_are_cut_in_the_tail(tmp_path):
    path = tmp_path / 'engine.log'
    path.write_text('y' * 5000 + '\n')
    assert log_tail(str(path)) == ['y' * 1000]


CONTENTS = [
    'line 1\nline 2\n',
    'line 1\nline 2 without its newline',
    'Capture cuda graph begin\n' + ''.join('\r' + PROGRESS_BAR % (k * 10, k * 64) for k in range(1, 5)),
    'Capture cuda graph begin\n' + ''.join('\r' + PROGRESS_BAR % (k * 10, k * 64) for k in range(1, 5)) + '\ndone\n',
    'a\n\rb\r\rc\n\n   \nd\r',
    # A bar redrawn across two reads, below more than one line, replaces only itself.
    'Load weight end\nCapture cuda graph begin\n' + ''.join('bs=64: %d/20\r' % k for k in range(1, 4))
    + '\nCapture cuda graph end\n',
    ''.join('line %d\n' % number for number in range(45)),
]


@pytest.mark.parametrize('content', CONTENTS)
def test_reading_in_two_parts_gives_the_tail_of_reading_it_whole(tmp_path, content):
    # The engine writes whenever its buffer fills, so a poll may end anywhere: in a line, or between \n and \r.
    path = tmp_path / 'engine.log'
    whole = content.encode()
    path.write_bytes(whole)
    expected = log_tail(str(path))
    for split in range(len(whole) + 1):
        path.write_bytes(whole[:split])
        reading = new_reading()
        read_on(str(path), reading)
        path.write_bytes(whole)
        read_on(str(path), reading)
        assert tail_lines(reading) == expected, 'split at byte %d' % split


def test_a_line_written_in_two_parts_never_hides_the_line_before(tmp_path):
    # A block-buffered engine log often ends in the middle of a line when it is polled.
    path = tmp_path / 'engine.log'
    reading = new_reading()
    shown = []
    for part in ('Load weight begin\n', 'Load wei', 'ght end\n'):
        with open(path, 'a') as handle:
            handle.write(part)
        read_on(str(path), reading)
        shown.append(tail_lines(reading))
    assert shown == [['Load weight begin'], ['Load weight begin', 'Load wei'], ['Load weight begin', 'Load weight end']]


def test_a_progress_bar_first_drawn_after_a_line_keeps_the_line(tmp_path):
    # tqdm writes '\r' + bar: a poll between its writes ends just after a '\r'.
    path = tmp_path / 'engine.log'
    path.write_text('Capture cuda graph begin\n\r' + PROGRESS_BAR % (10, 64))
    reading = new_reading()
    read_on(str(path), reading)
    with open(path, 'a') as handle:
        handle.write('\r' + PROGRESS_BAR % (20, 128))
    read_on(str(path), reading)
    assert tail_lines(reading) == ['Capture cuda graph begin', PROGRESS_BAR % (20, 128)]


def test_read_on_passes_each_segment_and_the_unfinished_line_again_once_complete(tmp_path):
    path = tmp_path / 'engine.log'
    path.write_text('first\nbar 1\rbar 2\rbar')
    reading = new_reading()
    seen = []
    read_on(str(path), reading, seen.append)
    assert seen == ['first', 'bar 1', 'bar 2', 'bar']
    with open(path, 'a') as handle:
        handle.write(' 3\n')
    read_on(str(path), reading, seen.append)
    assert seen[4:] == ['bar 3']
    assert reading['read_offset'] == path.stat().st_size


def test_read_on_starts_at_the_offset(tmp_path):
    path = tmp_path / 'engine.log'
    path.write_text('old launch\nnew launch\n')
    reading = new_reading(len('old launch\n'))
    read_on(str(path), reading)
    assert tail_lines(reading) == ['new launch']


def test_blank_lines_are_not_in_the_tail(tmp_path):
    path = tmp_path / 'engine.log'
    path.write_text('Load weight begin\n\n   \n\t\nLoad weight end\n')
    assert log_tail(str(path)) == ['Load weight begin', 'Load weight end']


def test_a_log_of_exactly_256_kib_is_read_from_its_first_line(tmp_path):
    # Only the last 256 KiB are read; a log of exactly that size is read whole, its first line included.
    path = tmp_path / 'engine.log'
    first, last = b'first line\n', b'last line\n'
    path.write_bytes(first + b'x' * (256 * 1024 - len(first) - len(last) - 1) + b'\n' + last)
    assert log_tail(str(path)) == ['first line', 'x' * 1000, 'last line']


def test_bytes_that_are_not_utf_8_are_shown_replaced(tmp_path):
    # A Latin-1 path in a complete line, and a poll that ends inside a character of tqdm's bar.
    tqdm_bar = ' 35%|\u2588\u2588\u2588\u258c      | 7/20'
    cut = tqdm_bar.encode().index('\u258c'.encode()) + 2
    path = tmp_path / 'engine.log'
    path.write_bytes(b'Loading weights from /models/caf\xe9\n\r' + tqdm_bar.encode()[:cut])
    reading = new_reading()
    seen = []
    read_on(str(path), reading, seen.append)
    assert seen == ['Loading weights from /models/caf\ufffd', ' 35%|\u2588\u2588\u2588\ufffd']
    assert tail_lines(reading) == ['Loading weights from /models/caf\ufffd', ' 35%|\u2588\u2588\u2588\ufffd']
    path.write_bytes(b'Loading weights from /models/caf\xe9\n\r' + tqdm_bar.encode())
    read_on(str(path), reading)
    assert tail_lines(reading) == ['Loading weights from /models/caf\ufffd', tqdm_bar]


@pytest.fixture
def returns_within_5_s():
    """Fail a test whose code under test loops instead of returning (it would otherwise hang the run)."""
    def stop(_signum, _frame):
        raise AssertionError('did not return within 5 s')

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_log_larger_than_a_chunk_is_read_whole_in_one_call(tmp_path, returns_within_5_s):
    # The first chunk ends inside "line 2": that line is still read as one line.
    path = tmp_path / 'engine.log'
    path.write_bytes(b'A' * (CHUNK - 20) + b'\n' + b''.join(b'line %d\n' % number for number in range(10)))
    reading = new_reading()
    read_on(str(path), reading)
    assert tail_lines(reading) == ['A' * 1000] + ['line %d' % number for number in range(10)]
    assert reading['read_offset'] == path.stat().st_size


def test_a_line_longer_than_a_chunk_is_taken_a_chunk_at_a_time(tmp_path, returns_within_5_s):
    # Rather than wait forever for its end, the first chunk is taken as the line; the rest redraws it.
    path = tmp_path / 'engine.log'
    path.write_bytes(b'a' * CHUNK + b'b' * 100)
    reading = new_reading()
    seen = []
    read_on(str(path), reading, seen.append)
    assert seen == ['a' * CHUNK, 'b' * 100]
    assert reading['read_offset'] == CHUNK
    assert tail_lines(reading) == ['b' * 100]


def test_a_read_that_ends_at_a_chunk_boundary_forgets_the_unfinished_line(tmp_path):
    # The line unfinished at the last read is completed, and the new bytes end exactly at the end of a chunk.
    path = tmp_path / 'engine.log'
    path.write_bytes(b'Load wei')
    reading = new_reading()
    read_on(str(path), reading)
    assert tail_lines(reading) == ['Load wei']
    head, end = b'Load weight end\n', b'\ndone\n'
    path.write_bytes(head + b'x' * (CHUNK - len(head) - len(end)) + end)
    read_on(str(path), reading)
    assert tail_lines(reading) == ['Load weight end', 'x' * 1000, 'done']


# ---------------------------------------------------------------- results and caches

@pytest.mark.parametrize('text, expected', [
    ('', 0),
    (RESULT_LINE + '\n', 1),
    (RESULT_LINE + '\n' + RESULT_LINE, 2),
    (RESULT_LINE + '\n\n' + RESULT_LINE + '\n\n', 2),
])
def test_count_lines(tmp_path, text, expected):
    path = tmp_path / 'mix.jsonl'
    path.write_text(text)
    assert count_lines(str(path)) == expected


def test_count_lines_counts_a_record_cut_inside_a_character(tmp_path):
    # A client killed while it writes leaves a last line that may end inside a UTF-8 character.
    path = tmp_path / 'mix.jsonl'
    path.write_bytes((RESULT_LINE + '\n').encode() + '{"generated_text": "caf\u00e9'.encode()[:-1])
    assert count_lines(str(path)) == 2


def test_count_lines_of_a_missing_or_unset_file(tmp_path):
    assert count_lines(str(tmp_path / 'missing.jsonl')) == 0
    assert count_lines(None) == 0


def test_watch_dirs_are_measured_in_bytes_and_files(tmp_path):
    (tmp_path / 'jit' / 'kernels').mkdir(parents=True)
    (tmp_path / 'jit' / 'a.so').write_bytes(b'x' * 100)
    (tmp_path / 'jit' / 'kernels' / 'b.so').write_bytes(b'x' * 250)
    assert dir_signature([str(tmp_path / 'jit'), str(tmp_path / 'missing')]) == [350, 2]


def test_a_file_gone_before_it_is_measured_skips_only_that_file(tmp_path, monkeypatch):
    # A JIT cache is written while it is measured: a file listed may be gone by its lstat.
    (tmp_path / 'jit').mkdir()
    for name in ('a.so', 'b.so', 'c.so'):
        (tmp_path / 'jit' / name).write_bytes(b'x' * 100)
    real_lstat = os.lstat
    gone = []

    def lstat(path, *args, **kwargs):
        if not gone:
            gone.append(path)
            raise FileNotFoundError(2, 'No such file or directory', path)
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, 'lstat', lstat)
    assert dir_signature([str(tmp_path / 'jit')]) == [200, 2]
    assert len(gone) == 1
