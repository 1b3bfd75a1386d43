"""Extract the text templates of every line a released SGLang can print, from its wheel.

    pip download --no-deps sglang==0.5.15.post1 -d /tmp/w
    python3 tests/rehearsal/sglang_lines/extract.py /tmp/w/sglang-0.5.15.post1-*.whl

writes ``tests/rehearsal/sglang_lines/sglang-0.5.15.post1.jsonl`` (or ``-o PATH``): a header
line (version, the wheel's file name and sha256, this command) and then one line per
template. The same for Infera from a vendored tarball:

    python3 tests/rehearsal/sglang_lines/extract.py ../shared/vendor/amd-infera-v0.1.1.tar.gz

writes ``infera-v0.1.1.jsonl``. Each template is ``{"kind", "file", "line", "parts"}``. ``parts`` alternates literal text with
placeholders, each a one-letter class: ``"s"`` any text, ``"d"`` an integer, ``"f2"`` a
number with 2 decimals. The kinds:

- ``log``: the message of a ``logger.<level>(...)`` / ``logging.<level>(...)`` call, the
  ``warning_once`` / ``info_once`` levels (transformers' Logger methods) included (f-strings,
  ``%`` with the call's own arguments, ``+``, implicit concatenation, ``.format``);
- ``print``: the text of a ``print(...)`` call (its arguments joined by ``sep`` when they are
  strings, else one placeholder each);
- ``raise``: the message of ``raise SomeError(<text>)`` or ``assert cond, <text>``, what a
  traceback's last line shows after ``SomeError: ``;
- ``bar``: a tqdm progress bar: the ``desc=`` text or ``.set_description(...)`` text;
- ``bar_format``: a tqdm ``bar_format=``, its first placeholder the description.

A message first built in a local variable (``msg = ...``, maybe then ``msg += ...``) and then
logged or raised gives one template per form it can take (each value assigned, alone and with
each addition); a message from any other variable (a parameter, an attribute) has no template
and is left out; so is a module-level string constant that only feeds another line (the
constant's text is inlined where a line names it in the same file). Standard library only: it reads the wheel
as a zip and parses each module with ``ast``, so nothing of SGLang is imported or run.
"""

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import tarfile
import zipfile

# Not run by an LLM server or its benchmark client: the diffusion server, SGLang's own tests,
# the kernel JIT helpers, the frontend language and the evals.
SKIPPED = ("sglang/multimodal_gen/", "sglang/test/", "sglang/jit_kernel/", "sglang/lang/",
           "sglang/eval/")
LOG_HELPER = re.compile(r"print_\w*(?:warning|info|error)\w*|log_info_on_rank0")
BY_NAME = ""  # the key of {constant name: [modules defining it]} beside the modules
LOG_LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal",
              "warning_once", "info_once"}
HERE = os.path.dirname(os.path.abspath(__file__))
# %-style conversions: %s %r %d %i %.2f %5.1f %%.
PERCENT = re.compile(r"%(?:\((\w+)\))?[-+ #0]*(\d+|\*)?(?:\.(\d+))?([diouxXeEfFgGcrsa%])")
# str.format fields: {}, {0}, {name}, {name:.2f}, {{ and }}.
FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{([^{}:!]*)(?:![rsa])?(?::([^{}]*))?\}")


def placeholder(spec):
    """The class of a formatted value from its format spec (``.2f``, ``d``, ``3.0f``...)."""
    match = re.fullmatch(r"[^.]*\.(\d+)f", spec or "")
    if match:
        return "f" + match.group(1)
    if spec and spec[-1:] == "d" and re.fullmatch(r"[<>^=]?[+\- ]?,?\d*d", spec):
        return "d"
    return "s"


class Template:
    """A list of parts: str for literal text, Hole(cls) for a placeholder."""

    def __init__(self, parts=()):
        self.parts = []
        for part in parts:
            self.add(part)

    def add(self, part):
        if isinstance(part, Template):
            for inner in part.parts:
                self.add(inner)
        elif isinstance(part, str):
            if part == "":
                return
            if self.parts and isinstance(self.parts[-1], str):
                self.parts[-1] += part
            else:
                self.parts.append(part)
        else:
            self.parts.append(part)
        return self

    def literal(self):
        return "".join(part for part in self.parts if isinstance(part, str))

    def only_literal(self):
        return all(isinstance(part, str) for part in self.parts)

    def to_json(self):
        return [part if isinstance(part, str) else [part.cls] for part in self.parts]


