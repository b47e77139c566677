# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Streaming audit of SGLang server logs: the public API (LogAuditor, audit_path, audit_journal, audit_bytes).

The work is split by job, each in its own module:

- ``sglang_log._scan``: bytes to lines with bounded memory, and the literal-search plan that hands on
  only lines holding a key literal (the time grep takes to find the same literals, plus the parse of those lines);
- ``sglang_log._records``: which program wrote a line (SGLang's own records, uvicorn, access lines, request
  echoes, bare lines), prefixes, ANSI codes, glued and flattened records;
- ``sglang_log._lines``: the table of every line the audit keys on, with its SGLang source file;
- ``sglang_log._facts``: facts of the latest server start, startup phase, tracebacks and fatal causes;
- ``sglang_log._rules``: default and user rules, waivers, findings.

Facts and rules take text only from SGLang's own records, matched at the start of their message: a
request line, an access line or an echoed prompt never changes a verdict.
"""

from __future__ import annotations

import os

from ansible_collections.llmops.sglang.plugins.module_utils._journal import read as read_journal
from ansible_collections.llmops.sglang.plugins.module_utils._process import CHUNK_BYTES, stream
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._facts import (
    FATAL_CLASSES, PHASES, UNIT_CAUSES, StartFacts, TracebackTracker)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._lines import LOG_LINES
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._records import (
    ANSI_RE, CLIENT_KINDS, indented_bare, rank_sort_key, split_records)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._rules import (
    LogAuditError, RuleMatcher, build_rules, build_waivers)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._scan import DEFAULT_MAX_LINE_BYTES, LineScanner

__all__ = ("BUILTIN_LITERALS", "FATAL_CLASSES", "PHASES", "UNIT_CAUSES", "LogAuditError", "LogAuditor", "audit_bytes",
           "audit_journal", "audit_path", "audit_stream", "build_rules", "prefilter_literals")

# Literals every interesting line contains (on top of one literal per rule): one per keyed line, and the
# markers of lines that end a start without an SGLang record (exception text, CUDA errors).
BUILTIN_LITERALS = tuple(sorted(set(
    lit for entry in LOG_LINES for lit in (entry["literal"] if isinstance(entry["literal"], tuple) else (entry["literal"],))))) + (
    "Error", "Exception", "CUDA error")


def prefilter_literals(rules=None):
    """The literals a line must contain to be parsed (None in the list: a rule that needs every line)."""
    lits = list(BUILTIN_LITERALS)
    for rule in build_rules(rules):
        if rule.literals is None:
            lits.append(None)
        else:
            lits.extend(runs[0] for runs in rule.literals)
    return lits


class LogAuditor(object):
    """Feed bytes with feed(), then call finish() once for the result dict; progress() any time before.

    Line numbers are counted while scanning unless ``line_counter`` is given: a callable that maps
    a sorted list of byte offsets of the input to their 1-based line numbers (for a file, a second
    read up to the last offset needed). Only evidence and fatal lines need one, so a long log whose
    findings all sit near its start is never counted to its end.
    """

    def __init__(self, rules=None, allow=None, max_evidence=3, max_line_bytes=DEFAULT_MAX_LINE_BYTES, line_counter=None):
        if isinstance(max_evidence, bool) or not isinstance(max_evidence, int) or max_evidence < 0:
            raise LogAuditError("max_evidence must be an integer >= 0, got %r" % (max_evidence,))
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes < 1024:
            raise LogAuditError("max_line_bytes must be an integer >= 1024, got %r" % (max_line_bytes,))
        rules = build_rules(rules)
        self._matcher = RuleMatcher(rules, build_waivers(allow, rules), max_evidence)
        alternatives = [[lit] for lit in BUILTIN_LITERALS]
        for rule in rules:
            if rule.literals is None:
                alternatives = None
                break
            alternatives.extend(rule.literals)
        self._line_counter = line_counter
        self._scanner = LineScanner(self._line, alternatives, max_line_bytes, count_lines=line_counter is None)
        self._facts = StartFacts()
        self._tracebacks = TracebackTracker(self._facts, self._scanner)
        self._finished = None

    def feed(self, data):
        """Audit the next piece of the input (bytes of any size; lines may span calls)."""
        if self._finished is not None:
            raise LogAuditError("feed() after finish()")
        self._scanner.feed(data)

    def finish(self):
        """End of input: returns the result dict (the same one on later calls)."""
        if self._finished is None:
            self._scanner.finish()
            self._tracebacks.close(None)
            self._finished = self._result()
        return self._finished

    def progress(self):
        """Where the start stands so far, without ending the input: phase (or failed), ready, fatal (None or
        {class, message, rank}), kv_dtype_effective, kv_cache_dtype_configured, max_total_num_tokens."""
        facts = self._facts
        fatal = None
        if facts.fatal is not None:
            fatal = dict((k, facts.fatal[k]) for k in ("class", "message", "rank"))
        return {"phase": "failed" if fatal is not None else PHASES[facts.phase], "ready": facts.ready, "fatal": fatal,
                "kv_dtype_effective": facts.kv_dtype_effective, "kv_cache_dtype_configured": facts.kv_cache_dtype_configured,
                "max_total_num_tokens": facts.max_total_num_tokens}

    # -- one line ------------------------------------------------------------------------------

    def _line(self, raw, loc):
        text = raw.decode("utf-8", "replace")
        if "\x1b" in text:
            text = ANSI_RE.sub("", text)
        tracebacks = self._tracebacks
        if tracebacks.in_traceback() and indented_bare(text):
            # a frame of the open traceback (most lines a traceback hands on): what the parse below does with it
            tracebacks.on_line()
            tracebacks.on_frame(text)
            return None
        records = split_records(text)
        facts = self._facts
        if all(rec.kind in CLIENT_KINDS for rec in records):
            # an access line or a request echo: client text, which neither counts nor interrupts anything
            return False
        self._tracebacks.on_line()
        # a line without a key literal (handed on for an open traceback or a follow window) gives no fact, late
        # startup record or rule hit: every one of them keys on a literal the scanner looks for
        keyed = self._scanner.candidate
        for rec in records:
            seen = self._tracebacks.on_record(rec, loc)
            if seen is None:
                continue  # a frame of an open traceback
            rank, facts_ok = seen
            if not keyed:
                if facts_ok:
                    facts.see_rank(rec)
                continue
            if facts_ok and facts.on_record(rec):
                # a startup record after the server accepted requests: no fact, and no rule counts it (the FP8 warning
                # written by a client must not fail a deployment); it is a finding of its own
                self._matcher.on_late_startup_record(rec, rank, loc)
                continue
            self._matcher.on_record(rec, rank, loc)

    # -- result --------------------------------------------------------------------------------

    def _result(self):
        facts = self._facts
        locs = self._matcher.evidence_locations()
        if facts.fatal is not None:
            locs.append(facts.fatal["line"])
        if self._line_counter is not None and locs:
            offsets = sorted(set(locs))
            lines = dict(zip(offsets, self._line_counter(offsets)))
        else:
            lines = None

        def line_of(loc):
            return lines[loc] if lines is not None else loc

        findings, failed = self._matcher.findings(line_of, rank_sort_key)
        scanner = self._scanner
        stats = {
            "bytes": scanner.offset,
            "inspected_lines": scanner.inspected,
            "truncated_lines": scanner.truncated,
            "dropped_bytes": scanner.dropped,
            "kv_pools_dropped": facts.kv_pools_dropped,
        }
        return {"facts": facts.as_dict(line_of), "findings": findings, "failed_rules": failed, "stats": stats}


def _file_line_counter(path, chunk_bytes=CHUNK_BYTES):
    """Line numbers of sorted byte offsets of a file, read once up to the last offset."""
    def count(offsets):
        out, line, pos = [], 1, 0
        with open(path, "rb") as stream:
            for off in offsets:
                while pos < off:
                    data = stream.read(min(chunk_bytes, off - pos))
                    if not data:
                        break
                    line += data.count(b"\n")
                    pos += len(data)
                out.append(line)
        return out
    return count


def audit_stream(stream, chunk_bytes=CHUNK_BYTES, max_bytes=None, **kwargs):
    """Audit a binary file object, read in chunks (lines are numbered while scanning); at most max_bytes when given."""
    auditor = LogAuditor(**kwargs)
    read = stream.read
    left = max_bytes
    while left is None or left > 0:
        data = read(chunk_bytes if left is None else min(chunk_bytes, left))
        if not data:
            break
        if left is not None:
            left -= len(data)
        auditor.feed(data)
    return auditor.finish()


def audit_path(path, chunk_bytes=CHUNK_BYTES, **kwargs):
    """Audit a log file up to the size it had when opened (a log still written to is not followed).

    Line numbers come from a second read that stops at the last one needed.
    """
    kwargs.setdefault("line_counter", _file_line_counter(path, chunk_bytes))
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        return audit_stream(stream, chunk_bytes=chunk_bytes, max_bytes=size, **kwargs)


def audit_journal(argv, require, chunk_bytes=CHUNK_BYTES, **kwargs):
    """Run a ``journalctl -o json`` argv (``_journal.unit_output``) and audit the messages of the entries whose
    trusted fields match require, while it streams. Returns (rc, the head of its standard error, result); the
    result's ``stats.journal`` counts the entries read and those left out, by reason (``_journal.JournalReader``).
    """
    auditor = LogAuditor(**kwargs)
    rc, err, reader = read_journal(lambda args, sink: stream(args, sink, chunk_bytes=chunk_bytes), argv, require, auditor.feed)
    result = auditor.finish()
    result["stats"]["journal"] = reader.stats()
    return rc, err, result


def audit_bytes(data, **kwargs):
    auditor = LogAuditor(**kwargs)
    auditor.feed(data)
    return auditor.finish()
