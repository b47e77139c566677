# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark prompts: deterministic, sized, and coding tasks that name code that exists."""

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _prompts as bp


def test_prompts_are_deterministic_and_sized():
    a = bp.build_prompt("coding", 7, 3, 4000)
    assert a == bp.build_prompt("coding", 7, 3, 4000)
    assert a != bp.build_prompt("coding", 7, 4, 4000) and a != bp.build_prompt("coding", 8, 3, 4000)
    text = a[-1]["content"]
    assert 0.9 * 16000 <= len(text) + len(a[0]["content"]) <= 16000
    # real-looking code, and the task names a function or class that exists in it
    assert "def " in text and "# ---- file: " in text and "\n\nTask: " in text
    task = text.rsplit("Task: ", 1)[1]
    named, path = task.split("`")[1], task.split("`")[3]
    assert ("def %s(" % named) in text or ("class %s(" % named) in text
    assert ("# ---- file: %s ----" % path) in text
    r = bp.build_prompt("random", 7, 3, 1000)
    assert len(r) == 1 and 3900 <= len(r[0]["content"]) <= 4000 and r == bp.build_prompt("random", 7, 3, 1000)
    with pytest.raises(bp.BenchmarkError, match="unknown dataset"):
        bp.build_prompt("sharegpt", 0, 0, 10)


def test_synthetic_code_parses_as_python_and_has_no_needle():
    code, symbols = bp.synthetic_code("x", 200000)
    assert 0.9 * 200000 <= len(code) <= 200000
    for part in code.split("# ---- file: ")[1:-1]:
        compile(part.split("\n", 1)[1], "<generated>", "exec")  # each whole file is valid Python (the last may be cut)
    assert "needle" not in code.lower()
    kinds = set(kind for _p, _n, kind in symbols)
    assert kinds == {"function", "class"} and len(set(p for p, _n, _k in symbols)) > 50
    for path, name, kind in symbols:
        at = code.index("# ---- file: %s ----" % path)
        assert ("%s %s(" % ("def" if kind == "function" else "class", name)) in code[at:]
