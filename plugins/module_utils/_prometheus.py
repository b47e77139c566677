# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Samples of the Prometheus text exposition format 0.0.4 (``/metrics`` of SGLang and of its router), bounded.

Pure Python, standard library only; runs on hosts (server_info, router_probe, router_worker).
"""

from __future__ import annotations

import math
import re

from ansible_collections.llmops.sglang.plugins.module_utils._http import SNIPPET_CHARS

MAX_METRIC_SAMPLES = 20000
MAX_MALFORMED_KEPT = 5
METRIC_PREFIX = "sglang:"

_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME_RE = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_LABEL_ESCAPES = {"\\": "\\", "\"": "\"", "n": "\n"}


def _parse_labels(text, pos):
    """Labels starting after '{' at pos: (dict, position after '}'); ValueError when malformed."""
    labels = {}
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        m = _LABEL_NAME_RE.match(text, pos)
        if not m:
            raise ValueError("bad label name")
        pos = m.end()
        chars = []
        while True:
            if pos >= len(text):
                raise ValueError("unterminated label value")
            ch = text[pos]
            if ch == "\\":
                if pos + 1 >= len(text):
                    raise ValueError("dangling escape")
                chars.append(_LABEL_ESCAPES.get(text[pos + 1], "\\" + text[pos + 1]))
                pos += 2
                continue
            if ch == "\"":
                pos += 1
                break
            chars.append(ch)
            pos += 1
        labels[m.group(1)] = "".join(chars)
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        else:
            raise ValueError("expected ',' or '}' after a label")


def _metric_value(token):
    value = float(token)  # accepts NaN, +Inf, -Inf and exponents, like the format
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def parse_sample(line):
    """(name, labels, value) of one sample line; ValueError when malformed."""
    m = _METRIC_NAME_RE.match(line)
    if not m:
        raise ValueError("no metric name")
    name, pos = m.group(0), m.end()
    labels = {}
    if pos < len(line) and line[pos] == "{":
        labels, pos = _parse_labels(line, pos + 1)
    rest = line[pos:].split()
    if not rest or len(rest) > 2 or (pos < len(line) and line[pos] not in " \t"):
        raise ValueError("expected a value (and optional timestamp) after the name")
    value = _metric_value(rest[0])
    if len(rest) == 2:
        int(rest[1])  # the timestamp must be an integer (milliseconds); not kept
    return name, labels, value


def parse_prometheus(text, prefix=METRIC_PREFIX, max_samples=MAX_METRIC_SAMPLES):
    """Samples of the Prometheus text format as {name: [{labels, value}]}, kept for names with prefix.

    Comment lines are skipped; malformed sample lines are counted and a few kept, never raised.
    Non-finite values are the strings ``NaN``, ``+Inf`` and ``-Inf``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    metrics, malformed, bad_lines = {}, 0, []
    samples, kept, truncated = 0, 0, False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, labels, value = parse_sample(line)
        except ValueError:
            malformed += 1
            if len(bad_lines) < MAX_MALFORMED_KEPT:
                bad_lines.append(line[:SNIPPET_CHARS])
            continue
        samples += 1
        if prefix and not name.startswith(prefix):
            continue
        if kept >= max_samples:
            truncated = True
            continue
        kept += 1
        metrics.setdefault(name, []).append({"labels": labels, "value": value})
    return {"metrics": metrics, "samples": samples, "kept": kept, "malformed_lines": malformed,
            "malformed_examples": bad_lines, "truncated": truncated}
