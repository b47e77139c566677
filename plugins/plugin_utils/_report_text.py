# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""Text from logs and servers, made safe to show: the one escaping rule for play output and the one for Markdown.

A log line or an HTTP answer is written by whoever reached the server; shown as it is it could move the terminal's
cursor, recolour or hide text (ANSI escapes), reverse what is read (bidi overrides) or, in ``audit.md``, open a
table cell, a code span, a link or an HTML tag. So:

* ``plain(text)`` (play output: summary lines, set_stats, failure messages) shows C0 and C1 control characters
  (ESC, and so every ANSI sequence, included), DEL, the Unicode bidi controls and the line and paragraph separators
  as visible escapes (``\\x1b``, ``\\u202e``, ``\\n``); ``lines=True`` keeps line breaks of a multi-line message;
* ``markdown(text, kind)`` shows the same escapes, then: ``text`` backslash-escapes what Markdown would read as
  syntax inline (backslash, backticks, ``*``, ``_``, brackets, ``<``, ``>``, ``|``, ``~``, ``&``) and at the start
  of a line (a heading, quote, list or rule), so a value never leaves its table cell or paragraph; ``code`` is an
  inline code span whose fence is longer than any run of backticks inside; ``block`` a fenced code block likewise.

Standard library only; runs on the controller (filters, report builders).
"""

from __future__ import absolute_import, division, print_function

import re

# Unicode's Bidi_Control characters (ALM, LRM, RLM, LRE..RLO, LRI..PDI) and the line and paragraph separators.
BIDI_CONTROLS = (0x061C, 0x200E, 0x200F) + tuple(range(0x202A, 0x202F)) + tuple(range(0x2066, 0x206A))
SEPARATORS = (0x2028, 0x2029)
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _escape(code):
    return _NAMED.get(code) or ("\\x%02x" % code if code < 0x100 else "\\u%04x" % code)


_PLAIN = dict((code, _escape(code)) for code in tuple(range(0x20)) + (0x7F,) + tuple(range(0x80, 0xA0))
              + BIDI_CONTROLS + SEPARATORS)
_PLAIN_LINES = dict((code, value) for code, value in _PLAIN.items() if code != 0x0A)
# Markdown syntax inside a line; at its start also headings, quotes, lists, rules and setext underlines (the text is
# one line: plain() shows its line breaks escaped).
_INLINE = re.compile(r"([\\`*_\[\]<>|~&])")
_LINE_START = re.compile(r"^([#>+=-]|[0-9]+(?=[.)]))")
_BACKTICKS = re.compile(r"`+")
KINDS = ("text", "code", "block")


def plain(text, lines=False):
    """``text`` (any value: it is made a string) with every control, bidi and separator character shown escaped;
    line breaks kept when ``lines``."""
    text = text if isinstance(text, str) else str(text)
    return text.translate(_PLAIN_LINES if lines else _PLAIN)


def _fence(text, least):
    return "`" * max([least] + [len(run) + 1 for run in _BACKTICKS.findall(text)])


def markdown(text, kind="text"):
    """``text`` to write into Markdown as ``kind``: ``text`` (in a paragraph, list item or table cell), ``code`` (an
    inline code span) or ``block`` (a fenced code block, line breaks kept)."""
    if kind not in KINDS:
        raise ValueError("kind must be one of %s, not %r" % (", ".join(KINDS), kind))
    if kind == "block":
        body = plain(text, lines=True)
        fence = _fence(body, 3)
        return "%s\n%s\n%s" % (fence, body, fence)
    body = plain(text)
    if kind == "code":
        if not body.strip(" "):
            return body  # no code span holds only spaces: they stay what they are
        # one space inside each fence: CommonMark strips it, so a backtick at either end stays content
        fence = _fence(body, 1)
        return "%s %s %s" % (fence, body, fence)
    # leading spaces would make an indented code block at a line's start: they carry nothing in a report
    body = _INLINE.sub(r"\\\1", body.lstrip(" "))
    return _LINE_START.sub(lambda m: "\\" + m.group(1) if not m.group(1).isdigit() else m.group(1) + "\\", body)
