# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The KV-cache guard's evaluation: every signal, the counting rule and the verdicts."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint as ck
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_budget as kb
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_guard as kg

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


def server(flag="bf16", resolved="bf16", tp=8):
    return {"model_path": MODEL_DIR, "tp_size": tp, "kv_cache_dtype": flag, "max_total_num_tokens": 1850000,
            "internal_states": [{"kv_cache_dtype": resolved, "memory_usage": {"kvcache": 26.4}}], "version": "0.5.23"}


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


def test_auto_with_fp8_checkpoint_fails_on_the_server_alone(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["fp8"], "server_info": server("auto", "fp8_e4m3")})
    sig = by_name(res)
    assert sig["server"]["verdict"] == "fp8" and "fp8_e4m3" in sig["server"]["evidence"]
    assert res["verdict"] == "fp8" and not res["passed"]
    assert "FP8 E4M3" in res["message"] and res["message"].startswith("KV cache guard failed")


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
    res = kg.evaluate({"argv": argv, "checkpoint": ckpts["fp8"], "server_info": server("fp8_e4m3", "fp8_e4m3"),
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
    res = kg.evaluate({"argv": BASE_ARGV + flag, "checkpoint": ckpts["fp8"], "server_info": server("bf16", "bf16"),
                       "log_facts": facts("bf16", "torch.bfloat16", bpe=2)})
    sig = by_name(res)
    assert res["verdict"] == "bf16" and res["passed"] is True and res["fix"] is None
    assert res["available_signals"] == 4
    assert [s["name"] for s in res["signals"] if s["counted"]] == ["argv", "server", "log_dtype", "pool_bytes"]
    assert sig["checkpoint"]["verdict"] == "bf16" and not sig["checkpoint"]["counted"]
    assert "never overrides an explicit value" in sig["checkpoint"]["evidence"]
    assert "2.000 bytes/element" in sig["pool_bytes"]["evidence"]
    assert res["message"].startswith("KV cache guard passed")


def test_host_switched_from_fp8_to_bf16_passes_on_the_current_invocation(ckpts):
    argv = BASE_ARGV + ["--kv-cache-dtype", "bf16"]
    current = facts("bf16", "torch.bfloat16", bpe=2)
    res = kg.evaluate({"argv": argv, "checkpoint": ckpts["fp8"], "log_facts": current, "server_info": server()})
    assert res["passed"] and not any("restart" in n for n in res["notes"])
    # the earlier invocation's facts (auto, FP8) describe another server: they contradict the unit
    earlier = facts("auto", "torch.float8_e4m3fn", bpe=1, tokens=3700000)
    res = kg.evaluate({"argv": argv, "checkpoint": ckpts["fp8"], "log_facts": earlier})
    assert res["verdict"] == "mixed" and not res["passed"]
    assert any("restart" in n for n in res["notes"])
    assert by_name(res)["checkpoint"]["verdict"] == "fp8"  # resolved with the flag the server really got


def test_auto_with_a_checkpoint_without_kv_quant_is_bf16(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["kvnull"], "server_info": server("auto", "auto"),
                       "log_facts": facts("auto", "torch.bfloat16", bpe=2)})
    sig = by_name(res)
    assert sig["argv"]["verdict"] == "unknown"
    assert sig["checkpoint"]["verdict"] == "bf16" and sig["checkpoint"]["counted"]
    # the scheduler kept 'auto': that proves nothing, in either direction
    assert sig["server"]["verdict"] == "unknown" and "proves" in sig["server"]["evidence"]
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
                       "server_info": server("bf16", "bf16")})
    assert res["available_signals"] == 2 and res["verdict"] == "insufficient" and not res["passed"]
    assert "Only 2 independent signal(s) available, 3 required" in res["fix"]
    assert "log_dtype (pass log_audit's facts" in res["fix"]
    # the checkpoint row is not offered as a way out: with an explicit flag it cannot count
    assert "checkpoint (" not in res["fix"]


def test_contradictory_signals_are_mixed(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "checkpoint": ckpts["fp8"],
                       "server_info": server("bf16", "fp8_e4m3"), "log_facts": facts("bf16", "torch.bfloat16", bpe=2)})
    assert res["verdict"] == "mixed" and not res["passed"]
    assert "disagree" in res["fix"]


def test_a_present_warning_contradicts_bf16_claims(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "checkpoint": ckpts["fp8"],
                       "server_info": server(), "log_facts": facts(warning=True)})
    assert by_name(res)["fp8_warning"]["verdict"] == "fp8"
    assert res["verdict"] == "mixed"


def test_uncounted_checkpoint_row_still_vetoes(ckpts):
    # the unit says bf16, the running server was started with an explicit fp8_e4m3
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "checkpoint": ckpts["fp8"],
                       "server_info": server("fp8_e4m3", "bf16"), "log_facts": facts("fp8_e4m3", None, bpe=None)})
    sig = by_name(res)
    assert sig["checkpoint"]["verdict"] == "fp8" and not sig["checkpoint"]["counted"]
    assert res["verdict"] == "mixed" and not res["passed"]


