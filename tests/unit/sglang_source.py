# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang 0.5.23's own source, read with ``ast`` (never imported): the oracle for what the collection and its
simulator believe SGLang prints, answers and decides.

The package lies in the venv made by ``tests/lab/bin/make-sglang-venv .cache/sglang-venv`` (``make setup`` makes it),
or the one whose interpreter $LLMOPS_SGLANG_PYTHON names. Without it the tests that need it fail, naming the fix:
a missing oracle is an error, never a skip.
"""

import ast
import functools
import glob
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECKED_RELEASE = "0.5.23"
# %s, %d, %.2f and logging's %(name)s
_PERCENT_RE = re.compile(r"%(?:\([^)]*\))?(?:\.(\d+))?([sdrf])")


def python():
    """The interpreter of the venv holding the real SGLang."""
    path = os.environ.get("LLMOPS_SGLANG_PYTHON") or str(ROOT / ".cache" / "sglang-venv" / "bin" / "python")
    if not os.path.exists(path):
        pytest.fail("no SGLang interpreter at %s: run make setup (tests/lab/bin/make-sglang-venv .cache/sglang-venv) "
                    "or set LLMOPS_SGLANG_PYTHON" % path)
    return path


def python_env(path):
    """Environment for running SGLang's model-config code with ``path``: make-sglang-venv keeps the torchvision those
    imports need beside the venv (a CUDA torchvision cannot load next to the CPU torch), or None."""
    no_ops = os.path.join(os.path.dirname(os.path.dirname(path)), "torchvision-no-ops")
    return {"PYTHONPATH": no_ops} if os.path.isdir(no_ops) else None


def srt_dir():
    """sglang/srt of the installed SGLang 0.5.23."""
    venv = pathlib.Path(python()).parents[1]
    found = sorted(glob.glob(str(venv / "lib" / "python3*" / "site-packages" / "sglang")))
    if not found:
        pytest.fail("no SGLang package under %s: run make setup (tests/lab/bin/make-sglang-venv .cache/sglang-venv)" % venv)
    site = pathlib.Path(found[-1]).parent
    versions = [p.name[len("sglang-"):-len(".dist-info")] for p in site.glob("sglang-*.dist-info")]
    assert versions == [CHECKED_RELEASE], "these tests read SGLang %s; the venv holds %s" % (CHECKED_RELEASE, versions)
    return site / "sglang" / "srt"


@functools.lru_cache(maxsize=None)
def parse(path):
    return ast.parse(pathlib.Path(path).read_text(encoding="utf-8-sig"), filename=str(path))


def _placeholder(spec):
    """The regex a formatted value may print: digits for a fixed-point format, else anything."""
    if spec and re.fullmatch(r"\.\d+f", spec):
        return r"-?\d+\.\d{%s}" % spec[1:-1]
    return ".*?"


def string_regex(node):
    """The regex of what a string literal or f-string prints (%-placeholders of a plain string included), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        out, pos = [], 0
        for m in _PERCENT_RE.finditer(node.value):
            out.append(re.escape(node.value[pos:m.start()]))
            out.append(r"-?\d+" if m.group(2) == "d" else _placeholder(".%sf" % m.group(1) if m.group(1) else None))
            pos = m.end()
        return "".join(out) + re.escape(node.value[pos:])
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(re.escape(part.value))
            else:
                spec = part.format_spec
                spec = "".join(v.value for v in spec.values if isinstance(v, ast.Constant)) if spec is not None else None
                out.append(_placeholder(spec))
        return "".join(out)
    return None


def _message_chains(tree):
    """Messages built in a variable: ``msg = <string>`` then ``msg += <string>`` (each may be left out), in order."""
    chains = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        steps = sorted((n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))), key=lambda n: n.lineno)
        heads = {}
        for node in steps:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
            if not isinstance(target, ast.Name):
                continue
            regex = string_regex(node.value)
            if regex is None:
                continue
            if isinstance(node, ast.Assign):
                heads[target.id] = [regex]
                chains.append(heads[target.id])
            elif target.id in heads:
                heads[target.id].append(regex)
    return ["".join([chain[0]] + ["(?:%s)?" % piece for piece in chain[1:]]) for chain in chains if len(chain) > 1]


