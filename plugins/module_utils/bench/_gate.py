# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's regression gate: each level's aggregate output tok/s against a baseline, and the one-line summary."""

from __future__ import annotations

import math

from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError


def normalize_baseline(baseline):
    """{concurrency (int): tok/s (float)} from a mapping with int or string keys; BenchmarkError when malformed."""
    if baseline is None:
        return {}
    if not isinstance(baseline, dict):
        raise BenchmarkError("baseline must map concurrency to output tok/s, e.g. {1: 172, 32: 2100}")
    out = {}
    for key, value in baseline.items():
        try:
            c = int(str(key).strip())
        except ValueError:
            raise BenchmarkError("baseline key %r is not a concurrency level (an integer)" % (key,))
        try:
            number = None if isinstance(value, bool) else float(value)
        except (TypeError, ValueError, OverflowError):
            number = None
        if number is None or not math.isfinite(number) or number <= 0:
            raise BenchmarkError("baseline for concurrency %d must be a positive number of tok/s, got %r" % (c, value))
        out[c] = number
    return out


def evaluate_gate(levels, baseline, min_fraction=0.9):
    """Compare each level's aggregate output tok/s with the baseline; fail below min_fraction of it."""
    base = normalize_baseline(baseline)
    if not isinstance(min_fraction, (int, float)) or not 0 < min_fraction <= 10:
        raise BenchmarkError("min_fraction must be a number > 0 (0.9 = fail below 90%% of the baseline), got %r" % (min_fraction,))
    gate = {"enabled": bool(base), "passed": True, "min_fraction": float(min_fraction), "checks": [], "reason": None}
    if not base:
        gate["reason"] = "no baseline given"
        return gate
    measured = dict((lv["concurrency"], lv) for lv in levels)
    for c in sorted(base):
        lv = measured.get(c)
        if lv is None:
            gate["checks"].append({"concurrency": c, "baseline": base[c], "measured": None, "ratio": None, "passed": None,
                                   "note": "not measured"})
            continue
        got = lv.get("aggregate_output_tok_s") or 0.0
        ratio = got / base[c]
        ok = ratio >= min_fraction
        gate["checks"].append({"concurrency": c, "baseline": base[c], "measured": got, "ratio": round(ratio, 4), "passed": ok,
                               "note": None if ok else "below %.0f%% of the baseline" % (min_fraction * 100)})
    checked = [ch for ch in gate["checks"] if ch["passed"] is not None]
    if not checked:
        gate["passed"] = False
        gate["reason"] = ("no measured concurrency level has a baseline (baseline levels %s): measure one of them or fix the "
                          "baseline" % sorted(base))
    elif not all(ch["passed"] for ch in checked):
        gate["passed"] = False
        gate["reason"] = "; ".join("C=%d %.1f tok/s is %.0f%% of the baseline %.1f"
                                   % (ch["concurrency"], ch["measured"], ch["ratio"] * 100, ch["baseline"])
                                   for ch in checked if not ch["passed"])
    return gate


def summary_line(levels, gate):
    parts = []
    for lv in levels:
        tok = lv.get("aggregate_output_tok_s")
        text = "C=%d %s tok/s" % (lv["concurrency"], "n/a" if tok is None else ("%.0f" % tok))
        ch = next((c for c in gate.get("checks", []) if c["concurrency"] == lv["concurrency"] and c["ratio"] is not None), None)
        if ch:
            text += " (%.0f%%)" % (ch["ratio"] * 100)
        if lv.get("failed"):
            text += " %d failed" % lv["failed"]
        parts.append(text)
    verdict = "no gate" if not gate.get("enabled") else ("gate pass" if gate["passed"] else "gate FAIL")
    return ", ".join(parts) + "; " + verdict
