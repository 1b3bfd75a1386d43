"""Which lines a released SGLang (and what runs under it) can print: templates as regexes.

The templates come from two places, never from memory:
- ``sglang-<version>.jsonl``: extracted from that version's wheel by ``extract.py`` (its
  header names the wheel, its sha256 and the command that regenerates it);
- ``other_sources.json``: the few lines a SGLang log holds that SGLang does not write (the HIP
  runtime's fault lines, PyTorch's out-of-memory error, uvicorn's, tqdm's bar, Python's
  traceback), each with the project, file and version it was read in.

``Catalog(version).unmatched(text)`` splits an engine log into records and returns those no
template of that version accounts for. A record is one of:
- a line with SGLang's logging prefix (``configure_logger``: ``[%(asctime)s{prefix}] %(message)s``,
  datefmt ``%Y-%m-%d %H:%M:%S``, the scheduler's rank prefix `` DP<d> PP<d> ATTN_CP<d> MOE_DP<d>
  TP<d> EP<d>`` in that order, each only where that size is > 1), whose message must match a
  ``log`` template, together with the lines that follow it and are not records of their own
  (a message with newlines, such as a traceback);
- a line without the prefix: a tqdm bar (a ``bar`` description in one of the bar formats),
  a ``print`` template, or one of the other sources' lines.
Lines holding ``[simulated]`` are the simulator's own, labelled as such, and are left out.
"""

import json
import os
import re
from functools import lru_cache

HERE = os.path.dirname(os.path.abspath(__file__))
SIMULATED = "[simulated]"
# SGLang's logging prefix (sglang/srt/utils/common.py configure_logger; the rank prefix is
# built in sglang/srt/managers/scheduler.py run_scheduler_process, in this order).
PREFIX = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?"
    r"(?: DP\d+)?(?: PP\d+)?(?: ATTN_CP\d+)?(?: MOE_DP\d+)?(?: TP\d+)?(?: EP\d+)?\] ")
# A template needs this many letters of literal text to count (see weak()).
MIN_LETTERS = 8
HOLES = {"s": r".*?", "d": r"\s*-?\d+"}
# Python's traceback (CPython 3.11 Lib/traceback.py: _cause_message, _context_message,
# StackSummary.format_frame_summary with its caret lines).
TRACEBACK_HEAD = "Traceback (most recent call last):"
CHAINING = ("During handling of the above exception, another exception occurred:",
            "The above exception was the direct cause of the following exception:")
# The end of a tqdm bar: "| 7/19 [00:05<00:10,  1.20it/s]" (the default r_bar and SGLang's BAR_FORMAT).
BAR_END = re.compile(r".*?\| ?\d+/\d+ \[[^\]]*\]")
# Colour codes some warnings carry (sglang/srt/arg_groups/argparse_actions.py
# print_deprecated_warning wraps its message in bold yellow).
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FRAME_LINE = re.compile(r'  File "[^"]+", line \d+, in \S+$|    \S.*$|\s+[~^]+$')


def supported_versions():
    """The SGLang versions with an extract here, oldest first."""
    names = [name[len("sglang-"):-len(".jsonl")] for name in os.listdir(HERE)
             if name.startswith("sglang-") and name.endswith(".jsonl")]
    return sorted(names, key=lambda version: [int(part) if part.isdigit() else part
                                              for part in re.split(r"[.]", version)])


def hole(cls):
    if cls in HOLES:
        return HOLES[cls]
    if cls.startswith("f"):
        decimals = int(cls[1:])
        return r"\s*-?(?:\d+%s|nan|inf)" % (r"\.\d{%d}" % decimals if decimals else "")
    raise ValueError("unknown placeholder class %r" % cls)


def to_regex(parts, named_first_hole=False):
    """The parts of a template as one regex (placeholders may span lines)."""
    pieces = []
    named = not named_first_hole
    for part in parts:
        if _is_hole(part):
            part = part[0]
            if not named:
                pieces.append(r"(?P<desc>.*?)")
                named = True
            else:
                pieces.append(hole(part))
        else:
            pieces.append(re.escape(part))
    return re.compile("".join(pieces), re.DOTALL)


def read_extract(path):
    with open(path, encoding="utf-8") as handle:
        header = json.loads(handle.readline())
        entries = [json.loads(line) for line in handle if line.strip()]
    return header, entries


class _Traceback:
    kind = "traceback"
    source = "CPython 3.11 Lib/traceback.py"


TRACEBACK = _Traceback()


class Template:
    def __init__(self, kind, source, parts, named_first_hole=False):
        self.kind = kind
        self.source = source
        self.parts = parts
        self.regex = to_regex(parts, named_first_hole)
        literals = [part for part in parts if not _is_hole(part)]
        # The longest literal must appear in any text the template matches: a cheap filter.
        self.anchor = max(literals, key=len) if literals else ""
        self.multiline = any("\n" in literal for literal in literals)

    def matches(self, text):
        return self.anchor in text and self.regex.fullmatch(text) is not None

    def __repr__(self):
        return "%s %s %r" % (self.kind, self.source, self.parts)


def weak(parts):
    """A template with fewer than MIN_LETTERS letters of its own text."""
    letters = "".join(part for part in parts if not _is_hole(part))
    return len(re.sub(r"[^A-Za-z]", "", letters)) < MIN_LETTERS


def _is_hole(part):
    """A placeholder is a list of its one class (["s"], ["d"], ["f2"]); literal text is a string."""
    return isinstance(part, list)


