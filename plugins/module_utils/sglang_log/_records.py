# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which program wrote a log line: SGLang's own records versus text that came from clients.

SGLang's logger (``configure_logger`` in ``sglang/srt/utils/common.py``) writes
``[%Y-%m-%d %H:%M:%S{.mmm with SGLANG_LOG_MS}{rank prefix}] message``; the rank prefix of a scheduler
(``managers/scheduler.py``) is `` DPn``, `` PPn``, `` ATTN_CP n``, `` MOE_DPn``, `` TPn``, `` EPn`` in that order.
The same file points uvicorn at ``[%(asctime)s] %(levelprefix)s ...``, so uvicorn's access lines
(``[ts] INFO:     1.2.3.4:5 - "GET /path?query HTTP/1.1" 200 OK``) carry the main process's prefix too, and
``--log-requests`` (``utils/request_logger.py``) writes ``[ts] Receive: obj=...`` / ``Finish: obj=...`` or a
JSON event. Access lines and request echoes hold text chosen by whoever sends a request: they are kinds of
their own and never count as SGLang's records.

A physical line that starts as a record is one record: a prompt inside it (``repr()``-quoted, so it has no
newline) can never start another. Only a line that starts with something else (a progress bar, a flattened
log, ``\\r`` updates) is split into the records glued into it, and after a request echo or an access line
the rest of the line stays theirs.
"""

from __future__ import annotations

import re

SGLANG = "sglang"      # a record of SGLang's logger: its prefix, or Python's default format of an sglang.* logger
UVICORN = "uvicorn"    # uvicorn's own record ("INFO:     Uvicorn running on ..."), with or without SGLang's prefix
ACCESS = "access"      # a uvicorn access line: the request line is client text
ECHO = "echo"          # a request or response echoed by --log-requests: client text
BARE = "bare"          # anything else: print()ed lines, traceback lines, other programs
CLIENT_KINDS = (ACCESS, ECHO)

# the rank parts SGLang's scheduler puts into its prefix, in its order
RANK_NAMES = ("DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP")
# the encoder of disaggregated serving names its processes instead
_WORKER_NAMES = r" encode_server| encode_dp_worker\[\d+\]"

ANSI_PATTERN = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
ANSI_RE = re.compile(ANSI_PATTERN)

_PREFIX_RE = re.compile(
    r"\[(?:(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:[.,]\d{3})?"
    r"(?P<ranks>(?: (?:%s)\d+)*)(?P<worker>%s)?|gpu=(?P<gpu>\d+))\] ?" % ("|".join(RANK_NAMES), _WORKER_NAMES))
# a level and source tag after the prefix (a logging config that adds them, e.g. SGLANG_LOGGING_CONFIG_PATH)
_LEVEL_TAG_RE = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w./-]+\.py:\d+: ")
# Python's default format, used by SGLang's loggers before configure_logger ran
_PY_DEFAULT_RE = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):sglang(?:\.[\w.]+)?:")
# uvicorn's levelprefix: the level, a colon, padding to 8 characters, then the format's space
_UVICORN_RE = re.compile(r"(?:TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
_ACCESS_RE = re.compile(r"\S* ?- \"")
_ECHO_STARTS = ("Receive: obj=", "Receive OpenAI: obj=", "Finish: obj=", '{"timestamp": ')
# Outer prefixes added by the host: a container runtime's RFC 3339 stamp (optionally with journald's host and
# ident), journald's short format, a Ray actor, docker compose.
_OUTER_RE = re.compile(
    r"(?:"
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?(?: [^\s\[]+ [^\s:\[]+(?:\[\d+\])?:)? "
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)? [^\s\[]+ [^\s:\[]+(?:\[\d+\])?: "
    r"|\(\w+ pid=\d+(?:, ip=[\d.]+)?\) "
    r"|[\w][\w.-]*\s*\| "
    r")")
# Pieces of a line that does not start as a record: tqdm \r updates, logs flattened with " \u23ce ",
# a record glued to the end of a progress bar, a traceback glued to one.
_PIECE_SPLIT_RE = re.compile("(\r| ?\u23ce ?)")
_GLUED_RE = re.compile(r"(?<=\S)(?=\[(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:[.,]\d{3})?(?: [A-Z_]+\d+)*\] )"
                       r"|(?<=\S)(?=Traceback \(most recent call last\))")
_RANK_PART_RE = re.compile(r"([A-Z_]+)(\d+)")
# Whitespace plus what invalid UTF-8 decodes to: neither may hide a message's start.
BLANK = " \t\r\n\x00\ufffd"


class Record(object):
    """One log record: kind, rank (None without SGLang's prefix, "main" for the main process), the message
    (without prefix, leading blanks removed), the text (outer prefixes removed), whether SGLang's prefix
    opened it, and uvicorn's level prefix."""

    __slots__ = ("kind", "rank", "msg", "text", "prefixed", "level")

    def __init__(self, kind, rank, msg, text, prefixed, level=""):
        self.kind = kind
        self.rank = rank
        self.msg = msg
        self.text = text
        self.prefixed = prefixed
        self.level = level      # uvicorn's level prefix ("ERROR:    "), which msg does not hold

    def __repr__(self):
        return "Record(%s, %r, %r)" % (self.kind, self.rank, self.msg[:60])


def rank_sort_key(rank):
    return [(name, int(num)) for name, num in _RANK_PART_RE.findall(rank)] or [(rank, 0)]


def parse_record(text):
    """The Record of one piece of a line (a whole line, or one piece of a split one)."""
    for dummy in range(3):
        m = _OUTER_RE.match(text)
        if not m:
            break
        text = text[m.end():]
    m = _PREFIX_RE.match(text)
    if m is not None:
        if m.group("gpu") is not None:
            rank = "gpu" + m.group("gpu")
        else:
            rank = (m.group("ranks") + (m.group("worker") or "")).strip() or "main"
        msg = text[m.end():]
        t = _LEVEL_TAG_RE.match(msg)
        if t:
            msg = msg[t.end():]
        msg = msg.lstrip(BLANK)
        u = _UVICORN_RE.match(msg)
        if u is not None:
            rest = msg[u.end():]
            return Record(ACCESS if _ACCESS_RE.match(rest) else UVICORN, rank, rest, text, True, msg[:u.end()])
        if msg.startswith(_ECHO_STARTS):
            return Record(ECHO, rank, msg, text, True)
        return Record(SGLANG, rank, msg, text, True)
    msg = text.lstrip(BLANK)
    m = _PY_DEFAULT_RE.match(msg)
    if m is not None:
        return Record(SGLANG, "main", msg[m.end():].lstrip(BLANK), text, False)
    u = _UVICORN_RE.match(msg)
    if u is not None:
        rest = msg[u.end():]
        return Record(ACCESS if _ACCESS_RE.match(rest) else UVICORN, None, rest, text, False, msg[:u.end()])
    return Record(BARE, None, msg, text, False)


_LEVEL_WORDS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def indented_bare(text):
    """Whether split_records(text) is one BARE record whose text starts with a blank, decided without parsing: the
    line starts with a space or tab (no prefix can match), holds nothing that splits a line (a carriage return, the
    flattened-log mark, a glued record or traceback) and no level word follows the blanks (uvicorn's or Python's format)."""
    return (text[:1] in (" ", "\t") and "[" not in text and "\r" not in text and "\u23ce" not in text and "Traceback" not in text
            and not text.lstrip(BLANK).startswith(_LEVEL_WORDS))


def split_records(text):
    """The records of one decoded physical line (ANSI codes already removed)."""
    first = parse_record(text)
    if first.kind != BARE:
        return [first]
    has_pieces = "\r" in text or "\u23ce" in text
    if not has_pieces and "[" not in text and "Traceback" not in text:
        return [first]
    pieces = _PIECE_SPLIT_RE.split(text) if has_pieces else [text]
    out = []
    # pieces alternate with their separators: text, sep, text, sep, ...
    for n in range(0, len(pieces), 2):
        piece = pieces[n]
        glued = _GLUED_RE.split(piece) if ("[" in piece or "Traceback" in piece) else (piece,)
        for g, part in enumerate(glued):
            rec = parse_record(part)
            if rec.kind in CLIENT_KINDS:
                # client text runs to the end of the physical line
                rest = "".join(glued[g + 1:]) + "".join(pieces[n + 1:])
                if rest:
                    rec = parse_record(part + rest)
                out.append(rec)
                return out
            out.append(rec)
    return out