class Hole:
    def __init__(self, cls="s"):
        self.cls = cls


def split_literal(text, pattern, hole_for):
    """A literal that is itself a format string (``%``-style or ``.format``) as a Template."""
    template = Template()
    last = 0
    for match in pattern.finditer(text):
        template.add(text[last:match.start()])
        template.add(hole_for(match))
        last = match.end()
    template.add(text[last:])
    return template


def percent_hole(match):
    if match.group(4) == "%":
        return "%"
    if match.group(4) in "diu":
        return Hole("d")
    if match.group(4) == "f" and match.group(3) is not None:
        return Hole("f" + match.group(3))
    return Hole("s")


def format_hole(match):
    if match.group(0) in ("{{", "}}"):
        return match.group(0)[0]
    return Hole(placeholder(match.group(2)))


def module_name(path):
    """``sglang/srt/utils/common.py`` -> ``sglang.srt.utils.common`` (a package: its __init__)."""
    name = path[:-3].replace("/", ".")
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def module_constants(tree, resolve_names):
    """Module-level ``NAME = "text"`` (or a parenthesised concatenation) as literal Templates."""
    constants = {}
    reader = Extractor.__new__(Extractor)
    reader.constants = resolve_names
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            value = reader.text(node.value, resolve=False)
            if value is not None and value.only_literal():
                constants[node.targets[0].id] = value
    return constants


