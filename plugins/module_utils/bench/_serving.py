# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's own tools: ``python -m sglang.bench_serving`` (its command line and its printed summary, read into
the builtin runner's level report) and the bounded runner of it and of ``sglang.test.run_eval``.
"""

from __future__ import annotations

import math
import os
import re

from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import rounded
from ansible_collections.llmops.sglang.plugins.module_utils._http import seconds_text
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded

# Output kept from bench_serving or run_eval (their progress bars included): far more than their summaries.
MAX_PROCESS_OUTPUT = 64 * 1024 * 1024


def run_process(argv, env_update=None, timeout=3600.0, tail_chars=4000, max_bytes=MAX_PROCESS_OUTPUT):
    """Run a command bounded in time and output: {rc, stdout, stderr_tail, timed_out, error}. Never raises."""
    env = dict(os.environ)
    env.update(env_update or {})
    out = {"rc": None, "stdout": "", "stderr_tail": "", "timed_out": False, "error": None}
    rc, stdout, stderr, timed_out, not_found = run_bounded(argv, timeout, env, max_bytes)
    out.update(stdout=stdout, stderr_tail=stderr[-tail_chars:], timed_out=timed_out)
    if not_found:
        out["error"] = "cannot run %s: %s" % (argv[0], stderr)
    elif timed_out:
        out["error"] = "%s did not finish within %ss" % (" ".join(argv[:3]), seconds_text(timeout))
    elif rc is None:
        out["error"] = stderr.splitlines()[0]  # run_bounded's line: it printed more than max_bytes
    else:
        out["rc"] = rc
    return out


# ---------------------------------------------------------------------------------------------
# sglang.bench_serving


_SECTION_RE = re.compile(r"^\s*[-=]{3,}\s*(.*?)\s*[-=]{3,}\s*$")
_FIELD_RE = re.compile(r"^(?P<label>[^:]{1,80}?):\s+(?P<value>\S.*?)\s*$")
# summary label (lower case) -> key; the fallback table maps "<section> <label>" of the newest layout.
_BENCH_FIELDS = {
    "backend": "backend",
    "traffic request rate": "request_rate",
    "max request concurrency": "max_concurrency",
    "successful requests": "completed",
    "failed requests": "failed",
    "benchmark duration (s)": "duration_s",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "total output tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "peak_output_throughput",
    "total token throughput (tok/s)": "total_throughput",
    "concurrency": "concurrency",
    "accept length": "accept_length",
}
_STAT_RE = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?|max)\s+(e2e latency|ttft|tpot|itl)\s+\(ms\)$")
_SECTION_METRIC = (("e2e", "e2e"), ("end-to-end", "e2e"), ("first token", "ttft"), ("per output token", "tpot"),
                   ("inter-token", "itl"), ("inter token", "itl"))


def _number(text):
    text = text.strip()
    try:
        if re.match(r"^-?\d+$", text):
            value = int(text)
            # a count past 2**53 is no count bench_serving prints (and would overflow the float math)
            return value if abs(value) <= 2 ** 53 else text
        value = float(text)
        return value if math.isfinite(value) else text
    except ValueError:
        return text


def parse_bench_serving(text):
    """The last "Serving Benchmark Result" block of bench_serving's output, or None.

    Returns {fields: {key: value}, latency: {ttft|tpot|itl|e2e: {mean, median, p90, p99, ...}}, raw: {label: value}}.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if "Serving Benchmark Result" in line:
            start = i
    if start is None:
        return None
    fields, latency, raw = {}, {}, {}
    section = None
    for line in lines[start + 1:]:
        if re.match(r"^\s*={10,}\s*$", line):
            break
        sec = _SECTION_RE.match(line)
        if sec:
            title = sec.group(1).lower()
            section = next((m for key, m in _SECTION_METRIC if key in title), None)
            continue
        m = _FIELD_RE.match(line)
        if not m:
            continue
        label, value = m.group("label").strip(), _number(m.group("value"))
        raw[label] = value
        low = label.lower()
        stat = _STAT_RE.match(low)
        if stat:
            name = {"e2e latency": "e2e"}.get(stat.group(2), stat.group(2))
            latency.setdefault(name, {})[stat.group(1)] = value
        elif low in _BENCH_FIELDS:
            fields[_BENCH_FIELDS[low]] = value
        elif section and re.match(r"^(mean|median|std|p\d+(?:\.\d+)?|max)$", low):
            # newest layout: "Mean:" under a "E2E Latency (ms)" heading
            latency.setdefault(section, {})[low] = value
    return {"fields": fields, "latency": latency, "raw": raw}


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _num_or_none(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def bench_serving_level(parsed, concurrency, num_prompts):
    """A level report (same keys as summarize_level) from parse_bench_serving's result."""
    f, lat = parsed["fields"], parsed["latency"]

    def dist(name, digits=2):
        d = lat.get(name, {})
        return {"mean": rounded(_num_or_none(d.get("mean")), digits), "p50": rounded(_num_or_none(d.get("median")), digits),
                "p90": rounded(_num_or_none(d.get("p90")), digits), "p99": rounded(_num_or_none(d.get("p99")), digits)}

    completed = f.get("completed") if _is_int(f.get("completed")) else 0
    failed = f.get("failed") if _is_int(f.get("failed")) else max(0, num_prompts - completed)
    tpot = lat.get("tpot", {})
    mean_tpot, median_tpot = _num_or_none(tpot.get("mean")), _num_or_none(tpot.get("median"))
    return {
        "concurrency": concurrency,
        "requests": completed + failed,
        "succeeded": completed,
        "failed": failed,
        "duration_s": rounded(_num_or_none(f.get("duration_s")), 3),
        "output_tokens": f.get("total_output_tokens") if _is_int(f.get("total_output_tokens")) else None,
        "prompt_tokens_mean": rounded(f["total_input_tokens"] / float(completed), 1) if completed and _is_int(f.get("total_input_tokens")) else None,
        "aggregate_output_tok_s": rounded(_num_or_none(f.get("output_throughput"))),
        # bench_serving reports TPOT (ms per output token after the first): its inverse is the decode rate.
        "per_request_output_tok_s": {"mean": rounded(1000.0 / mean_tpot) if mean_tpot else None,
                                     "p50": rounded(1000.0 / median_tpot) if median_tpot else None, "min": None},
        "ttft_ms": dist("ttft"),
        "itl_ms": dist("itl", 3),
        "e2e_ms": dist("e2e"),
        "errors": {"failed": failed} if failed else {},
        "error_examples": [],
        "token_count_source": "bench_serving",
        "accept_length": _num_or_none(f.get("accept_length")),
    }


def bench_serving_argv(python, module, base, model, concurrency, num_prompts, input_tokens, output_tokens, seed,
                       warmup_requests, tokenizer=None, output_file=None, extra_args=None):
    argv = [python, "-m", module, "--backend", "sglang-oai-chat", "--base-url", base, "--model", model,
            "--dataset-name", "random", "--random-input-len", str(input_tokens), "--random-output-len", str(output_tokens),
            # range ratio 1.0: every request has exactly these lengths (the default 0.0 samples shorter ones)
            "--random-range-ratio", "1.0", "--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency),
            "--request-rate", "inf", "--seed", str(seed), "--warmup-requests", str(warmup_requests), "--disable-tqdm"]
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    if output_file:
        argv += ["--output-file", output_file]
    return argv + list(extra_args or [])
