# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the SGLang log parser against the real logs of tests/fixtures/sglang-logs and their answer key."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import pathlib
import re
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import (
    FATAL_CLASSES,
    PHASES,
    LogAuditError,
    LogAuditor,
    audit_bytes,
    audit_path,
    build_rules,
)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._rules import required_literals
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log import _log_audit, _scan
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._records import ANSI_PATTERN
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._scan import PROBE_LIMIT_PER_MIB, LineScanner

LOGS = "sglang-logs"


def _expected(fixtures_dir):
    return json.loads((fixtures_dir / LOGS / "expected.json").read_text(encoding="utf-8"))


# parametrize runs before fixtures exist: read the answer key from the tree directly
FIXTURES = pathlib.Path(__file__).resolve().parents[4] / "fixtures"
ANSWERS = json.loads((FIXTURES / LOGS / "expected.json").read_text(encoding="utf-8"))
ANSWER_IDS = [a["file"][:3] for a in ANSWERS]


def _read(fixtures_dir, name):
    return (fixtures_dir / LOGS / name).read_bytes()


def _all_logs(fixtures_dir):
    return [(a["file"], _read(fixtures_dir, a["file"])) for a in _expected(fixtures_dir)]


def _comparable(result, drop_ranks=False):
    """The result without what legitimately depends on how the input was read."""
    res = json.loads(json.dumps(result))
    res.pop("stats")
    if drop_ranks:
        res["facts"].pop("ranks_seen")
    return res


# ----------------------------------------------------------------------------------------------
# The answer key


def _check_fatal(expected, fatal):
    cls = re.match(r"\w+", expected).group(0)
    assert fatal["class"] == cls
    if cls == "none":
        assert fatal["message"] is None
        return
    detail = expected[len(cls):].strip()
    if cls == "python_exception":
        # "python_exception: TypeError cannot unpack ... (context)"
        m = re.match(r":\s*(\w+)\s+([^(]*)", detail)
        exc_type, text = m.group(1), m.group(2).strip()
        assert fatal["message"].startswith(exc_type)
        assert text in fatal["message"]
    else:
        quoted = re.search(r"`([^`]+)`", detail)
        if quoted:
            # the answer key elides with "..."; every piece must be in the message
            for piece in quoted.group(1).split("..."):
                if piece.strip():
                    assert piece.strip() in fatal["message"]
    assert isinstance(fatal["line"], int) and fatal["line"] >= 1


def _check_kv_alloc(expected, facts):
    pools = facts["kv_pools"]
    if expected is None or expected.startswith("no `KV Cache is allocated`"):
        assert pools == []
        return
    assert pools, "the answer key lists a KV allocation"
    m = re.match(r"#tokens (\d+), (?:K ([\d.]+) GB, V ([\d.]+) GB|KV(?: size)? ([\d.]+) GB)", expected)
    if m:
        want = {"tokens": int(m.group(1)), "k_gb": m.group(2) and float(m.group(2)), "v_gb": m.group(3) and float(m.group(3)),
                "kv_gb": m.group(4) and float(m.group(4))}
        for pool in pools:
            assert {k: pool[k] for k in want} == want
        each = re.search(r"each of TP(\d+)-TP(\d+)", expected)
        if each:
            ranks = ["TP%d" % n for n in range(int(each.group(1)), int(each.group(2)) + 1)]
            assert sorted(p["rank"] for p in pools) == sorted(ranks)
    else:
        m = re.search(r"K size: ([\d.]+) GB, V size: ([\d.]+) GB", expected)
        assert m, "unknown kv_alloc wording in the answer key: %s" % expected
        assert [(p["tokens"], p["k_gb"], p["v_gb"]) for p in pools] == [(None, float(m.group(1)), float(m.group(2)))]
    mamba = re.search(r"Mamba: max_mamba_cache_size (\d+), conv_state ([\d.]+)GB, ssm_state ([\d.]+)GB", expected)
    if mamba:
        got = facts["mamba_pool"]
        assert (got["max_mamba_cache_size"], got["conv_state_gb"], got["ssm_state_gb"]) == (
            int(mamba.group(1)), float(mamba.group(2)), float(mamba.group(3)))
    else:
        assert facts["mamba_pool"] is None


@pytest.mark.parametrize("answer", ANSWERS, ids=ANSWER_IDS)
def test_answer_key(fixtures_dir, answer):
    path = fixtures_dir / LOGS / answer["file"]
    data = path.read_bytes()
    assert len(data) == answer["bytes"] and hashlib.sha256(data).hexdigest() == answer["sha256"], "fixture changed"
    facts = audit_path(str(path))["facts"]
    for key in ("fp8_scale_warning", "kv_cache_dtype_configured", "kv_dtype_effective", "tp_size", "model_path",
                "max_total_num_tokens", "ready"):
        assert facts[key] == answer[key], key
    _check_fatal(answer["fatal"], facts["fatal"])
    _check_kv_alloc(answer["kv_alloc"], facts)


def test_answer_key_is_complete(fixtures_dir):
    assert len(_expected(fixtures_dir)) == 11 == len(ANSWERS)


@pytest.mark.parametrize("name, phase", [
    ("001-qwq32b-tp4-l4-ready-2025-03.log", "ready"),
    ("004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log", "failed"),
    ("005-qwen3.5-9b-hybrid-mamba-tp2-rtx4090-2026-04.log", "warming_up"),
    ("011-deepseek-coder-v2-lite-fp8-e5m2-tp2-flattened-2024-11.log", "loading_weights"),
    ("015-jetson-qwen2-old-kv-line-format-2025-03.log", "capturing_cuda_graphs"),
    ("029-h20-deepep-2node-capture-graph-cuda-oom-truncated-2025-04.log", "failed"),
])
def test_phase(fixtures_dir, name, phase):
    assert audit_path(str(fixtures_dir / LOGS / name))["facts"]["phase"] == phase


