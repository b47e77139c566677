# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_report_text: log and server text stays text, on a terminal and in the Markdown reports.

The Markdown side is judged by a real CommonMark parser with GitHub's tables (markdown-it-py, requirements.txt):
whatever the text, escaped it parses back to exactly the characters ``plain`` shows, in the one table cell, code
span or code block it was written into. The reports themselves (audit.md, the benchmark's report.md) are rendered
from their role templates with forged values from a log and a server.
"""

from __future__ import annotations

import json
import pathlib
import re
import unicodedata

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ansible_collections.llmops.sglang.plugins.filter.markdown import markdown as markdown_filter
from ansible_collections.llmops.sglang.plugins.plugin_utils import _audit_checks
from ansible_collections.llmops.sglang.plugins.plugin_utils import _benchmark_report
from ansible_collections.llmops.sglang.plugins.plugin_utils import _site_report
from ansible_collections.llmops.sglang.plugins.plugin_utils._report_text import BIDI_CONTROLS, markdown, plain

ROOT = pathlib.Path(__file__).resolve().parents[4]
MD = MarkdownIt("commonmark").enable("table")
# What a client or a log can put into a value: ANSI colours and cursor moves, a bidi override, C1 CSI, a line break
# that opens a new table row, pipes, a code fence, a link, an image, raw HTML, an entity for U+202E, a heading.
FORGED = ("ok\x1b[2K\x1b[1A\x1b[32mPASS\x1b[0m \u202egnirts\u202c \x9b31m\r\n| forged | row |\n```\n</table><script>x()</script>"
          " [click](http://evil.example) ![i](http://evil.example/i.png) &#x202e; <http://evil.example> `tick`` \u2028# H")
# Characters no terminal line may carry raw: C0 but the line break of a multi-line message, DEL, C1, bidi, separators.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def cells(source):
    """[[inline text of each cell] per body row] of the one table in source, and whether anything but text was read
    (a link, an image, HTML, emphasis, code)."""
    rows, row, other = [], None, []
    for token in MD.parse(source):
        if token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            rows.append(row)
        elif token.type == "inline" and row is not None:
            other += [c.type for c in token.children if c.type != "text"]
            row.append("".join(c.content for c in token.children))
    return rows[1:], other


def test_plain_shows_every_control_bidi_and_separator_character_escaped():
    every = "".join(chr(c) for c in list(range(0x20)) + [0x7F] + list(range(0x80, 0xA0)) + list(BIDI_CONTROLS) + [0x2028, 0x2029])
    out = plain(every)
    assert RAW.search(out) is None and "\n" not in out and out.isascii()
    assert plain("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m" and plain("a\tb\r\nc") == "a\\tb\\r\\nc"
    assert plain("a\u202eb\x9bc") == "a\\u202eb\\x9bc"
    assert plain("line 1\nline 2\x1b", lines=True) == "line 1\nline 2\\x1b"
    # every other character stays: format characters that are not bidi controls, accents, CJK, emoji
    kept = "caf\u00e9 \u00a0 \u4e2d\u6587 \U0001f600 \u200b"
    assert plain(kept) == kept and plain(None) == "None" and plain(8192) == "8192"
    # Unicode's own Bidi_Control list
    assert set(BIDI_CONTROLS) == {c for c in range(0x110000) if unicodedata.bidirectional(chr(c)) in
                                  ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")} | {0x061C, 0x200E, 0x200F}


def test_a_forged_value_stays_in_its_table_cell_as_text():
    rows, other = cells("| a | b |\n|---|---|\n| %s | end |\n" % markdown(FORGED))
    assert rows == [[plain(FORGED).strip(), "end"]] and other == []


def test_a_forged_value_stays_in_its_code_span_and_code_block():
    code = MD.parse("- %s\n" % markdown(FORGED, "code"))
    inline = [t for t in code if t.type == "inline"][0].children
    assert [(c.type, c.content) for c in inline] == [("code_inline", plain(FORGED))]
    block = list(MD.parse("before\n\n%s\n\nafter\n" % markdown(FORGED + "\nsecond line", "block")))
    fences = [t for t in block if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == plain(FORGED + "\nsecond line", lines=True) + "\n"
    assert [t.content for t in block if t.type == "inline"] == ["before", "after"]


@pytest.mark.parametrize("text", ["# heading", "> quote", "- item", "+ item", "1. item", "2) item", "===", "---", "***",
                                  "    code", "<div>", "[x]: http://evil.example"])
def test_a_value_at_the_start_of_a_line_is_a_paragraph_of_text(text):
    tokens = MD.parse("%s\n" % markdown(text))
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert "".join(c.content for c in tokens[1].children) == text.strip()


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_any_text_parses_back_to_what_plain_shows(text):
    rows, other = cells("| a | b |\n|---|---|\n| %s | end |\n" % markdown(text))
    # a cell's edges are trimmed by the table rule; what is inside is exactly the plain text
    assert other == [] and len(rows) == 1 and rows[0][1] == "end" and rows[0][0] == rows[0][0].strip()
    assert plain(text).strip(" \t\n") == rows[0][0] or plain(text).strip() == rows[0][0].strip()
    if plain(text).strip(" "):
        code = [t for t in MD.parse("- %s\n" % markdown(text, "code")) if t.type == "inline"][0].children
        assert [(c.type, c.content) for c in code] == [("code_inline", plain(text))]
    assert RAW.search(plain(text)) is None and RAW.search(plain(text, lines=True)) is None


def test_the_filter_is_the_function_and_names_a_bad_kind():
    assert markdown_filter(FORGED) == markdown(FORGED) and markdown_filter("x", "code") == "` x `"
    from ansible.errors import AnsibleFilterError  # pylint: disable=import-outside-toplevel

    with pytest.raises(AnsibleFilterError, match="kind must be one of text, code, block, not 'html'"):
        markdown_filter("x", "html")


# --- the reports and the play output ---------------------------------------------------------------------------

AUDIT_FACTS = ROOT / "tests" / "fixtures" / "audit" / "lab-auto.json"


def _forged_audit_facts(forged=FORGED):
    """The lab host's real facts with ``forged`` text where a log, a server and systemd speak."""
    facts = json.loads(AUDIT_FACTS.read_text())
    facts.update(host="au-auto", model_dir="/models/q" + forged, unit_show="ActiveState=active" + forged.replace("\n", " "))
    facts["server"]["server_info"]["version"] = "0.5.23" + forged
    facts["server"]["server_info"]["quantization"] = "modelopt_fp4" + forged
    for finding in facts["log"].get("findings") or []:
        for evidence in finding.get("evidence") or []:
            evidence["text"] = evidence.get("text", "") + forged
    facts["log"]["facts"]["phase"] = "ready" + forged
    facts["guard"]["msg"] = facts["guard"].get("msg", "") + forged
    facts["guard"]["table"] = facts["guard"].get("table", "") + "\n" + forged
    return facts


def _render(tmp_path, template, variables):
    """The role template rendered by ansible-playbook (its filters loaded the way a play loads them)."""
    import os  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    (tmp_path / "vars.json").write_text(json.dumps(variables))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                                        "tasks": [{"ansible.builtin.template": {"src": str(template),
                                                                                                "dest": str(tmp_path / "out.md")}}]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-e", "@" + str(tmp_path / "vars.json"),
                           str(tmp_path / "play.yml")], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return (tmp_path / "out.md").read_text()


