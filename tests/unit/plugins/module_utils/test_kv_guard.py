# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The KV-cache guard's evaluation: every signal, the counting rule and the verdicts."""

import ast
import json
import pathlib
import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint as ck
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_budget as kb
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_guard as kg
from ansible_collections.llmops.sglang.plugins.module_utils import _launch_args as la
from ansible_collections.llmops.sglang.plugins.module_utils import _server_info as si
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log import _log_audit as sglang_log

import sglang_source  # tests/unit/sglang_source.py

GIB = 1 << 30
MODEL_DIR = "/models/Qwen3.5-397B-A17B-NVFP4"
# The reference launch command, without --kv-cache-dtype.
BASE_ARGV = ["/opt/sglang/.venv/bin/python", "-m", "sglang.launch_server", "--model-path", MODEL_DIR, "--tp", "8",
             "--moe-runner-backend", "flashinfer_cutlass", "--fp4-gemm-backend", "flashinfer_cudnn",
             "--attention-backend", "triton", "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
             "--speculative-algorithm", "NEXTN", "--mem-fraction-static", "0.85", "--host", "0.0.0.0",
             "--port", "30000", "--enable-metrics", "--api-key", "sk-unit-secret"]


@pytest.fixture(scope="module")
def ckpts(fixtures_dir):
    root = fixtures_dir / "checkpoints"
    names = {"fp8": "qwen3.5-397b-a17b-nvfp4", "kvnull": "qwen3.5-397b-a17b-nvfp4-kvnull",
             "flat_nokv": "qwen3.5-397b-a17b-nvfp4-flat-nokv", "9b": "qwen3.5-9b", "qwq": "qwq-32b"}
    return {k: ck.inspect_checkpoint(str(root / v)) for k, v in names.items()}


def pools(tokens, bytes_per_element, tp=8, layers=15, heads=1, head_dim=256, draft=False):
    """'KV Cache is allocated' facts as SGLang prints them (sizes in GB with two decimals)."""
    def line(rank, n_layers):
        k = round(tokens * n_layers * heads * head_dim * bytes_per_element / GIB, 2)
        return {"rank": "TP%d" % rank, "tokens": tokens, "k_gb": k, "v_gb": k, "kv_gb": None, "dtype": None}
    out = [line(r, layers) for r in range(tp)]
    if draft:
        out += [line(r, 1) for r in range(tp)]
    return out


def facts(configured="bf16", effective="torch.bfloat16", bpe=2, tokens=1850000, warning=False, tp=8, draft=True):
    return {"fp8_scale_warning": warning, "kv_cache_dtype_configured": configured, "kv_dtype_effective": effective,
            "tp_size": tp, "model_path": MODEL_DIR, "max_total_num_tokens": tokens,
            "kv_pools": pools(tokens, bpe, tp=tp, draft=draft) if bpe else [], "ready": True,
            "fatal": {"class": "none", "message": None, "line": None, "rank": None}}


SERVER_INFO_DIR = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "server-info"


def server(name="0.5.23-bf16", **changes):
    """A real-shaped /server_info answer (tests/fixtures/server-info), as the module hands it over (cleaned)."""
    info = json.loads((SERVER_INFO_DIR / ("server-info-%s.json" % name)).read_text(encoding="utf-8"))
    info.update(changes)
    return si.clean(info)


def serving(argv, info):
    """argv with the --model-path the /server_info answer runs (the guard fails when they differ)."""
    return [info["model_path"] if word == MODEL_DIR else word for word in argv]


def by_name(result):
    return {s["name"]: s for s in result["signals"]}


def real_log_facts(fixtures_dir, name):
    """Facts read straight from a real log's lines (pool lines through _kv_budget's parser)."""
    text = (fixtures_dir / "sglang-logs" / name).read_text(encoding="utf-8")
    eff = re.search(r"Using KV cache dtype: (torch\.\w+)", text)
    kv_pools = []
    for line in text.splitlines():
        parsed = kb.parse_kv_pool_line(line)
        if parsed:
            rank = re.search(r" (TP\d+)\]", line)
            kv_pools.append(dict(parsed, rank=rank.group(1) if rank else "main"))
    dump = re.search(r"kv_cache_dtype='([^']*)'", text)
    tp = re.search(r"ServerArgs\(.*?\btp_size=(\d+)", text)
    return {"fp8_scale_warning": kg.FP8_WARNING in text, "kv_dtype_effective": eff.group(1) if eff else None,
            "kv_cache_dtype_configured": dump.group(1) if dump else None, "kv_pools": kv_pools,
            "tp_size": int(tp.group(1)) if tp else None}


# --- the silent FP8 path ----------------------------------------------------------------------


def test_auto_with_fp8_checkpoint_fails_without_any_warning(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["fp8"],
                       "log_facts": facts("auto", "torch.float8_e4m3fn", bpe=1, tokens=3700000, warning=False)})
    sig = by_name(res)
    assert res["verdict"] == "fp8" and res["passed"] is False
    assert sig["argv"]["verdict"] == "unknown" and "auto" in sig["argv"]["evidence"]
    assert sig["checkpoint"]["verdict"] == "fp8" and sig["checkpoint"]["counted"] is True
    assert "kv_cache_quant_algo FP8" in sig["checkpoint"]["evidence"] and "scale 1.0" in sig["checkpoint"]["evidence"]
    assert sig["log_dtype"]["verdict"] == "fp8"
    assert sig["pool_bytes"]["verdict"] == "fp8" and "1.000 bytes/element" in sig["pool_bytes"]["evidence"]
    assert "8 draft pool(s) ignored" in sig["pool_bytes"]["evidence"]
    assert sig["fp8_warning"]["verdict"] == "unknown" and "proves nothing" in sig["fp8_warning"]["evidence"]
    assert res["available_signals"] == 3
    assert "--kv-cache-dtype bf16" in res["fix"] and "FP8 E4M3" in res["fix"] and "scale 1.0" in res["fix"]


def test_auto_with_fp8_checkpoint_on_sglang_0_5_16_the_schedulers_say_fp8(ckpts):
    info = server("0.5.16-auto-fp8-checkpoint")
    res = kg.evaluate({"argv": serving(BASE_ARGV, info), "checkpoint": ckpts["fp8"], "server_info": info})
    sig = by_name(res)
    assert sig["server"]["verdict"] == "fp8" and sig["server"]["counted"]
    assert "internal_states[*].kv_cache_dtype=['fp8_e4m3']" in sig["server"]["evidence"]
    assert "SGLang 0.5.16 rules (/server_info version 0.5.16)" in sig["server"]["evidence"]
    assert res["verdict"] == "fp8" and not res["passed"] and res["available_signals"] == 2
    assert "FP8 E4M3" in res["message"] and res["message"].startswith("KV cache guard failed")


def test_auto_with_fp8_checkpoint_on_sglang_0_5_23_the_server_cannot_tell(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["fp8"], "server_info": server("0.5.23-auto-fp8-checkpoint")})
    sig = by_name(res)
    # 0.5.23 keeps auto at the top level and in internal_states: that proves nothing
    assert sig["server"]["verdict"] == "unknown" and "0.5.17 or newer reports that resolution nowhere" in sig["server"]["evidence"]
    assert sig["checkpoint"]["verdict"] == "fp8" and sig["checkpoint"]["counted"]
    assert res["verdict"] == "fp8" and not res["passed"] and res["available_signals"] == 1


