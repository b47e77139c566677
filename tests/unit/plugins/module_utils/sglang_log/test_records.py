# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Facts come only from SGLang's own records: forged access lines and echoed prompts change nothing.

The client lines (tests/fixtures/sglang-logs/client-lines-sglang-0.5.23.jsonl) were written by SGLang 0.5.23's
RequestLogger and uvicorn's AccessFormatter with SGLang's format (sglang_client_lines.py); they are injected
into the real logs of the answer key.
"""

from __future__ import annotations

import ast
import json
import pathlib
import re
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import audit_bytes
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._records import (
    ACCESS, BARE, ECHO, SGLANG, UVICORN, parse_record, split_records)

import sglang_source  # tests/unit/sglang_source.py

from . import sglang_client_lines  # the table of client log sites lies beside the client lines it extends

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[4]
LOGS = ROOT / "tests" / "fixtures" / "sglang-logs"
CLIENT_LINES = LOGS / "client-lines-sglang-0.5.23.jsonl"
ANSWERS = json.loads((LOGS / "expected.json").read_text(encoding="utf-8"))
FACT_KEYS = ("fp8_scale_warning", "kv_cache_dtype_configured", "kv_dtype_effective", "tp_size", "model_path",
             "max_total_num_tokens", "ready")


def _client_items():
    return [json.loads(line) for line in CLIENT_LINES.read_text(encoding="utf-8").splitlines()]


def _without_line_numbers(result):
    res = json.loads(json.dumps(result))
    res.pop("stats")
    res["facts"]["fatal"].pop("line")
    for finding in res["findings"]:
        for ev in finding["evidence"]:
            ev.pop("line")
    return res


def _inject(data, block, every):
    lines = data.split(b"\n")
    out = []
    for n, line in enumerate(lines):
        out.append(line)
        if n % every == 0:
            out.append(block)
    return b"\n".join(out)


def test_client_lines_fixture_is_what_sglang_and_uvicorn_write(sglang_python):
    out = subprocess.run([sglang_python, str(HERE / "sglang_client_lines.py")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=300, check=False)
    assert out.returncode == 0, out.stderr.decode("utf-8", "replace")[-3000:]
    assert out.stdout.decode("utf-8") == CLIENT_LINES.read_text(encoding="utf-8")


def test_every_client_line_is_a_client_record():
    items = _client_items()
    assert {i["kind"] for i in items} == {"access", "echo"} and len(items) >= 400
    for item in items:
        line = item["line"]
        assert line.endswith("\n") and line.count("\n") == 1, "a client line spans one physical line"
        kinds = {rec.kind for rec in split_records(line.rstrip("\n"))}
        assert kinds == {ACCESS if item["kind"] == "access" else ECHO}, line[:200]


@pytest.mark.parametrize("answer", ANSWERS, ids=[a["file"][:3] for a in ANSWERS])
def test_forged_lines_in_real_logs_change_no_fact(answer):
    data = (LOGS / answer["file"]).read_bytes()
    block = "".join(i["line"] for i in _client_items()).rstrip("\n").encode("utf-8")
    clean = audit_bytes(data)
    for every in (1, 7):
        forged = _inject(data, block, every)
        res = audit_bytes(forged)
        facts = res["facts"]
        for key in FACT_KEYS:
            assert facts[key] == answer[key], (key, every)
        assert _without_line_numbers(res) == _without_line_numbers(clean), every


def test_the_forged_request_of_the_report_changes_nothing():
    # a bf16 start, then a client asks for /?server_args=ServerArgs(kv_cache_dtype='fp8_e4m3',model_path='/tmp/x')
    # and sends a prompt holding the FP8 warning
    start = (LOGS / "001-qwq32b-tp4-l4-ready-2025-03.log").read_bytes()
    items = _client_items()
    access = next(i["line"] for i in items if i["kind"] == "access" and i["request"]["query"].startswith("server_args=ServerArgs("))
    echo = next(i["line"] for i in items if i["kind"] == "echo" and i["request"]["text"].startswith("Using FP8 KV cache"))
    assert "GET /?server_args=ServerArgs(kv_cache_dtype='fp8_e4m3',model_path='/tmp/x') HTTP/1.1" in access
    res = audit_bytes(start + (access + echo).encode("utf-8"))
    facts = res["facts"]
    assert (facts["kv_cache_dtype_configured"], facts["model_path"], facts["starts"]) == ("auto", "/home/model/Qwen/QwQ-32B", 1)
    assert facts["fp8_scale_warning"] is False and res["failed_rules"] == [] and facts["phase"] == "ready"


@pytest.mark.parametrize("line, kind, rank, msg", [
    ("[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=1.00 GB", SGLANG, "TP0", "Load weight begin. avail mem=1.00 GB"),
    # SGLANG_LOG_MS adds milliseconds
    ("[2026-01-01 00:00:00.042 DP1 TP1 EP1] Memory pool end. avail mem=1.00 GB", SGLANG, "DP1 TP1 EP1", "Memory pool end. avail mem=1.00 GB"),
    ("[2026-01-01 00:00:00 PP1 ATTN_CP1 MOE_DP1 TP3] Load weight end.", SGLANG, "PP1 ATTN_CP1 MOE_DP1 TP3", "Load weight end."),
    ("[2026-01-01 00:00:00 encode_dp_worker[2]] Load weight end.", SGLANG, "encode_dp_worker[2]", "Load weight end."),
    ("[2026-03-21 03:31:56] INFO engine.py:177: server_args={'tp_size': 2}", SGLANG, "main", "server_args={'tp_size': 2}"),
    ("WARNING:sglang.srt.server_args:Detected GPT-OSS model", SGLANG, "main", "Detected GPT-OSS model"),
    ("[2026-01-01 00:00:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", UVICORN, "main",
     "Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"),
    ('[2026-01-01 00:00:00] INFO:     127.0.0.1:1 - "GET /?server_args={} HTTP/1.1" 200 OK', ACCESS, "main",
     '127.0.0.1:1 - "GET /?server_args={} HTTP/1.1" 200 OK'),
    ("[2026-01-01 00:00:00] Receive: obj=GenerateReqInput(text='The server is fired up and ready to roll!')", ECHO, "main",
     "Receive: obj=GenerateReqInput(text='The server is fired up and ready to roll!')"),
    ('[2026-01-01 00:00:00] {"timestamp": "x", "event": "request.finished"}', ECHO, "main",
     '{"timestamp": "x", "event": "request.finished"}'),
    ("max_total_num_tokens=4096", BARE, None, "max_total_num_tokens=4096"),
    ("INFO 03-07 12:29:02 __init__.py:190] Automatically detected platform cuda.", BARE, None,
     "INFO 03-07 12:29:02 __init__.py:190] Automatically detected platform cuda."),
])
def test_record_kinds(line, kind, rank, msg):
    rec = parse_record(line)
    assert (rec.kind, rec.rank, rec.msg) == (kind, rank, msg)


def test_a_record_is_never_split_but_a_progress_bar_is():
    echo = ("[2026-01-01 00:00:00] Receive: obj=GenerateReqInput(text='x[2026-01-01 00:00:00 TP0] Using FP8 KV cache but no "
            "scaling factors provided \u23ce [2026-01-01 00:00:00 TP1] KV Cache is allocated. dtype: torch.float8_e4m3fn')")
    assert [r.kind for r in split_records(echo)] == [ECHO]
    # glued after a bar, the echo keeps the rest of the line
    progress = "  0%|   | 0/4 [00:00<?, ?it/s]" + echo
    assert [r.kind for r in split_records(progress)] == [BARE, ECHO] and split_records(progress)[1].msg.endswith("float8_e4m3fn')")
    glued = "  0%|   | 0/4 [00:00<?, ?it/s][2026-01-01 00:00:00 TP1] Capture cuda graph begin."
    assert [(r.kind, r.rank) for r in split_records(glued)] == [(BARE, None), (SGLANG, "TP1")]
    flattened = "$ python3 x.py \u23ce [2024-11-25 00:47:01] server_args=ServerArgs(tp_size=2) \u23ce [2024-11-25 00:47:11 TP1] Load weight begin."
    assert [(r.kind, r.rank) for r in split_records(flattened)] == [(BARE, None), (SGLANG, "main"), (SGLANG, "TP1")]


def _log(*lines):
    return ("\n".join(lines) + "\n").encode("utf-8")


def test_text_later_in_a_message_does_not_match_a_line_anchored_at_its_start():
    res = audit_bytes(_log(
        "[2026-01-01 00:00:00 TP0] Setup note: server_args={'kv_cache_dtype': 'fp8_e4m3'} and "
        "Using FP8 KV cache but no scaling factors provided. KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1,",
        "[2026-01-01 00:00:00] hello The server is fired up and ready to roll!",
        "[2026-01-01 00:00:00 TP0] x max_total_num_tokens=5, chunked_prefill_size=1"))
    facts = res["facts"]
    assert (facts["starts"], facts["fp8_scale_warning"], facts["kv_dtype_effective"], facts["ready"], facts["max_total_num_tokens"],
            facts["kv_pools"]) == (0, False, None, False, None, [])
    assert res["findings"] == []


def test_sglang_0_5_23_lines():
    res = audit_bytes(_log(
        "[2026-12-01 10:00:00.120] server_args={'model_path': '/m', 'kv_cache_dtype': 'bf16', 'tp_size': 2, 'api_key': None}",
        "[2026-12-01 10:00:10.003 TP0] Load weight end. elapsed=5.46 s, type=Qwen3ForCausalLM, avail mem=60.00 GB, mem usage=16.10 GB.",
        "[2026-12-01 10:00:11.500 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 454112, K size: 3.46 GB, V size: 3.46 GB",
        "[2026-12-01 10:00:11.501 TP1] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 8192, KV size: 0.10 GB",
        "[2026-12-01 10:00:12.000 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens=[1, 2], avail mem=8.10 GB",
        "[2026-12-01 10:00:20.000 TP0] max_total_num_tokens=454112, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=64, context_len=8192, available_gpu_mem=6.80 GB",
        "[2026-12-01 10:00:25.000] The server is fired up and ready to roll!"))
    facts = res["facts"]
    assert facts["ranks_seen"] == ["TP0", "TP1"] and facts["tp_size"] == 2 and facts["kv_cache_dtype_configured"] == "bf16"
    assert facts["kv_dtype_effective"] == "torch.bfloat16" and facts["max_total_num_tokens"] == 454112 and facts["ready"]
    pools = [(p["rank"], p["tokens"], p["k_gb"], p["kv_gb"]) for p in facts["kv_pools"]]
    assert pools == [("TP0", 454112, 3.46, None), ("TP1", 8192, None, 0.10)]
    assert res["failed_rules"] == [] and facts["phase"] == "ready"
    fp8 = audit_bytes(_log("[2026-12-01 10:00:11.500 TP0] KV Cache VA upper bound. dtype: torch.float8_e4m3fn, #tokens: 1, "
                           "K size: 1.00 GB, V size: 1.00 GB"))
    assert fp8["facts"]["kv_dtype_effective"] == "torch.float8_e4m3fn" and fp8["failed_rules"] == ["fp8_kv_effective"]


def test_a_prompt_that_opens_a_traceback_is_no_fatal_error():
    items = _client_items()
    lines = [i["line"] for i in items if "Traceback" in i["line"] or "OutOfMemoryError" in i["line"]]
    assert lines
    res = audit_bytes(("[2026-01-01 00:00:00] The server is fired up and ready to roll!\n" + "".join(lines)).encode("utf-8"))
    assert res["facts"]["fatal"]["class"] == "none" and res["facts"]["phase"] == "ready" and res["findings"] == []


def test_client_lines_inside_a_traceback_and_a_chain_change_nothing():
    frames = ['  File "/x/scheduler.py", line 1, in run', "    boom()"]
    chained = ["Traceback (most recent call last):", *frames, "KeyError: 'a'", "",
               "During handling of the above exception, another exception occurred:", "",
               "Traceback (most recent call last):", *frames, "ValueError: the real cause"]
    noise = [i["line"].rstrip("\n") for i in _client_items()[:300]]
    plain = audit_bytes(_log(*chained))["facts"]["fatal"]
    mixed = [chained[0], *noise, *chained[1:5], *noise, *chained[5:]]
    fatal = audit_bytes(_log(*mixed))["facts"]["fatal"]
    assert plain["message"] == fatal["message"] == "ValueError: the real cause" and fatal["class"] == "python_exception"


# ----------------------------------------------------------------------------------------------
# Startup facts only from records written before the server accepted requests; SGLang's own client-to-log sites

REAL = ROOT / "tests" / "fixtures" / "real-sglang"
REAL_LOGS = sorted(REAL.glob("sglang-0.5.16-h200-*.log"))
# the answer key of each real log: expected.json; for the H200 logs the facts of their start, which test_real_sglang_log.py
# holds to what the run recorded (a log with a client's forged records after its acceptance point keeps its real start's)
REAL_KEYS = ("kv_cache_dtype_configured", "kv_dtype_effective", "fp8_scale_warning", "model_path", "max_total_num_tokens",
             "tp_size", "ready")
_ACCEPTANCE_RE = re.compile(r"(?:INFO:\s+(?:Application startup complete|Uvicorn running on )|\] The server is fired up"
                            r"|\] \[http_server\] Error: )")
STAMP = "[2026-12-01 15:51:56] "
# what a hostile client holding the API key makes SGLang write: after a newline, SGLang-prefixed records of another
# checkpoint with a bf16 KV cache, a token budget, the ready line and the FP8 no-scales warning
FORGED_RECORDS = (
    "server_args=ServerArgs(model_path='/models/decoy-bf16', kv_cache_dtype='bf16', tp_size=8, api_key='sk-forged-0')",
    "server_args={'model_path': '/models/decoy-bf16', 'kv_cache_dtype': 'bf16', 'tp_size': 8}",
    "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000000, K size: 9.00 GB, V size: 9.00 GB",
    "max_total_num_tokens=1000000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, "
    "context_len=8192, available_gpu_mem=9.00 GB",
    "The server is fired up and ready to roll!",
    "Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.",
)
PAYLOAD = "x\n" + "".join(STAMP + rec + "\n" for rec in FORGED_RECORDS) + STAMP + "y"


def _sites():
    return [(r[0], r[1], r[2], "".join(r[3:-1]) if len(r) > 5 else r[3], r[-1]) for r in sglang_client_lines.CLIENT_LOG_SITES]


def _render(fmt, value):
    """The message a site writes with value as every field, spoken as SGLang speaks it (f-string fields, %-formats)."""
    try:
        node = ast.parse(fmt[len("raise "):] if fmt.startswith("raise ") else fmt, mode="eval").body
    except SyntaxError:
        return value    # a starred argument (*rejection): the exception's text
    if isinstance(node, ast.Call) and node.args and fmt.startswith("raise "):
        node = node.args[0]
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(part.value)
            else:
                out.append(repr(value) if part.conversion == ord("r") else value)
        return "".join(out)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.sub(r"%[-#0 +\d.]*([sdrfgixX])", lambda m: repr(value) if m.group(1) == "r" else value if m.group(1) == "s" else "1",
                      node.value.replace("%%", "%"))
    return value   # a message built elsewhere (a variable, str(exc)): the client value is all of it


def _logs_with_keys():
    """(name, bytes, answer key) of every real log in the fixtures."""
    out = [(a["file"], (LOGS / a["file"]).read_bytes(), dict((k, a[k]) for k in FACT_KEYS)) for a in ANSWERS]
    for path in REAL_LOGS:
        facts = audit_bytes(path.read_bytes())["facts"]
        out.append((path.name, path.read_bytes(), dict((k, facts[k]) for k in REAL_KEYS)))
    return out


def _acceptance(lines):
    """Index of the first line of the acceptance point, or None."""
    return next((n for n, line in enumerate(lines) if _ACCEPTANCE_RE.search(line.decode("utf-8", "replace"))), None)


def _verdict(facts):
    from ansible_collections.llmops.sglang.plugins.module_utils._kv_guard import evaluate
    return evaluate({"log_facts": facts, "expected": "bf16", "min_signals": 1})["verdict"]


@pytest.mark.parametrize("release", ["0.5.16", "0.5.23"])
def test_the_client_log_sites_are_the_ones_sglangs_source_has(release):
    """The ast rule of sglang_source.client_log_sites over the installed source finds exactly the table's sites."""
    srt = sglang_source.srt_dir_0_5_16() if release == "0.5.16" else sglang_source.srt_dir()
    found = [(release, f, fn, fmt, "raw" if raw else "repr") for f, fn, fmt, raw in sglang_source.client_log_sites(srt)]
    table = [s for s in _sites() if s[0] == release]
    assert sorted(found) == sorted(table), ("new sites", sorted(set(found) - set(table)), "gone", sorted(set(table) - set(found)))
    # the sites the issue named: a set_internal_state key (0.5.16 logs it raw), a duplicate rid, --log-requests echoes
    fmts = set(s[3] for s in table)
    assert "raise ValueError(f'Duplicate request ID detected: {rid}')" in fmts
    assert any(s[1] == "utils/request_logger.py" and s[3].startswith("f'Receive: obj=") for s in table)
    assert ("f'Updating {k} is not supported.'" if release == "0.5.16" else "raise UpdateRejected(f'Updating {key} is not supported.')") in fmts


