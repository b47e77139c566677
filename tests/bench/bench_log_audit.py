# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark of the SGLang log audit against grep on a large, realistic log.

Writes a log of the requested size with the fact density of a real one: the server restarts every ~30 MiB (each
start a real startup block up to the server's acceptance point, taken in turn from the real logs of
tests/fixtures/real-sglang and tests/fixtures/sglang-logs, or a TP8 block with the server_args dump, per-rank
weight/KV-pool lines and the FP8 scale warning), about 3% of the other lines come from those real logs (their
startup records, warnings, errors and tracebacks with their frames), the rest are decode, prefill and HTTP access
lines with rank prefixes. Then it prints:

- the wall and CPU time of the parser (run in a child process) and its peak RSS (the child's own ru_maxrss at the
  end), next to the RSS of the same interpreter with the modules imported and nothing read (the baseline);
- the wall and CPU time of ``grep -cE`` of the four key patterns of the issue it answers (the FP8 scale warning, the
  ready line, ``KV Cache is allocated``, ``max_total_num_tokens=``) on the same file, and of ``grep -cE``
  with the parser's whole literal set (a slower grep); grep writes to a file (GNU grep stops at the first
  match when its output is /dev/null).

Usage: python tests/bench/bench_log_audit.py [--size-mb 1024] [--path FILE] [--repeat N] [--keep]
A given --path is reused when it exists; otherwise the file is written there (or to a temp file).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / "collections"

DUMP = (
    "server_args=ServerArgs(model_path='/models/Qwen3.5-397B-A17B-NVFP4', tokenizer_path='/models/Qwen3.5-397B-A17B-NVFP4', "
    "tokenizer_mode='auto', skip_tokenizer_init=False, load_format='auto', trust_remote_code=True, dtype='auto', "
    "kv_cache_dtype='auto', quantization='modelopt_fp4', quantization_param_path=None, context_length=262144, device='cuda', "
    "served_model_name='qwen3.5', is_embedding=False, revision=None, host='0.0.0.0', port=30000, mem_fraction_static=0.85, "
    "max_running_requests=64, max_total_tokens=None, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "schedule_policy='fcfs', tp_size=8, pp_size=1, stream_interval=1, random_seed=1234, "
    "speculative_algorithm='EAGLE', speculative_num_steps=3, attention_backend='triton', moe_runner_backend='flashinfer_cutlass', "
    "mamba_scheduler_strategy='extra_buffer', enable_metrics=True, cuda_graph_max_bs=64)"
)


