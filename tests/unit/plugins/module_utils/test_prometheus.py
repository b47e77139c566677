# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_prometheus: the text exposition format's labels, escapes and special values, bounded, never raising."""

import ast
import json
import pathlib
import re
import shutil
import subprocess

import pytest
import sglang_source
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _prometheus as prom
from ansible_collections.llmops.sglang.plugins.module_utils import _router_workers as rw

ROOT = pathlib.Path(__file__).resolve().parents[4]


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


def _fixture(name):
    return (ROOT / "tests" / "fixtures" / "prometheus" / name).read_text()


def test_both_spellings_sglang_serves_are_in_its_source():
    """SGLang 0.5.23 serves sglang: from its collectors and sglang_ from /v1/loads (the samples' MANIFEST)."""
    srt = sglang_source.srt_dir()
    colon = [n.value for n in ast.walk(sglang_source.parse(srt / "observability" / "metrics_collector.py"))
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("sglang:")]
    assert {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_requests_total"} <= set(colon)
    loads = sglang_source.parse(srt / "entrypoints" / "v1_loads.py")
    heads = [n.values[0].value for n in ast.walk(loads) if isinstance(n, ast.JoinedStr) and n.values
             and isinstance(n.values[0], ast.Constant)]
    assert "sglang_" in heads
    assert set(prom.METRIC_PREFIXES) == {"sglang:", "sglang_"}


def test_either_spelling_is_read_from_real_samples():
    colon = prom.parse_prometheus(_fixture("sglang-0.5.23-metrics.prom"))["metrics"]
    underscore = prom.parse_prometheus(_fixture("sglang-0.5.23-v1-loads.prom"))["metrics"]
    assert [s["value"] for s in prom.sglang_samples(colon, "num_running_reqs")] == [3.0]
    assert sorted((s["labels"]["dp_rank"], s["value"]) for s in prom.sglang_samples(underscore, "num_running_reqs")) \
        == [("0", 3.0), ("1", 2.0)]
    assert prom.sglang_samples(colon, "num_requests_total")[0]["labels"]["is_streaming"] == "false"
    assert prom.sglang_samples(underscore, "num_queue_reqs") == []
    # the router drain sums the in-flight gauges whichever spelling the server used
    assert rw.in_flight(colon) == 5 and rw.in_flight(underscore) == 5
    # names of other programs on the same endpoint are not SGLang's
    assert prom.parse_prometheus("process_cpu_seconds_total 1\nsglangx_y 2\n")["kept"] == 0


def test_render_escapes_and_round_trips():
    families = [{"name": "llmops_sglang_x_ok", "help": 'back\\slash "quoted"\nsecond line', "samples": [
        {"labels": {"unit": 'a"b\\c\nd', "kv_dtype": "bf16"}, "value": True},
        {"labels": {"unit": "u2", "kv_dtype": "fp8"}, "value": 0.25},
        {"labels": {"unit": "u3", "kv_dtype": "fp8"}, "value": float("nan")}]},
        {"name": "llmops_sglang_y", "type": "counter", "help": "y", "samples": [{"value": 7}]}]
    text = prom.render(families)
    assert '# HELP llmops_sglang_x_ok back\\\\slash "quoted"\\nsecond line\n' in text
    assert 'llmops_sglang_x_ok{kv_dtype="bf16",unit="a\\"b\\\\c\\nd"} 1\n' in text
    back = prom.parse_prometheus(text, prefix="llmops_sglang_")
    assert back["malformed_lines"] == 0
    assert back["metrics"]["llmops_sglang_x_ok"][0] == {"labels": {"unit": 'a"b\\c\nd', "kv_dtype": "bf16"}, "value": 1.0}
    assert back["metrics"]["llmops_sglang_x_ok"][2]["value"] == "NaN"
    assert back["metrics"]["llmops_sglang_y"] == [{"labels": {}, "value": 7.0}]


@pytest.mark.parametrize("families, cause", [
    ([{"name": "sglang:x", "help": "h", "samples": []}], "not a Prometheus metric name"),
    ([{"name": "1x", "help": "h", "samples": []}], "not a Prometheus metric name"),
    ([{"name": "x", "help": " ", "samples": []}], "no help text"),
    ([{"name": "x", "help": "h", "type": "histogram", "samples": []}], "type 'histogram'"),
    ([{"name": "x", "help": "h", "samples": [{"labels": {"__name__": "y"}, "value": 1}]}], "label name '__name__'"),
    ([{"name": "x", "help": "h", "samples": [{"labels": {"a-b": "y"}, "value": 1}]}], "label name 'a-b'"),
    ([{"name": "x", "help": "h", "samples": [{"labels": {"a": 1}, "value": 1}]}], "not a string"),
    ([{"name": "x", "help": "h", "samples": [{"value": "1"}]}], "not a number"),
    ([{"name": "x", "help": "h", "samples": [{"value": 1}, {"labels": {}, "value": 2}]}], "two samples"),
    ([{"name": "x", "help": "h", "samples": []}, {"name": "x", "help": "h", "samples": []}], "given twice"),
])
def test_render_refuses_what_the_format_does_not_take(families, cause):
    with pytest.raises(prom.RenderError, match=re.escape(cause)):
        prom.render(families)


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian package prometheus; make host-packages) is absent")
def test_rendered_text_passes_promtool():
    text = prom.render([{"name": "llmops_sglang_x_ok", "help": 'h "q"\n\\', "samples": [
        {"labels": {"unit": 'a"b\\c\nd'}, "value": False}, {"labels": {"unit": "b"}, "value": 2.5e-9}]}])
    run = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    # and promtool does fail on what the renderer refuses (the check can fail)
    bad = subprocess.run(["promtool", "check", "metrics"], input=b'x{a="b} 1\n', capture_output=True, timeout=60, check=False)
    assert bad.returncode != 0