@pytest.mark.parametrize("name, data, key", _logs_with_keys(), ids=lambda v: v[:3] if isinstance(v, str) else "")
def test_no_fact_of_a_real_log_comes_after_its_acceptance_point(name, data, key):
    lines = data.split(b"\n")
    cut = _acceptance(lines)
    whole = audit_bytes(data)
    if cut is None:
        return  # the log ends before the server accepted requests (a failed start, an excerpt)
    before = audit_bytes(b"\n".join(lines[:cut]) + b"\n")["facts"]
    for k in key:
        if k != "ready":
            assert before[k] == whole["facts"][k] == key[k], (name, k)


def _inject_sites(lines, start, sites, shift):
    out = lines[:start + 1]
    for n, line in enumerate(lines[start + 1:]):
        site = sites[(n + shift) % len(sites)]
        out.append((STAMP + _render(site[3], PAYLOAD)).encode("utf-8"))
        out.append(line)
    return b"\n".join(out)


SERVED = [log for log in _logs_with_keys() if _acceptance(log[1].split(b"\n")) is not None]


@pytest.mark.parametrize("name, data, key", SERVED, ids=lambda v: v[:3] if isinstance(v, str) else "")
def test_every_client_log_site_after_every_line_changes_no_fact(name, data, key):
    """From the acceptance point on a client can make SGLang write any site's text: injected after every line, each
    site with forged SGLang records behind a newline, facts and the guard's verdict stay those of the answer key."""
    sites = _sites()
    lines = data.split(b"\n")
    start = _acceptance(lines)
    clean = audit_bytes(data)
    positions = max(len(lines) - start - 1, 1)
    for shift in range(0, len(sites), positions):
        res = audit_bytes(_inject_sites(lines, start, sites, shift))
        facts = res["facts"]
        assert dict((k, facts[k]) for k in key) == key, (name, shift)
        for k in ("kv_pools", "mamba_pool", "starts", "server_args_format", "phase"):
            assert facts[k] == clean["facts"][k], (name, k, shift)
        assert _verdict(facts) == _verdict(clean["facts"]), (name, shift)
        assert res["failed_rules"] == clean["failed_rules"], (name, shift)
        late = [f for f in res["findings"] if f["rule"] == "startup_record_after_ready"]
        assert late and late[0]["severity"] == "warning" and "sk-forged-0" not in json.dumps(res)


