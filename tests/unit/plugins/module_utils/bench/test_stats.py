# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark statistics: percentiles and the report of one level."""

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _stats as bs


def test_percentile_matches_linear_interpolation():
    assert bs.percentile([4, 1, 3, 2], 50) == 2.5
    assert bs.percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)
    assert bs.percentile([10], 99) == 10.0 and bs.percentile([], 50) is None


def fake_result(tokens, ttft, gaps, ok=True, kind=None, source="usage"):
    return {"ok": ok, "error": None if ok else {"kind": kind, "message": kind + " happened"}, "ttft_s": ttft, "itl_s": gaps,
            "latency_s": (ttft or 0.5) + sum(gaps), "decode_s": sum(gaps), "output_tokens": tokens, "token_source": source,
            "prompt_tokens": 100, "started": 0.0, "finished": (ttft or 0.5) + sum(gaps)}


def test_summarize_level_counts_only_measured_successes():
    res = [fake_result(11, 0.1, [0.01] * 10), fake_result(11, 0.3, [0.02] * 10), fake_result(0, None, [], ok=False, kind="timeout"),
           fake_result(0, None, [], ok=False, kind="timeout")]
    lv = bs.summarize_level(4, res, 2.0)
    assert (lv["requests"], lv["succeeded"], lv["failed"]) == (4, 2, 2)
    assert lv["aggregate_output_tok_s"] == 11.0  # 22 tokens / 2 s
    assert lv["per_request_output_tok_s"] == {"mean": 75.0, "p50": 75.0, "min": 50.0}  # 10 tokens in 0.1 s and 0.2 s
    assert lv["ttft_ms"]["p50"] == 200.0 and lv["itl_ms"]["p99"] == 20.0
    assert lv["errors"] == {"timeout": 2} and lv["error_examples"] == ["timeout happened"]
    assert lv["token_count_source"] == "usage"