def test_auto_with_fp8_checkpoint_and_a_real_fp8_log(ckpts, fixtures_dir):
    # the RTX PRO 6000 (SM120) log: FP8 KV with the no-scales warning
    log = real_log_facts(fixtures_dir, "010-rtxpro6000-sm120-fp8kv-no-kernel-image-2026-05.log")
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["fp8"], "log_facts": log})
    sig = by_name(res)
    assert sig["log_dtype"]["verdict"] == "fp8" and "torch.float8_e4m3fn" in sig["log_dtype"]["evidence"]
    assert sig["fp8_warning"]["verdict"] == "fp8" and sig["fp8_warning"]["counted"]
    assert res["verdict"] == "fp8" and res["available_signals"] == 3


def test_explicit_fp8_e4m3_fails(ckpts):
    argv = BASE_ARGV + ["--kv-cache-dtype", "fp8_e4m3"]
    res = kg.evaluate({"argv": argv, "checkpoint": ckpts["fp8"], "server_info": server("0.5.23-fp8-e4m3"),
                       "log_facts": facts("fp8_e4m3", "torch.float8_e4m3fn", bpe=1, warning=True)})
    sig = by_name(res)
    assert sig["argv"]["verdict"] == "fp8" and sig["argv"]["counted"]
    # explicit: the checkpoint repeats the flag and does not count
    assert sig["checkpoint"]["verdict"] == "fp8" and sig["checkpoint"]["counted"] is False
    assert res["verdict"] == "fp8" and res["available_signals"] == 5
    assert "sets --kv-cache-dtype explicitly" in res["fix"]


# --- passing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [["--kv-cache-dtype", "bf16"], ["--kv-cache-dtype=bf16"], ["--kv-cache-dtype", "bfloat16"]])
def test_explicit_bf16_with_server_log_and_pool_passes(ckpts, flag):
    res = kg.evaluate({"argv": BASE_ARGV + flag, "checkpoint": ckpts["fp8"], "server_info": server("0.5.23-bf16"),
                       "log_facts": facts("bf16", "torch.bfloat16", bpe=2)})
    sig = by_name(res)
    assert res["verdict"] == "bf16" and res["passed"] is True and res["fix"] is None
    assert res["available_signals"] == 4
    assert [s["name"] for s in res["signals"] if s["counted"]] == ["argv", "server", "log_dtype", "pool_bytes"]
    assert sig["checkpoint"]["verdict"] == "bf16" and not sig["checkpoint"]["counted"]
    assert "does not consult the checkpoint's KV metadata (kv_cache_quant_algo FP8" in sig["checkpoint"]["evidence"]
    assert "2.000 bytes/element" in sig["pool_bytes"]["evidence"]
    assert res["message"].startswith("KV cache guard passed")


def test_host_switched_from_fp8_to_bf16_passes_on_the_current_invocation(ckpts):
    argv = BASE_ARGV + ["--kv-cache-dtype", "bf16"]
    current = facts("bf16", "torch.bfloat16", bpe=2)
    res = kg.evaluate({"argv": argv, "checkpoint": ckpts["fp8"], "log_facts": current, "server_info": server("0.5.23-bf16")})
    assert res["passed"] and not any("restart" in n for n in res["notes"])
    # the earlier invocation's facts (auto, FP8) describe another server: they contradict the unit
    earlier = facts("auto", "torch.float8_e4m3fn", bpe=1, tokens=3700000)
    res = kg.evaluate({"argv": argv, "checkpoint": ckpts["fp8"], "log_facts": earlier})
    assert res["verdict"] == "mixed" and not res["passed"]
    assert any("restart" in n for n in res["notes"])
    assert by_name(res)["checkpoint"]["verdict"] == "fp8"  # resolved with the flag the server really got


def test_auto_with_a_checkpoint_without_kv_quant_is_bf16(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["kvnull"], "server_info": server("0.5.23-auto-bf16-checkpoint"),
                       "log_facts": facts("auto", "torch.bfloat16", bpe=2)})
    sig = by_name(res)
    assert sig["argv"]["verdict"] == "unknown"
    assert sig["checkpoint"]["verdict"] == "bf16" and sig["checkpoint"]["counted"]
    # the server args kept 'auto': that proves nothing, in either direction
    assert sig["server"]["verdict"] == "unknown" and "proves nothing" in sig["server"]["evidence"]
    assert res["verdict"] == "bf16" and res["available_signals"] == 3 and res["passed"]


def test_real_bf16_hybrid_log_pool_arithmetic(ckpts, fixtures_dir):
    # Qwen3.5-9B at TP2 on two RTX 4090: K size 2.50 GB for 327310 tokens = 2 bytes per element
    log = real_log_facts(fixtures_dir, "005-qwen3.5-9b-hybrid-mamba-tp2-rtx4090-2026-04.log")
    assert log["tp_size"] is None  # the excerpt has no ServerArgs dump
    res = kg.evaluate({"checkpoint": ckpts["9b"], "log_facts": log, "tp_size": 2, "min_signals": 2})
    sig = by_name(res)
    assert sig["pool_bytes"]["verdict"] == "bf16" and "2 of 2 pool(s) agree" in sig["pool_bytes"]["evidence"]
    assert "tp_size 2 (tp_size option)" in sig["pool_bytes"]["evidence"]
    assert sig["log_dtype"]["verdict"] == "bf16"
    assert res["verdict"] == "bf16" and res["passed"]
    # without a TP size the arithmetic cannot be done
    res = kg.evaluate({"checkpoint": ckpts["9b"], "log_facts": log})
    assert by_name(res)["pool_bytes"]["verdict"] == "unknown" and "tp_size unknown" in by_name(res)["pool_bytes"]["evidence"]


def test_real_qwq_log_counts_the_checkpoint_for_auto(ckpts, fixtures_dir):
    log = real_log_facts(fixtures_dir, "001-qwq32b-tp4-l4-ready-2025-03.log")
    assert log["kv_cache_dtype_configured"] == "auto" and log["tp_size"] == 4
    res = kg.evaluate({"checkpoint": ckpts["qwq"], "log_facts": log})
    sig = by_name(res)
    assert "log ServerArgs dump" in sig["argv"]["evidence"] and sig["argv"]["verdict"] == "unknown"
    assert sig["checkpoint"]["verdict"] == "bf16" and sig["checkpoint"]["counted"]
    assert sig["pool_bytes"]["verdict"] == "bf16"
    assert res["verdict"] == "insufficient" and res["available_signals"] == 2
    assert kg.evaluate({"checkpoint": ckpts["qwq"], "log_facts": log, "min_signals": 2})["passed"]


# --- insufficient and contradictory ------------------------------------------------------------


