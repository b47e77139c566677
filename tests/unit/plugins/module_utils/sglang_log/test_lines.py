# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Format drift: every log line the audit keys on is checked against the installed SGLang 0.5.23's source.

The format strings are read with ``ast`` from the package in the venv made by tests/lab/bin/make-sglang-venv
(logger calls' f-strings and %-formats, print calls, exception texts, messages built in a variable), never
imported. A line SGLang changes or stops printing fails here; a line the table marks as older must indeed be
gone. uvicorn's lines are read from the uvicorn in the same venv, the standard library's from this interpreter.
"""

from __future__ import annotations

import argparse
import ast
import asyncio.base_events
import logging
import pathlib
import re
import traceback

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log import _facts
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import BUILTIN_LITERALS, audit_bytes
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._lines import BY_ID, CHECKED_SGLANG, LOG_LINES
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._records import (
    BARE, RANK_NAMES, SGLANG, UVICORN, parse_record)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._rules import DEFAULT_RULES

import sglang_source  # tests/unit/sglang_source.py

FORMS = ("record", "print", "uvicorn", "text")
ORIGINS = ("sglang", "uvicorn", "python", "external")
STDLIB = {"argparse.py": argparse.__file__, "traceback.py": traceback.__file__,
          "asyncio/base_events.py": asyncio.base_events.__file__}
_PERCENT_RE = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfgixX]")
_BRACES_RE = re.compile(r"\{[^{}]*\}")


@pytest.fixture(scope="module")
def site():
    assert CHECKED_SGLANG == sglang_source.CHECKED_RELEASE, "the table was checked against SGLang %s" % CHECKED_SGLANG
    return sglang_source.srt_dir().parents[1]


def _source_path(site, entry):
    if entry["origin"] == "sglang":
        return site / "sglang" / entry["source"]
    if entry["origin"] == "uvicorn":
        return site / "uvicorn" / entry["source"]
    return pathlib.Path(STDLIB[entry["source"]])


# ----------------------------------------------------------------------------------------------
# Format strings of a source file


def _render(node, fmt_receiver=False):
    """A regex of the text a string expression produces: fields and %-conversions become wildcards."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        out, pos = [], 0
        pattern = _BRACES_RE if fmt_receiver else _PERCENT_RE
        for m in pattern.finditer(text):
            out.append(re.escape(text[pos:m.start()]) + "(?s:.*?)")
            pos = m.end()
        out.append(re.escape(text[pos:]))
        return "".join(out)
    if isinstance(node, ast.JoinedStr):
        return "".join(_render(v) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        v = node.value
        if (isinstance(v, ast.IfExp) and all(isinstance(b, ast.Constant) and isinstance(b.value, str) for b in (v.body, v.orelse))):
            return "(?:%s|%s)" % (re.escape(v.body.value), re.escape(v.orelse.value))
        return "(?s:.*?)"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _render(node.left) + _render(node.right)
    return "(?s:.*?)"


def _emitter(node, parents):
    """What prints a string: the logging method or function called with it, raise, or a variable it is put in."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "_":
                continue  # gettext
            if name.endswith(("Error", "Exception")):
                return "raise"
            return name
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            return "assign"
        if isinstance(node, ast.Raise):
            return "raise"
        if isinstance(node, ast.stmt):
            return "statement"
    return "module"


def _is_str(node):
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


_TEMPLATES = {}


def templates(path):
    """[(regex, emitter)] of every string literal, f-string and string concatenation in a file."""
    path = str(path)
    if path not in _TEMPLATES:
        tree = ast.parse(pathlib.Path(path).read_text(encoding="utf-8"))
        parents = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        out = []
        for node in ast.walk(tree):
            parent = parents.get(node)
            if isinstance(parent, (ast.JoinedStr, ast.FormattedValue)):
                continue
            if _is_str(node) or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (_is_str(node.left) or _is_str(node.right))
                                 and not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add))):
                receiver = isinstance(parent, ast.Attribute) and parent.attr == "format"
                out.append((re.compile(_render(node, receiver)), _emitter(node, parents)))
        _TEMPLATES[path] = out
    return _TEMPLATES[path]


_WILDCARD = "(?s:.*?)"


def _literal_chars(pattern):
    return len(pattern.replace(_WILDCARD, "").replace("\\", ""))


def _printed_by(path, text, inside=False):
    """Emitters of the format strings of path that print text: the whole text, or its start where the string is
    only the head of a message built in a variable; with inside, a string found anywhere in text (an exception
    message inside a longer line)."""
    found = []
    for regex, emitter in templates(path):
        if regex.fullmatch(text):
            found.append(emitter)
        elif _literal_chars(regex.pattern) < 12:
            continue
        elif emitter == "assign" and regex.match(text):
            found.append(emitter)
        elif inside:
            bare = regex.pattern
            while bare.startswith("\\\n") or bare.endswith("\\\n"):
                bare = bare[2:] if bare.startswith("\\\n") else bare[:-2]
            if re.search(bare, text):
                found.append(emitter)
    return found


# ----------------------------------------------------------------------------------------------
# The table's own consistency


@pytest.mark.parametrize("entry", LOG_LINES, ids=[e["id"] for e in LOG_LINES])
def test_entry_is_complete_and_its_regex_reads_its_examples(entry):
    assert set(entry) >= {"id", "regex", "literal", "form", "origin", "source", "emitters", "versions", "examples", "legacy"}
    assert entry["form"] in FORMS and entry["origin"] in ORIGINS
    assert entry["examples"] or entry.get("last_seen"), "a line 0.5.23 prints needs examples; an older one last_seen"
    assert not (entry["examples"] and entry.get("last_seen"))
    regex = re.compile(entry["regex"])
    literals = entry["literal"] if isinstance(entry["literal"], tuple) else (entry["literal"],)
    for text in entry["examples"] + entry["legacy"]:
        assert regex.match(text), text
        assert any(lit in text for lit in literals), text
        assert set(literals) <= set(BUILTIN_LITERALS)


@pytest.mark.parametrize("entry", [e for e in LOG_LINES if e["form"] != "text"], ids=lambda e: e["id"])
def test_examples_read_in_their_form(entry):
    """A record example behind SGLang's prefix is an SGLang record, a print a bare line, a uvicorn line uvicorn's."""
    for text in entry["examples"] + entry["legacy"]:
        line = {"record": "[2026-12-01 10:00:00 TP0] %s", "print": "%s", "uvicorn": "[2026-12-01 10:00:00] INFO:     %s"}[entry["form"]]
        rec = parse_record(line % text)
        assert rec.kind == {"record": SGLANG, "print": BARE, "uvicorn": UVICORN}[entry["form"]]
        assert re.match(entry["regex"], rec.msg)


def test_every_default_rule_keys_on_table_lines():
    for rule in DEFAULT_RULES:
        assert rule.get("lines"), "rule %s names no line of LOG_LINES: a rule cannot skip the drift check" % rule["id"]
        regex = re.compile(rule["pattern"])
        for line_id in rule["lines"]:
            entry = BY_ID[line_id]
            texts = entry["examples"] + entry["legacy"]
            hits = [t for t in texts if (regex.match(t) if rule["scope"] == "message" else regex.search(t))]
            assert hits, "rule %s matches no example of line %s" % (rule["id"], line_id)
            if rule["scope"] == "message":
                assert entry["form"] == "record", "a message rule keys on SGLang records only"


def test_the_facts_key_only_on_table_lines():
    # every regex of the facts module is compiled from the table
    source = pathlib.Path(_facts.__file__).read_text(encoding="utf-8")
    keyed = set(re.findall(r'_line_re\("(\w+)"\)', source)) | set(re.findall(r'BY_ID\["(\w+)"\]', source))
    keyed |= set(re.findall(r'"(argparse_\w+)"', source))
    assert keyed <= set(BY_ID) and len(keyed) >= 20


# ----------------------------------------------------------------------------------------------
# Against the installed source


CHECKED = [e for e in LOG_LINES if e["origin"] != "external"]


@pytest.mark.parametrize("entry", CHECKED, ids=[e["id"] for e in CHECKED])
def test_line_is_printed_by_its_source(site, entry):
    path = _source_path(site, entry)
    if entry.get("last_seen"):
        return
    assert path.exists(), "%s no longer exists in the installed %s" % (entry["source"], entry["origin"])
    for text in entry["examples"]:
        emitters = _printed_by(path, text, inside=entry["form"] == "text")
        assert emitters, "%s: no format string of %s prints %r" % (entry["id"], entry["source"], text)
        assert set(emitters) & set(entry["emitters"]), "%s: printed by %s, the table says %s" % (entry["id"], emitters, entry["emitters"])


OLDER = [e for e in LOG_LINES if (e.get("last_seen") or e["legacy"]) and e["origin"] != "external"]


@pytest.mark.parametrize("entry", OLDER, ids=[e["id"] for e in OLDER])
def test_older_lines_are_gone(site, entry):
    path = _source_path(site, entry)
    for text in entry["legacy"]:
        assert not (path.exists() and any(r.fullmatch(text) for r, dummy in templates(path) if _literal_chars(r.pattern) >= 12)), \
            "%s: %r is still printed by %s" % (entry["id"], text, entry["source"])
    if entry.get("last_seen") and entry["origin"] == "sglang":
        literal = entry["literal"]
        for py in (site / "sglang").rglob("*.py"):
            assert literal not in py.read_text(encoding="utf-8", errors="replace"), "%s: %r is back in %s" % (entry["id"], literal, py)


def test_sglang_0_5_23_no_longer_prints_the_removed_lines(site):
    srt = site / "sglang" / "srt"
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in srt.rglob("*.py")]
    # the DeepGemm scale_fmt warning had a rule of its own, removed with the line
    assert not any("DeepGemm is enabled but the scale_fmt" in t for t in texts)
    assert not any("Child process unexpectedly failed" in t for t in texts)
    # Mamba2 state dtype is a debug line: not keyed
    regex_calls = [e for r, e in templates(srt / "configs" / "mamba_utils.py") if r.fullmatch("Mamba2 state dtype: conv_dtype=x, ssm_dtype=y")]
    assert regex_calls == ["debug"]
    assert not any(e["regex"].startswith("Mamba2") for e in LOG_LINES)


# ----------------------------------------------------------------------------------------------
# The record prefix and the client lines' formats


def _function(tree, name):
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_record_prefix_is_sglang_logger_format(site):
    tree = ast.parse((site / "sglang" / "srt" / "utils" / "common.py").read_text(encoding="utf-8"))
    func = _function(tree, "configure_logger")
    assigns = dict((n.targets[0].id, n.value) for n in ast.walk(func) if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name))
    ms = assigns["maybe_ms"].body.value                  # ".%(msecs)03d" if SGLANG_LOG_MS else ""
    call = next(n for n in ast.walk(func) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "basicConfig")
    datefmt = next(k.value.value for k in call.keywords if k.arg == "datefmt")
    sched = ast.parse((site / "sglang" / "srt" / "managers" / "scheduler.py").read_text(encoding="utf-8"))
    parts = [n.value.values[0].value.strip() for n in ast.walk(sched)
             if isinstance(n, ast.AugAssign) and getattr(n.target, "id", "") == "prefix" and isinstance(n.value, ast.JoinedStr)]
    assert tuple(parts) == RANK_NAMES, "SGLang's rank prefix parts changed: %s" % parts
    for maybe_ms in ("", ms):
        for ranks in ((), ("TP", 3), ("DP", 1, "TP", 1, "EP", 1), tuple(x for name in RANK_NAMES for x in (name, 2))):
            prefix = "".join(" %s%d" % (ranks[i], ranks[i + 1]) for i in range(0, len(ranks), 2))
            fmt = eval(compile(ast.Expression(assigns["format"]), "common.py", "eval"), {"maybe_ms": maybe_ms, "prefix": prefix})
            record = logging.LogRecord("sglang.srt.x", logging.INFO, __file__, 1, "Load weight begin. avail mem=1.00 GB", None, None)
            line = logging.Formatter(fmt, datefmt=datefmt).format(record)
            rec = parse_record(line)
            assert (rec.kind, rec.rank, rec.msg) == (SGLANG, prefix.strip() or "main", "Load weight begin. avail mem=1.00 GB"), line
            assert audit_bytes((line + "\n").encode())["facts"]["phase"] == "loading_weights"


def test_client_line_formats_are_the_ones_the_records_module_knows(site):
    srt = site / "sglang" / "srt"
    # uvicorn's access format as SGLang sets it: the main prefix, uvicorn's level prefix, the client address
    common = ast.parse((srt / "utils" / "common.py").read_text(encoding="utf-8"))
    fmts = [n.value for n in ast.walk(_function(common, "set_uvicorn_logging_configs"))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "%(asctime)s" in n.value]
    assert '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s' in fmts
    assert "[%(asctime)s] %(levelprefix)s %(message)s" in fmts
    # --log-requests: the main prefix, then one of these message starts
    starts = set()
    for regex, dummy in templates(srt / "utils" / "request_logger.py"):
        m = re.match(r"([\w ]+: obj=)", regex.pattern.replace("\\", ""))
        if m:
            starts.add(m.group(1).replace("\\", ""))
    assert starts == {"Receive: obj=", "Receive OpenAI: obj=", "Finish: obj="}
    for start in starts:
        assert parse_record("[2026-12-01 10:00:00] %s{'text': 'x'}" % start).kind == "echo"
    log_utils = (srt / "utils" / "log_utils.py").read_text(encoding="utf-8")
    assert 'logging.Formatter("[%(asctime)s] %(message)s"' in log_utils and "json.dumps(log_data" in log_utils


def test_fp8_warning_is_printed_only_for_an_explicit_fp8_e4m3(site):
    """Under auto the warning never comes (the check sees the setting, not the resolved dtype): its absence says nothing."""
    entry = BY_ID["fp8_no_scales"]
    tree = ast.parse(_source_path(site, entry).read_text(encoding="utf-8"))
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    warning = next(n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                   and n.value.startswith("Using FP8 KV cache but no scaling factors"))
    guards = []
    node = warning
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If):
            guards.append(ast.unparse(node.test))
    assert "kv_cache_dtype == 'fp8_e4m3'" in guards, guards
