# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's SGLang simulator, run as a real subprocess on a loopback port.

What it prints and answers is checked against SGLang 0.5.23's own source (tests/unit/sglang_source.py): every
log line it prints must be one of SGLang's format strings, in the file its table names, and its /server_info
keys must be those SGLang builds. The line shape ([ts ranks] message) is proven on the real logs in tests/fixtures.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

import sglang_source  # tests/unit/sglang_source.py
from sim_harness import free_port  # tests/unit/sim_harness.py

SIM = pathlib.Path(__file__).resolve().parents[1] / "lab" / "sglang_sim" / "sglang_sim.py"
_spec = importlib.util.spec_from_file_location("sglang_sim", str(SIM))
sim_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sim_module)

REFERENCE_FLAGS = [
    "--model-path", "{ckpt}", "--served-model-name", "qwen3.5-397b", "--tp-size", "8", "--kv-cache-dtype", "{kv}",
    "--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass", "--fp4-gemm-backend", "flashinfer_cudnn",
    "--attention-backend", "triton", "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
    "--mem-fraction-static", "0.85", "--context-length", "262144", "--host", "127.0.0.1", "--port", "{port}", "--enable-metrics",
]

# SGLang's line shape: [ts{ rank tags}] (optional LEVEL file.py:N: ) message
LINE_RE = re.compile(r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] "
                     r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<src>[\w./-]+\.py):(?P<lineno>\d+): )?(?P<msg>.*)$")
_PLACEHOLDER_RE = re.compile(r"%(?:\.\d+)?[sdf]")


def sim_line(name, *groups):
    """A regex for the simulator's SGLANG_LOG line name, its placeholders captured under the names given."""
    fmt = sim_module.SGLANG_LOG[name][0]
    parts, pos, out = iter(groups), 0, []
    for m in _PLACEHOLDER_RE.finditer(fmt):
        out.append(re.escape(fmt[pos:m.start()]))
        pattern = {"d": r"-?\d+", "f": r"-?\d+\.\d+"}.get(m.group(0)[-1], r".*?")
        group = next(parts, None)
        out.append("(?P<%s>%s)" % (group, pattern) if group else "(?:%s)" % pattern)
        pos = m.end()
    return re.compile("^" + "".join(out) + re.escape(fmt[pos:]) + "$")


DUMP_RE = re.compile(r"^server_args=(?P<dict>\{.*\})$")
LOAD_BEGIN_RE = sim_line("load_begin")
LOAD_END_RE = sim_line("load_end", "elapsed", "type", "quant")
KV_ALLOC_RE = sim_line("kv_pool", "dtype", "tokens", "k", "v")
MAMBA_RE = sim_line("mamba_pool", "n", "conv", "ssm")
FP8_WARN_RE = sim_line("fp8_no_scales")
GRAPH_BEGIN_RE = sim_line("graph_begin")
GRAPH_END_RE = sim_line("graph_end")
MAX_TOKENS_RE = sim_line("max_tokens", "n", "chunk", "prefill", "mrr", "ctx")
READY_RE = sim_line("ready")
SIGQUIT_RE = sim_line("sigquit")
UVICORN_RE = re.compile(r"^INFO:     Uvicorn running on http://(?P<host>[^:]+):(?P<port>\d+) \(Press CTRL\+C to quit\)$")
BIND_ERR_RE = re.compile(r"^ERROR:    \[Errno 98\] error while attempting to bind on address \('(?P<host>[^']+)', (?P<port>\d+)\): address already in use$")

GIB = float(1 << 30)


def parsed(lines):
    out = []
    for line in lines:
        m = LINE_RE.match(line)
        if m:
            tp = re.search(r"TP(\d+)", m.group("ranks"))
            out.append((int(tp.group(1)) if tp else None, m.group("msg")))
    return out


def matching(lines, regex):
    return [(rank, regex.match(msg)) for rank, msg in parsed(lines) if regex.match(msg)]


@pytest.fixture(scope="module")
def real_logs(fixtures_dir):
    logs = fixtures_dir / "sglang-logs"
    return {p.name[:3]: p.read_text(encoding="utf-8").splitlines() for p in logs.glob("*.log")}


@pytest.mark.parametrize("regex,real", [
    (LOAD_BEGIN_RE, "005"), (MAMBA_RE, "005"), (MAX_TOKENS_RE, "005"), (UVICORN_RE, "001"), (READY_RE, "001"),
    (DUMP_RE, "021"),
])
def test_line_shape_matches_real_sglang_logs(real_logs, regex, real):
    """The [ts ranks] shape and the lines that kept their format are proven on real SGLang logs."""
    assert matching(real_logs[real], regex), "%s matches nothing in real log %s" % (regex.pattern, real)


# ---------------------------------------------------------------------------------------------------------
# Harness
# ---------------------------------------------------------------------------------------------------------

def text_config(kv_heads=2):
    layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(60)]
    return {
        "model_type": "qwen3_5_moe_text", "num_hidden_layers": 60, "layer_types": layer_types, "full_attention_interval": 4,
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": kv_heads, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 64, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 1024,
        "max_position_embeddings": 262144, "vocab_size": 248320, "dtype": "bfloat16",
    }


