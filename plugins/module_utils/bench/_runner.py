# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The builtin benchmark: closed-loop levels of concurrent streamed requests, warm-up first, then statistics.

Standard library only (threads), Python 3.9+, so it runs on a managed host or on the controller.
"""

from __future__ import annotations

import threading
import time

from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import discover, payload_for
from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import DATASETS, DEFAULT_CHARS_PER_TOKEN, BenchmarkError, build_prompt
from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import summarize_level
from ansible_collections.llmops.sglang.plugins.module_utils._http import MAX_SECONDS

ENGINES = ("builtin", "sglang_bench_serving")
DEFAULT_CONCURRENCY = (1, 32)
MAX_DISTINCT_PROMPTS = 256
PROMPT_MEMORY_CHARS = 64 * 1024 * 1024
# One thread per request in flight.
MAX_CONCURRENCY = 4096
# Failures that every later request to the same server would repeat: stop the level at once.
FATAL_KINDS = ("bad_url", "refused", "unreachable", "tls", "unauthorized")
RANDOM_DATASET_SPEC_WARNING = (
    "speculative decoding is on and the dataset is random: random tokens make draft acceptance close to zero, so "
    "these numbers do not show what speculation gives on real text; use dataset coding to see it")


def run_level(client, concurrency, payloads, num_requests=None, duration=None, stop_on_fatal=True):
    """Closed loop: `concurrency` workers send requests back to back.

    Stops after num_requests requests, or for duration seconds (requests started before the end finish and count).
    Returns (results, wall seconds from the first send to the last answer).
    """
    lock = threading.Lock()
    state = {"next": 0, "fatal": None}
    results = []
    deadline = None

    def take():
        with lock:
            if state["fatal"] is not None:
                return None
            i = state["next"]
            if num_requests is not None and i >= num_requests:
                return None
            if deadline is not None and time.perf_counter() >= deadline:
                return None
            state["next"] += 1
            return i

    def worker():
        while True:
            i = take()
            if i is None:
                return
            res = client.chat(payloads[i % len(payloads)])
            with lock:
                results.append(res)
                if stop_on_fatal and res["error"] and res["error"]["kind"] in FATAL_KINDS:
                    state["fatal"] = res["error"]

    start = time.perf_counter()
    if duration is not None:
        deadline = start + float(duration)
    threads = [threading.Thread(target=worker, name="bench-%d" % n) for n in range(concurrency)]
    for t in threads:
        t.daemon = True
        t.start()
    for t in threads:
        t.join()
    if not results:
        return results, 0.0
    first = min(r["started"] for r in results)
    end = max(r["finished"] for r in results)
    return results, max(0.0, end - first)


def validate_options(concurrency, dataset, input_tokens, output_tokens, rounds, num_requests, duration, warmup_requests,
                     chars_per_token):
    if not concurrency:
        raise BenchmarkError("concurrency must list at least one level, e.g. [1, 32]")
    for c in concurrency:
        if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_CONCURRENCY:
            raise BenchmarkError("concurrency levels must be integers from 1 to %d (one thread each), got %r" % (MAX_CONCURRENCY, c))
    if dataset not in DATASETS:
        raise BenchmarkError("unknown dataset %r: choose from %s" % (dataset, ", ".join(DATASETS)))
    for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BenchmarkError("%s must be an integer >= 1, got %r" % (name, value))
    if num_requests is not None and (not isinstance(num_requests, int) or num_requests < 1):
        raise BenchmarkError("num_requests must be an integer >= 1 (requests per level), got %r" % (num_requests,))
    if duration is not None and (not isinstance(duration, (int, float)) or not 0 < duration <= MAX_SECONDS):
        raise BenchmarkError("duration must be a number of seconds in (0, %d] (time per level), got %r" % (MAX_SECONDS, duration))
    if not isinstance(warmup_requests, int) or warmup_requests < 0:
        raise BenchmarkError("warmup_requests must be an integer >= 0, got %r" % (warmup_requests,))
    if isinstance(chars_per_token, bool) or not isinstance(chars_per_token, (int, float)) or not 0 < chars_per_token <= 64:
        raise BenchmarkError("chars_per_token must be a number in (0, 64], got %r" % (chars_per_token,))
    if input_tokens * chars_per_token > PROMPT_MEMORY_CHARS:
        raise BenchmarkError("input_tokens %d makes prompts of %d characters (chars_per_token %g), more than %d: use fewer "
                             "input tokens" % (input_tokens, input_tokens * chars_per_token, chars_per_token, PROMPT_MEMORY_CHARS))


def run_benchmark(client, concurrency=DEFAULT_CONCURRENCY, dataset="random", input_tokens=1024, output_tokens=512, rounds=3,
                  num_requests=None, duration=None, warmup_requests=2, seed=0, model=None, chars_per_token=DEFAULT_CHARS_PER_TOKEN,
                  speculative=None, extra_body=None, ignore_eos=True):
    """Every level in turn; returns the whole result (never raises for server problems)."""
    concurrency = list(concurrency)
    validate_options(concurrency, dataset, input_tokens, output_tokens, rounds, num_requests, duration, warmup_requests,
                     chars_per_token)
    out = {"ok": False, "engine": "builtin", "url": client.base, "model": model, "dataset": dataset, "input_tokens": input_tokens,
           "output_tokens": output_tokens, "levels": [], "warnings": [], "error": None, "speculative_algorithm": None}
    found_model, _max_len, spec_algo, err = discover(client)
    if err is not None:
        out["error"] = {"kind": err["class"], "message": err["message"]}
        return out
    out["model"] = model = model or found_model or "default"
    out["speculative_algorithm"] = spec_algo
    if speculative is None:
        speculative = spec_algo is not None
    if speculative and dataset == "random":
        out["warnings"].append(RANDOM_DATASET_SPEC_WARNING)

    most = max(num_requests or 0, max(concurrency) * rounds) if duration is None else max(concurrency) * 2
    # Distinct prompts (cycled beyond this), bounded so long-context sets stay within about 64 MB.
    distinct = max(1, min(most, MAX_DISTINCT_PROMPTS, int(PROMPT_MEMORY_CHARS // max(1, input_tokens * chars_per_token))))
    prompts = [build_prompt(dataset, seed, i, input_tokens, chars_per_token) for i in range(distinct)]
    payloads = [payload_for(m, model, output_tokens, seed, extra_body, ignore_eos) for m in prompts]
    for c in concurrency:
        if warmup_requests:
            # Different prompts than the measured ones, so nothing measured is a prefix-cache hit of the warm-up.
            warm = [payload_for(build_prompt(dataset, "%s-warmup" % seed, i, input_tokens, chars_per_token), model,
                                min(output_tokens, 32), seed, extra_body, ignore_eos) for i in range(min(warmup_requests, c))]
            wres, _w = run_level(client, min(c, warmup_requests), warm, num_requests=warmup_requests)
            if not any(r["ok"] for r in wres):
                first = next(r["error"] for r in wres if r["error"])
                out["error"] = {"kind": first["kind"], "message": "warm-up at concurrency %d failed: %s" % (c, first["message"])}
                return out
        n = num_requests if num_requests is not None else (None if duration is not None else c * rounds)
        results, wall = run_level(client, c, payloads, num_requests=n, duration=duration)
        level = summarize_level(c, results, wall)
        out["levels"].append(level)
        if level["succeeded"] == 0:
            kind = sorted(level["errors"], key=lambda k: -level["errors"][k])[0] if level["errors"] else "empty"
            out["error"] = {"kind": kind, "message": "every request at concurrency %d failed: %s"
                            % (c, "; ".join(level["error_examples"]) or kind)}
            return out
    out["ok"] = True
    return out