@functools.lru_cache(maxsize=None)
def message_regexes(path):
    """Compiled regexes of every string the file can print: its literals, f-strings and messages built in a variable."""
    tree = parse(path)
    found = set(filter(None, (string_regex(n) for n in ast.walk(tree))))
    found.update(_message_chains(tree))
    return tuple(re.compile(r) for r in sorted(found) if r.strip())


def printed_by(path, message):
    """Whether the file has a format string that prints exactly this message."""
    return any(r.fullmatch(message) for r in message_regexes(path))


# ----------------------------------------------------------------------------------------------
# SGLang 0.5.16, the release that ran on the H200: its Python source, unpacked by tests/lab/bin/fetch-sglang-source

RELEASE_0_5_16 = "0.5.16"


def srt_dir_0_5_16():
    """sglang/srt of SGLang 0.5.16's wheel (source only, never imported)."""
    base = ROOT / ".cache" / "sglang-0.5.16-source"
    versions = [p.name[len("sglang-"):-len(".dist-info")] for p in base.glob("sglang-*.dist-info")]
    if versions != [RELEASE_0_5_16] or not (base / "sglang" / "srt").is_dir():
        pytest.fail("no SGLang %s source under %s: run make setup (tests/lab/bin/fetch-sglang-source %s)"
                    % (RELEASE_0_5_16, base, base))
    return base / "sglang" / "srt"


# ----------------------------------------------------------------------------------------------
# Where a client value reaches a log call
#
# The rule, per function of sglang/srt: a name holds a client value when it is a parameter annotated with a
# request class (a class of managers/io_struct.py, the scheduler's Req, FastAPI's Request) or named recv_req, obj
# or raw_request, or when it is assigned or looped over from an expression using such a name in the same function.
# A site is a log call (logger.<level>, logging.<level>, print, or a function of the same file that hands its
# parameter to one, such as RequestLogger._log) or a raise of an exception (the HTTP server and
# the scheduler log the text of the exceptions a request raises) with an argument that uses a client name other
# than only through len(), int(), float(), bool(), type() or isinstance(). Its format is the first argument as
# written (ast.unparse); it writes the client value raw unless every client value is formatted with !r or %r.

LOG_METHODS = ("debug", "info", "warning", "warn", "error", "critical", "exception", "log")
LOGGER_NAMES = ("logger", "logging", "log")
CLIENT_PARAMS = ("recv_req", "obj", "raw_request")
_OPAQUE_CALLS = ("len", "int", "float", "bool", "type", "isinstance")


def _annotation_names(node):
    if node is None:
        return set()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return set(re.findall(r"\w+", node.value))
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def request_classes(srt):
    """Names of the request classes: the classes of managers/io_struct.py, the scheduler's Req, FastAPI's Request."""
    tree = parse(srt / "managers" / "io_struct.py")
    return frozenset(n.name for n in tree.body if isinstance(n, ast.ClassDef)) | {"Req", "Request"}


def _client_uses(node, tainted):
    """Whether node uses a client name other than only inside len(), int() and the like."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _OPAQUE_CALLS:
        return False
    if isinstance(node, ast.Name):
        return node.id in tainted
    return any(_client_uses(child, tainted) for child in ast.iter_child_nodes(node))


def _escaped(node, tainted):
    """Whether every client value in a log call's arguments is printed with repr (!r in an f-string, %r)."""
    fmt = node.args[0] if isinstance(node, ast.Call) and node.args else None
    if isinstance(fmt, ast.JoinedStr):
        fields = [v for v in fmt.values if isinstance(v, ast.FormattedValue) and _client_uses(v.value, tainted)]
        rest = [a for a in node.args[1:] if _client_uses(a, tainted)]
        return bool(fields) and not rest and all(v.conversion == ord("r") for v in fields)
    if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str):
        specs = re.findall(r"%[-#0 +\d.]*([sdrfgixX])", fmt.value)
        args = node.args[1:]
        used = [specs[i] for i, a in enumerate(args) if i < len(specs) and _client_uses(a, tainted)]
        return bool(used) and all(s in "rdfgixX" for s in used)
    return False