def test_note_when_the_log_serves_another_model(ckpts):
    same = dict(facts(), model_path=ckpts["fp8"]["path"])
    assert kg.evaluate({"checkpoint": ckpts["fp8"], "log_facts": same})["notes"] == []
    notes = kg.evaluate({"checkpoint": ckpts["fp8"], "log_facts": facts()})["notes"]
    assert len(notes) == 1 and "not the checkpoint given" in notes[0]


def test_flat_checkpoint_relying_on_the_hf_fallback_is_treated_as_fp8(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV, "checkpoint": ckpts["flat_nokv"]})
    sig = by_name(res)
    assert sig["checkpoint"]["verdict"] == "fp8"
    assert "without the hf_quant_config.json fallback resolve it to bfloat16" in sig["checkpoint"]["evidence"]


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


# --- waiver and options ------------------------------------------------------------------------


def test_fp8_waiver(ckpts):
    inputs = {"argv": BASE_ARGV + ["--kv-cache-dtype", "fp8_e4m3"], "checkpoint": ckpts["fp8"],
              "server_info": server("fp8_e4m3", "fp8_e4m3"), "log_facts": facts("fp8_e4m3", "torch.float8_e4m3fn", bpe=1, warning=True),
              "expected": "fp8_e4m3"}
    with pytest.raises(kg.GuardError, match="waiver_reason"):
        kg.evaluate(inputs)
    with pytest.raises(kg.GuardError, match="waiver_reason"):
        kg.evaluate(dict(inputs, waiver_reason="  "))
    res = kg.evaluate(dict(inputs, waiver_reason="capacity test, ticket OPS-1"))
    assert res["passed"] and res["waived"] and res["waiver_reason"] == "capacity test, ticket OPS-1"
    assert "waived: capacity test" in res["message"]
    # the waiver does not cover contradictions
    mixed = dict(inputs, waiver_reason="x", server_info=server("fp8_e4m3", "bf16"))
    assert kg.evaluate(mixed)["verdict"] == "mixed" and not kg.evaluate(mixed)["passed"]


def test_fp8_waiver_with_a_bf16_server_passes_unwaived(ckpts):
    res = kg.evaluate({"argv": BASE_ARGV + ["--kv-cache-dtype", "bf16"], "server_info": server(),
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
    got = kg.parse_launch_argv(argv)
    assert got["kv_cache_dtype"] == value and got["sglang"] is True
    assert (problem is None and got["problem"] is None) or problem in got["problem"]


def test_parse_launch_argv_tp_and_model():
    got = kg.parse_launch_argv(BASE_ARGV + ["--tensor-parallel-size=4"])
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


def test_execstart_of_systemctl_show():
    # systemctl show -p ExecStart --value: argv joined by single spaces, no quoting
    text = ("{ path=/opt/sglang/.venv/bin/python ; argv[]=/opt/sglang/.venv/bin/python -m sglang.launch_server "
            "--model-path /models/Qwen3.5-397B-A17B-NVFP4 --tp 8 --kv-cache-dtype bf16 "
            "--model-loader-extra-config {\"enable_multithread_load\": true} ; ignore_errors=no ; "
            "start_time=[Mon 2026-11-30 10:00:00 UTC] ; stop_time=[n/a] ; pid=4242 ; code=(null) ; status=0/0 }\n")
    cmds = kg.parse_execstart(text)
    assert len(cmds) == 1 and cmds[0][:3] == ["/opt/sglang/.venv/bin/python", "-m", "sglang.launch_server"]
    assert kg.parse_launch_argv(kg.select_launch_command(cmds))["kv_cache_dtype"] == "bf16"
    ex = text.replace("ignore_errors=no", "flags=ignore-failure")
    assert kg.parse_execstart(ex) == cmds


def test_execstart_with_several_commands_picks_sglang():
    text = ("{ path=/usr/bin/nvidia-smi ; argv[]=/usr/bin/nvidia-smi -pm 1 ; ignore_errors=yes ; start_time=[n/a] ; "
            "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n"
            "{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server --model-path /m ; ignore_errors=no "
            "; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n")
    cmds = kg.parse_execstart(text)
    assert [c[0] for c in cmds] == ["/usr/bin/nvidia-smi", "/usr/bin/python3"]
    assert kg.select_launch_command(cmds)[0] == "/usr/bin/python3"
    assert kg.parse_execstart("") == [] and kg.select_launch_command([]) is None
    assert kg.select_launch_command([["a"], ["b"]]) is None


def test_argv_from_the_running_server_when_no_command_is_given(ckpts):
    res = kg.evaluate({"server_info": server("bf16", "bf16")})
    assert by_name(res)["argv"]["verdict"] == "bf16" and "/server_info" in by_name(res)["argv"]["evidence"]
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
    "kv_cache_dtype": st.one_of(DTYPES, ANY), "tp_size": ANY,
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