def test_findings_of_the_rocm_crash(fixtures_dir):
    res = audit_path(str(fixtures_dir / LOGS / "004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log"))
    by_rule = {f["rule"]: f for f in res["findings"]}
    warn = by_rule["fp8_kv_no_scales"]
    assert warn["count"] == 8 and warn["per_rank"] == {"TP%d" % n: 1 for n in range(8)}
    assert len(warn["evidence"]) == 3
    # evidence line numbers point at the real lines
    lines = _read(fixtures_dir, "004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log").decode().split("\n")
    for ev in warn["evidence"]:
        assert "Using FP8 KV cache but no scaling factors provided" in lines[ev["line"] - 1]
        assert ev["text"] == lines[ev["line"] - 1].strip()
    assert by_rule["scheduler_exception"]["per_rank"] == {"TP7": 1}
    assert res["facts"]["fatal"]["rank"] == "TP7"
    assert set(res["failed_rules"]) == {"fp8_kv_no_scales", "fp8_kv_effective", "scheduler_exception", "child_process_failed"}
    assert res["facts"]["ranks_seen"] == ["TP%d" % n for n in range(8)]


def test_dict_dump_and_two_scale_warnings(fixtures_dir):
    res = audit_path(str(fixtures_dir / LOGS / "021-dgx-spark-sm121-3node-tp3-ep3-deepseek-v41-dict-serverargs-ready-2026-09.log"))
    by_rule = {f["rule"]: f for f in res["findings"]}
    assert by_rule["fp8_kv_no_scales"]["per_rank"] == {"TP0 EP0": 2}
    assert by_rule["kv_dtype_set_by_model"]["severity"] == "warning"
    assert res["facts"]["ranks_seen"] == ["TP0 EP0"] and res["facts"]["starts"] == 1


def test_e5m2_kv_is_fp8_without_scale_warning(fixtures_dir):
    res = audit_path(str(fixtures_dir / LOGS / "033-h100-gpt-oss-20b-bench-one-batch-fp8-e5m2-kv-2025-09.log"))
    assert res["failed_rules"] == ["fp8_kv_effective"]
    assert res["facts"]["fp8_scale_warning"] is False


# ----------------------------------------------------------------------------------------------
# Reading: chunks, prefixes, encodings, long lines


@pytest.mark.parametrize("chunk", [1, 7, 100, 4096])
def test_chunking_does_not_change_the_result(fixtures_dir, chunk):
    for name, data in _all_logs(fixtures_dir):
        auditor = LogAuditor()
        for i in range(0, len(data), chunk):
            auditor.feed(data[i:i + chunk])
        assert _comparable(auditor.finish()) == _comparable(audit_bytes(data)), name


def test_lazy_line_numbers_match_counted_ones(fixtures_dir):
    for answer in _expected(fixtures_dir):
        path = fixtures_dir / LOGS / answer["file"]
        assert _comparable(audit_path(str(path))) == _comparable(audit_bytes(path.read_bytes())), answer["file"]


def _prefix_lines(data, prefix):
    return b"\n".join((prefix(n) + line) if line else line for n, line in enumerate(data.split(b"\n")))


@pytest.mark.parametrize("prefix", [
    lambda n: b"Nov 30 10:01:%02d gpu-node-1 python3[4242]: " % (n % 60),
    lambda n: b"2026-09-22T06:49:56.%09dZ " % n,
    lambda n: b"2026-11-30T10:01:22+0000 gpu-node-1 sglang-launch[4242]: ",
    lambda n: b"(WorkerDict pid=67803, ip=10.0.0.3) ",
    lambda n: b"sglang-1  | ",
    lambda n: b"\x1b[32m",
], ids=["journald", "container", "journald-iso", "ray", "compose", "ansi"])
def test_outer_prefixes_are_transparent(fixtures_dir, prefix):
    for name in ("001-qwq32b-tp4-l4-ready-2025-03.log", "004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log",
                 "025-ray-workerdict-prefix-tp2-scheduler-exception-truncated-2025-05.log",
                 "029-h20-deepep-2node-capture-graph-cuda-oom-truncated-2025-04.log"):
        data = _read(fixtures_dir, name)
        assert _comparable(audit_bytes(_prefix_lines(data, prefix))) == _comparable(audit_bytes(data)), name


def test_ansi_colours_inside_records(fixtures_dir):
    data = _read(fixtures_dir, "004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log")
    coloured = re.sub(rb"^(\[[^\]]+\]) ", lambda m: b"\x1b[1;34m" + m.group(1) + b"\x1b[0m ", data, flags=re.M)
    coloured = coloured.replace(b"TypeError:", b"\x1b[31mTypeError:\x1b[0m")
    assert coloured != data
    assert _comparable(audit_bytes(coloured))["facts"] == _comparable(audit_bytes(data))["facts"]


def test_crlf_line_endings(fixtures_dir):
    data = _read(fixtures_dir, "001-qwq32b-tp4-l4-ready-2025-03.log")
    facts = audit_bytes(data.replace(b"\n", b"\r\n"))["facts"]
    assert facts == audit_bytes(data)["facts"]


def test_invalid_utf8_does_not_hide_facts(fixtures_dir):
    data = _read(fixtures_dir, "010-rtxpro6000-sm120-fp8kv-no-kernel-image-2026-05.log")
    broken = data.replace(b"Defaulting", b"\xff\xfe\xc3Defaulting").replace(b"CUDA error (", b"\x80CUDA error (")
    facts = audit_bytes(broken)["facts"]
    assert facts["fp8_scale_warning"] is True
    assert facts["kv_dtype_effective"] == "torch.float8_e4m3fn"
    assert facts["fatal"]["class"] == "no_kernel_image"


def test_glued_records_after_progress_bars(fixtures_dir):
    # 001: a TP1 line glued to the end of a tqdm bar
    res = audit_path(str(fixtures_dir / LOGS / "001-qwq32b-tp4-l4-ready-2025-03.log"))
    data = b"  0%|          | 0/13 [00:00<?, ?it/s][2026-05-08 14:34:30 TP2] Using FP8 KV cache but no scaling factors provided.\n"
    glued = audit_bytes(data)
    assert glued["facts"]["fp8_scale_warning"] and glued["findings"][0]["per_rank"] == {"TP2": 1}
    assert res["facts"]["phase"] == "ready"
    cr = b"Capturing batches (bs=8):   0%|   | 0/4\rCapturing batches (bs=4):  50%|   | 2/4\r[2026-05-08 14:34:30 TP0] KV Cache is allocated. " \
         b"dtype: torch.bfloat16, #tokens: 100, K size: 1.00 GB, V size: 1.00 GB\n"
    facts = audit_bytes(cr)["facts"]
    assert facts["kv_dtype_effective"] == "torch.bfloat16" and facts["kv_pools"][0]["tokens"] == 100