def _is_log_call(node):
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in LOG_METHODS and isinstance(f.value, ast.Name) and f.value.id in LOGGER_NAMES:
        return True
    return isinstance(f, ast.Name) and f.id == "print"


def _log_wrappers(tree):
    """Names of the file's functions that hand a parameter to a log call (RequestLogger._log: ``target.info(msg)``), the
    call anywhere inside the function. One pass over the tree, each node with the functions around it (walking every
    function's subtree again for each function it is nested in cost seconds per release)."""
    names = set()
    todo = [(tree, ())]
    while todo:
        node, around = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            around = around + ((node.name, {a.arg for a in node.args.args if a.arg != "self"}),)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOG_METHODS:
            passed = {a.id for a in node.args if isinstance(a, ast.Name)}
            names.update(name for name, params in around if passed & params)
        todo.extend((child, around) for child in ast.iter_child_nodes(node))
    return names


def _sink(node, wrappers=()):
    """'log', 'raise' or None."""
    if isinstance(node, ast.Call):
        if _is_log_call(node):
            return "log"
        f = node.func
        if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" and f.attr in wrappers) or \
                (isinstance(f, ast.Name) and f.id in wrappers):
            return "log"
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
        return "raise"
    return None


def client_log_sites(srt):
    """[(file, function, format, raw)] of every site of the rule above in sglang/srt, in file and line order."""
    classes = request_classes(srt)
    # only files that can hold such a parameter are parsed (a fifth of them): a client name or an annotation naming a class
    may_hold = re.compile(r"\b(?:%s)\b|:[\w\[\], .\"'\s|]*\b(?:%s)\b" % ("|".join(CLIENT_PARAMS), "|".join(sorted(classes))))
    out = []
    for path in sorted(srt.rglob("*.py")):
        if not may_hold.search(path.read_text(encoding="utf-8-sig")):
            continue
        tree = parse(path)
        wrappers = _log_wrappers(tree)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            tainted = {a.arg for a in params if a.arg in CLIENT_PARAMS or _annotation_names(a.annotation) & classes}
            if not tainted:
                continue
            flows, sinks = [], []
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                    source, targets = node.value, node.targets if isinstance(node, ast.Assign) else [node.target]
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    source, targets = node.iter, [node.target]
                else:
                    kind = _sink(node, wrappers)
                    if kind is not None:
                        sinks.append((kind, node))
                    continue
                flows.append(({n.id for n in ast.walk(source) if isinstance(n, ast.Name)}, source,
                              {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}))
            grown = True
            while grown:
                grown = False
                for names, source, targets in flows:
                    if targets - tainted and names & tainted and _client_uses(source, tainted):
                        tainted |= targets
                        grown = True
            for kind, node in sinks:
                call = node.exc if kind == "raise" else node
                args = list(call.args) + [k.value for k in call.keywords]
                if not any(_client_uses(a, tainted) for a in args):
                    continue
                fmt = ast.unparse(call.args[0]) if call.args else ast.unparse(call)
                if kind == "raise":
                    fmt = "raise %s(%s)" % (ast.unparse(call.func), fmt)
                out.append((path.relative_to(srt).as_posix(), fn.name, fmt, not _escaped(call, tainted), node.lineno))
    return [site[:4] for site in sorted(out, key=lambda s: (s[0], s[4]))]