def test_a_client_site_before_the_acceptance_point_fails_closed():
    """No client can write before the HTTP server is up. Were a request's record ([http_server] Error: ...) there all
    the same, it is itself an acceptance point: the forged records after it are no facts, neither are the real
    ones after it, so the log says less (the guard lacks those signals) but never what the client wrote."""
    lines = (REAL / "sglang-0.5.16-h200-trap-auto.log").read_bytes().split(b"\n")
    dump = next(n for n, line in enumerate(lines) if b"server_args=ServerArgs(" in line)
    record = STAMP + "[http_server] Error: " + _render("raise ValueError(f'Duplicate request ID detected: {rid}')", PAYLOAD)
    res = audit_bytes(b"\n".join(lines[:dump + 1] + [record.encode()] + lines[dump + 1:]))
    facts = res["facts"]
    assert (facts["kv_cache_dtype_configured"], facts["model_path"], facts["starts"]) == ("auto", "/tmp/real-gpu/ckpt/trap-fp8", 1)
    assert (facts["kv_dtype_effective"], facts["max_total_num_tokens"], facts["kv_pools"], facts["fp8_scale_warning"]) == \
        (None, None, [], False)
    assert _verdict(facts) != "bf16"
    (late,) = [f for f in res["findings"] if f["rule"] == "startup_record_after_ready"]
    assert late["count"] >= len(FORGED_RECORDS) + 2 and late["evidence"][0]["line"] == dump + 3
    assert "sk-forged-0" not in json.dumps(res)


def test_the_first_record_of_each_fact_wins_and_a_restart_before_the_server_was_ready_starts_over():
    head = (REAL / "sglang-0.5.16-h200-trap-fp8.log").read_bytes()
    lines = head.split(b"\n")
    cut = _acceptance(lines)
    failed = b"\n".join(lines[:cut]) + b"\nRuntimeError: the first start died\n"
    res = audit_bytes(failed + (REAL / "sglang-0.5.16-h200-trap-bf16-logms.log").read_bytes())
    facts = res["facts"]
    assert (facts["starts"], facts["kv_cache_dtype_configured"], facts["kv_dtype_effective"], facts["fp8_scale_warning"]) == \
        (2, "bf16", "torch.bfloat16", False)
    twice = audit_bytes(b"\n".join(lines[:cut]) + b"\n" + STAMP.encode() + b"max_total_num_tokens=5, chunked_prefill_size=1\n")
    assert twice["facts"]["max_total_num_tokens"] == 87380569
