# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_prometheus: the text exposition format's labels, escapes and special values, bounded, never raising."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _prometheus as prom


def test_prometheus_labels_escapes_and_special_values():
    text = ('sglang:x{a="q\\"uote",b="back\\\\slash",c="new\\nline",d="com,ma"} NaN\n'
            'sglang:y +Inf 1700000000000\nsglang:z{} -1.5e-3\n')
    out = prom.parse_prometheus(text)
    assert out["metrics"]["sglang:x"] == [{"labels": {"a": 'q"uote', "b": "back\\slash", "c": "new\nline", "d": "com,ma"},
                                           "value": "NaN"}]
    assert out["metrics"]["sglang:y"][0]["value"] == "+Inf"
    assert out["metrics"]["sglang:z"][0]["value"] == -0.0015
    assert out["malformed_lines"] == 0


def test_prometheus_sample_cap():
    text = "\n".join("sglang:s{i=\"%d\"} 1" % i for i in range(50))
    out = prom.parse_prometheus(text, max_samples=10)
    assert out["kept"] == 10 and out["samples"] == 50 and out["truncated"] is True


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400) | st.binary(max_size=400))
def test_prometheus_parser_never_raises(text):
    out = prom.parse_prometheus(text)
    lines = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).splitlines()
    assert out["samples"] + out["malformed_lines"] <= len(lines)
    json.dumps(out, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(['sglang:a', 'x', '{', '}', '"', '\\', '=', ',', ' ', '1', 'NaN', '+Inf', 'le', '\n', '#']),
                max_size=40))
def test_prometheus_parser_on_near_valid_text(tokens):
    prom.parse_prometheus("".join(tokens))
