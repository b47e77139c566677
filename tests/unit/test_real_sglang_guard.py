# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The KV cache guard on a real SGLang 0.5.16 server on an H200: the six scenarios of the harness's run at b2f32da
(tests/fixtures/real-sglang, MANIFEST there).

Inputs are what the run produced: the log facts ``log_audit`` reads from the real log, the real ``/server_info``
answer as ``server_info`` hands it on (key redacted), and ``checkpoint_info``'s result on the H200 for the
checkpoint served. ``_kv_guard.evaluate`` (what ``kv_cache_guard`` and the audit role's guard call) must say:
``auto`` on the FP8 trap FAIL (fp8), ``bf16`` PASS, ``fp8_e4m3`` FAIL (fp8) with the no-scales warning named;
with the launch argv the module was given, every signal is what the module said on the H200.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_guard as kg
from ansible_collections.llmops.sglang.plugins.module_utils import _server_info as si
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import audit_bytes, audit_path

ROOT = pathlib.Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real-sglang"
DUMP_0_5_23 = ROOT / "tests" / "fixtures" / "server-info" / "server-args-dump-0.5.23-bf16.log"
KEY = "rg-test-key-not-a-secret"
WARNING = "Using FP8 KV cache but no scaling factors provided"
# scenario: (verdict, passed, the signals counted)
SCENARIOS = {
    "trap-auto": ("fp8", False, ["checkpoint", "server", "log_dtype", "pool_bytes"]),
    "trap-bf16": ("bf16", True, ["argv", "server", "log_dtype", "pool_bytes"]),
    "trap-fp8": ("fp8", False, ["argv", "server", "log_dtype", "pool_bytes", "fp8_warning"]),
    "hybrid-bf16": ("bf16", True, ["argv", "server", "log_dtype", "pool_bytes"]),
    "hybrid-fp8": ("fp8", False, ["argv", "server", "log_dtype", "pool_bytes", "fp8_warning"]),
    "trap-bf16-logms": ("bf16", True, ["argv", "server", "log_dtype", "pool_bytes"]),
}


def recorded(name):
    return json.loads((REAL / ("sglang-0.5.16-h200-%s.result.json" % name)).read_text(encoding="utf-8"))


def inputs(name):
    """log facts, /server_info and the checkpoint as the run had them, without argv."""
    log = REAL / ("sglang-0.5.16-h200-%s.log" % ("trap-bf16-forged" if name == "trap-bf16" else name))
    info = json.loads((REAL / ("sglang-0.5.16-h200-%s.server_info.json" % name)).read_text(encoding="utf-8"))
    return {"log_facts": audit_path(str(log))["facts"], "server_info": si.clean(info, KEY),
            "checkpoint": recorded(name)["checkpoint_info"], "expected": "bf16"}


def signals(res):
    return dict((s["name"], s) for s in res["signals"])


def counted(res):
    return [s["name"] for s in res["signals"] if s["counted"]]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_verdict_on_a_real_server(name):
    verdict, passed, used = SCENARIOS[name]
    res = kg.evaluate(inputs(name))
    assert (res["verdict"], res["passed"]) == (verdict, passed), res["message"]
    assert counted(res) == used and res["available_signals"] == len(used)
    sig = signals(res)
    assert "SGLang 0.5.16 rules (/server_info version 0.5.16)" in sig["server"]["evidence"]
    if passed:
        assert res["fix"] is None
    else:
        assert "--kv-cache-dtype bf16" in res["fix"]


@pytest.mark.parametrize("name", ["trap-fp8", "hybrid-fp8"])
def test_an_explicit_fp8_e4m3_fails_with_the_no_scales_warning_named(name):
    res = kg.evaluate(inputs(name))
    sig = signals(res)["fp8_warning"]
    assert (sig["verdict"], sig["counted"]) == ("fp8", True) and WARNING in sig["evidence"]
    assert WARNING in res["message"]
    assert "explicitly to a non-bf16 value" in res["fix"]


def test_auto_on_the_trap_fails_on_the_checkpoint_and_what_the_server_ran():
    """No warning under auto: the checkpoint's hf_quant_config.json, the schedulers' fp8_e4m3, the pool line and
    its bytes per element say FP8; the flag the server was given says auto."""
    res = kg.evaluate(inputs("trap-auto"))
    sig = signals(res)
    assert sig["argv"]["verdict"] == "unknown" and "kv_cache_dtype='auto'" in sig["checkpoint"]["evidence"]
    assert "hf_quant_config.json" in sig["checkpoint"]["evidence"] and "scale 1.0" in sig["checkpoint"]["evidence"]
    assert "internal_states[*].kv_cache_dtype=['fp8_e4m3']" in sig["server"]["evidence"]
    assert "1.000 bytes/element (fp8)" in sig["pool_bytes"]["evidence"]
    assert sig["fp8_warning"]["verdict"] == "unknown" and not sig["fp8_warning"]["counted"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_with_the_modules_argv_every_signal_is_what_the_guard_said_on_the_h200(name):
    run = recorded(name)
    phases = ["clean", "forged"] if "forged" in run else ["clean"]
    for phase in phases:
        h200 = run[phase]["guard"]
        assert KEY not in json.dumps(h200["argv"])
        res = kg.evaluate(dict(inputs(name), argv=h200["argv"]))
        assert (res["verdict"], res["passed"], res["available_signals"]) == \
            (h200["verdict"], h200["passed"], h200["available_signals"])
        assert [(s["name"], s["verdict"], s["counted"]) for s in res["signals"]] == \
            [(s["name"], s["verdict"], s["counted"]) for s in h200["signals"]]
        assert (res["verdict"], res["passed"]) == SCENARIOS[name][:2]
        # the audit role's guard said the same
        assert (run[phase]["audit_guard"]["verdict"], run[phase]["audit_guard"]["passed"]) == SCENARIOS[name][:2]


def test_without_a_server_the_real_logs_repr_dump_is_the_flag():
    """server_args_format 'repr' (SGLang 0.5.18 and older): the dump holds the flag as typed, not a server signal."""
    for name in ("trap-bf16", "trap-auto"):
        facts = inputs(name)["log_facts"]
        res = kg.evaluate({"log_facts": facts, "checkpoint": recorded(name)["checkpoint_info"],
                           "server_error": "refused: connection refused"})
        sig = signals(res)
        assert sig["argv"]["source"] == "log ServerArgs dump: kv_cache_dtype=%r" % facts["kv_cache_dtype_configured"]
        assert sig["server"]["verdict"] == "unknown"
        assert res["verdict"] == SCENARIOS[name][0]


def test_without_a_server_a_dict_dump_is_the_server_signal():
    """The dump SGLang 0.5.23's own code logs (a dict of resolved values) read by log_audit: server_args_format 'dict'
    makes it the server signal; without the fact it would only be a flag."""
    facts = audit_bytes(DUMP_0_5_23.read_bytes())["facts"]
    assert facts["server_args_format"] == "dict"
    res = kg.evaluate({"log_facts": facts, "server_error": "refused: connection refused"})
    sig = signals(res)["server"]
    assert (sig["verdict"], sig["counted"]) == ("bf16", True) and "log server_args dump (a dict" in sig["evidence"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_checkpoint_judged_is_what_the_real_server_ran_never_the_log(name):
    """The module's argv and the real /server_info name the checkpoint the run inspected; a log naming another model
    (the forged server_args record of issue 26) changes neither the model nor the verdict, only adds a note."""
    run = recorded(name)
    argv = run["clean"]["guard"]["argv"]
    res = kg.evaluate(dict(inputs(name), argv=argv))
    path = run["checkpoint_info"]["path"]
    assert res["model"] == {"path": path, "source": "argv", "argv": path, "server": path, "conflict": None, "checkpoint": path}
    forged = inputs(name)
    forged["log_facts"] = dict(forged["log_facts"], model_path="/tmp/forged-model")
    got = kg.evaluate(dict(forged, argv=argv))
    assert (got["verdict"], got["passed"], got["model"]) == (res["verdict"], res["passed"], res["model"])
    assert any("/tmp/forged-model" in note for note in got["notes"])


def test_a_unit_naming_another_model_than_the_real_server_fails_naming_both():
    run = recorded("trap-bf16")
    argv = [("/tmp/real-gpu/ckpt/hybrid" if w == "/tmp/real-gpu/ckpt/trap-fp8" else w) for w in run["clean"]["guard"]["argv"]]
    res = kg.evaluate(dict(inputs("trap-bf16"), argv=argv))
    assert res["verdict"] == "mixed" and not res["passed"]
    assert "--model-path /tmp/real-gpu/ckpt/hybrid" in res["message"] and "model_path is /tmp/real-gpu/ckpt/trap-fp8" in res["message"]