def test_long_line_keeps_its_head_with_bounded_memory():
    head = b"[2026-05-08 14:34:30 TP0] Using KV cache dtype: torch.bfloat16 "
    tail_key = b" The server is fired up and ready to roll!"
    line = head + b"x" * (20 << 20) + tail_key + b"\n"
    after = b"[2026-05-08 14:34:31] max_total_num_tokens=1234, chunked_prefill_size=8192\n"
    auditor = LogAuditor(max_line_bytes=64 << 10)
    tracemalloc.start()
    for i in range(0, len(line), 1 << 20):
        auditor.feed(line[i:i + (1 << 20)])
    auditor.feed(after)
    dummy, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    res = auditor.finish()
    assert peak < 8 << 20  # a 20 MiB line never sits in memory
    assert res["facts"]["kv_dtype_effective"] == "torch.bfloat16"
    assert res["facts"]["ready"] is False  # the key past the cap is dropped, not parsed
    assert res["facts"]["max_total_num_tokens"] == 1234
    assert res["stats"]["truncated_lines"] == 1
    assert res["stats"]["dropped_bytes"] == len(line) - 1 - (64 << 10)


def test_long_line_inside_one_chunk_is_cut_the_same_way():
    line = b"[2026-05-08 14:34:30 TP0] Using KV cache dtype: torch.bfloat16 " + b"y" * 5000 + b" ready to roll! The server is fired up and ready to roll!\n"
    small = audit_bytes(line, max_line_bytes=1024)
    assert small["facts"]["kv_dtype_effective"] == "torch.bfloat16" and small["facts"]["ready"] is False
    auditor = LogAuditor(max_line_bytes=1024)
    for i in range(0, len(line), 700):
        auditor.feed(line[i:i + 700])
    assert _comparable(auditor.finish()) == _comparable(small)


def test_unterminated_last_line_and_empty_input():
    res = audit_bytes(b"[2026-05-08 14:34:30] The server is fired up and ready to roll!")
    assert res["facts"]["ready"] and res["facts"]["phase"] == "ready"
    empty = audit_bytes(b"")
    assert empty["facts"]["phase"] == "starting" and empty["findings"] == [] and empty["facts"]["fatal"]["class"] == "none"


# ----------------------------------------------------------------------------------------------
# Facts from synthetic lines in real formats


def _log(*lines):
    return ("\n".join(lines) + "\n").encode("utf-8")


def test_rank_prefix_variants():
    data = _log(
        "[2025-11-04 05:27:13 DP0 TP0 EP0] Load weight begin. avail mem=70.00 GB",
        "[2026-05-22 20:39:55 DP1 TP1 EP1] Load weight begin. avail mem=70.00 GB",
        "[12:29:02 TP3] Load weight begin. avail mem=70.00 GB",
        "[2026-01-01 00:00:00 PP1] Load weight begin. avail mem=70.00 GB",
        "[gpu=2] Load weight begin. avail mem=70.00 GB",
        "[2025-11-07 12:20:13] WARNING server_args.py:1082: Using FP8 KV cache but no scaling factors provided.",
    )
    res = audit_bytes(data)
    assert res["facts"]["ranks_seen"] == ["DP0 TP0 EP0", "DP1 TP1 EP1", "PP1", "TP3", "gpu2"]
    assert res["findings"][0]["per_rank"] == {"main": 1}


def test_max_total_num_tokens_decoys():
    data = _log(
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', kv_cache_dtype='bf16', max_total_tokens=3000000, tp_size=8)",
        "[2026-01-01 00:00:01 TP0] KV pool sizing: rest=10.0 GB -> max_total_num_tokens=999",
        "[2026-01-01 00:00:01 TP0] DSV4 memory calculation: full_token=5491200",
        "[2026-01-01 00:00:02 TP0] max_total_num_tokens=1557504, chunked_prefill_size=1024, max_prefill_tokens=16384",
    )
    facts = audit_bytes(data)["facts"]
    assert facts["max_total_num_tokens"] == 1557504
    assert facts["kv_cache_dtype_configured"] == "bf16" and facts["tp_size"] == 8 and facts["model_path"] == "m"


def test_dump_cut_before_the_field():
    facts = audit_bytes(_log("[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m', tokenizer_path='/m', kv_cache_dty"))["facts"]
    assert facts["model_path"] == "/m" and facts["kv_cache_dtype_configured"] is None and facts["tp_size"] is None
    cut_value = audit_bytes(_log("[2026-01-01 00:00:00] server_args={'model_path': '/m', 'kv_cache_dtype': 'fp8_e"))["facts"]
    assert cut_value["kv_cache_dtype_configured"] is None


def test_tp_size_from_other_lines_needs_an_sglang_prefix():
    assert audit_bytes(_log("echo tp_size=4"))["facts"]["tp_size"] is None
    assert audit_bytes(_log("[2026-01-01 00:00:00 TP0] Context: self.tp_rank=0 self.tp_size=2"))["facts"]["tp_size"] == 2
    # attn_tp_size is another field
    assert audit_bytes(_log("[2026-01-01 00:00:00] DSA with TP mode is active, attn_tp_size=8"))["facts"]["tp_size"] is None


def test_newest_kv_pool_line_gives_effective_dtype():
    data = _log("[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 454112, K size: 3.46 GB, V size: 3.46 GB",
                "[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 454112, K size: 0.23 GB, V size: 0.23 GB")
    res = audit_bytes(data)
    assert res["facts"]["kv_dtype_effective"] == "torch.float8_e4m3fn"
    assert [p["k_gb"] for p in res["facts"]["kv_pools"]] == [3.46, 0.23]
    assert res["findings"][0]["rule"] == "fp8_kv_effective" and res["findings"][0]["count"] == 2


def test_setting_kv_dtype_is_not_the_effective_dtype(fixtures_dir):
    facts = audit_path(str(fixtures_dir / LOGS / "020-ascend-910b-deepseek-v4-w4a8-tp4-npu-ready-2026-08.log"))["facts"]
    assert facts["kv_dtype_effective"] is None and facts["kv_cache_dtype_configured"] == "bfloat16"