def test_two_signals_are_insufficient(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "checkpoint": ckpts["fp8"],
                       "server_info": server("0.5.23-bf16")})
    assert res["available_signals"] == 2 and res["verdict"] == "insufficient" and not res["passed"]
    assert "Only 2 independent signal(s) available, 3 required" in res["fix"]
    assert "log_dtype (pass log_audit's facts" in res["fix"]
    # the checkpoint row is not offered as a way out: with an explicit flag it cannot count
    assert "checkpoint (" not in res["fix"]


def test_contradictory_signals_are_mixed(ckpts):
    # the unit says bf16, the running server was started with fp8_e4m3 (its launch_command shows it)
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "checkpoint": ckpts["fp8"],
                       "server_info": server("0.5.23-fp8-e4m3"), "log_facts": facts("bf16", "torch.bfloat16", bpe=2)})
    assert res["verdict"] == "mixed" and not res["passed"]
    assert by_name(res)["server"]["verdict"] == "fp8" and "disagree" in res["fix"]
    assert any("/server_info launch_command shows the running server was started with fp8_e4m3" in n for n in res["notes"])


def test_a_present_warning_contradicts_bf16_claims(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "checkpoint": ckpts["fp8"],
                       "server_info": server("0.5.23-bf16"), "log_facts": facts(warning=True)})
    assert by_name(res)["fp8_warning"]["verdict"] == "fp8"
    assert res["verdict"] == "mixed"


def test_uncounted_checkpoint_row_still_vetoes(ckpts):
    # the unit says bf16, the running server's log shows it was started with an explicit fp8_e4m3
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "checkpoint": ckpts["fp8"],
                       "log_facts": facts("fp8_e4m3", None, bpe=None)})
    sig = by_name(res)
    assert sig["checkpoint"]["verdict"] == "fp8" and not sig["checkpoint"]["counted"]
    assert res["verdict"] == "mixed" and not res["passed"]


def test_note_when_the_log_serves_another_model(ckpts):
    same = dict(facts(), model_path=ckpts["fp8"]["path"])
    assert kg.evaluate({"checkpoint": ckpts["fp8"], "log_facts": same})["notes"] == []
    notes = kg.evaluate({"checkpoint": ckpts["fp8"], "log_facts": facts()})["notes"]
    assert len(notes) == 1 and "not the checkpoint given" in notes[0]


def test_flat_checkpoint_ignores_the_hf_quant_config_fallback(ckpts):
    # SGLang 0.5.23 reads config.json's quantization_config alone when it is there: no KV metadata, so bf16
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["flat_nokv"]})
    sig = by_name(res)
    assert sig["checkpoint"]["verdict"] == "bf16" and "no KV-cache quantization metadata" in sig["checkpoint"]["evidence"]


# --- each signal's unknowns --------------------------------------------------------------------


def test_nothing_given_is_insufficient_and_says_what_to_add():
    res = kg.evaluate({})
    assert res["verdict"] == "insufficient" and res["available_signals"] == 0
    assert all(s["verdict"] == "unknown" for s in res["signals"])
    for name in ("argv", "server", "log_dtype", "pool_bytes"):
        assert name + " (" in res["fix"]


def test_unreachable_server_is_unknown_with_the_reason(ckpts):
    res = kg.evaluate({"checkpoint": ckpts["fp8"], "server_error": "refused: connection refused at 127.0.0.1:30000"})
    assert by_name(res)["server"]["verdict"] == "unknown"
    assert "connection refused" in by_name(res)["server"]["evidence"]


def test_checkpoint_error_is_unknown():
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint_error": "config.json not found in /models/x"})
    assert by_name(res)["checkpoint"]["verdict"] == "unknown"
    assert "config.json not found" in by_name(res)["checkpoint"]["evidence"]


def test_checkpoint_without_flag_only_says_what_auto_would_do(ckpts):
    res = kg.evaluate({"checkpoint": ckpts["fp8"]})
    sig = by_name(res)["checkpoint"]
    assert sig["verdict"] == "unknown" and "launch flag is unknown" in sig["evidence"]


def test_pool_needs_the_architecture(ckpts):
    res = kg.evaluate({"log_facts": facts()})
    assert "set checkpoint" in by_name(res)["pool_bytes"]["evidence"]


def test_pool_lines_without_token_counts_are_skipped(ckpts, fixtures_dir):
    # the old pool line format (no #tokens) of a Jetson log
    log = real_log_facts(fixtures_dir, "015-jetson-qwen2-old-kv-line-format-2025-03.log")
    log["kv_pools"] = log["kv_pools"] or [{"rank": "main", "tokens": None, "k_gb": 0.5}]
    res = kg.evaluate({"checkpoint": ckpts["9b"], "log_facts": log, "tp_size": 1})
    assert by_name(res)["pool_bytes"]["verdict"] == "unknown"


def test_pool_that_matches_no_dtype_is_unknown(ckpts):
    bogus = dict(facts(), kv_pools=pools(1850000, 2, layers=7))
    res = kg.evaluate({"checkpoint": ckpts["fp8"], "log_facts": bogus})
    sig = by_name(res)["pool_bytes"]
    assert sig["verdict"] == "unknown" and "matches no dtype" in sig["evidence"]


def test_log_dtype_from_the_newest_pool_line(ckpts):
    newest = dict(facts(effective=None), kv_pools=[dict(p, dtype="torch.float8_e4m3fn") for p in pools(3700000, 1)])
    assert by_name(kg.evaluate({"log_facts": newest}))["log_dtype"]["verdict"] == "fp8"


# --- what a real server exposes, per SGLang release ----------------------------------------------

ARGV_BF16 = BASE_ARGV + ["--kv-cache-dtype", "bf16"]


def facts_0_5_23(dtype, bpe, tokens, dump):
    """Log facts of a 0.5.23 start: no 'Using KV cache dtype' line; the dtype is on the pool lines."""
    out = facts(dump, dtype, bpe=bpe, tokens=tokens)
    out["kv_pools"] = [dict(p, dtype=dtype) for p in out["kv_pools"]]
    return out


@pytest.mark.parametrize("release,answer,argv,log,ckpt,verdict,counted", [
    # a healthy bf16 server: explicit flag
    ("0.5.23", "0.5.23-bf16", ARGV_BF16, ("torch.bfloat16", 2, 1850000, "bf16"), "fp8", "bf16",
     ["argv", "server", "log_dtype", "pool_bytes"]),
    ("0.5.16", "0.5.16-bf16", ARGV_BF16, ("torch.bfloat16", 2, 1850000, "bf16"), "fp8", "bf16",
     ["argv", "server", "log_dtype", "pool_bytes"]),
    # a healthy bf16 server: auto on a checkpoint without KV metadata (0.5.23's server says only auto)
    ("0.5.23", "0.5.23-auto-bf16-checkpoint", BASE_ARGV, ("torch.bfloat16", 2, 1850000, "auto"), "kvnull", "bf16",
     ["checkpoint", "log_dtype", "pool_bytes"]),
    # the trap: auto on an FP8 checkpoint; only 0.5.16's schedulers say so on the server side
    ("0.5.23", "0.5.23-auto-fp8-checkpoint", BASE_ARGV, ("torch.float8_e4m3fn", 1, 3700000, "auto"), "fp8", "fp8",
     ["checkpoint", "log_dtype", "pool_bytes"]),
    ("0.5.16", "0.5.16-auto-fp8-checkpoint", BASE_ARGV, ("torch.float8_e4m3fn", 1, 3700000, "auto"), "fp8", "fp8",
     ["checkpoint", "server", "log_dtype", "pool_bytes"]),
])
def test_real_shaped_answers_give_the_right_verdict(ckpts, release, answer, argv, log, ckpt, verdict, counted):
    info = server(answer)
    res = kg.evaluate({"argv": serving(argv, info), "checkpoint": ckpts[ckpt], "server_info": info, "log_facts": facts_0_5_23(*log)})
    assert res["verdict"] == verdict and res["passed"] == (verdict == "bf16"), res["message"]
    assert [s["name"] for s in res["signals"] if s["counted"]] == counted
    assert "SGLang %s rules" % release in by_name(res)["server"]["evidence"]
    assert not any("restart" in note for note in res["notes"])


