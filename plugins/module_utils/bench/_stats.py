# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark statistics: percentiles, distributions and the report of one concurrency level.

Per-request output tok/s is the decode rate after the first token: ``(tokens - 1) / (last - first)`` (the
inverse of bench_serving's TPOT). Aggregate output tok/s is every measured request's output tokens divided by
the level's wall time (first send to last answer); warm-up requests are excluded.
"""

from __future__ import annotations

import math

MAX_ERROR_EXAMPLES = 3


def percentile(values, q):
    """Linear-interpolated percentile (numpy's default); None for no values."""
    vals = sorted(values)
    if not vals:
        return None
    k = (len(vals) - 1) * (q / 100.0)
    lo = int(math.floor(k))
    hi = int(math.ceil(k))
    if lo == hi:
        return float(vals[lo])
    return vals[lo] + (vals[hi] - vals[lo]) * (k - lo)


def rounded(value, digits=2):
    return None if value is None else round(float(value), digits)


def distribution(values, scale=1.0, digits=2):
    """{mean, p50, p90, p99} of values x scale (None entries when empty)."""
    vals = [v * scale for v in values]
    if not vals:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    return {"mean": rounded(sum(vals) / len(vals), digits), "p50": rounded(percentile(vals, 50), digits),
            "p90": rounded(percentile(vals, 90), digits), "p99": rounded(percentile(vals, 99), digits)}


def decode_rate(res):
    """Output tok/s of one request after its first token (None when it cannot be measured)."""
    if not res["ok"] or res["output_tokens"] < 2 or not res["decode_s"] or res["decode_s"] <= 0:
        return None
    return (res["output_tokens"] - 1) / res["decode_s"]


def summarize_level(concurrency, results, wall_s):
    """Per-level report from the measured requests (warm-up excluded)."""
    good = [r for r in results if r["ok"]]
    errors, examples = {}, []
    for r in results:
        if r["error"]:
            errors[r["error"]["kind"]] = errors.get(r["error"]["kind"], 0) + 1
            if len(examples) < MAX_ERROR_EXAMPLES and r["error"]["message"] not in examples:
                examples.append(r["error"]["message"])
    tokens = sum(r["output_tokens"] for r in good)
    rates = [x for x in (decode_rate(r) for r in good) if x is not None]
    itls = [gap for r in good for gap in r["itl_s"]]
    sources = sorted(set(r["token_source"] for r in good))
    prompts = [r["prompt_tokens"] for r in good if r["prompt_tokens"] is not None]
    aggregate = tokens / wall_s if good and wall_s > 0 else 0.0
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "succeeded": len(good),
        "failed": len(results) - len(good),
        "duration_s": rounded(wall_s, 3),
        "output_tokens": tokens,
        "prompt_tokens_mean": rounded(sum(prompts) / len(prompts), 1) if prompts else None,
        "aggregate_output_tok_s": rounded(aggregate),
        "per_request_output_tok_s": {"mean": rounded(sum(rates) / len(rates)) if rates else None,
                                     "p50": rounded(percentile(rates, 50)), "min": rounded(min(rates)) if rates else None},
        "ttft_ms": distribution([r["ttft_s"] for r in good if r["ttft_s"] is not None], 1000.0),
        "itl_ms": distribution(itls, 1000.0, 3),
        "e2e_ms": distribution([r["latency_s"] for r in good], 1000.0),
        "errors": errors,
        "error_examples": examples,
        "token_count_source": sources[0] if len(sources) == 1 else ("mixed" if sources else None),
    }
