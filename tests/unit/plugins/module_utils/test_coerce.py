# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one set of coercion rules: booleans are Ansible's own, integers Python's and Jinja's."""

import math

import pytest
from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE, boolean
from jinja2 import Environment

from ansible_collections.llmops.sglang.plugins.module_utils import _coerce as c


def test_boolean_words_are_ansibles():
    assert c.TRUE_WORDS == set(w for w in BOOLEANS_TRUE if isinstance(w, str))
    assert c.FALSE_WORDS == set(w for w in BOOLEANS_FALSE if isinstance(w, str))


@pytest.mark.parametrize("value", [True, False, 1, 0, 1.0, 0.0, 2, -1, "yes", " No ", "ON", "off", "y", "N", "t", "F",
                                   "1", "0", "true", "False", "", "none", "maybe", None, [], {}, [1], 0.5])
def test_truthy_is_ansibles_lenient_boolean(value):
    try:
        expected = boolean(value, strict=False)
    except TypeError:
        # ansible-core 2.18's boolean() looks a list or dict up in a set and raises; later releases answer False
        expected = False
    assert c.truthy(value) is expected


@pytest.mark.parametrize("value", [True, False, 1, 0, "yes", " No ", "ON", "off", "y", "n", "t", "f", "1", "0"])
def test_boolean_or_none_agrees_with_ansibles_strict_boolean(value):
    assert c.boolean_or_none(value) is boolean(value, strict=True)


@pytest.mark.parametrize("value", ["", "none", "maybe", "2", None, 2, 0.5, [], {"a": 1}, b"yes"])
def test_boolean_or_none_refuses_what_ansible_refuses(value):
    assert c.boolean_or_none(value) is None


@pytest.mark.parametrize("value,empty", [(None, True), ("", True), ("  ", True), ("None", True), ("NULL", True),
                                         ("0", False), (0, False), (False, False), ("none of it", False)])
def test_is_empty(value, empty):
    assert c.is_empty(value) is empty


@pytest.mark.parametrize("value,expected", [(8, 8), ("8", 8), (" 12 ", 12), (3.9, 3), (-3.9, -3), (True, 1),
                                            ("8.5", None), ("x", None), (None, None), ([], None), (math.inf, None),
                                            (math.nan, None)])
def test_to_int_is_pythons_int(value, expected):
    assert c.to_int(value) == expected
    assert c.to_int(value, 0) == (0 if expected is None else expected)


@pytest.mark.parametrize("value", [8, "8", "42.7", "-3.9", 3.9, True, None, "", "x", "1e3", [], {}, "0x1A", " 7 "])
def test_jinja_int_is_jinjas_int_filter(value):
    assert str(c.jinja_int(value)) == Environment().from_string("{{ v | int }}").render(v=value)


@pytest.mark.parametrize("value", ["inf", "nan", math.inf, math.nan, "1e999"])
def test_jinja_int_of_no_finite_number_is_zero(value):
    assert c.jinja_int(value) == 0


@pytest.mark.parametrize("value,expected", [(1.5, 1.5), ("0.9", 0.9), (2, 2.0), ("x", 0.0), (None, 0.0), ([], 0.0)])
def test_to_float(value, expected):
    assert c.to_float(value) == expected
    assert c.to_float("x", None) is None


@pytest.mark.parametrize("value,expected,with_digits", [
    (8, 8, 8), (8.0, 8, 8), (-2, -2, -2), (8.5, None, None), (True, None, None), (False, None, None),
    ("8", None, 8), (" 8 ", None, 8), ("-8", None, None), ("8.0", None, None), ("²", None, None), ("", None, None),
    (math.inf, None, None), (math.nan, None, None), (None, None, None), ([8], None, None)])
def test_whole_number(value, expected, with_digits):
    assert c.whole_number(value) == expected
    assert c.whole_number(value, digits=True) == with_digits


@pytest.mark.parametrize("value,expected", [(1, 1), (8.0, 8), ("8", 8), (0, None), ("0", None), (-1, None), (True, None)])
def test_whole_number_with_a_minimum(value, expected):
    assert c.whole_number(value, digits=True, minimum=1) == expected


@pytest.mark.parametrize("value, expected", [("torch.bfloat16", "bfloat16"), (" BF16 ", "bf16"), ("torch.Float8_E4M3FN", "float8_e4m3fn"),
                                             ("int8", "int8"), ("torch.", None), ("  ", None), (None, None), (16, None)])
def test_dtype_name_strips_torch_and_case(value, expected):
    assert c.dtype_name(value) == expected


def test_dtype_name_callers_keep_their_answer_for_unknown_names():
    from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint, _kv_guard
    # the checkpoint knows only floating model dtypes; the guard sorts every name into a class
    assert [_checkpoint.normalize_model_dtype(v) for v in ("torch.bfloat16", "Half", "torch.int8", "", None)] == \
        ["bfloat16", "float16", None, None, None]
    assert [_kv_guard.classify_dtype(v) for v in ("torch.bfloat16", " FP8_E4M3 ", "torch.int8", "", None, "Auto")] == \
        ["bf16", "fp8", "unknown", "unknown", "unknown", "auto"]
    assert _kv_guard._same_flag("torch.INT8", " int8") and not _kv_guard._same_flag("int8", "int4")