def test_audit_md_keeps_its_structure_with_forged_log_and_server_text(tmp_path):
    defaults = yaml.safe_load((ROOT / "roles" / "audit" / "defaults" / "main.yml").read_text())
    settings_ = dict((k, defaults["audit_" + k]) for k in _audit_checks.DEFAULTS if "audit_" + k in defaults and k != "report_dir")
    settings_.update(report_dir="/srv/reports", unit="sglang-qwen.service", url="http://10.0.0.11:30000")

    def render(facts, name):
        result = _audit_checks.audit(facts, settings_)
        (tmp_path / name).mkdir()
        return _render(tmp_path / name, ROOT / "roles" / "audit" / "templates" / "audit.md.j2", {
            "_audit_result": result,
            "audit_guard": result["guard"], "_audit_server": facts["server"], "_audit_log": facts["log"],
            "audit_mamba_slots_per_request": settings_["mamba_slots_per_request"]})

    forged_md, clean_md = render(_forged_audit_facts(), "forged"), render(_forged_audit_facts(" plain words"), "clean")

    def shape(source):
        return [(t.type, t.tag) for t in MD.parse(source) if t.type != "inline"]
    # the same headings, tables, rows, cells, lists and code blocks; no link, image or HTML; no raw control
    assert shape(forged_md) == shape(clean_md)
    inline = [c.type for t in MD.parse(forged_md) if t.type == "inline" for c in t.children]
    assert not {"link_open", "image", "html_inline", "html_block"} & set(inline)
    assert [t.content for t in MD.parse(forged_md) if t.type == "html_block"] == [  # the ansible_managed comment only
        t.content for t in MD.parse(clean_md) if t.type == "html_block"]
    assert RAW.search(forged_md.replace("\n", "")) is None
    assert "gnirts" in forged_md and "\\\\u202egnirts" in forged_md  # shown, escaped