def test_a_real_sglang_0_5_16_server_with_bf16_passes(fixtures_dir):
    """The real H200 run (tests/fixtures/real-sglang): its /server_info and its log, read by 0.5.16's rules."""
    real = fixtures_dir / "real-sglang"
    info = si.clean(json.loads((real / "sglang-0.5.16-h200-trap-bf16.server_info.json").read_text()))
    log = sglang_log.audit_path(str(real / "sglang-0.5.16-h200-trap-bf16-forged.log"))["facts"]
    res = kg.evaluate({"server_info": info, "log_facts": log, "min_signals": 3})
    sig = by_name(res)
    assert res["passed"] and res["verdict"] == "bf16", res["message"]
    assert sig["argv"]["source"] == "log ServerArgs dump: kv_cache_dtype='bf16'"
    assert sig["server"]["counted"] and "internal_states[*].kv_cache_dtype=['bf16']" in sig["server"]["evidence"]
    assert sig["log_dtype"]["verdict"] == "bf16"


def test_a_healthy_0_5_23_server_passes_without_the_unit(ckpts):
    # argv from launch_command, the server signal from the top-level value: two facts of one answer
    res = kg.evaluate({"checkpoint": ckpts["fp8"], "server_info": server("0.5.23-bf16"),
                       "log_facts": facts_0_5_23("torch.bfloat16", 2, 1850000, "bf16")})
    assert res["passed"] and res["available_signals"] == 4
    assert by_name(res)["argv"]["source"] == "/server_info launch_command: --kv-cache-dtype bf16"


def test_reading_a_release_by_the_other_releases_rules_fails(ckpts):
    # the 0.5.16 trap answer read as 0.5.23 loses its server signal ...
    inputs = {"argv": BASE_ARGV, "checkpoint": ckpts["fp8"], "log_facts": facts_0_5_23("torch.float8_e4m3fn", 1, 3700000, "auto")}
    right = kg.evaluate(dict(inputs, server_info=server("0.5.16-auto-fp8-checkpoint")))
    wrong = kg.evaluate(dict(inputs, server_info=server("0.5.16-auto-fp8-checkpoint", version="0.5.23")))
    assert by_name(right)["server"]["verdict"] == "fp8" and by_name(wrong)["server"]["verdict"] == "unknown"
    # ... and the 0.5.23 tokenspeed answer read as 0.5.16 takes the resolved value for the flag typed
    right = kg.evaluate({"server_info": server("0.5.23-tokenspeed-mla-bf16")})
    wrong = kg.evaluate({"server_info": server("0.5.23-tokenspeed-mla-bf16", version="0.5.16")})
    assert "--kv-cache-dtype bf16, but --attention-backend tokenspeed_mla" in by_name(right)["argv"]["evidence"]
    assert by_name(wrong)["argv"]["evidence"] == "/server_info kv_cache_dtype='fp8_e4m3' (explicit)"


def test_the_log_dump_decides_the_release_without_a_server(ckpts):
    # a dict dump (0.5.19+) holds the resolved value: the server signal, read from the log
    log = dict(facts_0_5_23("torch.bfloat16", 2, 1850000, "bf16"), server_args_format="dict")
    res = kg.evaluate({"argv": ARGV_BF16, "checkpoint": ckpts["fp8"], "log_facts": log,
                       "server_error": "refused: connection refused"})
    assert by_name(res)["server"]["verdict"] == "bf16" and "log server_args dump (a dict" in by_name(res)["server"]["evidence"]
    assert res["available_signals"] == 4
    # a repr dump (0.5.18 and older) holds the flag: argv's source when no command is given
    log = dict(log, server_args_format="repr")
    res = kg.evaluate({"checkpoint": ckpts["fp8"], "log_facts": log})
    assert by_name(res)["argv"]["source"] == "log ServerArgs dump: kv_cache_dtype='bf16'"
    assert by_name(res)["server"]["verdict"] == "unknown"


# --- SGLang's own FP8 rules ---------------------------------------------------------------------


def test_tokenspeed_mla_over_an_explicit_bf16_is_named(ckpts):
    # SGLang 0.5.23 turns --kv-cache-dtype bf16 into fp8_e4m3 for this backend: no restart helps, another backend does
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/DeepSeek-R1-0528-NVFP4", "--tp-size", "8",
            "--attention-backend", "tokenspeed_mla", "--kv-cache-dtype", "bf16"]
    res = kg.evaluate({"argv": argv, "server_info": server("0.5.23-tokenspeed-mla-bf16"),
                       "log_facts": facts_0_5_23("torch.float8_e4m3fn", None, 2400000, "fp8_e4m3")})
    sig = by_name(res)
    assert sig["argv"]["verdict"] == "fp8" and sig["server"]["verdict"] == "fp8"
    assert ("--attention-backend tokenspeed_mla makes SGLang 0.5.23 set --kv-cache-dtype fp8_e4m3 over any flag "
            "(sglang/srt/arg_groups/serving_hook.py)") in sig["argv"]["evidence"]
    assert res["verdict"] == "fp8" and res["notes"] == []  # the rule, not a stale unit, explains fp8_e4m3
    assert "tokenspeed_mla" in res["fix"] and "choose another attention backend" in res["fix"]
    assert "explicitly to a non-bf16 value" not in res["fix"] and "never overrides" not in res["fix"]
    # an SGLang release before the rule: no claim about it
    res = kg.evaluate({"argv": argv, "server_info": server("0.5.23-tokenspeed-mla-bf16", version="0.5.22")})
    assert "tokenspeed_mla makes" not in by_name(res)["argv"]["evidence"]


def test_the_plain_fix_says_which_backend_overrides_an_explicit_bf16(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["fp8"],
                       "log_facts": facts_0_5_23("torch.float8_e4m3fn", 1, 3700000, "auto")})
    assert "SGLang does not consult the checkpoint's KV metadata for an explicit value" in res["fix"]
    assert "in SGLang 0.5.23 only --attention-backend tokenspeed_mla overrides an explicit bf16" in res["fix"]