def imported_constants(tree, everywhere):
    """The names a module imports (``from sglang.x import NAME [as ALIAS]``, anywhere in it)
    that are string constants of another module of the wheel."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                value = everywhere.get(node.module, {}).get(alias.name)
                if value is None:
                    # A package that re-exports its submodules' names (``from .common import *``).
                    value = next((everywhere[module][alias.name]
                                  for module in everywhere.get(BY_NAME, {}).get(alias.name, ())
                                  if module.startswith(node.module + ".")), None)
                if value is not None:
                    found[alias.asname or alias.name] = value
    return found


class Extractor(ast.NodeVisitor):
    def __init__(self, path, tree, everywhere):
        self.path = path
        self.found = []
        # String constants, inlined where a line names them: the module's own and those it
        # imports from other modules of the wheel (e.g. an advice text under an error).
        self.constants = {**imported_constants(tree, everywhere),
                          **everywhere.get(module_name(path), {})}
        self.local = {}
        self.visit(tree)

    # ------------------------------------------------------------ expressions to templates

    def text(self, node, resolve=True):
        """The template of a string expression, or None when it is not text we can know."""
        if isinstance(node, ast.Constant):
            return Template([node.value]) if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            template = Template()
            for value in node.values:
                if isinstance(value, ast.Constant):
                    template.add(value.value)
                elif resolve and isinstance(value.value, ast.Name) and value.format_spec is None \
                        and value.value.id in self.constants:
                    template.add(self.constants[value.value.id])
                else:
                    spec = value.format_spec
                    spec_text = None
                    if isinstance(spec, ast.JoinedStr) and all(
                            isinstance(item, ast.Constant) for item in spec.values):
                        spec_text = "".join(item.value for item in spec.values)
                    template.add(Hole(placeholder(spec_text)))
            return template
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.text(node.left, resolve), self.text(node.right, resolve)
            if left is None and right is None:
                return None
            return Template([left or Hole(), right or Hole()])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self.text(node.left, resolve)
            if left is None or not left.only_literal():
                return None
            return split_literal(left.literal(), PERCENT, percent_hole)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "format":
            base = self.text(node.func.value, resolve)
            if base is None or not base.only_literal():
                return None
            constants = list(node.args) + [keyword.value for keyword in node.keywords]
            if all(isinstance(arg, ast.Constant) for arg in constants) and \
                    all(keyword.arg for keyword in node.keywords):
                # Every value is known: the text itself ("\n{s:{c}^{n}}".format(s=..., c="=", n=50)).
                try:
                    return Template([base.literal().format(
                        *[arg.value for arg in node.args],
                        **{keyword.arg: keyword.value.value for keyword in node.keywords})])
                except (IndexError, KeyError, ValueError):
                    pass
            return split_literal(base.literal(), FORMAT_FIELD, format_hole)
        if resolve and isinstance(node, ast.Name) and node.id in self.constants:
            return self.constants[node.id]
        return None

    def keep(self, kind, node, template):
        if template is None or not template.literal().strip():
            return
        self.found.append({"kind": kind, "file": self.path, "line": node.lineno,
                           "parts": template.to_json()})

    # ------------------------------------------------------------ the calls that print

    def visit_Call(self, node):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if name and LOG_HELPER.fullmatch(name) and not owner and node.args:
            # SGLang's logging helpers: print_warning_once(msg), print_deprecated_warning(msg),
            # log_info_on_rank0(logger, msg).
            message = node.args[1] if name.startswith("log_") and len(node.args) > 1 else node.args[0]
            self.keep("log", node, self.text(message))
        elif name in LOG_LEVELS and "log" in owner.lower() and node.args:
            for message in self.messages(node.args[0]):
                if message is not None and len(node.args) > 1 and message.only_literal():
                    message = split_literal(message.literal(), PERCENT, percent_hole)
                self.keep("log", node, message)
        elif name and name.endswith(("Error", "Exception")) and node.args:
            # An exception built here, raised here or returned to be raised elsewhere
            # (``return RuntimeError(f"...")``): its message ends a traceback.
            for message in self.messages(node.args[0]):
                self.keep("raise", node, message)
        elif name == "print" and not owner:
            self.keep("print", node, self.print_text(node))
        elif name == "set_description" and node.args:
            self.keep("bar", node, self.text(node.args[0]))
        elif name == "tqdm":
            for keyword in node.keywords:
                if keyword.arg == "desc":
                    self.keep("bar", node, self.text(keyword.value))
                if keyword.arg == "bar_format":
                    self.keep("bar_format", node, self.bar_format(keyword.value))
        self.generic_visit(node)

    def bar_format(self, node):
        """A tqdm ``bar_format`` as a template whose first placeholder is the description
        (tqdm/std.py format_meter: ``{l_bar}`` is ``{desc}: {percentage:3.0f}%|``, ``{r_bar}``
        is ``| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]``)."""
        text = self.text(node)
        if text is None or not text.only_literal():
            return None
        expanded = text.literal().replace("{l_bar}", "{desc}: {percentage:3.0f}%|").replace(
            "{r_bar}", "| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]")
        if not expanded.startswith("{desc}"):
            return None
        return split_literal(expanded, FORMAT_FIELD, format_hole)

    def print_text(self, node):
        sep = " "
        for keyword in node.keywords:
            if keyword.arg == "sep":
                sep_text = self.text(keyword.value)
                if sep_text is None or not sep_text.only_literal():
                    return None
                sep = sep_text.literal()
        template = Template()
        for index, arg in enumerate(node.args):
            if index:
                template.add(sep)
            if isinstance(arg, ast.Starred):
                template.add(Hole())
                continue
            template.add(self.text(arg) or Hole())
        return template

    def visit_Raise(self, node):
        exc = node.exc
        # ``raise SomeError(text)`` is kept by visit_Call; here a class whose name says less.
        if isinstance(exc, ast.Call) and exc.args and not (
                getattr(exc.func, "id", getattr(exc.func, "attr", "")) or "").endswith(
                    ("Error", "Exception")):
            for message in self.messages(exc.args[0]):
                self.keep("raise", node, message)
        self.generic_visit(node)

    def visit_Assert(self, node):
        # ``assert cond, "text"``: the traceback ends ``AssertionError: text``.
        if node.msg is not None:
            self.keep("raise", node, self.text(node.msg))
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        # A message built in a local variable first: ``msg = "..."``, ``msg += f"..."``; each
        # value the name is given is a form of its own, each ``+=`` an addition to any of them.
        saved = self.local
        self.local = {}
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assign) and len(inner.targets) == 1 \
                    and isinstance(inner.targets[0], ast.Name):
                value = self.text(inner.value)
                if value is not None:
                    self.local.setdefault(inner.targets[0].id, ([], []))[0].append(value)
            elif isinstance(inner, ast.AugAssign) and isinstance(inner.op, ast.Add) \
                    and isinstance(inner.target, ast.Name) and inner.target.id in self.local:
                value = self.text(inner.value)
                if value is not None:
                    self.local[inner.target.id][1].append(value)
        self.generic_visit(node)
        self.local = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def messages(self, node):
        """The texts an argument can hold: its template, or for a local variable each value it
        is given, alone and with each ``+=`` it may get."""
        if isinstance(node, ast.Name) and node.id in self.local:
            values, additions = self.local[node.id]
            forms, seen = [], set()
            for form in values + [Template([value, addition]) for value in values
                                  for addition in additions]:
                key = json.dumps(form.to_json())
                if key not in seen:
                    seen.add(key)
                    forms.append(form)
            return forms
        return [self.text(node)]


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_wheel(wheel):
    """(version, {path: source}) of SGLang's modules in its wheel."""
    version, sources = None, {}
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if name.endswith("/METADATA") and ".dist-info/" in name:
                for line in archive.read(name).decode().splitlines():
                    if line.startswith("Version: "):
                        version = line.split(": ", 1)[1]
            if name.endswith(".py") and name.startswith("sglang/") \
                    and not name.startswith(SKIPPED):
                sources[name] = archive.read(name).decode("utf-8")
    return version, sources