def startup_lines(ts):
    lines = ["[%s] %s" % (ts, DUMP)]
    for r in range(8):
        lines.append("[%s TP%d] Init torch distributed begin." % (ts, r))
    for r in range(8):
        lines.append("[%s TP%d] Init torch distributed ends. elapsed=9.10 s, mem usage=1.22 GB" % (ts, r))
        lines.append("[%s TP%d] Load weight begin. avail mem=93.10 GB" % (ts, r))
        lines.append("[%s TP%d] Detected nvfp4 checkpoint. Please note that the format is experimental and subject to change." % (ts, r))
    for n in range(0, 101, 10):
        lines.append("Loading safetensors checkpoint shards: %3d%% Completed | %d/88 [00:%02d<00:10,  2.93it/s]" % (n, n * 88 // 100, n // 10))
    for r in range(8):
        lines.append("[%s TP%d] Load weight end. elapsed=61.20 s, type=Qwen3_5MoeForConditionalGeneration, quant=modelopt_fp4, "
                     "quant_algo=NVFP4, avail mem=62.80 GB, mem usage=30.30 GB." % (ts, r))
        lines.append("[%s TP%d] Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0. "
                     "This may lead to less accurate results!" % (ts, r))
    lines.append("[%s TP0] Using KV cache dtype: torch.float8_e4m3fn" % ts)
    for r in range(8):
        lines.append("[%s TP%d] Mamba Cache is allocated. max_mamba_cache_size: 1060, conv_state size: 0.41GB, ssm_state size: 23.29GB " % (ts, r))
        lines.append("[%s TP%d] KV Cache is allocated. #tokens: 3696000, K size: 13.22 GB, V size: 13.22 GB" % (ts, r))
        lines.append("[%s TP%d] Memory pool end. avail mem=8.40 GB" % (ts, r))
    for r in range(8):
        lines.append("[%s TP%d] Capture cuda graph begin. This can take up to several minutes. avail mem=8.10 GB" % (ts, r))
    lines.append("[%s TP0] Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64]" % ts)
    for r in range(8):
        lines.append("[%s TP%d] Capture cuda graph end. Time elapsed: 21.30 s. mem usage=1.30 GB. avail mem=6.80 GB." % (ts, r))
    lines.append("[%s TP0] max_total_num_tokens=3696000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                 "max_running_requests=64, context_len=262144, available_gpu_mem=6.80 GB" % ts)
    lines.append("[%s] INFO:     Started server process [4242]" % ts)
    lines.append("[%s] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)" % ts)
    lines.append('[%s] INFO:     127.0.0.1:49534 - "GET /get_model_info HTTP/1.1" 200 OK' % ts)
    lines.append("[%s] The server is fired up and ready to roll!" % ts)
    return lines


REAL_LOGS = sorted((ROOT / "tests" / "fixtures" / "real-sglang").glob("*.log")) + sorted(
    (ROOT / "tests" / "fixtures" / "sglang-logs").glob("*.log"))
_ACCEPTANCE_RE = re.compile(r"INFO:\s+(?:Application startup complete|Uvicorn running on )|\] The server is fired up")
# share of the lines, outside the startup blocks, taken from the real logs
REAL_SHARE = 0.03
RESTART_EVERY = 30 << 20


def real_material():
    """(startup blocks: each real log up to and with its acceptance point, pieces: every line of the real logs that holds a
    literal the parser keys on, with the indented lines after it (at most 12; a traceback's frames all, then its exception line))."""
    sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import prefilter_literals
    literals = [lit for lit in prefilter_literals() if lit is not None]
    blocks, pieces = [], []
    for path in REAL_LOGS:
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        cut = next((n for n, line in enumerate(lines) if _ACCEPTANCE_RE.search(line)), None)
        if cut is not None:
            blocks.append(lines[:cut + 1])
        for n, line in enumerate(lines):
            if any(lit in line for lit in literals):
                whole = "Traceback (most recent call last)" in line     # a traceback is taken to its exception line
                end = n + 1
                while end < len(lines) and (whole or end - n < 12) and lines[end][:1] in (" ", "\t"):
                    end += 1
                if whole and end < len(lines):
                    end += 1
                pieces.append(lines[n:end])
    return blocks, pieces


def write_log(path, size_bytes, seed=20261130):
    """Write about size_bytes of log to path."""
    rng = random.Random(seed)
    blocks, pieces = real_material()
    written, next_restart, starts = 0, 0, 0
    day, sec = 0, 0
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        while written < size_bytes:
            buf = []
            ts = "2026-11-%02d %02d:%02d:%02d" % (1 + day % 28, sec // 3600 % 24, sec // 60 % 60, sec % 60)
            if written >= next_restart:
                buf.extend(blocks[starts % len(blocks)] if starts % (len(blocks) + 1) else startup_lines(ts))
                starts += 1
                next_restart += RESTART_EVERY
            for dummy in range(2000):
                if rng.random() < REAL_SHARE:
                    buf.extend(rng.choice(pieces))
                    continue
                sec += 1
                if sec % 86400 == 0:
                    day += 1
                ts = "2026-11-%02d %02d:%02d:%02d" % (1 + day % 28, sec // 3600 % 24, sec // 60 % 60, sec % 60)
                kind = rng.random()
                # DP-attention deployments print from every DP rank; the TP8 target prints from TP0.
                tag = "TP0" if rng.random() < 0.8 else "DP%d TP%d EP%d" % ((rng.randrange(8),) * 3)
                if kind < 0.45:
                    buf.append("[%s %s] Decode batch, #running-req: %d, #full token: %d, full token usage: 0.%02d, mamba num: %d, "
                               "mamba usage: 0.%02d, accept len: %.2f, accept rate: 0.%02d, cuda graph: True, "
                               "gen throughput (token/s): %.2f, #queue-req: %d"
                               % (ts, tag, rng.randrange(1, 64), rng.randrange(100, 900000), rng.randrange(100), rng.randrange(1, 200),
                                  rng.randrange(100), rng.uniform(1, 4), rng.randrange(100), rng.uniform(20, 3000), rng.randrange(8)))
                elif kind < 0.65:
                    buf.append("[%s %s] Decode batch. #running-req: %d, #token: %d, token usage: 0.%02d, cuda graph: True, "
                               "gen throughput (token/s): %.2f, #queue-req: %d, "
                               % (ts, tag, rng.randrange(1, 64), rng.randrange(100, 900000), rng.randrange(100),
                                  rng.uniform(20, 3000), rng.randrange(8)))
                elif kind < 0.75:
                    buf.append("[%s %s] Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: %d, full token usage: 0.%02d, "
                               "mamba usage: 0.%02d, #running-req: %d, #queue-req: %d, input throughput (token/s): %.2f"
                               % (ts, tag, rng.randrange(1, 8), rng.randrange(1, 16384), rng.randrange(0, 8192), rng.randrange(100),
                                  rng.randrange(100), rng.randrange(64), rng.randrange(8), rng.uniform(100, 40000)))
                elif kind < 0.93:
                    buf.append('[%s] INFO:     10.0.%d.%d:%d - "POST /v1/chat/completions HTTP/1.1" 200 OK'
                               % (ts, rng.randrange(4), rng.randrange(256), rng.randrange(1024, 65535)))
                elif kind < 0.99:
                    buf.append('[%s] INFO:     10.0.0.9:%d - "GET /metrics HTTP/1.1" 200 OK' % (ts, rng.randrange(1024, 65535)))
                elif kind < 0.9995:
                    buf.append('[%s] INFO:     127.0.0.1:%d - "GET /health HTTP/1.1" 200 OK' % (ts, rng.randrange(1024, 65535)))
                else:
                    buf.append("[%s TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.7000 -> 0.8000"
                               % ts)
            text = "\n".join(buf) + "\n"
            out.write(text)
            written += len(text)
    return written


PARSER_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import audit_path
base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
res = audit_path(sys.argv[2])
elapsed = time.perf_counter() - t0
f = res["facts"]
print(json.dumps({"elapsed": elapsed, "phase": f["phase"], "starts": f["starts"], "ready": f["ready"],
                  "kv_dtype_effective": f["kv_dtype_effective"], "findings": {x["rule"]: x["count"] for x in res["findings"]},
                  "stats": res["stats"], "rss_base_kb": base_kb, "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

# What an operator greps for first: the FP8 scale warning, the ready line, the KV pool and the token budget.
KEY_PATTERNS = ("Using FP8 KV cache but no scaling factors provided", "The server is fired up and ready to roll!",
                "KV Cache is allocated", "max_total_num_tokens=")


def timed(argv, stdout):
    """Run argv; (its standard output when piped, (wall seconds, CPU seconds of the child))."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, stdout=stdout, check=True if stdout is subprocess.PIPE else False).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def grep_pattern():
    sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import prefilter_literals
    # ERE-escape the literals the parser itself keys on
    return "|".join(re.sub(r"([.[\\()*+?{|^$])", r"\\\1", lit) for lit in prefilter_literals() if lit is not None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated log in MiB (default 1024)")
    ap.add_argument("--path", help="log file to use; reused when it exists, else written there")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tool; the best time is reported")
    ap.add_argument("--keep", action="store_true", help="keep a generated temp file")
    args = ap.parse_args()

    tmp = None
    if args.path:
        path = args.path
    else:
        fd, tmp = tempfile.mkstemp(prefix="sglang-bench-", suffix=".log")
        os.close(fd)
        path = tmp
    try:
        if args.path and os.path.exists(path) and os.path.getsize(path) > 0:
            print("reusing %s (%.1f MiB)" % (path, os.path.getsize(path) / 2.0 ** 20))
        else:
            t0 = time.perf_counter()
            n = write_log(path, args.size_mb << 20)
            print("wrote %s: %.1f MiB in %.1f s" % (path, n / 2.0 ** 20, time.perf_counter() - t0))
        size = os.path.getsize(path)

        # parser and greps alternate, so a busy machine slows all alike; the best of each is reported, in wall time
        # and in CPU time (user + system of the child), which a machine shared with other work disturbs less
        greps = (("grep -cE, 4 key patterns", "|".join(KEY_PATTERNS)), ("grep -cE, the parser's literal set", grep_pattern()))
        parser_times, inner_times, grep_times, grep_counts = [], [], [[] for dummy in greps], [None] * len(greps)
        report = None
        for dummy in range(args.repeat):
            out, wall_cpu = timed([sys.executable, "-c", PARSER_CHILD, str(COLLECTIONS), path], subprocess.PIPE)
            parser_times.append(wall_cpu)
            report = json.loads(out)
            inner_times.append(report["elapsed"])
            for n, (dummy_name, pattern) in enumerate(greps):
                with tempfile.TemporaryFile() as sink:
                    dummy_out, wall_cpu = timed(["grep", "-cE", pattern, path], sink)
                    grep_times[n].append(wall_cpu)
                    sink.seek(0)
                    grep_counts[n] = sink.read().decode().strip()

        mib = size / 2.0 ** 20
        tp, cp = min(t for t, c in parser_times), min(c for t, c in parser_times)
        print("file: %s, %.1f MiB" % (path, mib))
        print("parser: %.2f s wall (%.2f s in audit_path), %.2f s CPU, %.0f MiB/s; inspected %d lines"
              % (tp, min(inner_times), cp, mib / tp, report["stats"]["inspected_lines"]))
        print("parser peak RSS: %.1f MiB (the interpreter with the modules imported: %.1f MiB; the audit added %.1f MiB)"
              % (report["rss_peak_kb"] / 1024.0, report["rss_base_kb"] / 1024.0,
                 (report["rss_peak_kb"] - report["rss_base_kb"]) / 1024.0))
        for n, (name, pattern) in enumerate(greps):
            tg, cg = min(t for t, c in grep_times[n]), min(c for t, c in grep_times[n])
            print("%s (%d patterns): %.2f s wall, %.2f s CPU, %.0f MiB/s; %s matching lines; parser/grep ratio %.2f wall, %.2f CPU"
                  % (name, pattern.count("|") + 1, tg, cg, mib / tg, grep_counts[n], tp / tg, cp / cg))
        print("parser summary: %s" % json.dumps({k: report[k] for k in ("phase", "starts", "ready", "kv_dtype_effective", "findings")}))
    finally:
        if tmp and not args.keep:
            os.unlink(tmp)


if __name__ == "__main__":
    main()
