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
    return ast.parse(pathlib.Path(path).read_text(encoding="utf-8"), filename=str(path))


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