def read_infera(tarball):
    """(tag, {path: source}) of Infera's package in a vendored ``git archive`` tarball
    (``amd-infera-<tag>.tar.gz``, one top folder)."""
    tag = os.path.basename(tarball)[len("amd-infera-"):-len(".tar.gz")]
    sources = {}
    with tarfile.open(tarball) as archive:
        for member in sorted(archive.getmembers(), key=lambda item: item.name):
            inner = member.name.split("/", 1)[-1]
            if member.isfile() and inner.startswith("infera/") and inner.endswith(".py"):
                sources[inner] = archive.extractfile(member).read().decode("utf-8")
    return tag, sources


def extract_sources(sources):
    trees = {}
    for name, source in sources.items():
        try:
            trees[name] = ast.parse(source, filename=name)
        except SyntaxError:
            continue
    everywhere = {}
    for _round in range(2):  # a constant built from an imported constant needs a second round
        everywhere = {module_name(name): module_constants(
            tree, {**imported_constants(tree, everywhere), **everywhere.get(module_name(name), {})})
            for name, tree in trees.items()}
        by_name = {}
        for module, names in sorted(everywhere.items()):
            for constant in names:
                by_name.setdefault(constant, []).append(module)
        everywhere[BY_NAME] = by_name
    entries = []
    for name, tree in trees.items():
        entries.extend(Extractor(name, tree, everywhere).found)
    return entries


def extract(path):
    """(header, entries, output name) for an SGLang wheel or a vendored Infera tarball."""
    if path.endswith(".tar.gz"):
        version, sources = read_infera(path)
        product = "infera"
        command = "python3 tests/rehearsal/sglang_lines/extract.py ../shared/vendor/%s" % (
            os.path.basename(path))
    else:
        version, sources = read_wheel(path)
        product = "sglang"
        command = ("pip download --no-deps sglang==%s -d /tmp/w && python3 "
                   "tests/rehearsal/sglang_lines/extract.py /tmp/w/%s"
                   % (version, os.path.basename(path)))
    entries = extract_sources(sources)
    header = {product: version, "source": os.path.basename(path), "sha256": sha256_of(path),
              "templates": len(entries), "command": command}
    return header, entries, "%s-%s.jsonl" % (product, version)


def record_sha256(output):
    """Keep SHA256SUMS (``sha256  name`` per extract) in step with the extract just written."""
    sums_path = os.path.join(HERE, "SHA256SUMS")
    sums = {}
    if os.path.exists(sums_path):
        with open(sums_path, encoding="utf-8") as handle:
            sums = dict(line.split()[::-1] for line in handle if line.strip())
    sums[os.path.basename(output)] = sha256_of(output)
    with open(sums_path, "w", encoding="utf-8") as handle:
        for name in sorted(sums):
            handle.write("%s  %s\n" % (sums[name], name))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("source", help="an sglang wheel or a vendored amd-infera-<tag>.tar.gz")
    parser.add_argument("-o", "--output")
    args = parser.parse_args(argv)
    header, entries, name = extract(args.source)
    output = args.output or os.path.join(HERE, name)
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(header, sort_keys=True) + "\n")
        for entry in entries:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
    if os.path.dirname(os.path.abspath(output)) == HERE:
        record_sha256(output)
    print("%s: %d templates from %s (sha256 %s)"
          % (output, len(entries), header["source"], header["sha256"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
