# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's regression gate and its baseline."""

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _gate as bg
from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError


def test_gate_passes_fails_and_explains():
    levels = [{"concurrency": 1, "aggregate_output_tok_s": 170.0}, {"concurrency": 32, "aggregate_output_tok_s": 1800.0}]
    gate = bg.evaluate_gate(levels, {"1": 172, 32: 2100}, 0.9)
    assert gate["enabled"] and not gate["passed"]
    assert [c["passed"] for c in gate["checks"]] == [True, False]
    assert "C=32 1800.0 tok/s is 86% of the baseline 2100.0" in gate["reason"]
    assert bg.evaluate_gate(levels, {1: 172, 32: 2100}, 0.85)["passed"] is True
    assert bg.evaluate_gate(levels, None)["enabled"] is False
    none = bg.evaluate_gate(levels, {8: 900})
    assert none["passed"] is False and "no measured concurrency level has a baseline" in none["reason"]
    with pytest.raises(BenchmarkError, match="not a concurrency level"):
        bg.evaluate_gate(levels, {"C1": 3})
    with pytest.raises(BenchmarkError, match="positive number"):
        bg.evaluate_gate(levels, {1: -3})


@pytest.mark.parametrize("value", [10 ** 400, float("inf"), "1e999", -1, 0, "x", None, True])
def test_a_baseline_that_is_not_a_finite_positive_number_is_named(value):
    # 10**400 raised OverflowError ("int too large to convert to float") from float()
    with pytest.raises(BenchmarkError, match="baseline for concurrency 8 must be a positive number of tok/s"):
        bg.normalize_baseline({"8": value})