def test_restart_in_one_file_reports_the_latest_start():
    first = _log(
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m', kv_cache_dtype='auto', tp_size=8)",
        "[2026-01-01 00:00:10 TP0] Load weight begin. avail mem=90.00 GB",
        "[2026-01-01 00:01:00 TP0] Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.",
        "[2026-01-01 00:01:00 TP0] Using KV cache dtype: torch.float8_e4m3fn",
        "[2026-01-01 00:02:00 TP0] KV Cache is allocated. #tokens: 3000000, K size: 10.00 GB, V size: 10.00 GB",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    )
    second = _log(
        "[2026-01-02 00:00:00] server_args=ServerArgs(model_path='/m', kv_cache_dtype='bf16', tp_size=8)",
        "[2026-01-02 00:01:00 TP0] Using KV cache dtype: torch.bfloat16",
        "[2026-01-02 00:02:00 TP0] KV Cache is allocated. #tokens: 1500000, K size: 10.00 GB, V size: 10.00 GB",
        "[2026-01-02 00:03:00] The server is fired up and ready to roll!",
    )
    res = audit_bytes(first + second)
    facts = res["facts"]
    assert facts["starts"] == 2 and facts["phase"] == "ready" and facts["fatal"]["class"] == "none"
    assert facts["kv_cache_dtype_configured"] == "bf16" and facts["kv_dtype_effective"] == "torch.bfloat16"
    assert facts["fp8_scale_warning"] is False and [p["tokens"] for p in facts["kv_pools"]] == [1500000]
    # findings cover the whole input, with line numbers
    by_rule = {f["rule"]: f for f in res["findings"]}
    assert by_rule["fp8_kv_no_scales"]["evidence"][0]["line"] == 3
    assert by_rule["cuda_out_of_memory"]["evidence"][0]["line"] == 6


# ----------------------------------------------------------------------------------------------
# Tracebacks


TB_FRAMES = ('  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2009, in run_scheduler_process',
             "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
             "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")


def test_chained_traceback_reports_the_last_exception():
    data = _log("Traceback (most recent call last):", *TB_FRAMES, "KeyError: 'glm_moe_dsa'", "",
                "During handling of the above exception, another exception occurred:", "",
                "Traceback (most recent call last):", *TB_FRAMES,
                "ValueError: The checkpoint you are trying to load has model type `glm_moe_dsa` but Transformers does not recognize it.")
    fatal = audit_bytes(data)["facts"]["fatal"]
    assert fatal["class"] == "python_exception" and fatal["message"].startswith("ValueError: The checkpoint")
    assert fatal["line"] == 13