@pytest.mark.parametrize("architecture,decides", [("DeepseekV4ForCausalLM", True), ("DeepseekV32ForCausalLM", False)])
def test_an_architecture_that_sets_auto_to_fp8_is_named(ckpts, architecture, decides):
    ckpt = dict(ckpts["kvnull"], architecture=dict(ckpts["kvnull"]["architecture"], architectures=[architecture]))
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpt})
    sig = by_name(res)["checkpoint"]
    assert "architecture %s makes SGLang 0.5.23 set --kv-cache-dtype fp8_e4m3 when the flag is auto" % architecture \
        in sig["evidence"]
    # unconditional rules decide; a rule with a condition (GPU generation, checkpoint kind) is only named
    assert sig["verdict"] == ("fp8" if decides else "bf16")
    if decides:
        assert "architecture %s" % architecture in res["fix"] and "set --kv-cache-dtype bf16" in res["fix"]
    # an explicit flag is untouched by architecture rules
    res = kg.evaluate({"argv": ARGV_BF16, "checkpoint": ckpt})
    assert by_name(res)["checkpoint"]["verdict"] == "bf16" and "architecture" not in by_name(res)["checkpoint"]["evidence"]


def _kv_writes(fn):
    """(value node, ancestors) of each write of kv_cache_dtype inside a function (dict item, subscript, local)."""
    parents = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def chain(node):
        out = []
        while node in parents:
            node = parents[node]
            out.append(node)
        return out
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                key = target.slice if isinstance(target, ast.Subscript) else None
                if (isinstance(key, ast.Constant) and key.value == "kv_cache_dtype") or \
                        (isinstance(target, ast.Name) and target.id == "kv_cache_dtype"):
                    yield node.value, chain(node)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "kv_cache_dtype":
                    yield value, chain(node)


def _sets_fp8(value):
    return any(isinstance(n, ast.Constant) and n.value == "fp8_e4m3" for n in ast.walk(value))


def _strings(node, consts):
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
        elif isinstance(n, ast.Name) and n.id in consts:
            out.update(consts[n.id])
    return out


def _compared(node, attr_words, consts):
    """Strings that node compares (==, !=, in, not in) with an expression naming one of attr_words."""
    found = set()
    for n in ast.walk(node):
        if not isinstance(n, ast.Compare):
            continue
        sides = [n.left] + list(n.comparators)
        named = [side for side in sides if any(word in ast.unparse(side) for word in attr_words)]
        if named:
            for side in sides:
                if isinstance(side, ast.Constant) or (isinstance(side, ast.Name) and side.id in consts):
                    found |= _strings(side, consts)
    return found


def fp8_rules_in_source(srt):
    """{(kind, name, over)} of every rule in sglang/srt/arg_groups that sets kv_cache_dtype to fp8_e4m3.

    A backend rule is a write under an ``if`` comparing an attention backend; an architecture rule is a write
    in a function registered for, or comparing, architectures. ``over`` is auto when an ``if`` above the write
    requires kv_cache_dtype == 'auto', else any.
    """
    rules = set()
    for path in sorted((srt / "arg_groups").rglob("*.py")):
        tree = sglang_source.parse(path)
        consts = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                strings = _strings(node.value, {})
                if strings:
                    consts[node.targets[0].id] = strings
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            writes = [(value, chain) for value, chain in _kv_writes(fn) if _sets_fp8(value)]
            if not writes:
                continue
            archs = set()
            for deco in fn.decorator_list:
                if isinstance(deco, ast.Call) and "register" in ast.unparse(deco.func):
                    archs |= _strings(deco, consts)
            archs |= _compared(fn, ("architectures", "model_arch"), consts)
            for _value, chain in writes:
                ifs = [n.test for n in chain if isinstance(n, ast.If)]
                over = "auto" if any("kv_cache_dtype == 'auto'" in ast.unparse(t) for t in ifs) else "any"
                backends = set().union(*[_compared(t, ("attention_backend",), consts) for t in ifs]) if ifs else set()
                for name in backends:
                    rules.add(("attention backend", name, over))
                for name in () if backends else archs:
                    rules.add(("architecture", name, over))
                assert backends or archs, "%s %s sets fp8_e4m3 for a reason this test does not know" % (path, fn.name)
    return rules


def not_dsa_architectures(srt):
    """The DeepSeek family names SGLang's DSA rule (arg_groups/overrides.py) lists but never acts on: is_deepseek_dsa
    (configs/model_config.py) accepts only its own list (Kimi K2.5 has DeepSeek V3's layout and no DSA indexer)."""
    family = [n for n in sglang_source.parse(srt / "arg_groups" / "overrides.py").body
              if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "_DEEPSEEK_FAMILY_ARCHS"][0]
    dsa = [n for n in ast.walk(sglang_source.parse(srt / "configs" / "model_config.py"))
           if isinstance(n, ast.FunctionDef) and n.name == "is_deepseek_dsa"][0]
    return set(ast.literal_eval(family.value.args[0])) - set(ast.literal_eval(dsa.body[0].value.values[0].comparators[0]))


def test_fp8_rules_are_sglangs_own():
    """FP8_RULES is what SGLang 0.5.23's arg_groups say: a new, changed or removed rule fails here."""
    srt = sglang_source.srt_dir()
    table = set((rule["kind"], name, rule["over"]) for rule in kg.FP8_RULES for name in rule["names"])
    never = not_dsa_architectures(srt)
    assert never == {"KimiK25ForConditionalGeneration"}
    assert table == set(rule for rule in fp8_rules_in_source(srt) if rule[1] not in never)
    for rule in kg.FP8_RULES:
        source = (srt / rule["source"]).read_text(encoding="utf-8")
        assert all(name in source for name in rule["names"]), rule
        for flag in rule["flags"]:
            assert flag[2:].replace("-", "_") in source, (flag, rule["source"])
    assert kg.FP8_RULES_RELEASE == sglang_source.CHECKED_RELEASE


# --- waiver and options ------------------------------------------------------------------------


def test_fp8_waiver(ckpts):
    inputs = {"argv": BASE_ARGV + ["--kv-cache-dtype", "fp8_e4m3"], "checkpoint": ckpts["fp8"],
              "server_info": server("0.5.23-fp8-e4m3"), "log_facts": facts("fp8_e4m3", "torch.float8_e4m3fn", bpe=1, warning=True),
              "expected": "fp8_e4m3"}
    with pytest.raises(kg.GuardError, match="waiver_reason"):
        kg.evaluate(inputs)
    with pytest.raises(kg.GuardError, match="waiver_reason"):
        kg.evaluate(dict(inputs, waiver_reason="  "))
    res = kg.evaluate(dict(inputs, waiver_reason="capacity test, ticket OPS-1"))
    assert res["passed"] and res["waived"] and res["waiver_reason"] == "capacity test, ticket OPS-1"
    assert "waived: capacity test" in res["message"]
    # the waiver does not cover contradictions
    mixed = dict(inputs, waiver_reason="x", server_info=server("0.5.23-bf16"))
    assert kg.evaluate(mixed)["verdict"] == "mixed" and not kg.evaluate(mixed)["passed"]


