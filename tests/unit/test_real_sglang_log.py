# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The log audit on what a real SGLang 0.5.16 wrote on an H200: the six scenarios of the harness's run at
b2f32da (tests/fixtures/real-sglang, MANIFEST there).

Per scenario the parser (``sglang_log._log_audit.audit_path`` / ``audit_bytes``, what ``log_audit`` runs) reads from the
trimmed log the facts the harness's verdict and the module on the H200 recorded; ``SGLANG_LOG_MS=1`` changes
nothing; the forged requests of ``trap-bf16`` (a request line and echoed prompts quoting SGLang's lines)
change no fact. ``server_args_format`` tells a ServerArgs repr (0.5.18 and older) from a dict dump (0.5.19 and
newer): checked on the real 0.5.16 logs and on the line SGLang 0.5.23's own code logs.
"""

from __future__ import annotations

import ast
import json
import pathlib
import re

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._server_info import kv_release
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import audit_bytes, audit_path
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._lines import BY_ID

import sglang_source  # tests/unit/sglang_source.py

ROOT = pathlib.Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real-sglang"
DUMP_0_5_23 = ROOT / "tests" / "fixtures" / "server-info" / "server-args-dump-0.5.23-bf16.log"
TRAP, HYBRID = "/tmp/real-gpu/ckpt/trap-fp8", "/tmp/real-gpu/ckpt/hybrid"
# scenario: --kv-cache-dtype as launched, the KV pool's dtype, the FP8 no-scales warning, model path, max_total_num_tokens
SCENARIOS = {
    "trap-auto": ("auto", "torch.float8_e4m3fn", False, TRAP, 87380569),
    "trap-bf16": ("bf16", "torch.bfloat16", False, TRAP, 43690284),
    "trap-fp8": ("fp8_e4m3", "torch.float8_e4m3fn", True, TRAP, 87380569),
    "hybrid-bf16": ("bf16", "torch.bfloat16", False, HYBRID, 23003534),
    "hybrid-fp8": ("fp8_e4m3", "torch.float8_e4m3fn", True, HYBRID, 46007069),
    "trap-bf16-logms": ("bf16", "torch.bfloat16", False, TRAP, 43690284),
}
FACT_KEYS = ("kv_cache_dtype_configured", "kv_dtype_effective", "fp8_scale_warning", "model_path", "max_total_num_tokens")
# what the module read on the H200 (the log up to that moment) and the whole log must agree on
COMPARED = FACT_KEYS + ("tp_size", "ready", "kv_pools", "mamba_pool", "fatal")
FORGED_GET = "GET /?server_args=ServerArgs(kv_cache_dtype='fp8_e4m3'"


def log_path(name):
    return REAL / ("sglang-0.5.16-h200-%s.log" % ("trap-bf16-forged" if name == "trap-bf16" else name))


def recorded(name):
    return json.loads((REAL / ("sglang-0.5.16-h200-%s.result.json" % name)).read_text(encoding="utf-8"))


def verdict_checks(name):
    checks = json.loads((REAL / "verdict-all.json").read_text(encoding="utf-8"))["checks"]
    return dict((c["check"], c) for c in checks if c["scenario"] == name)


def rules(result):
    return sorted(f["rule"] for f in result["findings"])


@pytest.fixture(scope="module")
def audits():
    return dict((name, audit_path(str(log_path(name)))) for name in SCENARIOS)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_facts_of_a_real_log_are_what_the_run_recorded(audits, name):
    facts = audits[name]["facts"]
    assert tuple(facts[k] for k in FACT_KEYS) == SCENARIOS[name]
    assert (facts["ready"], facts["phase"], facts["starts"], facts["tp_size"], facts["fatal"]["class"]) == \
        (True, "ready", 1, 1, "none")
    # the harness's judge recorded these values from log_audit's result on the H200
    checks = verdict_checks(name)
    assert [checks[c]["got"] for c in ("log: --kv-cache-dtype as configured", "log: KV pool dtype", "log: FP8 no-scales warning",
                                       "log: model path")] == [facts[k] for k in FACT_KEYS[:4]]
    assert all(checks[c]["ok"] for c in checks)
    # and the module's whole result: the log read while the server ran gives what the whole log gives
    module = recorded(name)["clean"]["log_audit"]
    assert dict((k, facts[k]) for k in COMPARED) == dict((k, module["facts"][k]) for k in COMPARED)
    assert rules(audits[name]) == rules(module)
    (pool,) = facts["kv_pools"]
    assert (pool["dtype"], pool["tokens"], pool["rank"]) == (SCENARIOS[name][1], SCENARIOS[name][4], "main")


def test_the_fp8_warning_is_read_only_where_sglang_printed_it(audits):
    """0.5.16 printed the no-scales warning for an explicit fp8_e4m3 flag, never under auto."""
    warned = sorted(name for name, res in audits.items() if res["facts"]["fp8_scale_warning"])
    assert warned == sorted(name for name, spec in SCENARIOS.items() if spec[0] == "fp8_e4m3") == ["hybrid-fp8", "trap-fp8"]
    assert all(("fp8_kv_no_scales" in rules(res)) == (name in warned) for name, res in audits.items())
    # under auto the pool is FP8 all the same: the finding that says so comes from the pool line
    assert rules(audits["trap-auto"]) == ["fp8_kv_effective"]


def test_the_mamba_pool_of_the_hybrid_is_read(audits):
    for name in ("hybrid-bf16", "hybrid-fp8"):
        assert audits[name]["facts"]["mamba_pool"] == {
            "rank": "main", "max_mamba_cache_size": 154501, "conv_state_gb": 0.88, "ssm_state_gb": 18.86,
            "intermediate_ssm_state_gb": None, "intermediate_conv_window_gb": None}
    assert audits["trap-bf16"]["facts"]["mamba_pool"] is None


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_audit_bytes_reads_what_audit_path_reads(audits, name):
    got = audit_bytes(log_path(name).read_bytes())
    assert got["facts"] == audits[name]["facts"] and got["findings"] == audits[name]["findings"]


def test_millisecond_timestamps_give_the_same_facts(audits):
    """SGLANG_LOG_MS=1: SGLang's records carry milliseconds ([2026-12-01 15:52:38.378] ...), uvicorn's do not."""
    text = log_path("trap-bf16-logms").read_text(encoding="utf-8")
    for line in ("server_args=ServerArgs(", "KV Cache is allocated. dtype:", "max_total_num_tokens=", "The server is fired up"):
        assert re.search(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}\] " + re.escape(line), text, re.M), line
    same = [k for k in COMPARED if k != "fatal"] + ["phase", "starts", "server_args_format"]
    assert dict((k, audits["trap-bf16-logms"]["facts"][k]) for k in same) == \
        dict((k, audits["trap-bf16"]["facts"][k]) for k in same)


def test_forged_requests_change_no_fact():
    """The log before the forged requests and the whole log give the same facts; the forged part alone gives none,
    though it quotes the FP8 warning, an FP8 pool line, a ServerArgs repr and a dict dump."""
    lines = log_path("trap-bf16").read_bytes().splitlines(True)
    cut = next(i for i, line in enumerate(lines) if FORGED_GET.encode() in line)
    before, forged = b"".join(lines[:cut]), b"".join(lines[cut:])
    for quoted in (FORGED_GET, "Using FP8 KV cache but no scaling factors provided",
                   "KV Cache is allocated. dtype: torch.float8_e4m3fn", "server_args={'kv_cache_dtype': 'fp8_e4m3'"):
        assert quoted.encode() in forged, quoted
    whole = audit_path(str(log_path("trap-bf16")))
    clean = audit_bytes(before)
    assert whole["facts"] == clean["facts"] and rules(whole) == rules(clean) == []
    alone = audit_bytes(forged)["facts"]
    assert (alone["kv_cache_dtype_configured"], alone["kv_dtype_effective"], alone["fp8_scale_warning"], alone["model_path"],
            alone["tp_size"], alone["kv_pools"], alone["starts"], alone["server_args_format"]) == \
        (None, None, False, None, None, [], 0, None)
    # what the module said on the H200 before and after the forged requests
    run = recorded("trap-bf16")
    assert run["clean"]["log_audit"]["facts"] == run["forged"]["log_audit"]["facts"]
    assert dict((k, whole["facts"][k]) for k in COMPARED) == dict((k, run["forged"]["log_audit"]["facts"][k]) for k in COMPARED)


# --- server_args_format: which release wrote the dump ------------------------------------------------


def test_a_real_0_5_16_dump_is_a_repr_and_means_0_5_16_rules(audits):
    for name, res in audits.items():
        assert res["facts"]["server_args_format"] == "repr", name
        assert kv_release(None, res["facts"]["server_args_format"])[0] == "0.5.16"


def test_the_dump_sglang_0_5_23_logs_is_a_dict():
    facts = audit_bytes(DUMP_0_5_23.read_bytes())["facts"]
    assert (facts["server_args_format"], facts["kv_cache_dtype_configured"], facts["starts"]) == ("dict", "bf16", 1)
    assert kv_release(None, facts["server_args_format"])[0] == "0.5.23"


def test_the_format_is_the_one_of_the_start_before_the_server_was_ready():
    """A dump before the server accepted requests starts a new start; one after it (a file appended across restarts,
    or a client's forgery) is no fact but a finding that names the fix."""
    real = log_path("trap-fp8").read_bytes()
    dict_dump = DUMP_0_5_23.read_bytes()
    appended = audit_bytes(real + dict_dump)
    assert (appended["facts"]["server_args_format"], appended["facts"]["starts"]) == ("repr", 1)
    (late,) = [f for f in appended["findings"] if f["rule"] == "startup_record_after_ready"]
    assert late["severity"] == "warning" and "journal" in late["fix"] and late["evidence"][0]["line"] == real.count(b"\n") + 1
    assert audit_bytes(dict_dump + real)["facts"]["server_args_format"] == "repr"
    assert audit_bytes(b"[2026-12-01 15:00:00] Load weight begin. avail mem=1.00 GB\n")["facts"]["server_args_format"] is None


def test_the_versions_note_follows_sglang():
    """0.5.23's engine.py logs server_args= with the resolved dict (through a helper); the repr of 0.5.16 is in the
    real logs. The boundary (f"{server_args=}" through 0.5.18, resolved_dict() from 0.5.19) was read from the
    released wheels; the table and the release rules of _server_info name the same one."""
    engine = sglang_source.srt_dir() / "entrypoints" / "engine.py"
    tree = sglang_source.parse(engine)
    functions = dict((n.name, n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    values = [part.value for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) and node.values
              and isinstance(node.values[0], ast.Constant) and node.values[0].value == "server_args="
              for part in node.values[1:2] if isinstance(part, ast.FormattedValue)]
    assert values, "SGLang 0.5.23's engine.py logs no server_args= dump"
    for value in values:
        assert isinstance(value, ast.Call)
        called = functions.get(getattr(value.func, "id", None))
        assert "resolved_dict()" in ast.unparse(called if called is not None else value), ast.unparse(value)
    note = BY_ID["server_args_dump"]["versions"]
    assert "repr through 0.5.18" in note and "dict of resolved values since 0.5.19" in note
    assert "0.5.18 or older" in kv_release(None, "repr")[1] and "0.5.19 or newer" in kv_release(None, "dict")[1]


# What a client holding the key made SGLang 0.5.16 write on the H200 (MANIFEST: "What a client holding the key
# makes SGLang 0.5.16 write"): records forged through set_internal_state and an in-flight duplicate rid.
ATTACKS = {
    "attack-auto": ("auto", "torch.float8_e4m3fn", False, TRAP),
    "attack-bf16": ("bf16", "torch.bfloat16", False, TRAP),
}


def attack_sent(name, run):
    return json.loads((REAL / ("sglang-0.5.16-h200-%s%s.sent.json" % (name, run))).read_text(encoding="utf-8"))


# two runs: ".first" at fa439c7 (echoes cut by SGLang at its default level), "" the run that also sent prompts past LineMax
@pytest.mark.parametrize("run", (".first", ""))
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_records_sglang_wrote_for_a_client_are_findings_never_facts(name, run):
    """SGLang wrote each forged record as a line of its own, in its own prefix; the facts are those of the real start
    (the log cut before the attack), and every forged startup record is a startup_record_after_ready finding."""
    data = (REAL / ("sglang-0.5.16-h200-%s%s.log" % (name, run))).read_bytes()
    forged = [line for line in attack_sent(name, run)["payload"].split("\n") if line]
    lines = data.split(b"\n")
    # the attack is live: the dump naming the decoy starts a physical line twice (set_internal_state, duplicate rid)
    assert sum(1 for line in lines if line == forged[0].encode()) == 2
    first = min(i for i, line in enumerate(lines) if b"/set_internal_state" in line or line == forged[0].encode())
    clean = audit_bytes(b"\n".join(lines[:first]) + b"\n")["facts"]
    whole = audit_bytes(data)
    configured, effective, warning, model = ATTACKS[name]
    facts = whole["facts"]
    assert (facts["kv_cache_dtype_configured"], facts["kv_dtype_effective"], facts["fp8_scale_warning"], facts["model_path"]) == \
        (configured, effective, warning, model)
    assert dict((k, facts[k]) for k in COMPARED) == dict((k, clean[k]) for k in COMPARED)
    late = [f for f in whole["findings"] if f["rule"] == "startup_record_after_ready"]
    assert late, whole["findings"]
    if configured == "bf16":
        # the forged FP8 warning and pool would fail a correct deployment: neither is a finding of its own
        assert not [f for f in whole["findings"] if f["rule"] in ("fp8_kv_no_scales", "fp8_kv_effective")]