def test_repeated_tracebacks_keep_the_first():
    tb = ["[2026-01-01 00:00:00 TP%d] Scheduler hit an exception: Traceback (most recent call last):", TB_FRAMES[0], TB_FRAMES[1]]
    data = _log(*[line % 0 if "%d" in line else line for line in tb], "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                *[line % 1 if "%d" in line else line for line in tb], "RuntimeError: NCCL error: unhandled system error")
    res = audit_bytes(data)
    assert res["facts"]["fatal"]["message"].startswith("RuntimeError: Not enough memory") and res["facts"]["fatal"]["rank"] == "TP0"
    by_rule = {f["rule"]: f for f in res["findings"]}
    assert by_rule["scheduler_exception"]["per_rank"] == {"TP0": 1, "TP1": 1}
    assert by_rule["not_enough_memory"]["per_rank"] == {"TP0": 1}  # the exception line belongs to the traceback's rank


def test_traceback_with_interleaved_rank_lines_and_glued_to_a_bar():
    data = _log("Capturing batches (bs=512 avail_mem=2.60 GB):   0%|          | 0/52 [00:00<?, ?it/s]Traceback (most recent call last):",
                TB_FRAMES[0],
                "[2026-02-26 05:35:13 TP3] Registering 0 cuda graph addresses",
                TB_FRAMES[1],
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 GiB")
    fatal = audit_bytes(data)["facts"]["fatal"]
    assert fatal["class"] == "cuda_oom" and fatal["line"] == 5


def test_traceback_cut_at_end_of_file(fixtures_dir):
    fatal = audit_path(str(fixtures_dir / LOGS / "025-ray-workerdict-prefix-tp2-scheduler-exception-truncated-2025-05.log"))["facts"]["fatal"]
    assert fatal["class"] == "truncated_traceback" and fatal["line"] == 3 and fatal["rank"] == "TP0"
    assert "Scheduler(server_args," in fatal["message"]


def test_exception_ignored_and_traceback_after_offline_run_are_not_fatal():
    ignored = _log("[2026-01-01 00:00:00] The server is fired up and ready to roll!",
                   "Exception ignored in: <function Engine.__del__ at 0x7f>", "Traceback (most recent call last):", *TB_FRAMES,
                   "AttributeError: 'NoneType' object has no attribute 'shutdown'")
    facts = audit_bytes(ignored)["facts"]
    assert facts["fatal"]["class"] == "none" and facts["phase"] == "ready"
    offline = _log("Warmup ...", "Total. latency:  0.476 s, throughput:     35.72 token/s", "Benchmark ...",
                   "Total. latency:  0.003 s, throughput:   5184.39 token/s",
                   "Traceback (most recent call last):", *TB_FRAMES, "RuntimeError: destroy_process_group() was not called")
    assert audit_bytes(offline)["facts"]["fatal"]["class"] == "none"
    during = _log("Warmup ...", "Total. latency:  0.476 s, throughput:     35.72 token/s", "Benchmark ...",
                  "Traceback (most recent call last):", *TB_FRAMES, "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert audit_bytes(during)["facts"]["fatal"]["class"] == "python_exception"


def test_exception_text_without_traceback_header():
    facts = audit_bytes(_log("[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=90.00 GB",
                             "RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device"))["facts"]
    assert facts["fatal"]["class"] == "no_kernel_image" and facts["phase"] == "failed"
    plain = audit_bytes(_log("ValueError: Unsupported kv_cache_dtype: fp16."))["facts"]["fatal"]
    assert plain["class"] == "python_exception" and plain["message"] == "ValueError: Unsupported kv_cache_dtype: fp16."
    # warnings and prose mentioning errors are not fatal
    harmless = _log("[2026-02-26 05:20:06 TP1] Failed to import amdsmi with ModuleNotFoundError(\"No module named 'amdsmi'\")",
                    "/x/launch_server.py:56: UserWarning: 'python -m sglang.launch_server' is still supported",
                    "[2026-04-14 16:08:44 TP1] Setup Custom allreduce failed with CUDART error: peer access is not supported")
    assert audit_bytes(harmless)["facts"]["fatal"]["class"] == "none"


def test_error_after_ready_fails_the_phase():
    facts = audit_bytes(_log("[2026-01-01 00:00:00] The server is fired up and ready to roll!",
                             "[2026-01-01 01:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):", *TB_FRAMES,
                             "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"))["facts"]
    assert facts["ready"] is True and facts["phase"] == "failed" and facts["fatal"]["rank"] == "TP3"


# Startup failures that are no Python exception. uvicorn logs the bind error with SGLang's prefix; argparse
# writes its usage and error to stderr without one.
UVICORN_BIND = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use"
USAGE = "usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH] [--host HOST] [--port PORT]"
# what SGLang's warmup thread logs once it gives up on a server that never listened
WARMUP_FAILED = ("[2025-03-08 12:31:29] Initialization failed. warmup error: Traceback (most recent call last):",
                 '  File "/usr/local/lib/python3.12/dist-packages/requests/adapters.py", line 667, in send',
                 "    resp = conn.urlopen(",
                 "requests.exceptions.ConnectionError: HTTPConnectionPool(host='0.0.0.0', port=30000): Max retries exceeded "
                 "with url: /get_model_info (Caused by NewConnectionError('Failed to establish a new connection: "
                 "[Errno 111] Connection refused'))")


def _start_without_uvicorn(fixtures_dir):
    """001's start up to the point where uvicorn binds its port (the lines before "Uvicorn running")."""
    data = _read(fixtures_dir, "001-qwq32b-tp4-l4-ready-2025-03.log")
    return data[:data.index(b"[2025-03-08 12:29:29] INFO:     Uvicorn running")].decode("utf-8")


@pytest.mark.parametrize("line", [
    "[2025-03-08 12:29:29] " + UVICORN_BIND,
    "Nov 30 12:29:29 gpu-node-1 python3[3207]: [2025-03-08 12:29:29] " + UVICORN_BIND,
    "\x1b[31mERROR\x1b[0m:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
    "ERROR:    [Errno 98] Address already in use",
], ids=["sglang-prefix", "journald", "uvicorn-colours", "plain-strerror"])
def test_port_in_use_is_fatal(fixtures_dir, line):
    head = _start_without_uvicorn(fixtures_dir)
    data = (head + line + "\n[2025-03-08 12:29:29] INFO:     Waiting for application shutdown.\n").encode("utf-8")
    facts = audit_bytes(data)["facts"]
    assert facts["fatal"]["class"] == "port_in_use" and facts["phase"] == "failed" and facts["ready"] is False
    assert facts["fatal"]["line"] == head.count("\n") + 1 and facts["fatal"]["rank"] == "main"
    assert facts["fatal"]["message"].startswith("ERROR:    [Errno 98] ") and facts["fatal"]["message"].endswith("ddress already in use")
    # the start's facts are still there
    assert (facts["kv_cache_dtype_configured"], facts["tp_size"], facts["max_total_num_tokens"]) == ("auto", 4, 46611)


def test_port_in_use_stays_the_cause_after_the_warmup_gives_up(fixtures_dir):
    data = _log(_start_without_uvicorn(fixtures_dir) + "[2025-03-08 12:29:29] " + UVICORN_BIND, *WARMUP_FAILED)
    fatal = audit_bytes(data)["facts"]["fatal"]
    assert fatal["class"] == "port_in_use" and "bind on address ('0.0.0.0', 30000)" in fatal["message"]
    # without the bind error the warmup's exception is what the log shows
    alone = audit_bytes(_log(*WARMUP_FAILED))["facts"]["fatal"]
    assert alone["class"] == "python_exception" and alone["message"].startswith("requests.exceptions.ConnectionError: ")


@pytest.mark.parametrize("error", [
    "launch_server.py: error: unrecognized arguments: --foo",
    "launch_server.py: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer",
    "launch_server.py: error: argument --kv-cache-dtype: invalid choice: 'bf16' (choose from 'auto', 'fp8_e5m2', 'fp8_e4m3')",
    "launch_server.py: error: the following arguments are required: --model-path",
])
def test_rejected_command_line_is_fatal(error):
    res = audit_bytes(_log("python3 -m sglang.launch_server --model-path /models/qwen --foo", USAGE, error))
    facts = res["facts"]
    assert facts["fatal"] == {"class": "cli_argument_error", "message": error, "line": 3, "rank": "main"}
    assert facts["phase"] == "failed" and facts["starts"] == 0


def test_look_alikes_of_the_startup_failures():
    # an exception about the port stays a Python exception, as the answer key's classes say
    exc = audit_bytes(_log("[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):", *TB_FRAMES,
                           "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5757')"))["facts"]["fatal"]
    assert exc["class"] == "python_exception" and exc["message"].startswith("zmq.error.ZMQError: Address already in use")
    harmless = _log(USAGE,
                    "[2026-04-14 16:08:44 TP1] Setup Custom allreduce failed with CUDART error: peer access is not supported",
                    "[2026-01-01 00:00:00] INFO:     127.0.0.1:49534 - \"GET /get_model_info HTTP/1.1\" 200 OK",
                    "[2026-01-01 00:00:00] WARNING:  Invalid HTTP request received.")
    assert audit_bytes(harmless)["facts"]["fatal"]["class"] == "none"


def test_prefilter_keeps_the_startup_failure_lines(fixtures_dir):
    for data in (_log(_start_without_uvicorn(fixtures_dir) + "[2025-03-08 12:29:29] " + UVICORN_BIND),
                 _log(USAGE, "launch_server.py: error: the following arguments are required: --model-path")):
        noisy = _with_noise(data, every=5)
        fast = audit_bytes(noisy)
        assert fast["stats"]["inspected_lines"] < noisy.count(b"\n")
        assert fast["facts"]["fatal"]["class"] in ("port_in_use", "cli_argument_error")
        assert _comparable(fast, drop_ranks=True) == _comparable(_scan_everything(noisy), drop_ranks=True)


# ----------------------------------------------------------------------------------------------
# Rules and waivers


def test_rule_override_addition_and_waiver(fixtures_dir):
    data = _read(fixtures_dir, "004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log")
    res = audit_bytes(data, rules=[{"id": "child_process_failed", "severity": "warning"},
                                   {"id": "aiter_jit", "severity": "error", "pattern": r"^\[aiter\] import \[(\w+)\]",
                                    "description": "aiter JIT modules were loaded", "fix": "none"}],
                      allow=[{"rule": "fp8_kv_effective", "reason": "benchmark host, accuracy not measured"}])
    by_rule = {f["rule"]: f for f in res["findings"]}
    assert by_rule["child_process_failed"]["severity"] == "warning"
    assert by_rule["aiter_jit"]["count"] == 2 and by_rule["aiter_jit"]["evidence"][0]["line"] == 1
    assert by_rule["fp8_kv_effective"]["waived"] is True
    assert by_rule["fp8_kv_effective"]["waiver_reason"] == "benchmark host, accuracy not measured"
    assert res["failed_rules"] == ["fp8_kv_no_scales", "scheduler_exception", "aiter_jit"]


def test_rule_without_literal_scans_every_line(fixtures_dir):
    data = _read(fixtures_dir, "001-qwq32b-tp4-l4-ready-2025-03.log")
    res = audit_bytes(data, rules=[{"id": "any_load", "severity": "info", "pattern": r"(?i)load WEIGHT"}])
    want = sum(1 for line in data.split(b"\n") if re.search(rb"(?i)load weight", line))
    assert want > 0 and {f["rule"]: f["count"] for f in res["findings"]} == {"any_load": want}
    assert res["stats"]["inspected_lines"] == data.count(b"\n")
    # access lines hold client text: no rule ever counts them
    health = audit_bytes(data, rules=[{"id": "any_health", "severity": "info", "pattern": r"(?i)get /HEALTH"}])
    assert re.search(rb"(?i)get /health", data) and health["findings"] == []


@pytest.mark.parametrize("rules, allow, message", [
    ([{"id": "x", "severity": "fatal", "pattern": "a"}], None, "severity"),
    ([{"id": "x", "severity": "error"}], None, "lacks pattern"),
    ([{"id": "x", "severity": "error", "pattern": "("}], None, "not a valid regular expression"),
    ([{"id": "x", "severity": "error", "pattern": "ab", "colour": "red"}], None, "unknown keys"),
    ([{"severity": "error", "pattern": "ab"}], None, "no id"),
    (["fp8_kv_no_scales"], None, "must be a dict"),
    (None, [{"rule": "fp8_kv_no_scales", "reason": "  "}], "without a reason"),
    (None, [{"rule": "fp8_kv_no_scales"}], "without a reason"),
    (None, [{"rule": "no_such_rule", "reason": "r"}], "unknown rule"),
])
def test_bad_rules_and_waivers(rules, allow, message):
    with pytest.raises(LogAuditError, match=message):
        LogAuditor(rules=rules, allow=allow)


@pytest.mark.parametrize("pattern, literals", [
    (r"Using FP8 KV cache but no scaling factors provided", [["Using FP8 KV cache but no scaling factors provided"]]),
    (r"(?:Using KV cache dtype: |KV Cache is allocated\. dtype: )torch\.float8_\w+", [["torch.float8_"]]),
    (r"CUDA out of memory|OutOfMemoryError", [["CUDA out of memory"], ["OutOfMemoryError"]]),
    (r"Parameter \S+ not found in params_dict", [[" not found in params_dict", "Parameter "]]),
    (r"colou?r map", [["r map", "colo"]]),
    (r"a+bc", [["bc"]]),
    (r"(?i)health", None),
    (r"\d+ GB|x", None),
])
def test_required_literals(pattern, literals):
    assert required_literals(pattern) == literals


def test_every_default_rule_has_a_literal():
    # a default rule without one would make every audit parse every line
    assert all(rule.literals for rule in build_rules())


# ----------------------------------------------------------------------------------------------
# The prefilter: it must never hide a line that matters


NOISE = [
    b"[2026-05-08 14:34:30 DP3 TP3 EP3] Decode batch, #running-req: 12, #full token: 82345, full token usage: 0.31, mamba num: 30, "
    b"mamba usage: 0.03, accept len: 2.83, accept rate: 0.61, cuda graph: True, gen throughput (token/s): 93.65, #queue-req: 0",
    b'[2026-05-08 14:34:30] INFO:     10.0.0.9:40112 - "GET /metrics HTTP/1.1" 200 OK',
    b"[2026-05-08 14:34:30 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, #running-req: 0,",
    b"aaaa_bbbb_cccc_dddd_Eeee_Ffff='x' sglang_xyz Errr Excp Capt Cach KV KV KV ___ === yyy xxx LLL UUU",
]


def _with_noise(data, every=1):
    out = []
    for n, line in enumerate(data.split(b"\n")):
        out.append(line)
        if n % every == 0:
            out.extend(NOISE * 40)
    return b"\n".join(out)


def _scan_everything(data):
    # a rule without a usable literal switches the prefilter off
    everything = audit_bytes(data, rules=[{"id": "zz_all", "severity": "info", "pattern": r"(?i)\A\Z"}])
    everything["findings"] = [f for f in everything["findings"] if f["rule"] != "zz_all"]
    return everything


def test_prefilter_never_hides_a_line(fixtures_dir):
    for name, data in _all_logs(fixtures_dir):
        for variant in (data, _with_noise(data), _with_noise(data, every=7)):
            fast = audit_bytes(variant)
            assert fast["stats"]["inspected_lines"] < variant.count(b"\n") + 1
            assert _comparable(fast, drop_ranks=True) == _comparable(_scan_everything(variant), drop_ranks=True), name


def test_noise_does_not_change_the_facts(fixtures_dir):
    for name, data in _all_logs(fixtures_dir):
        plain, noisy = audit_bytes(data)["facts"], audit_bytes(_with_noise(data, every=3))["facts"]
        for key in ("fatal", "ranks_seen"):
            plain.pop(key)
            noisy.pop(key)
        assert plain == noisy, name


def test_plan_picks_rare_bytes_and_searches_common_literals_whole():
    scanner = LogAuditor()._scanner
    noise = b"\n".join(NOISE[:3] * 2000) + b"\n"
    scanner.plan(noise, 0, len(noise))
    probed = set(lit for entries in scanner.groups.values() for lit, dummy in entries)

    def rate(byte):
        return noise.count(bytes((byte,))) * (1 << 20) / len(noise)

    # every byte of "Error" is in most decode/HTTP lines ('E' of EPn and GET): it is searched whole
    assert b"Error" in scanner.find_literals
    assert b"server_args=" in probed and b"Mamba Cache is allocated" in probed
    for needle in scanner.groups:
        assert rate(needle[0]) <= PROBE_LIMIT_PER_MIB
    for lit in scanner.find_literals:
        assert min(rate(b) for b in lit) > PROBE_LIMIT_PER_MIB


COMMON_BYTE_LITERALS = ["Error", "error: argument -", "Traceback (most recent call last)", "error while attempting to bind on address"]


@pytest.mark.parametrize("search", ["find", "regex"])
@pytest.mark.parametrize("chunk", [4096, None])
def test_literals_of_common_bytes_are_found_by_whole_searches(search, chunk, monkeypatch):
    # every byte of these literals is in most decode/HTTP lines: a shared piece ("rror") and whole literals are
    # searched with bytes.find, or (when finds cost more) one regular expression per shared byte
    monkeypatch.setattr(_scan, "REGEX_PASS_COST" if search == "find" else "FIND_PASS_COST", 10 ** 6)
    noise = b"\n".join(NOISE[:3] * 400) + b"\n"
    lines = [b"xx Error", b"RuntimeError: boom", b"Errr rror Erro", b"y" * 2000 + b" Error", b"Traceback (most recent call last):",
             b"launch_server.py: error: argument --kv-cache-dtype: invalid choice", b"y" * 1020 + b"Error",
             b"[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000)"]
    data = b"Error first\n" + noise + b"\n".join(lines) + b"\n" + noise + b"at the end: Error"
    seen = []
    scanner = LineScanner(lambda raw, loc: seen.append((raw, loc)), [[lit] for lit in COMMON_BYTE_LITERALS], max_line_bytes=1024)
    for i in range(0, len(data), chunk or len(data)):
        scanner.feed(data[i:i + (chunk or len(data))])
    scanner.finish()
    # the lines whose first max_line_bytes hold a literal, with their numbers: nothing more, nothing less
    expected = [(line[:1024], n) for n, line in enumerate(data.split(b"\n"), 1)
                if any(lit.encode() in line[:1024] for lit in COMMON_BYTE_LITERALS)]
    assert seen == expected and len(expected) == 7
    assert sorted(scanner.find_literals) == sorted(lit.encode() for lit in COMMON_BYTE_LITERALS)
    kinds = set("regex" if len(key) == 1 else "find" for key, dummy, dummy in scanner.searches)
    assert kinds == {search}
    if search == "find":
        assert b"rror" in [key for key, dummy, dummy in scanner.searches]   # one search serves three literals


def _every_line_candidates(self, block, start, end):
    """The plain definition of the scan: each line whose head (max_line_bytes) holds every run of an alternative, as
    written or with its ANSI codes removed, found by testing every line for every alternative."""
    out, pos = [], start
    while pos < end:
        e = block.find(b"\n", pos, end)
        e = end if e < 0 else e
        head = block[pos:min(e, pos + self._max_line)]
        clean = re.sub(ANSI_PATTERN.encode(), b"", head)
        if any(all(r in head for r in runs) or all(r in clean for r in runs) for runs in self.alternatives):
            out.append(pos)
        pos = e + 1
    return out


def _bench_log(path, size):
    """A log as tests/bench/bench_log_audit.py writes it (real startup blocks, 3% real lines, the rest decode and HTTP
    lines), with a restart every MiB instead of every 30."""
    spec = importlib.util.spec_from_file_location("bench_log_audit", FIXTURES.parent / "bench" / "bench_log_audit.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.RESTART_EVERY = 1 << 20
    bench.write_log(path, size)
    return path


def _plain(audit, *args, **kwargs):
    """An audit that tests every line for every literal and parses every handed-on line in full."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(LineScanner, "candidates", _every_line_candidates)
        m.setattr(_log_audit, "indented_bare", lambda text: False)
        return json.loads(json.dumps(audit(*args, **kwargs)))


# indented lines of a traceback that are no plain frame: a glued record, an access line, a progress bar with a record
# after its carriage return, colour codes, a header, Python's default format
TRICKY_TRACEBACK = (
    b"[2026-12-03 19:55:34 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    b'  File "/x/scheduler.py", line 10, in run\n'
    b"    self.step()[2026-12-03 19:55:35 TP1] Load weight begin. avail mem=93.10 GB\n"
    b'    INFO:     10.0.0.1:5 - "GET /health HTTP/1.1" 200 OK\n'
    b"    progress 10%\r[2026-12-03 19:55:36 TP2] KV Cache is allocated. #tokens: 10, K size: 1.00 GB, V size: 1.00 GB\n"
    b"  \x1b[31mcolored frame\x1b[0m\n"
    b"  see Traceback (most recent call last) above\n"
    b"    INFO:sglang:not a record\n"
    b"\n"
    b"RuntimeError: boom\n")


# the default plan; every literal found by whole searches: finds, or regular expressions of a shared byte
PLANS = {"default": {}, "finds": {"PROBE_LIMIT_PER_MIB": -1, "REGEX_PASS_COST": 10 ** 6},
         "regexes": {"PROBE_LIMIT_PER_MIB": -1, "FIND_PASS_COST": 10 ** 6}}


@pytest.fixture(scope="module")
def plain_parses(tmp_path_factory):
    """The inputs and their plain parses, the same for every plan (one plain parse costs more than all fast ones)."""
    logs = sorted((FIXTURES / "real-sglang").glob("*.log")) + sorted((FIXTURES / LOGS).glob("*.log"))
    inputs = [(path, data) for path in logs for data in (path.read_bytes(), _with_noise(path.read_bytes(), every=5))]
    inputs += [("tricky traceback", TRICKY_TRACEBACK), ("tricky traceback in a log", logs[0].read_bytes() + TRICKY_TRACEBACK * 3)]
    bench = _bench_log(tmp_path_factory.mktemp("bench") / "bench.log", 6 << 20)
    plain = [_plain(audit_bytes, data) for dummy, data in inputs] + [_plain(audit_path, str(bench))]
    return logs, inputs, bench, plain


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_fast_paths_equal_the_plain_parse(plan, plain_parses, monkeypatch):
    # the scan plan (rare bytes probed per line, whole searches) and the frame shortcut change nothing against testing
    # every line for every literal and parsing every handed-on line in full: facts, findings, evidence lines, stats
    logs, inputs, bench, plain = plain_parses
    for name, value in PLANS[plan].items():
        monkeypatch.setattr(_scan, name, value)
    fast = [audit_bytes(data) for dummy, data in inputs] + [audit_path(str(bench))]
    assert len(logs) > 20 and plain[-1]["stats"]["inspected_lines"] > 1000 and plain[-1]["findings"]
    for (name, dummy), a, b in zip(inputs + [(bench, None)], fast, plain):
        assert json.loads(json.dumps(a)) == b, name


def test_lines_without_a_literal_skip_facts_and_rules_and_change_nothing(fixtures_dir, tmp_path, monkeypatch):
    # a line handed on only because a traceback is open or a follow window runs holds no key literal: the audit checks
    # only its traceback role and rank; with every line taken for one holding a literal, the result is the same
    logs = sorted((fixtures_dir / "real-sglang").glob("*.log")) + sorted((fixtures_dir / LOGS).glob("*.log"))
    inputs = [path.read_bytes() for path in logs] + [TRICKY_TRACEBACK, logs[0].read_bytes() + TRICKY_TRACEBACK * 3]
    bench = _bench_log(tmp_path / "bench.log", 4 << 20)
    seen = []
    line = LogAuditor._line

    def spy(self, raw, loc):
        seen.append(self._scanner.candidate)
        return line(self, raw, loc)

    with monkeypatch.context() as m:
        m.setattr(LogAuditor, "_line", spy)
        lean = [audit_bytes(data) for data in inputs] + [audit_path(str(bench))]
    assert seen.count(False) > 100 and seen.count(True) > 1000
    monkeypatch.setattr(LineScanner, "candidate", property(lambda self: True, lambda self, value: None), raising=False)
    full = [audit_bytes(data) for data in inputs] + [audit_path(str(bench))]
    for a, b in zip(lean, full):
        assert json.loads(json.dumps(a)) == json.loads(json.dumps(b))


# ----------------------------------------------------------------------------------------------
# Property tests: arbitrary and damaged input never raises


def _well_formed(res):
    json.dumps(res)
    facts = res["facts"]
    assert facts["fatal"]["class"] in FATAL_CLASSES
    assert facts["phase"] in PHASES + ("failed",)
    assert all(f["severity"] in ("error", "warning", "info") for f in res["findings"])
    assert set(res["failed_rules"]) <= set(f["rule"] for f in res["findings"])
    for f in res["findings"]:
        assert f["count"] == sum(f["per_rank"].values()) and len(f["evidence"]) <= 3
        assert all(isinstance(ev["line"], int) and ev["line"] >= 1 for ev in f["evidence"])


FIXTURE_BYTES = [(FIXTURES / LOGS / a["file"]).read_bytes() for a in ANSWERS]
ANSI = [b"\x1b[0m", b"\x1b[1;31m", b"\x1b[2K", b"\x1b]0;title\x07", b"\x1b[38;5;208m", b"\x1b", b"\x1b["]
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(st.binary(max_size=4096))
def test_random_bytes_never_raise(data):
    _well_formed(audit_bytes(data))


@st.composite
def damaged_logs(draw):
    data = bytearray(draw(st.sampled_from(FIXTURE_BYTES)))
    for dummy in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["flip", "ansi", "cut", "huge", "newline", "glue", "splice"]))
        pos = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            data[min(pos, len(data) - 1)] ^= draw(st.integers(1, 255))
        elif op == "ansi":
            data[pos:pos] = draw(st.sampled_from(ANSI))
        elif op == "cut":
            del data[pos:]
        elif op == "huge":
            data[pos:pos] = draw(st.sampled_from([b"x", b"\xff", b" ", b"\r", b"Error "])) * draw(st.integers(1000, 300000))
        elif op == "newline":
            data[pos:pos] = b"\n"
        elif op == "glue":
            data[pos:pos] = b"Traceback (most recent call last):"
        else:
            # a piece of another real log: records of several runs and formats mixed
            other = draw(st.sampled_from(FIXTURE_BYTES))
            a = draw(st.integers(0, len(other)))
            data[pos:pos] = other[a:a + draw(st.integers(0, 4000))]
    return bytes(data)


@PROPERTY
@given(damaged_logs(), st.integers(1, 1 << 16))
def test_damaged_logs_never_raise_and_chunking_is_invisible(data, chunk):
    whole = audit_bytes(data, max_line_bytes=16384)
    _well_formed(whole)
    auditor = LogAuditor(max_line_bytes=16384)
    for i in range(0, len(data), chunk):
        auditor.feed(data[i:i + chunk])
    assert _comparable(auditor.finish()) == _comparable(whole)


@PROPERTY
@given(damaged_logs())
def test_fast_paths_equal_the_plain_parse_on_damaged_logs(data):
    # glued records, carriage returns, ANSI codes and indented client lines inside tracebacks: still the full parse
    assert json.loads(json.dumps(audit_bytes(data, max_line_bytes=16384))) == _plain(audit_bytes, data, max_line_bytes=16384)


@PROPERTY
@given(damaged_logs())
def test_damaged_logs_prefilter_matches_full_scan(data):
    assert _comparable(audit_bytes(data), drop_ranks=True) == _comparable(_scan_everything(data), drop_ranks=True)