def test_fp8_waiver_with_a_bf16_server_passes_unwaived(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "server_info": server("0.5.23-bf16"),
                       "log_facts": facts(), "checkpoint": ckpts["fp8"], "expected": "fp8_e4m3", "waiver_reason": "x"})
    assert res["passed"] and not res["waived"] and res["waiver_reason"] is None


@pytest.mark.parametrize("bad", [0, 5, -1, "3", 2.5, True])
def test_min_signals_out_of_range(bad):
    with pytest.raises(kg.GuardError, match="min_signals"):
        kg.evaluate({"min_signals": bad})


def test_min_signals_five_only_for_fp8():
    assert kg.evaluate({"min_signals": 5, "expected": "fp8_e4m3", "waiver_reason": "x"})["min_signals"] == 5


@pytest.mark.parametrize("bad", ["fp8", "auto", ["bf16"]])
def test_bad_expected(bad):
    with pytest.raises(kg.GuardError, match="expected"):
        kg.evaluate({"expected": bad})


# --- launch command ----------------------------------------------------------------------------


@pytest.mark.parametrize("argv,value,problem", [
    (BASE_ARGV, None, None),
    (BASE_ARGV + ["--kv-cache-dtype", "fp8_e4m3", "--kv-cache-dtype=bf16"], "bf16", None),  # last one wins
    (["sglang", "serve", "--model-path", "/m", "--kv-cache-dtype", "auto"], "auto", None),
    (["/bin/sh", "-c", "exec python3 -m sglang.launch_server --model-path /m --kv-cache-dtype bf16 --tp 8"], "bf16", None),
    (BASE_ARGV + ["--kv-cache-dt", "bf16"], None, "abbreviates"),
])
def test_parse_launch_argv(argv, value, problem):
    got = la.parse_launch_argv(argv)
    assert got["kv_cache_dtype"] == value and got["sglang"] is True
    assert (problem is None and got["problem"] is None) or problem in got["problem"]


def test_parse_launch_argv_tp_and_model():
    got = la.parse_launch_argv(BASE_ARGV + ["--tensor-parallel-size=4"])
    assert got["tp_size"] == 4 and got["model_path"] == MODEL_DIR


@pytest.mark.parametrize("argv,why", [
    (["/usr/local/bin/start-sglang.sh"], "does not look like an SGLang launch"),
    (BASE_ARGV + ["--kv-cache-dtype", "${KV_DTYPE}"], "environment variable"),
    (["python", "-m", "sglang.launch_server", "--config", "/etc/sglang.yaml"], "--config"),
    (BASE_ARGV + ["--kv-cache-dtype", "int4"], "not a known KV dtype"),
])
def test_launch_commands_that_prove_nothing(argv, why):
    sig = by_name(kg.evaluate({"argv": argv}))["argv"]
    assert sig["verdict"] == "unknown" and why in sig["evidence"]


def test_a_word_with_spaces_stays_one_word():
    # the unit's argv as systemd splits it: "/models/with space" is one word, never two
    got = la.parse_launch_argv(["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/with space",
                                "--kv-cache-dtype", "bf16"])
    assert got["model_path"] == "/models/with space" and got["kv_cache_dtype"] == "bf16" and got["words"] == 7
    # a whole command line (the only element, or a shell's -c script) is split by ExecStart='s word rules
    assert la.parse_launch_argv(["python -m sglang.launch_server --model-path '/m n' --tp 2"])["model_path"] == "/m n"


