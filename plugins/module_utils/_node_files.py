# -*- coding: utf-8 -*-
# SPDX-License-Identifier: Apache-2.0

# This module util is PRIVATE to the infera.serving collection; it may change at any time.

"""Files the waits read on the node: exit and pid files, logs (tail and incremental reads), jsonl lines, dir sizes.

A log's tail is kept as a terminal shows it: a progress bar that tqdm redraws with carriage
returns is one line, its last redraw.
"""

from __future__ import annotations

import os
import re
import time

# The launch wrappers write `echo $? >FILE`: the shell creates the file a moment before the code is in it.
EXIT_CODE_GRACE = 2.0
TAIL_LINES = 30
MAX_LINE_CHARS = 1000

_READ_CHUNK = 1 << 20
_TAIL_BYTES = 256 * 1024
# A result file larger than this is fetched, not carried in a module result (small_text).
RETURN_LIMIT = 4 << 20


# ---------------------------------------------------------------- exit and pid files

def read_exit_code(path):
    """Return the int in an exit file, or None when it is missing or holds no code (yet)."""
    try:
        with open(path, 'r', errors='replace') as handle:
            text = handle.read(100).strip()
    except OSError:
        return None
    return int(text) if re.match(r'^-?\d+$', text) else None


def wait_for_exit_code(path, grace=EXIT_CODE_GRACE, clock=None, sleep=None):
    """The code in an exit file that has appeared, waiting up to grace seconds for it (every 0.1 s, on clock and
    sleep, which the unit tests inject; this module's time when not given, looked up at the call); None if none
    comes."""
    clock, sleep = clock or time.time, sleep or time.sleep
    give_up_at = clock() + grace
    code = read_exit_code(path)
    while code is None and clock() < give_up_at:
        sleep(0.1)
        code = read_exit_code(path)
    return code


def read_pid(pid_file):
    """The pid in pid_file, or None when it cannot be read or holds no pid."""
    # The wrapper may not have written it yet: an unreadable pid file says nothing.
    try:
        with open(pid_file, 'r') as handle:
            text = handle.read(32).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


# ---------------------------------------------------------------- logs

def new_reading(offset=0):
    """Where a reader of a growing log stands: the next byte to read and the tail so far.

    Plain JSON values, so a caller can keep them in its state file (or in the state itself).
    """
    return {'read_offset': offset, 'tail': [], 'tail_open': False, 'partial': ''}


def read_on(path, reading, on_text=None):
    """Read what path gained past reading['read_offset'] and add it to the tail.

    on_text(text) is called with each line, and with each carriage-return segment of a redrawn
    line, in order. The unfinished last line is passed now (tqdm's newest count lives there) and
    again once it is complete, because the next read starts at it.
    """
    partial = b''
    with open(path, 'rb') as handle:
        handle.seek(reading['read_offset'])
        while True:
            data = handle.read(_READ_CHUNK)
            if not data:
                break
            end = _complete_end(data)
            if end == 0 and len(data) == _READ_CHUNK:
                # One unterminated line longer than a chunk: take it whole rather than never advance.
                end = len(data)
            _consume(reading, data[:end], on_text)
            reading['read_offset'] += end
            handle.seek(reading['read_offset'])
            partial = data[end:]
            if len(data) < _READ_CHUNK:
                break
    _hold_partial(reading, partial, on_text)


def tail_lines(reading):
    """The last TAIL_LINES lines read, with the unfinished one as a terminal shows it."""
    lines = list(reading['tail'])
    if reading['partial']:
        # After a carriage return the unfinished text redraws the last line, as on a terminal.
        if reading['tail_open'] and lines:
            lines[-1] = reading['partial']
        else:
            lines.append(reading['partial'])
    return lines[-TAIL_LINES:]


def log_tail(path):
    """The last TAIL_LINES lines of path as a terminal shows them; [] when path is unset or unreadable.

    Only the last 256 KiB are read, so a huge log costs no more than a small one.
    """
    if not path:
        return []
    try:
        with open(path, 'rb') as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(size - _TAIL_BYTES, 0)
            handle.seek(start)
            data = handle.read()
    except OSError:
        return []
    if start > 0:
        # What comes before the first line break is the cut-off end of a longer line.
        data = data[data.find(b'\n') + 1:] if b'\n' in data else b''
    reading = new_reading()
    end = _complete_end(data)
    _consume(reading, data[:end], None)
    _hold_partial(reading, data[end:], None)
    return tail_lines(reading)


def _complete_end(data):
    """How many bytes of data end in a line terminator (a newline, or a carriage return that redraws)."""
    return max(data.rfind(b'\n'), data.rfind(b'\r')) + 1


def _consume(reading, complete, on_text):
    """Pass on bytes that end in a line terminator; keep the tail as a terminal would show it."""
    pieces = complete.split(b'\n')
    ends_open = not complete.endswith(b'\n')
    if not ends_open:
        pieces.pop()
    tail = reading['tail']
    # Whether the last line of the tail is still being redrawn (its newline has not come yet).
    open_entry = reading['tail_open']
    for index, piece in enumerate(pieces):
        shown = None
        for segment in piece.split(b'\r'):
            text = segment.decode('utf-8', 'replace').rstrip()
            if text:
                if on_text:
                    on_text(text)
                shown = text[:MAX_LINE_CHARS]
        # tqdm redraws one line with carriage returns; only the first piece can continue the tail's open line.
        continues = index == 0 and open_entry and tail
        if shown is not None:
            if continues:
                tail[-1] = shown
            else:
                tail.append(shown)
        open_entry = bool(shown is not None or continues)
    reading['tail_open'] = ends_open and open_entry
    del tail[:-TAIL_LINES]


def _hold_partial(reading, partial, on_text):
    text = partial.decode('utf-8', 'replace').rstrip()
    if text and on_text:
        on_text(text)
    reading['partial'] = text[:MAX_LINE_CHARS]


# ---------------------------------------------------------------- results and caches

def count_lines(path):
    """Non-blank lines in path (one jsonl record each); 0 when there is no such file."""
    if not path:
        return 0
    try:
        with open(path, 'rb') as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0


def small_text(path, limit=None):
    """The text of path when it is at most limit bytes of valid UTF-8, else None (missing, larger or not text).

    Returned to the controller in a module result, the text is the file byte for byte once it is encoded again; a
    file that could not make that trip is left to a fetch. limit defaults to RETURN_LIMIT.
    """
    limit = RETURN_LIMIT if limit is None else limit
    try:
        with open(path, 'rb') as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        return None


def dir_signature(paths):
    """Total bytes and file count under paths; a missing directory counts as empty."""
    total = files = 0
    for root in paths:
        for directory, _subdirs, names in os.walk(root):
            for name in names:
                try:
                    info = os.lstat(os.path.join(directory, name))
                except OSError:
                    continue
                total += info.st_size
                files += 1
    return [total, files]