def make_checkpoint(root, kv_algo="FP8"):
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe", "dtype": "bfloat16",
        "text_config": text_config()}))
    (root / "hf_quant_config.json").write_text(json.dumps({
        "producer": {"name": "modelopt", "version": "0.42.0"},
        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": kv_algo, "group_size": 16, "exclude_modules": ["lm_head"]}}))
    return root


class Sim(object):
    def __init__(self, argv, env):
        self.lines = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen([sys.executable, str(SIM)] + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=env, text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_line(self, regex, timeout=10.0, count=1):
        end = time.time() + timeout
        with self.cond:
            while True:
                found = [m for _r, m in matching(self.lines, regex)]
                if len(found) >= count:
                    return found
                left = end - time.time()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    raise AssertionError("no line %r; output:\n%s" % (regex.pattern, "\n".join(self.lines[-40:])))
                self.cond.wait(min(left, 0.1))

    def wait_exit(self, timeout=10.0):
        rc = self.proc.wait(timeout)
        self.reader.join(5)
        return rc

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def ckpt_fp8(tmp_path):
    return make_checkpoint(tmp_path / "qwen3.5-397b-a17b-nvfp4", "FP8")


@pytest.fixture
def start(tmp_path):
    sims = []

    def _start(ckpt, kv="bf16", extra=(), env=None, flags=None, port=None, load="0.2", warmup="0.2"):
        port = port or free_port()
        argv = [a.format(ckpt=ckpt, kv=kv, port=port) for a in (flags or REFERENCE_FLAGS)] + list(extra)
        full_env = dict(os.environ, SGLANG_SIM_LOAD_SECONDS=load, SGLANG_SIM_WARMUP_SECONDS=warmup,
                        SGLANG_SIM_STATE_FILE=str(tmp_path / ("state-%d.json" % len(sims))))
        full_env.update(env or {})
        sim = Sim(argv, full_env)
        sim.port = port
        sim.state_file = pathlib.Path(full_env["SGLANG_SIM_STATE_FILE"])
        sims.append(sim)
        return sim

    yield _start
    for sim in sims:
        sim.stop()


def http(port, path, body=None, key=None, timeout=10.0):
    """(status, parsed JSON or text)."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("content-type", "")
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers.get("content-type", "")
    text = raw.decode("utf-8")
    return status, (json.loads(text) if "json" in ctype and text else text)


def wait_ready(sim, timeout=10.0):
    sim.wait_line(READY_RE, timeout)


# ---------------------------------------------------------------------------------------------------------
# Startup, health, log formats
# ---------------------------------------------------------------------------------------------------------

def test_health_is_refused_then_503_then_200(start, ckpt_fp8):
    sim = start(ckpt_fp8, kv="bf16", warmup="0.6")
    seen = []
    end = time.time() + 15
    while time.time() < end:
        try:
            status, _body = http(sim.port, "/health", timeout=2)
        except (urllib.error.URLError, ConnectionError):
            status = "refused"
        if not seen or seen[-1] != status:
            seen.append(status)
        if status == 200:
            break
        time.sleep(0.02)
    assert seen[-1] == 200
    assert 503 in seen and seen.index(503) < seen.index(200)
    assert http(sim.port, "/health_generate")[0] == 200
    # 503 only after uvicorn is up; before it the port is closed, as with the real server
    assert "refused" in seen and seen.index("refused") < seen.index(503)


def test_bf16_startup_log_has_real_formats_and_consistent_sizes(start, ckpt_fp8):
    sim = start(ckpt_fp8, kv="bf16")
    wait_ready(sim)
    lines = sim.lines
    dump = matching(lines, DUMP_RE)
    assert len(dump) == 1 and dump[0][0] is None
    # a dict of every resolved server arg, as SGLang 0.5.23 logs it
    fields = ast.literal_eval(dump[0][1].group("dict"))
    assert list(fields) == list(sim_module.SERVER_ARGS_FIELDS)
    assert (fields["model_path"], fields["kv_cache_dtype"], fields["tp_size"]) == (str(ckpt_fp8), "bf16", 8)

    for regex in (LOAD_BEGIN_RE, LOAD_END_RE, KV_ALLOC_RE, MAMBA_RE, GRAPH_BEGIN_RE, GRAPH_END_RE):
        assert sorted(r for r, _m in matching(lines, regex)) == list(range(8)), regex.pattern
    end = matching(lines, LOAD_END_RE)[0][1]
    assert (end.group("type"), end.group("quant")) == ("Qwen3_5MoeForConditionalGeneration", "quant=modelopt_fp4, quant_algo=NVFP4, ")

    assert {m.group("dtype") for _r, m in matching(lines, KV_ALLOC_RE)} == {"torch.bfloat16"}
    assert not any("Using KV cache dtype" in line for line in lines)  # 0.5.23 prints no such line
    assert not matching(lines, FP8_WARN_RE)

    kv = matching(lines, KV_ALLOC_RE)[0][1]
    tokens = int(kv.group("tokens"))
    # 1 KV head per GPU at TP8 x 256 x 15 full-attention layers x 2 bytes = 7,680 B of K per token
    assert float(kv.group("k")) * GIB / tokens == pytest.approx(7680, rel=0.002)
    assert kv.group("k") == kv.group("v")
    (rank, mt), = matching(lines, MAX_TOKENS_RE)
    assert rank == 0 and int(mt.group("n")) == tokens and mt.group("ctx") == "262144"

    mamba = matching(lines, MAMBA_RE)[0][1]
    # 24,007,680 B per slot with an fp32 SSM state at TP8 (45 linear layers)
    assert float(mamba.group("ssm")) * GIB / int(mamba.group("n")) == pytest.approx(45 * 8 * 128 * 128 * 4, rel=0.01)

    order = [LOAD_BEGIN_RE, LOAD_END_RE, KV_ALLOC_RE, GRAPH_BEGIN_RE, GRAPH_END_RE, MAX_TOKENS_RE, UVICORN_RE, READY_RE]
    firsts = [next(i for i, (_r, msg) in enumerate(parsed(lines)) if rx.match(msg)) for rx in order]
    assert firsts == sorted(firsts)

    status, info = http(sim.port, "/server_info")
    assert status == 200
    assert info["kv_cache_dtype"] == "bf16" and info["internal_states"][0]["kv_cache_dtype"] == "bf16"
    assert info["max_total_num_tokens"] == tokens and info["tp_size"] == 8 and info["model_path"] == str(ckpt_fp8)
    assert info["internal_states"][0]["memory_usage"]["token_capacity"] == tokens
    assert "--kv-cache-dtype bf16" in info["launch_command"] and info["version"] == "0.5.23"
    # the dump and the top-level fields are the same resolved values
    assert dict((k, info[k]) for k in fields) == fields
    assert http(sim.port, "/get_server_info")[1]["max_total_num_tokens"] == tokens


def test_auto_with_fp8_checkpoint_silently_runs_fp8_e4m3(start, ckpt_fp8):
    sim = start(ckpt_fp8, kv="auto")
    wait_ready(sim)
    lines = sim.lines
    assert ast.literal_eval(matching(lines, DUMP_RE)[0][1].group("dict"))["kv_cache_dtype"] == "auto"
    assert {m.group("dtype") for _r, m in matching(lines, KV_ALLOC_RE)} == {"torch.float8_e4m3fn"}
    assert not matching(lines, FP8_WARN_RE), "SGLang prints no scale warning when auto resolves to FP8"
    kv = matching(lines, KV_ALLOC_RE)[0][1]
    assert float(kv.group("k")) * GIB / int(kv.group("tokens")) == pytest.approx(3840, rel=0.002)
    # SGLang 0.5.23 reports auto at the top level and in internal_states: the resolution stays in the model runner
    info = http(sim.port, "/server_info")[1]
    assert info["kv_cache_dtype"] == "auto" and info["internal_states"][0]["kv_cache_dtype"] == "auto"
    state = json.loads(sim.state_file.read_text())
    assert state["kv_cache_dtype_resolved"] == "fp8_e4m3" and state["kv_cache_dtype_server_args"] == "auto"
    assert state["fp8_scale_warning"] is False


def test_auto_with_checkpoint_without_kv_quant_stays_bf16(start, tmp_path):
    ckpt = make_checkpoint(tmp_path / "kvnull", kv_algo=None)
    sim = start(ckpt, kv="auto")
    wait_ready(sim)
    assert {m.group("dtype") for _r, m in matching(sim.lines, KV_ALLOC_RE)} == {"torch.bfloat16"}
    assert http(sim.port, "/server_info")[1]["internal_states"][0]["kv_cache_dtype"] == "auto"


def test_explicit_fp8_e4m3_warns_on_every_rank_and_fp8_tokens_double(start, ckpt_fp8):
    sim = start(ckpt_fp8, kv="fp8_e4m3")
    wait_ready(sim)
    assert sorted(r for r, _m in matching(sim.lines, FP8_WARN_RE)) == list(range(8))
    fp8_tokens = int(matching(sim.lines, MAX_TOKENS_RE)[0][1].group("n"))
    bf16 = start(ckpt_fp8, kv="bf16")
    wait_ready(bf16)
    bf16_tokens = int(matching(bf16.lines, MAX_TOKENS_RE)[0][1].group("n"))
    assert fp8_tokens == pytest.approx(2 * bf16_tokens, abs=2)


def test_fp8_with_quantization_param_path_does_not_warn(start, ckpt_fp8):
    sim = start(ckpt_fp8, kv="fp8_e4m3", extra=["--quantization-param-path", "/models/kv_scales.json"])
    wait_ready(sim)
    assert not matching(sim.lines, FP8_WARN_RE)


NEXTN = ["--speculative-algorithm", "NEXTN", "--speculative-num-draft-tokens", "4"]


def test_nextn_draft_never_warns_under_auto(start, ckpt_fp8):
    sim = start(ckpt_fp8, kv="auto", extra=NEXTN)
    wait_ready(sim)
    assert ast.literal_eval(matching(sim.lines, DUMP_RE)[0][1].group("dict"))["speculative_algorithm"] == "EAGLE"
    # 0.5.23's check reads the server args, which say auto for the draft model too; a second KV pool per rank
    assert not matching(sim.lines, FP8_WARN_RE)
    assert len(matching(sim.lines, KV_ALLOC_RE)) == 16


def test_explicit_fp8_e4m3_with_a_draft_warns_for_both_models(start, ckpt_fp8):
    sim = start(ckpt_fp8, kv="fp8_e4m3", extra=NEXTN)
    wait_ready(sim)
    assert sorted(r for r, _m in matching(sim.lines, FP8_WARN_RE)) == sorted(list(range(8)) * 2)


def test_tokenspeed_mla_turns_bf16_into_fp8(start, ckpt_fp8):
    flags = [f if f != "triton" else "tokenspeed_mla" for f in REFERENCE_FLAGS]
    sim = start(ckpt_fp8, kv="bf16", flags=flags)
    wait_ready(sim)
    assert "--attention-backend=tokenspeed_mla is deprecated; use 'cutedsl_mla' instead." in [m for _r, m in parsed(sim.lines)]
    assert "tokenspeed_mla required FP8 KV; setting --kv-cache-dtype=fp8_e4m3." in [m for _r, m in parsed(sim.lines)]
    assert {m.group("dtype") for _r, m in matching(sim.lines, KV_ALLOC_RE)} == {"torch.float8_e4m3fn"}
    assert sorted(r for r, _m in matching(sim.lines, FP8_WARN_RE)) == list(range(8))
    info = http(sim.port, "/server_info")[1]
    assert (info["kv_cache_dtype"], info["attention_backend"]) == ("fp8_e4m3", "cutedsl_mla")
    assert "--attention-backend tokenspeed_mla" in info["launch_command"] and "--kv-cache-dtype bf16" in info["launch_command"]


def test_launcher_prefix_and_unknown_flags_are_tolerated(start, ckpt_fp8):
    flags = ["-m", "sglang.launch_server"] + REFERENCE_FLAGS + ["--mamba-scheduler-strategy", "extra_buffer"]
    sim = start(ckpt_fp8, flags=flags)
    wait_ready(sim)
    warn = [line for line in sim.lines if "ignoring unrecognized arguments" in line]
    assert len(warn) == 1 and "--mamba-scheduler-strategy extra_buffer" in warn[0]


def test_invalid_kv_cache_dtype_is_rejected_like_argparse(ckpt_fp8):
    proc = subprocess.run([sys.executable, str(SIM), "--model-path", str(ckpt_fp8), "--kv-cache-dtype", "bf61"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2
    assert "argument --kv-cache-dtype: invalid choice: 'bf61'" in proc.stderr


def test_not_enough_memory_exits_1(start, ckpt_fp8):
    sim = start(ckpt_fp8, extra=["--mem-fraction-static", "0.3"])
    assert sim.wait_exit() == 1
    assert any("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in line for line in sim.lines)


# ---------------------------------------------------------------------------------------------------------
# HTTP API
# ---------------------------------------------------------------------------------------------------------

def stream_chat(port, body, key=None):
    """(list of (arrival time, delta content), finish_reason, saw [DONE])."""
    req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port, data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", "Bearer " + key)
    chunks, finish, done = [], None, False
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        for raw in resp:
            line = raw.decode("utf-8").strip()
            if not line:
                continue
            assert line.startswith("data: ")
            data = line[len("data: "):]
            if data == "[DONE]":
                done = True
                continue
            choice = json.loads(data)["choices"][0]
            if choice["delta"].get("content"):
                chunks.append((time.perf_counter(), choice["delta"]["content"]))
            finish = choice["finish_reason"] or finish
    return chunks, finish, done


def test_streaming_token_rate_within_10_percent_at_concurrency_1(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_TOKENS_PER_SECOND": "170", "SGLANG_SIM_TTFT_MS": "100"})
    wait_ready(sim)
    t0 = time.perf_counter()
    chunks, finish, done = stream_chat(sim.port, {"model": "qwen3.5-397b", "messages": [{"role": "user", "content": "Tell me a story"}],
                                                  "max_tokens": 86})
    assert done and finish == "length" and len(chunks) == 86
    rate = (len(chunks) - 1) / (chunks[-1][0] - chunks[0][0])
    assert rate == pytest.approx(170, rel=0.10)
    assert chunks[0][0] - t0 >= 0.1


def test_non_streaming_chat_usage_and_determinism(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_TOKENS_PER_SECOND": "2000", "SGLANG_SIM_TTFT_MS": "1"})
    wait_ready(sim)
    body = {"model": "qwen3.5-397b", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 7}
    first, second = http(sim.port, "/v1/chat/completions", body), http(sim.port, "/v1/chat/completions", body)
    assert first[0] == 200 and first[1]["choices"][0]["message"]["content"] == second[1]["choices"][0]["message"]["content"]
    assert first[1]["usage"]["completion_tokens"] == 7 and first[1]["object"] == "chat.completion"
    assert http(sim.port, "/v1/chat/completions", {"messages": "nope"})[0] == 400


def haystack(value, depth, filler_lines=400):
    lines = ["Line %d: the grass is green and the sky is blue." % i for i in range(filler_lines)]
    lines.insert(int(depth * filler_lines), "Remember this: the secret needle is: %s." % value)
    return "\n".join(lines)


def test_needle_is_recalled(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_TOKENS_PER_SECOND": "5000", "SGLANG_SIM_TTFT_MS": "1"})
    wait_ready(sim)
    for depth in (0.1, 0.9):
        msgs = [{"role": "user", "content": haystack("k7Q2x9", depth) + "\nWhat is the secret needle? Answer with the value only."}]
        status, resp = http(sim.port, "/v1/chat/completions", {"messages": msgs})
        assert status == 200 and "k7Q2x9" in resp["choices"][0]["message"]["content"]


def test_degrade_recall_corrupts_only_deep_needles(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_FAULT": "degrade_recall", "SGLANG_SIM_RECALL_DEPTH": "0.5",
                               "SGLANG_SIM_TOKENS_PER_SECOND": "5000", "SGLANG_SIM_TTFT_MS": "1"})
    wait_ready(sim)
    answers = {}
    for depth in (0.1, 0.9):
        msgs = [{"role": "user", "content": haystack("k7Q2x9", depth) + "\nWhat is the secret needle?"}]
        answers[depth] = http(sim.port, "/v1/chat/completions", {"messages": msgs})[1]["choices"][0]["message"]["content"]
    assert "k7Q2x9" in answers[0.1]
    assert "k7Q2x9" not in answers[0.9] and re.search(r"needle is \w{6}\.", answers[0.9])


def test_api_key_enforced_except_health_and_metrics(start, ckpt_fp8):
    sim = start(ckpt_fp8, extra=["--api-key", "s3cr3t-key"])
    wait_ready(sim)
    assert http(sim.port, "/v1/models") == (401, {"error": "Unauthorized"})
    assert http(sim.port, "/server_info", key="wrong")[0] == 401
    assert http(sim.port, "/health")[0] == 200 and http(sim.port, "/metrics")[0] == 200
    status, models = http(sim.port, "/v1/models", key="s3cr3t-key")
    assert status == 200 and models["data"][0]["id"] == "qwen3.5-397b" and models["data"][0]["owned_by"] == "sglang"
    status, info = http(sim.port, "/get_model_info", key="s3cr3t-key")
    assert status == 200 and info["model_path"] == str(ckpt_fp8) and info["is_generation"] is True
    # like SGLang 0.5.23, /server_info hands the key back in clear: clients must redact it
    info = http(sim.port, "/server_info", key="s3cr3t-key")[1]
    assert info["api_key"] == "s3cr3t-key" and "--api-key s3cr3t-key" in info["launch_command"]
    assert "--sim-" not in info["launch_command"]


def test_metrics_are_prometheus_text_and_count_tokens(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_TOKENS_PER_SECOND": "5000", "SGLANG_SIM_TTFT_MS": "1"})
    wait_ready(sim)
    http(sim.port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12})
    status, text = http(sim.port, "/metrics")
    assert status == 200
    samples = dict(re.findall(r'^(sglang:[a-z_]+)\{model_name="qwen3\.5-397b"\} (\S+)$', text, re.M))
    assert float(samples["sglang:generation_tokens_total"]) == 12
    assert float(samples["sglang:num_requests_total"]) == 1
    assert float(samples["sglang:max_total_num_tokens"]) > 0
    assert "# TYPE sglang:time_to_first_token_seconds histogram" in text
    assert re.search(r'^sglang:e2e_request_latency_seconds_count\{model_name="qwen3\.5-397b"\} 1\.0$', text, re.M)


def test_metrics_need_enable_metrics(start, ckpt_fp8):
    flags = [f for f in REFERENCE_FLAGS if f != "--enable-metrics"]
    sim = start(ckpt_fp8, flags=flags)
    wait_ready(sim)
    assert http(sim.port, "/metrics")[0] == 404


# ---------------------------------------------------------------------------------------------------------
# Faults, signals, nodes
# ---------------------------------------------------------------------------------------------------------

def test_sigterm_exits_0_with_shutdown_lines(start, ckpt_fp8):
    sim = start(ckpt_fp8)
    wait_ready(sim)
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit() == 0
    assert any(line.endswith("INFO:     Application shutdown complete.") for line in sim.lines)
    assert json.loads(sim.state_file.read_text())["status"] == "stopped"


def test_sigterm_during_load_exits_0(start, ckpt_fp8):
    sim = start(ckpt_fp8, load="30")
    sim.wait_line(LOAD_BEGIN_RE, count=8)
    t0 = time.time()
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit() == 0 and time.time() - t0 < 5
    assert not matching(sim.lines, LOAD_END_RE)


def test_fault_oom_prints_cuda_oom_traceback_and_exits_1(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_FAULT": "oom"})
    assert sim.wait_exit() == 1
    out = "\n".join(sim.lines)
    assert re.search(r"^\[[\d\- :]+ TP\d\] Scheduler hit an exception: Traceback \(most recent call last\):$", out, re.M)
    assert re.search(r"^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [\d.]+ GiB\. GPU \d has a total capacity of "
                     r"[\d.]+ GiB of which [\d.]+ GiB is free\.", out, re.M)
    assert matching(sim.lines, SIGQUIT_RE) and not matching(sim.lines, LOAD_END_RE)


def test_fault_crash_exits_fast_every_time(start, ckpt_fp8):
    for _attempt in range(2):
        t0 = time.time()
        sim = start(ckpt_fp8, load="5", env={"SGLANG_SIM_FAULT": "crash"})
        assert sim.wait_exit() != 0
        assert time.time() - t0 < 3
        assert matching(sim.lines, SIGQUIT_RE)


def test_fault_hang_never_becomes_ready(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_FAULT": "hang"})
    sim.wait_line(UVICORN_RE)
    for _attempt in range(5):
        assert http(sim.port, "/health")[0] == 503
        time.sleep(0.1)
    assert http(sim.port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})[0] == 503
    assert not matching(sim.lines, READY_RE) and sim.proc.poll() is None


def test_fault_port_in_use_prints_uvicorn_error(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_FAULT": "port_in_use"})
    assert sim.wait_exit() == 1
    (_r, m), = matching(sim.lines, BIND_ERR_RE)
    assert m.group("port") == str(sim.port)


def test_port_taken_for_real_gives_the_same_error(start, ckpt_fp8):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        sim = start(ckpt_fp8, port=port)
        assert sim.wait_exit() == 1
    (_r, m), = matching(sim.lines, BIND_ERR_RE)
    assert (m.group("host"), m.group("port")) == ("127.0.0.1", str(port))
    assert not matching(sim.lines, UVICORN_RE)


def test_fault_ignore_sigterm_leaves_a_child_running(start, ckpt_fp8):
    sim = start(ckpt_fp8, env={"SGLANG_SIM_FAULT": "ignore_sigterm", "SGLANG_SIM_CHILD_MAX_SECONDS": "60"})
    wait_ready(sim)
    child = json.loads(sim.state_file.read_text())["children"][0]
    try:
        with open("/proc/%d/cmdline" % child, "rb") as handle:
            assert b"sglang::scheduler_TP0" in handle.read()
        os.kill(child, signal.SIGTERM)
        sim.proc.send_signal(signal.SIGTERM)
        assert sim.wait_exit() == 0
        time.sleep(0.3)
        os.kill(child, 0)   # still alive after SIGTERM
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def two_node_args(rank, addr, tp="8"):
    return ["--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", addr, "--tp-size", tp]


def test_two_nodes_meet_at_the_dist_init_addr_and_only_node_0_serves(start, ckpt_fp8):
    addr = "127.0.0.1:%d" % free_port()
    # the second node first: it retries until node 0 listens, as torch's TCP store clients do
    node1 = start(ckpt_fp8, extra=two_node_args(1, addr))
    time.sleep(0.5)
    node0 = start(ckpt_fp8, extra=two_node_args(0, addr))
    wait_ready(node0)
    node1.wait_line(GRAPH_END_RE, count=4)
    time.sleep(0.3)
    assert sorted(r for r, _m in matching(node1.lines, LOAD_END_RE)) == [4, 5, 6, 7]
    assert sorted(r for r, _m in matching(node0.lines, LOAD_END_RE)) == [0, 1, 2, 3]
    assert not matching(node1.lines, MAX_TOKENS_RE) and not matching(node1.lines, UVICORN_RE)
    with pytest.raises(urllib.error.URLError):
        http(node1.port, "/health", timeout=1)
    assert http(node0.port, "/health")[0] == 200
    state0, state1 = (json.loads(n.state_file.read_text()) for n in (node0, node1))
    assert (state1["nnodes"], state1["node_rank"], state1["dist_init_addr"]) == (2, 1, addr)
    assert state1["serves_http"] is False and state1["ranks"] == [4, 5, 6, 7]
    assert state0["serves_http"] is True and state0["rendezvous"]["joined"] == [1]
    assert state1["rendezvous"]["joined"] == [0]


def test_node_0_alone_times_out_waiting_for_the_others(start, ckpt_fp8):
    node0 = start(ckpt_fp8, extra=two_node_args(0, "127.0.0.1:%d" % free_port()), env={"SGLANG_SIM_RENDEZVOUS_TIMEOUT": "0.5"})
    assert node0.wait_exit() == 1
    assert "torch.distributed.DistStoreError: Timed out after 0 seconds waiting for clients. 1/2 clients joined." in node0.lines
    assert not matching(node0.lines, LOAD_END_RE)


def test_a_node_without_node_0_times_out_connecting(start, ckpt_fp8):
    port = free_port()
    node1 = start(ckpt_fp8, extra=two_node_args(1, "127.0.0.1:%d" % port), env={"SGLANG_SIM_RENDEZVOUS_TIMEOUT": "1"})
    assert node1.wait_exit() == 1
    assert any("DistNetworkError" in line and "(127.0.0.1, %d)" % port in line for line in node1.lines), node1.lines[-5:]


def test_node_0_refuses_a_node_with_another_layout(start, ckpt_fp8):
    addr = "127.0.0.1:%d" % free_port()
    env = {"SGLANG_SIM_RENDEZVOUS_TIMEOUT": "3"}
    node0 = start(ckpt_fp8, extra=two_node_args(0, addr), env=env)
    node1 = start(ckpt_fp8, extra=two_node_args(1, addr, tp="16"), env=env)
    assert node1.wait_exit() == 1
    assert any("refused node 1" in line and "--tp-size 8" in line for line in node1.lines), node1.lines[-5:]
    assert node0.wait_exit() == 1
    assert json.loads(node0.state_file.read_text())["rendezvous"]["refused"] == [1]


# ---------------------------------------------------------------------------------------------------------
# SGLang 0.5.23's own source is the oracle
# ---------------------------------------------------------------------------------------------------------

def _request(sim, max_tokens=45):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens}
    assert http(sim.port, "/v1/chat/completions", body)[0] == 200


@pytest.fixture(scope="module")
def printed(tmp_path_factory, fixtures_dir):
    """Every line of five simulator runs: hybrid NVFP4 bf16, FP8 with a draft, tokenspeed_mla, unquantized dense, a crash."""
    root = tmp_path_factory.mktemp("printed")
    ckpt = make_checkpoint(root / "qwen3.5-397b-a17b-nvfp4", "FP8")
    env = dict(os.environ, SGLANG_SIM_LOAD_SECONDS="0.2", SGLANG_SIM_WARMUP_SECONDS="0.2", SGLANG_SIM_TOKENS_PER_SECOND="5000",
               SGLANG_SIM_TTFT_MS="1")
    runs = [(ckpt, "bf16", REFERENCE_FLAGS, [], {}), (ckpt, "fp8_e4m3", REFERENCE_FLAGS, NEXTN, {}),
            (ckpt, "bf16", [f if f != "triton" else "tokenspeed_mla" for f in REFERENCE_FLAGS], [], {}),
            (fixtures_dir / "checkpoints" / "qwq-32b", "auto", [f for f in REFERENCE_FLAGS if f != "modelopt_fp4" and
                                                                f != "--quantization"], [], {}),
            (ckpt, "bf16", REFERENCE_FLAGS, [], {"SGLANG_SIM_FAULT": "crash"})]
    lines = []
    for model, kv, flags, extra, fault in runs:
        port = free_port()
        sim = Sim([a.format(ckpt=model, kv=kv, port=port) for a in flags] + extra, dict(env, **fault))
        sim.port = port
        try:
            if fault:
                sim.wait_exit()
            else:
                wait_ready(sim)
                _request(sim)
                sim.proc.send_signal(signal.SIGTERM)
                sim.wait_exit()
        finally:
            sim.stop()
        lines += sim.lines
    return lines


def test_every_line_the_simulator_prints_is_sglangs(printed):
    """No invented lines: each SGLang record matches a format string of the file the simulator's table names."""
    srt = sglang_source.srt_dir()
    uvicorn = sorted(srt.parents[1].joinpath("uvicorn").rglob("*.py"))
    seen = set()
    for _rank, msg in parsed(printed):
        if msg.startswith("WARNING sglang_sim:"):
            continue  # the simulator's own note on flags it ignores
        if msg.startswith(("INFO:     ", "ERROR:    ")):
            bare = msg.split(None, 1)[1]
            assert any(sglang_source.printed_by(p, m) for p in uvicorn for m in (msg, bare)), "not uvicorn's: " + msg
            continue
        names = [name for name in sim_module.SGLANG_LOG if sim_line(name).match(msg)]
        assert names, "the simulator printed a line its SGLANG_LOG table does not have: %s" % msg
        path = srt / sim_module.SGLANG_LOG[names[0]][1]
        assert sglang_source.printed_by(path, msg), "SGLang 0.5.23's %s prints no such line: %s" % (path.name, msg)
        seen.add(names[0])
    assert seen == set(sim_module.SGLANG_LOG), "never printed: %s" % sorted(set(sim_module.SGLANG_LOG) - seen)


def _dict_keys(node):
    return set(k.value for k in node.keys if isinstance(k, ast.Constant))


def _function(path, name):
    return next(n for n in ast.walk(sglang_source.parse(path)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name == name)


def _subscript_writes(fn, var):
    """Keys written as var["key"] = ..., split into (always, only in some branch or after an early return)."""
    always, sometimes = set(), set()

    def visit(stmts, guarded):
        for stmt in stmts:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == var \
                            and isinstance(target.slice, ast.Constant):
                        (sometimes if guarded else always).add(target.slice.value)
            for field in ("body", "orelse", "handlers", "finalbody"):
                if isinstance(stmt, (ast.If, ast.For, ast.While, ast.Try, ast.With)) and getattr(stmt, field, None):
                    visit(getattr(stmt, field), True)
            if isinstance(stmt, ast.If) and any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
                guarded = True
    visit(fn.body, False)
    return always, sometimes


def sglang_server_info_keys(srt):
    """(top-level keys always there, keys there in some setups; internal_states' likewise) read from the source."""
    fields = set(next(n.value for n in sglang_source.parse(srt / "arg_groups" / "field_order.py").body
                      if isinstance(n, ast.Assign)).elts[i].value
                 for i in range(len(next(n.value for n in sglang_source.parse(srt / "arg_groups" / "field_order.py").body
                                         if isinstance(n, ast.Assign)).elts)))
    build = _function(srt / "utils" / "common.py", "build_server_info")
    top_always = fields | _subscript_writes(build, "result")[0]
    init = _function(srt / "managers" / "scheduler.py", "get_init_info")
    literal = next(n.value for n in ast.walk(init) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict))
    always, sometimes = _subscript_writes(init, "result_dict")
    top_always |= _dict_keys(literal) | always
    route = _function(srt / "entrypoints" / "http_server.py", "server_info")
    top_always |= set().union(*(_dict_keys(n) for n in ast.walk(route) if isinstance(n, ast.Dict)))
    top = (top_always, sometimes)

    state_path = srt / "managers" / "scheduler_components" / "internal_state.py"
    tree = sglang_source.parse(state_path)
    getter = _function(state_path, "get_internal_state")
    dropped = set(n.args[0].value for n in ast.walk(getter) if isinstance(n, ast.Call)
                  and getattr(n.func, "attr", None) == "pop" and isinstance(n.args[0], ast.Constant))
    internal_always, internal_sometimes = fields - dropped, set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("_add_"):
            always, sometimes = _subscript_writes(fn, "state")
            internal_always |= always
            internal_sometimes |= sometimes
    usage = _function(srt / "managers" / "scheduler_components" / "memory_usage.py", "build_memory_usage")
    usage_keys = _dict_keys(next(n.value for n in ast.walk(usage) if isinstance(n, ast.Return)))
    phases = set(e.value for n in sglang_source.parse(srt / "model_executor" / "graph_memory_usage.py").body
                 if isinstance(n, ast.Assign) and n.targets[0].id == "GRAPH_MEMORY_USAGE_KEYS" for e in n.value.elts)
    return top, (internal_always, internal_sometimes), usage_keys, phases


@pytest.mark.parametrize("extra", [[], NEXTN], ids=["plain", "speculative"])
def test_server_info_has_sglangs_keys(start, ckpt_fp8, extra):
    srt = sglang_source.srt_dir()
    (top, top_maybe), (internal, internal_maybe), usage_keys, phases = sglang_server_info_keys(srt)
    assert list(sim_module.SERVER_ARGS_FIELDS) == [
        e.value for n in sglang_source.parse(srt / "arg_groups" / "field_order.py").body if isinstance(n, ast.Assign)
        for e in n.value.elts]
    sim = start(ckpt_fp8, extra=extra)
    wait_ready(sim)
    info = http(sim.port, "/server_info")[1]
    assert top <= set(info) <= top | top_maybe, (sorted(top ^ set(info)))
    state = info["internal_states"][0]
    assert internal <= set(state) <= internal | internal_maybe, (sorted(internal ^ set(state)))
    assert ("avg_spec_accept_length" in state) == bool(extra)
    assert set(state["memory_usage"]) == usage_keys and set(state["memory_usage"]["graph"]) == phases


def test_dump_has_the_shape_sglang_logs(start, ckpt_fp8, fixtures_dir):
    """The simulator's server_args= dict and the one SGLang 0.5.23's own code makes: same keys, same order, key in clear."""
    line = (fixtures_dir / "server-info" / "server-args-dump-0.5.23-bf16.log").read_text(encoding="utf-8").strip()
    (_rank, real), = matching([line], DUMP_RE)
    real = ast.literal_eval(real.group("dict"))
    sim = start(ckpt_fp8, extra=["--api-key", "sk-dump-test-2b9f"])
    wait_ready(sim)
    (_rank, ours), = matching(sim.lines, DUMP_RE)
    ours = ast.literal_eval(ours.group("dict"))
    assert list(ours) == list(real)
    assert ours["api_key"] == "sk-dump-test-2b9f" and real["api_key"] == "sk-fixture-5ecret"
    assert ours["watermark_key"] == real["watermark_key"] == "<redacted>"


def test_node_0_fails_when_a_joined_node_dies(start, ckpt_fp8):
    """A node that crashes right after joining must not leave node 0 serving alone (the multi-node rollback relies
    on node 0 failing, as a collective with a dead peer does)."""
    addr = "127.0.0.1:%d" % free_port()
    node0 = start(ckpt_fp8, extra=two_node_args(0, addr))
    node1 = start(ckpt_fp8, extra=two_node_args(1, addr), env={"SGLANG_SIM_FAULT": "crash"})
    assert node1.wait_exit() == 1
    assert node0.wait_exit() == 1
    assert any("NCCL error: remote process exited" in line and "node 1 of 2" in line for line in node0.lines), node0.lines[-5:]
    state0 = json.loads(node0.state_file.read_text())
    assert state0["rendezvous"]["joined"] == [1] and state0["status"] == "exited"
    with pytest.raises(urllib.error.URLError):
        http(node0.port, "/health", timeout=1)


def test_node_0_is_never_ready_once_a_joined_node_died(start, ckpt_fp8):
    """The multinode flake: node 1 crashed right after joining and node 0, quicker than its failure, answered ready.
    Node 0 reaches its warm-up well within the grace it gives a dead peer, and still never answers 200."""
    addr = "127.0.0.1:%d" % free_port()
    node0 = start(ckpt_fp8, extra=two_node_args(0, addr), load="0.05", warmup="0.05")
    node1 = start(ckpt_fp8, extra=two_node_args(1, addr), env={"SGLANG_SIM_FAULT": "crash"})
    statuses = set()
    while node0.proc.poll() is None:
        try:
            statuses.add(http(node0.port, "/health_generate", timeout=1)[0])
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    assert node1.wait_exit() == 1 and node0.wait_exit() == 1
    assert 503 in statuses and 200 not in statuses, statuses


def test_stopping_both_nodes_is_a_clean_stop_for_node_0(start, ckpt_fp8):
    addr = "127.0.0.1:%d" % free_port()
    node0 = start(ckpt_fp8, extra=two_node_args(0, addr))
    node1 = start(ckpt_fp8, extra=two_node_args(1, addr))
    wait_ready(node0)
    node1.proc.send_signal(signal.SIGTERM)
    node0.proc.send_signal(signal.SIGTERM)
    assert (node1.wait_exit(), node0.wait_exit()) == (0, 0)