def test_several_commands_pick_sglang():
    cmds = [["/usr/bin/nvidia-smi", "-pm", "1"], ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m"]]
    assert la.select_launch_command(cmds)[0] == "/usr/bin/python3"
    assert la.select_launch_command([]) is None and la.select_launch_command([["a"], ["b"]]) is None


# --- the checkpoint served -----------------------------------------------------------------------


def test_the_model_served_comes_from_argv_and_the_server_never_the_log(ckpts):
    info = server("0.5.23-bf16")
    argv = serving(ARGV_BF16, info)
    assert kg.served_model(argv, info) == {"path": info["model_path"], "source": "argv", "argv": info["model_path"],
                                           "server": info["model_path"], "conflict": None}
    assert kg.served_model(None, info)["source"] == "/server_info"
    assert kg.served_model(["python", "-m", "sglang.launch_server", "--model", "/a", "--model-path", "/b/"])["path"] == "/b/"
    # a log naming another model decides nothing: at most a note
    res = kg.evaluate({"argv": argv, "server_info": info, "log_facts": dict(facts(), model_path="/models/decoy")})
    assert res["model"]["path"] == info["model_path"] and "/models/decoy" not in json.dumps(res["model"])


def test_argv_and_server_disagreeing_fails_naming_both():
    info = server("0.5.23-bf16")
    res = kg.evaluate({"argv": ARGV_BF16 + ["--model-path", "/models/other"], "server_info": info, "min_signals": 1})
    assert res["verdict"] == "mixed" and not res["passed"]
    assert "--model-path /models/other" in res["fix"] and "model_path is %s" % info["model_path"] in res["fix"]
    assert "/models/other" in res["message"] and info["model_path"] in res["message"]


def test_a_checkpoint_given_must_be_the_one_served(ckpts):
    info = server("0.5.23-bf16")
    argv = serving(ARGV_BF16, info)
    res = kg.evaluate({"argv": argv, "server_info": info, "checkpoint": ckpts["fp8"], "checkpoint_given": "/models/x",
                       "min_signals": 1})
    assert not res["passed"] and "the checkpoint given is /models/x but the server runs %s (argv)" % info["model_path"] in res["fix"]
    same = kg.evaluate({"argv": argv, "server_info": info, "checkpoint_given": info["model_path"] + "/", "min_signals": 1})
    assert same["passed"], same["message"]


def test_a_checkpoint_given_through_a_symlink_is_the_one_served(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    argv = ARGV_BF16[:4] + [str(tmp_path / "real")] + ARGV_BF16[5:]
    res = kg.evaluate({"argv": argv, "checkpoint_given": str(tmp_path / "link"), "min_signals": 1})
    assert res["passed"] and res["model"]["argv"] == str(tmp_path / "real"), res["message"]
    other = kg.evaluate({"argv": argv, "checkpoint_given": str(tmp_path), "min_signals": 1})
    assert not other["passed"] and "the checkpoint given is %s" % tmp_path in other["fix"]


# Where SGLang 0.5.23 renames a process (setproctitle): only in processes it starts, never in the one systemd started,
# so the unit's main process keeps its argv in /proc/PID/cmdline, which kv_cache_guard compares with the unit's.
RETITLED = {("managers/data_parallel_controller.py", "run_data_parallel_controller_process"),
            ("managers/detokenizer_manager.py", "run_detokenizer_process"),
            ("managers/multi_tokenizer_mixin.py", "run_multi_detokenizer_router_process"),
            ("managers/multi_tokenizer_mixin.py", "__init__"),  # TokenizerWorker: one per HTTP worker process
            ("managers/scheduler.py", "configure_scheduler_process")}


def test_sglang_renames_only_the_processes_it_starts():
    srt = pathlib.Path(sglang_source.srt_dir())
    found = set()
    for path in srt.rglob("*.py"):
        if "setproctitle" not in path.read_text(encoding="utf-8"):
            continue
        for func in ast.walk(sglang_source.parse(path)):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls = [c for c in ast.walk(func) if isinstance(c, ast.Call)]
                if any(getattr(c.func, "attr", getattr(c.func, "id", None)) == "setproctitle" for c in calls):
                    found.add((path.relative_to(srt).as_posix(), func.name))
    assert found == RETITLED


MODEL_SPELLINGS = [["--model-path", "/a"], ["--model=/a"], ["--model-p", "/a"], ["--model-pat=/a"], ["--model", "/b", "--model-pa", "/a"],
                   ["--model-path", "/a b"], ["--mode", "/a"], ["--model-", "/a"]]
ASK_PARSER = """
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser(exit_on_error=False)
ServerArgs.add_cli_args(parser)
out = []
for words in json.loads(sys.argv[1]):
    try:
        out.append(parser.parse_known_args(words)[0].model_path)
    except (argparse.ArgumentError, SystemExit):
        out.append(None)
print(json.dumps(out))
"""


def test_the_model_flag_is_read_as_sglangs_parser_reads_it(sglang_python):
    """SGLang 0.5.23's own parser (argparse with abbreviations) names the model path of each spelling; the guard agrees."""
    got = subprocess.run([sglang_python, "-c", ASK_PARSER, json.dumps(MODEL_SPELLINGS)], capture_output=True, text=True,
                         check=True, timeout=600)
    sglang = json.loads(got.stdout.strip().splitlines()[-1])
    ours = [la.parse_launch_argv(["python", "-m", "sglang.launch_server"] + words)["model_path"] for words in MODEL_SPELLINGS]
    assert ours == sglang and sglang[:6] == ["/a", "/a", "/a", "/a", "/a", "/a b"] and sglang[6:] == [None, None]


@pytest.mark.parametrize("served,given,path,why", [
    ({"path": "/models/a"}, None, "/models/a", None),
    ({"path": "/models/a"}, "/models/b", "/models/b", None),  # inspected, and evaluate fails on the conflict
    ({"path": "Qwen/Qwen3-8B"}, None, None, "not an absolute path"),
    ({"path": "Qwen/Qwen3-8B"}, "/snap/q", "/snap/q", None),
    ({"path": None}, None, None, None),
])
def test_checkpoint_to_inspect(served, given, path, why):
    got = kg.checkpoint_to_inspect(served, given)
    assert got[0] == path and (why is None and got[1] is None or why in got[1])


def test_argv_from_the_running_server_when_no_command_is_given(ckpts):
    # 0.5.23: the flag as typed is in launch_command
    res = kg.evaluate({"server_info": server("0.5.23-bf16")})
    assert by_name(res)["argv"]["verdict"] == "bf16"
    assert by_name(res)["argv"]["evidence"] == "/server_info launch_command: --kv-cache-dtype bf16 (explicit)"
    # 0.5.16 has no launch_command: its top-level value is the flag
    res = kg.evaluate({"server_info": server("0.5.16-bf16")})
    assert by_name(res)["argv"]["evidence"] == "/server_info kv_cache_dtype='bf16' (explicit)"
    res = kg.evaluate({"argv_error": "systemctl show sglang.service failed (rc 1)", "argv_source": "unit sglang.service"})
    assert "rc 1" in by_name(res)["argv"]["evidence"]


def test_redact_argv():
    out = kg.redact_argv(BASE_ARGV + ["--admin-api-key=adm1n", "sh -c 'x --api-key inline'"])
    assert "sk-unit-secret" not in out and "adm1n" not in " ".join(out) and "inline" not in " ".join(out)
    assert out[out.index("--api-key") + 1] == kg.REDACTED and out[:3] == BASE_ARGV[:3]


def test_table_lists_every_signal(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["fp8"]})
    lines = res["table"].splitlines()
    assert lines[0].split(" | ")[:3] == ["signal     ", "verdict", "counted"]
    assert [ln.split(" | ")[0].strip() for ln in lines[2:]] == list(kg.SIGNALS)
    assert res["table"] in res["message"]


@pytest.mark.parametrize("name,verdict", [("bf16", "bf16"), ("torch.bfloat16", "bf16"), ("fp8_e5m2", "fp8"),
                                          ("torch.float8_e4m3fn", "fp8"), ("nvfp4", "other"), ("float16", "other"),
                                          ("auto", "auto"), ("bogus", "unknown"), (None, "unknown")])
def test_classify_dtype(name, verdict):
    assert kg.classify_dtype(name) == verdict


# --- fuzz ----------------------------------------------------------------------------------------

ANY = st.recursive(st.none() | st.booleans() | st.integers(-5, 5000000) | st.floats() | st.text(max_size=12),
                   lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                   max_leaves=12)
DTYPES = st.sampled_from(["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "torch.bfloat16", "torch.float8_e4m3fn",
                          "nvfp4", "x", ""])
POOL = st.fixed_dictionaries({}, optional={"rank": ANY, "tokens": st.one_of(st.integers(-1, 10 ** 7), ANY),
                                           "k_gb": st.one_of(st.floats(), ANY), "kv_gb": st.one_of(st.floats(), ANY),
                                           "dtype": st.one_of(DTYPES, ANY)})
FACTS = st.fixed_dictionaries({}, optional={
    "kv_cache_dtype_configured": st.one_of(DTYPES, ANY), "kv_dtype_effective": st.one_of(DTYPES, ANY),
    "kv_pools": st.one_of(st.lists(POOL, max_size=4), ANY), "fp8_scale_warning": st.one_of(st.booleans(), ANY),
    "tp_size": st.one_of(st.integers(-1, 16), ANY), "model_path": ANY})
INFO = st.fixed_dictionaries({}, optional={
    "kv_cache_dtype": st.one_of(DTYPES, ANY), "tp_size": ANY, "version": st.one_of(st.sampled_from(["0.5.16", "0.5.23"]), ANY),
    "launch_command": st.one_of(st.sampled_from(["--model-path /m", "--model-path /m --kv-cache-dtype bf16",
                                                 "--attention-backend tokenspeed_mla --kv-cache-dtype=bf16"]), ANY),
    "internal_states": st.one_of(st.lists(st.fixed_dictionaries({}, optional={"kv_cache_dtype": st.one_of(DTYPES, ANY)}),
                                          max_size=3), ANY)})
ARGV = st.one_of(st.lists(st.one_of(st.sampled_from(["--kv-cache-dtype", "--kv-cache-dtype=bf16", "--tp", "8",
                                                     "sglang.launch_server", "--model-path", "--config", "$X"]),
                                    DTYPES, st.text(max_size=10)), max_size=8), ANY)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), argv=ARGV, log=st.one_of(FACTS, ANY), info=st.one_of(INFO, ANY),
       tp=st.one_of(st.none(), st.integers(-2, 16), ANY), which=st.sampled_from(["fp8", "kvnull", "9b", None, "junk"]))
