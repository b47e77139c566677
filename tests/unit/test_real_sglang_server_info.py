# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""server_info on what a real SGLang 0.5.16 answered on an H200: the /server_info answers of the six scenarios
of the harness's run at b2f32da (tests/fixtures/real-sglang, MANIFEST there).

The release is 0.5.16 (the answer's ``version``; without it, the log's ServerArgs repr); the running KV dtype
is the schedulers' (``internal_states[*].kv_cache_dtype``: ``fp8_e4m3`` under ``auto`` on the trap checkpoint,
where the top level says ``auto``), the flag the top-level value; what ``kv_summary``/``kv_report`` make of the
answers is what the module reported on the H200. The answers' bytes are also served over HTTP to ``gather``.
"""

from __future__ import annotations

import json
import pathlib
from http.server import BaseHTTPRequestHandler

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _server_info as si
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import audit_path

from sim_harness import LocalServer  # tests/unit/sim_harness.py

ROOT = pathlib.Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real-sglang"
KEY = "rg-test-key-not-a-secret"
INTERNAL = "/server_info internal_states[*].kv_cache_dtype"
# scenario: (the flag, the running KV dtype, max_total_num_tokens)
SCENARIOS = {
    "trap-auto": ("auto", "fp8_e4m3", 87380569),
    "trap-bf16": ("bf16", "bf16", 43690284),
    "trap-fp8": ("fp8_e4m3", "fp8_e4m3", 87380569),
    "hybrid-bf16": ("bf16", "bf16", 23003534),
    "hybrid-fp8": ("fp8_e4m3", "fp8_e4m3", 46007069),
    "trap-bf16-logms": ("bf16", "bf16", 43690284),
}


def answer_bytes(name, kind="server_info"):
    return (REAL / ("sglang-0.5.16-h200-%s.%s.json" % (name, kind))).read_bytes()


def answer(name):
    return json.loads(answer_bytes(name))


def recorded(name):
    return json.loads((REAL / ("sglang-0.5.16-h200-%s.result.json" % name)).read_text(encoding="utf-8"))["server_info"]


def log_facts(name):
    return audit_path(str(REAL / ("sglang-0.5.16-h200-%s.log" % ("trap-bf16-forged" if name == "trap-bf16" else name))))["facts"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_release_and_kv_dtype_of_a_real_answer(name):
    flag, running, tokens = SCENARIOS[name]
    summary = si.kv_summary(si.clean(answer(name)))
    report = si.kv_report(summary)
    assert (report["release"], report["release_source"]) == ("0.5.16", "/server_info version 0.5.16")
    assert (report["flag"], report["running"], report["running_source"], report["schedulers"]) == (flag, running, INTERNAL, [running])
    assert (report["server_args"], report["flag_source"]) == (flag, "/server_info kv_cache_dtype")
    assert (summary["launch_command"], summary["max_total_num_tokens"], summary["tp_size"]) == (None, tokens, 1)
    # what the module reported on the H200, and what the harness's verdict shows of it
    assert report == recorded(name)["kv_cache_dtype"]
    row = next(r for r in json.loads((REAL / "verdict-all.json").read_text(encoding="utf-8"))["scenarios"] if r["scenario"] == name)
    assert row["server_info_kv_cache_dtype"] == "running=%s, flag=%s, schedulers=['%s']" % (running, flag, running)


def test_under_auto_only_the_schedulers_say_fp8():
    """trap-auto: the top level keeps the flag as typed; read by 0.5.23's rules the answer hides the FP8 cache."""
    real = answer("trap-auto")
    assert (real["kv_cache_dtype"], real["internal_states"][0]["kv_cache_dtype"]) == ("auto", "fp8_e4m3")
    as_0_5_23 = si.kv_report(si.kv_summary(si.clean(dict(real, version="0.5.23"))))
    assert (as_0_5_23["release"], as_0_5_23["running"]) == ("0.5.23", None)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_without_a_version_the_logs_dump_decides_the_release(name):
    """The real log's ServerArgs repr (server_args_format 'repr') gives 0.5.16's rules to an answer without version."""
    flag, running, _tokens = SCENARIOS[name]
    unversioned = dict(answer(name))
    del unversioned["version"]
    fmt = log_facts(name)["server_args_format"]
    report = si.kv_report(si.kv_summary(si.clean(unversioned), fmt))
    assert (report["release"], report["flag"], report["running"]) == ("0.5.16", flag, running)
    assert "ServerArgs repr" in report["release_source"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_module_result_is_the_answer_with_the_key_redacted(name):
    raw = answer(name)
    assert raw["api_key"] == KEY and "launch_command" not in raw and raw["version"] == "0.5.16"
    cleaned = si.clean(raw, KEY)
    assert KEY not in json.dumps(cleaned) and cleaned["api_key"] != KEY
    got = recorded(name)["server_info"]
    if name == "trap-bf16":
        # the benchmark ran between the module's read and the harness's fetch
        for state in (got, cleaned):
            state["internal_states"][0].pop("last_gen_throughput")
    assert cleaned == got


class RealAnswers(LocalServer):
    """The recorded answers' bytes on a loopback port, behind the key as SGLang 0.5.16 had them (/metrics: 404)."""

    def __init__(self, name):
        routes = {"/server_info": answer_bytes(name)}
        if (REAL / ("sglang-0.5.16-h200-%s.model_info.json" % name)).exists():
            routes.update({"/get_model_info": answer_bytes(name, "model_info"), "/v1/models": answer_bytes(name, "models")})

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args):
                return

            def do_GET(self):
                if self.headers.get("Authorization") != "Bearer " + KEY:
                    status, body = 401, b'{"error":"Unauthorized"}'
                else:
                    status, body = (200, routes[self.path]) if self.path in routes else (404, b'{"detail":"Not Found"}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        LocalServer.__init__(self, Handler)


@pytest.mark.parametrize("name", ["trap-auto", "trap-bf16", "hybrid-bf16"])
def test_gather_over_http_reports_what_the_module_reported_on_the_h200(name):
    served = RealAnswers(name)
    try:
        endpoints = ["server_info", "model_info", "models", "metrics"] if name != "trap-auto" else ["server_info", "metrics"]
        got = si.gather(served.url, KEY, endpoints, timeout=5)
        refused = si.gather(served.url, None, ["server_info"], timeout=5)
    finally:
        served.close()
    h200 = recorded(name)
    for key in ("kv_cache_dtype", "max_total_num_tokens", "version"):
        assert got[key] == h200[key], key
    assert [e.split(":")[0] for e in got["errors"]] == ["metrics"] and "--enable-metrics" in got["errors"][0]
    assert got["errors"][0].replace(served.url, "http://127.0.0.1:30000") == h200["errors"][0]
    if name != "trap-auto":
        # /v1/models stamps each answer with the time it was made
        models = [[dict(m, created=None) for m in res["models"]] for res in (got, h200)]
        assert (got["model_info"], got["served_model_names"]) == (h200["model_info"], h200["served_model_names"])
        assert models[0] == models[1] and got["served_model_names"] == [answer(name)["model_path"]]
    assert KEY not in json.dumps(got)
    assert refused["endpoints"]["server_info"]["error"]["class"] == "unauthorized"