def _strings(value):
    """Every key and string value of a nested structure (the set_stats summary)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_play_output_lines_carry_no_control_or_bidi_character():
    facts = _forged_audit_facts()
    result = _audit_checks.audit(facts, dict(_audit_checks.DEFAULTS, report_dir="/srv/reports", unit="u", url="http://h:1"))
    assert "modelopt_fp4\\x1b[2K" in json.dumps(result["checks"]) or result["summary"]["line"]
    for text in [result["summary"]["line"]] + list(_strings(result["stats"])):
        assert RAW.search(text) is None and "\n" not in text
    assert RAW.search(result["guard"]["message"]) is None and "\\x1b[32mPASS" in result["guard"]["message"]
    row = _site_report.summary_row("gpu1", {"audit_guard": {"verdict": "bf16" + FORGED}, "benchmark_summary": FORGED,
                                            "sglang_server_info": {"ready": True}})
    assert RAW.search(row) is None and "\n" not in row
    record = _benchmark_report.run_record({"benchmark_fail": True, "benchmark_report_dir": "/nonexistent"},
                                          {"msg": "server said " + FORGED}, None, "gpu1", now="2026-12-03T00:00:00Z")
    for text in (record["summary"], record["benchmark"]["msg"]):
        assert RAW.search(text) is None and "\\x1b[1A" in text


def test_benchmark_report_keeps_its_structure_with_forged_server_and_model_text(tmp_path):
    def render(forged, name):
        level = {"concurrency": 1, "requests": 4, "failed": 1, "aggregate_output_tok_s": 80.5, "token_count_source": "usage",
                 "per_request_output_tok_s": {"mean": 80.1, "min": 79.0}, "ttft_ms": {"p50": 90, "p90": 95, "p99": 99},
                 "itl_ms": {"p50": 12.0, "p90": 13.0, "p99": 14.0}, "errors": {"http_500" + forged: 1}}
        entry = {"time": "2026-12-03T00:00:00Z", "dataset": "random", "output_tok_s": {"1": 80.5}, "gate": None,
                 "canary": "3/3" + forged}
        canary = {"passed": False, "summary": "2/3" + forged, "hash": "abc", "drift": {"compared": False}, "caveats": [],
                  "checks": {"coding": {"correct": 1, "total": 1, "threshold": 1.0, "items": [
                      {"call": "f(1)", "expected": "2", "answer": "2" + forged, "error": None, "correct": True}]}}}
        (tmp_path / name).mkdir()
        return _render(tmp_path / name, ROOT / "roles" / "benchmark" / "templates" / "report.md.j2", {
            "_benchmark_result": {"model": "qwen" + forged, "summary": "ok" + forged, "levels": [level],
                                  "error": {"kind": "http" + forged, "message": "server said" + forged},
                                  "caveats": ["slow" + forged], "gate": {"enabled": False, "reason": "no baseline"}},
            "_benchmark_run": {"entry": entry, "history": [entry]}, "_benchmark_plan": {"baseline": {"note": None}},
            "_benchmark_canary": canary, "benchmark_canary": True, "benchmark_url": "http://10.0.0.11:30000",
            "benchmark_engine": "builtin", "benchmark_dataset": "random", "benchmark_input_tokens": 64,
            "benchmark_output_tokens": 32, "benchmark_summary": "ok" + forged, "benchmark_profile": "p",
            "benchmark_baseline": None})

    forged_md, clean_md = render(FORGED, "forged"), render(" plain words", "clean")

    def shape(source):
        return [(t.type, t.tag) for t in MD.parse(source) if t.type != "inline"]
    assert shape(forged_md) == shape(clean_md)
    inline = [c.type for t in MD.parse(forged_md) if t.type == "inline" for c in t.children]
    assert not {"link_open", "image", "html_inline"} & set(inline)
    assert RAW.search(forged_md.replace("\n", "")) is None and "gnirts" in forged_md