def test_random_signal_inputs_never_raise(ckpts, data, argv, log, info, tp, which):
    ckpt = ckpts.get(which) if which != "junk" else data.draw(st.dictionaries(st.sampled_from(
        ["architecture", "kv_cache_dtype_auto", "kv_cache_quant_algo", "quantization", "path", "kv_scales_present"]), ANY))
    inputs = {"argv": argv, "log_facts": log, "server_info": info, "tp_size": tp, "checkpoint": ckpt,
              "server_error": data.draw(st.one_of(st.none(), st.text(max_size=20)))}
    res = kg.evaluate(inputs)
    assert res["verdict"] in kg.RESULT_VERDICTS
    assert [s["name"] for s in res["signals"]] == list(kg.SIGNALS)
    assert all(s["verdict"] in kg.VERDICTS for s in res["signals"])
    assert res["available_signals"] <= kg.max_countable("fp8")
    # argv and checkpoint never both count
    counted = [s["name"] for s in res["signals"] if s["counted"]]
    assert not ("argv" in counted and "checkpoint" in counted)
    # passing needs every available signal to say bf16
    if res["passed"]:
        assert all(s["verdict"] == "bf16" for s in res["signals"] if s["available"])


def test_checkpoint_signal_follows_the_gpu_rule_that_decided(fixtures_dir):
    """DeepSeek sparse attention asking for an FP8 KV cache: on an H200 SGLang sets bf16 before the checkpoint is read."""
    shape = str(fixtures_dir / "checkpoint-shapes" / "s40-deepseek-v32-dsa-fp8-kv-by-gpu")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", shape]
    h200 = kg.evaluate({"argv": argv, "checkpoint": ck.inspect_checkpoint(shape, gpu="9.0"), "min_signals": 1})
    sig = by_name(h200)["checkpoint"]
    assert sig["verdict"] == "bf16" and sig["counted"]
    assert "deepseek-dsa-kv sglang/srt/arg_groups/overrides.py:534" in sig["evidence"] and "capability 9.0" in sig["evidence"]
    b200 = kg.evaluate({"argv": argv, "checkpoint": ck.inspect_checkpoint(shape, gpu="10.0"), "min_signals": 1})
    assert by_name(b200)["checkpoint"]["verdict"] == "fp8" and not b200["passed"]
    # without the GPU the checkpoint cannot tell: it proves nothing either way
    anywhere = kg.evaluate({"argv": argv, "checkpoint": ck.inspect_checkpoint(shape), "min_signals": 1})
    assert by_name(anywhere)["checkpoint"]["verdict"] == "unknown" and not anywhere["passed"]


# --- a log read from a plain file (log_source file) ----------------------------------------------


def _real_h200(fixtures_dir, log, answer):
    real = fixtures_dir / "real-sglang"
    facts = sglang_log.audit_path(str(real / ("sglang-0.5.16-h200-%s.log" % log)))["facts"]
    return facts, si.clean(json.loads((real / ("sglang-0.5.16-h200-%s.server_info.json" % answer)).read_text()))


def test_a_log_file_counts_once_and_only_for_the_server_answering_now(fixtures_dir):
    """The real H200 run wrote its log to a file: read as the journal it gives three signals (the dump's flag, the
    schedulers, the pool's dtype line); as a file its signals count once, since one writer of the file wrote them all."""
    facts, info = _real_h200(fixtures_dir, "trap-bf16-forged", "trap-bf16")
    assert facts["max_total_num_tokens"] == info["max_total_num_tokens"] == 43690284
    journal = kg.evaluate({"server_info": info, "log_facts": facts})
    as_file = kg.evaluate({"server_info": info, "log_facts": facts, "log_source": "file"})
    assert journal["passed"] and [s["name"] for s in journal["signals"] if s["counted"]] == ["argv", "server", "log_dtype"]
    assert as_file["verdict"] == "insufficient" and not as_file["passed"]
    assert [s["name"] for s in as_file["signals"] if s["counted"]] == ["argv", "server"]
    sig = by_name(as_file)
    assert "from a log file, counted once for the file (max_total_num_tokens 43690284 equals the live server's)" in sig["argv"]["evidence"]
    assert sig["log_dtype"]["available"] and "the file already counts once" in sig["log_dtype"]["evidence"]
    # the launch command read elsewhere (a unit's ExecStart) is a signal of its own: three, and the guard passes
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", info["model_path"], "--kv-cache-dtype", "bf16"]
    with_unit = kg.evaluate({"argv": argv, "server_info": info, "log_facts": facts, "log_source": "file"})
    assert with_unit["passed"] and [s["name"] for s in with_unit["signals"] if s["counted"]] == ["argv", "server", "log_dtype"]


def test_a_log_file_of_another_start_counts_for_nothing(fixtures_dir):
    """The bf16 start's file next to the FP8 start's live server (real runs, same checkpoint): the pool the KV dtype
    sizes differs (43690284 tokens against 87380569), so the file describes another start; its bf16 lines still
    contradict the live server, so the guard fails."""
    facts, info = _real_h200(fixtures_dir, "trap-bf16-forged", "trap-fp8")
    res = kg.evaluate({"server_info": info, "log_facts": facts, "log_source": "file", "min_signals": 1})
    assert res["verdict"] == "mixed" and not res["passed"]
    assert [s["name"] for s in res["signals"] if s["counted"]] == ["server"]
    assert any("max_total_num_tokens 43690284 is not the live server's 87380569" in n for n in res["notes"])
    # without the live server nothing ties a file to the server running now
    res = kg.evaluate({"log_facts": facts, "log_source": "file", "min_signals": 1})
    assert res["verdict"] == "insufficient" and res["available_signals"] == 0
    assert any("/server_info did not answer" in n for n in res["notes"])
    # nor when the two name other models
    facts, info = _real_h200(fixtures_dir, "trap-bf16-forged", "trap-bf16")
    res = kg.evaluate({"server_info": info, "log_facts": dict(facts, model_path="/models/other"), "log_source": "file"})
    assert any("model_path /models/other is not the live server's" in n for n in res["notes"])


def test_a_0_5_23_server_started_by_hand_passes_on_its_log_file(ckpts):
    """No unit: the launch command is /server_info's, the server its own signal, the file one more."""
    info = server("0.5.23-bf16")
    res = kg.evaluate({"checkpoint": ckpts["fp8"], "server_info": info, "log_source": "file",
                       "log_facts": facts_0_5_23("torch.bfloat16", 2, info["max_total_num_tokens"], "bf16")})
    assert res["passed"] and [s["name"] for s in res["signals"] if s["counted"]] == ["argv", "server", "log_dtype"]
    assert not by_name(res)["pool_bytes"]["counted"] and by_name(res)["pool_bytes"]["verdict"] == "bf16"
    fp8 = kg.evaluate({"checkpoint": ckpts["fp8"], "server_info": server("0.5.23-auto-fp8-checkpoint"), "log_source": "file",
                       "log_facts": facts_0_5_23("torch.float8_e4m3fn", 1, 3700000, "auto")})
    assert fp8["verdict"] == "fp8" and not fp8["passed"]


def test_an_unknown_log_source_is_refused():
    with pytest.raises(kg.GuardError, match="log_source must be one of journal, file, got 'syslog'"):
        kg.evaluate({"log_source": "syslog"})