class Catalog:
    """Every template of one SGLang version and the other sources' lines."""

    def __init__(self, version):
        self.version = version
        self.header, entries = read_extract(os.path.join(HERE, "sglang-%s.jsonl" % version))
        by_kind = {}
        self.weak = []
        for entry in entries:
            if weak(entry["parts"]):
                # "{}: {}" and its like match nearly any text: they prove nothing of a line.
                self.weak.append(entry)
                continue
            source = "%s:%d" % (entry["file"], entry["line"])
            by_kind.setdefault(entry["kind"], []).append(Template(
                entry["kind"], source, entry["parts"],
                named_first_hole=entry["kind"] == "bar_format"))
        with open(os.path.join(HERE, "other_sources.json"), encoding="utf-8") as handle:
            others = json.load(handle)
        for entry in others["lines"]:
            by_kind.setdefault(entry["kind"], []).append(Template(
                entry["kind"], entry["source"], entry["parts"],
                named_first_hole=entry["kind"] == "bar_format"))
        self.by_kind = by_kind

    def templates(self, *kinds):
        return [template for kind in kinds for template in self.by_kind.get(kind, ())]

    def match(self, record):
        """The template that accounts for one record, or None."""
        text = record["text"]
        if text == TRACEBACK_HEAD or text.startswith(TRACEBACK_HEAD + "\n"):
            # An uncaught exception's traceback, printed by Python itself.
            return TRACEBACK if self.traceback_ok(text) else None
        if record["prefixed"]:
            template = self._first(self.templates("log"), text)
            if template is not None and TRACEBACK_HEAD in text and not self.traceback_ok(text):
                return None
            return template
        for bar_format in self.templates("bar_format"):
            found = bar_format.regex.fullmatch(text) if bar_format.anchor in text else None
            if found and self._first(self.templates("bar"), found.group("desc")):
                return bar_format
        # A line logged before SGLang configures logging has no prefix (logging's last-resort
        # handler writes the message alone).
        return self._first(self.templates("print", "raw", "log"), text)

    def traceback_ok(self, text):
        """Every exception a logged traceback ends with (and every one it chains) carries a
        message some ``raise`` of this version (or an ``exception`` of another source) writes;
        its other lines are Python's own (frames, source lines, carets, chaining lines)."""
        lines = text[text.index(TRACEBACK_HEAD):].split("\n")
        exception = None
        for line in lines + [TRACEBACK_HEAD]:
            if line == TRACEBACK_HEAD or line in CHAINING:
                if exception is not None and not self._exception_ok(exception):
                    return False
                exception = None
            elif exception is not None:
                exception.append(line)
            elif not FRAME_LINE.match(line):
                exception = [line]
        return True

    def _exception_ok(self, lines):
        name, _colon, message = "\n".join(lines).partition(": ")
        if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
            return False
        # A message ends with the newline its raise wrote, or without: both print the same.
        return any(self._first(self.templates(kind), candidate)
                   for kind in ("raise", "exception")
                   for candidate in (message, message + "\n"))

    def _multiline(self, text):
        """Whether a template that writes a newline of its own (a message of several lines)
        accounts for the text so far: only such a message takes in the lines after it."""
        return any(template.multiline and template.regex.match(text) for template in
                   self.templates("log"))

    @staticmethod
    def _first(templates, text):
        for template in templates:
            if template.matches(text):
                return template
        return None

    def records(self, log_text):
        """The records of a log (see the module's docstring), in order."""
        records = []
        for line in self.segments(log_text):
            if not line.strip() or SIMULATED in line:
                continue
            line = ANSI.sub("", line)
            prefix = PREFIX.match(line)
            if prefix:
                records.append({"prefixed": True, "absorbs": True, "text": line[prefix.end():],
                                "lines": [line]})
                continue
            record = {"prefixed": False, "absorbs": line == TRACEBACK_HEAD, "text": line,
                      "lines": [line]}
            last = records[-1] if records else None
            in_traceback = last is not None and TRACEBACK_HEAD in last["text"] and (
                line != TRACEBACK_HEAD or last["lines"][-1] in CHAINING)
            if last is not None and last["absorbs"] and (
                    in_traceback or (line != TRACEBACK_HEAD and self.match(record) is None
                                     and self._multiline(last["text"] + "\n" + line))):
                # A line of a message with newlines: a traceback runs to the next logged line;
                # any other line belongs to the message unless it stands on its own as a line
                # of another source.
                records[-1]["text"] += "\n" + line
                records[-1]["lines"].append(line)
                continue
            records.append(record)
        return records

    @staticmethod
    def segments(log_text):
        """The log's lines, split at ``\r`` too (tqdm's refreshes), and split again where a
        logged line starts in the middle of one (a bar left open by a failure: logging writes
        no newline before its record)."""
        for line in re.split(r"\r\n|\r|\n", log_text):
            open_bar = BAR_END.match(line)
            if open_bar and open_bar.end() < len(line):
                # A bar left open, and a line another writer (the HIP runtime) put after it.
                yield line[:open_bar.end()]
                line = line[open_bar.end():]
            starts = [found.start() for found in PREFIX.finditer(line)] or [0]
            for begin, end in zip([0] + starts, starts + [len(line)]):
                if line[begin:end]:
                    yield line[begin:end]

    def unmatched(self, log_text):
        """The records of a log that no template accounts for (an empty list: all real)."""
        return [record for record in self.records(log_text) if self.match(record) is None]


@lru_cache(maxsize=None)
def catalog(version):
    return Catalog(version)
