# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Prometheus text exposition format 0.0.4: samples read from ``/metrics`` of SGLang and of its router, bounded,
and metric families rendered for node_exporter's textfile collector (``verdict_metrics``).

SGLang names its metrics with either prefix: ``sglang:`` in ``/metrics`` (its prometheus_client collectors) and
``sglang_`` in ``/v1/loads?format=prometheus``; readers ask ``sglang_samples`` for a name, never for one spelling.

Pure Python, standard library only; runs on hosts (server_info, router_probe, router_worker, verdict_metrics).
"""

from __future__ import annotations

import math
import re

from ansible_collections.llmops.sglang.plugins.module_utils._http import SNIPPET_CHARS

MAX_METRIC_SAMPLES = 20000
MAX_MALFORMED_KEPT = 5
# Both spellings SGLang has served (tests/fixtures/prometheus/MANIFEST.md says where each comes from).
METRIC_PREFIXES = ("sglang:", "sglang_")

_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME_RE = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_LABEL_ESCAPES = {"\\": "\\", "\"": "\"", "n": "\n"}
_LABEL_NAME_ONLY_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
METRIC_TYPES = ("gauge", "counter", "untyped")


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


def parse_prometheus(text, prefix=METRIC_PREFIXES, max_samples=MAX_METRIC_SAMPLES):
    """Samples of the Prometheus text format as {name: [{labels, value}]}, kept for names with prefix (a string or a
    tuple of them; by default either spelling of SGLang's).

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


def sglang_samples(metrics, name):
    """The samples of SGLang's metric ``name`` (without prefix) in parsed ``metrics``, whichever spelling the server
    used (``sglang:NAME`` first, else ``sglang_NAME``); [] when neither is there."""
    for prefix in METRIC_PREFIXES:
        if metrics.get(prefix + name):
            return metrics[prefix + name]
    return []


class RenderError(ValueError):
    """Metric families that cannot be written in the text format; the message names the family and the fix."""


def _check_name(name, what):
    if not isinstance(name, str) or not _METRIC_NAME_RE.fullmatch(name) or ":" in name:
        raise RenderError("%s name %r is not a Prometheus metric name ([a-zA-Z_][a-zA-Z0-9_]*; colons are kept for "
                          "recording rules): rename it" % (what, name))


def escape_label_value(value):
    """A label value as the format writes it between quotes: backslash, double quote and line feed escaped."""
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def escape_help(text):
    """HELP text as the format writes it: backslash and line feed escaped (quotes stay)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value):
    """A sample value: booleans as 1 and 0, integers exactly, floats by repr, non-finite as NaN, +Inf, -Inf."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    raise RenderError("sample value %r is not a number" % (value,))


def _labels_text(labels, family):
    if not labels:
        return ""
    parts = []
    for key in sorted(labels):
        if not isinstance(key, str) or not _LABEL_NAME_ONLY_RE.match(key) or key.startswith("__"):
            raise RenderError("metric %s: label name %r is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not "
                              "starting with __): rename it" % (family, key))
        value = labels[key]
        if not isinstance(value, str):
            raise RenderError("metric %s: label %s has the value %r, not a string" % (family, key, value))
        parts.append('%s="%s"' % (key, escape_label_value(value)))
    return "{" + ",".join(parts) + "}"


def render(families):
    """Text of metric families [{name, help, type, samples: [{labels, value}]}], one HELP and TYPE line each, samples in
    the order given; RenderError when a name, label, value or type is not one the format (and node_exporter's
    textfile collector, which refuses a file with a repeated series) accepts."""
    lines, seen_families = [], set()
    for family in families:
        name = family.get("name") if isinstance(family, dict) else None
        _check_name(name, "metric")
        if name in seen_families:
            raise RenderError("metric %s is given twice: give each family once with all its samples" % name)
        seen_families.add(name)
        kind = family.get("type", "gauge")
        if kind not in METRIC_TYPES:
            raise RenderError("metric %s: type %r is not one of %s" % (name, kind, ", ".join(METRIC_TYPES)))
        help_text = family.get("help")
        if not isinstance(help_text, str) or not help_text.strip():
            raise RenderError("metric %s has no help text: say what it measures" % name)
        lines += ["# HELP %s %s" % (name, escape_help(help_text)), "# TYPE %s %s" % (name, kind)]
        seen_series = set()
        for sample in family.get("samples") or []:
            labels = sample.get("labels") or {}
            text = _labels_text(labels, name)
            if text in seen_series:
                raise RenderError("metric %s has two samples with the labels %s: each series once" % (name, text or "{}"))
            seen_series.add(text)
            lines.append("%s%s %s" % (name, text, format_value(sample.get("value"))))
    return "\n".join(lines) + "\n" if lines else ""
