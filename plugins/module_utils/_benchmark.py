# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Serving benchmark for an OpenAI-compatible server (SGLang): client, datasets, statistics, gate, chart.

Standard library only (``urllib`` + threads), Python 3.9+, so it runs on a managed host or on the
controller without new dependencies.

* The client streams ``POST /v1/chat/completions`` with ``stream_options: {include_usage: true}``.
  Output tokens come from the server's ``usage`` in the final chunk when present, else one token per
  content chunk. TTFT is measured from sending the request to the first content chunk; inter-token
  latency (ITL) is the gap between consecutive content chunks (a chunk that carries several tokens, as
  with speculative decoding, counts as one gap, like ``sglang.bench_serving``).
* Per-request output tok/s is the decode rate after the first token: ``(tokens - 1) / (last - first)``
  (the inverse of bench_serving's TPOT). Aggregate output tok/s is every measured request's output
  tokens divided by the level's wall time (first send to last answer); warm-up requests are excluded.
* Prompts are generated from a seed: ``random`` (random words, like bench_serving's random token ids)
  and ``coding`` (synthetic but realistic Python repositories with a coding task). Token counts are
  approximated as characters / ``chars_per_token`` (4 by default); the server's ``prompt_tokens`` is
  reported when it sends usage.
* ``parse_bench_serving`` reads the summary that ``python -m sglang.bench_serving`` prints.
* ``render_chart`` draws throughput and latency against concurrency as a standalone SVG.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import random
import re
import threading
import time
from urllib import error as urlerror
from urllib import request as urlrequest

from ansible_collections.llmops.sglang.plugins.module_utils._http import MAX_SECONDS, OptionError, check_api_key, describe_failure
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import (
    FetchError,
    ServerInfoError,
    _opener,
    fetch_endpoint,
    normalize_url,
)

CHAT_PATH = "/v1/chat/completions"
DATASETS = ("random", "coding")
ENGINES = ("builtin", "sglang_bench_serving")
DEFAULT_CONCURRENCY = (1, 32)
DEFAULT_CHARS_PER_TOKEN = 4.0
MAX_SSE_LINE = 4 * 1024 * 1024
# One streamed answer: far more than max_tokens of any request sends (about 1 KB of events per token).
MAX_STREAM_BYTES = 256 * 1024 * 1024
MAX_ERROR_EXAMPLES = 3
MAX_DISTINCT_PROMPTS = 256
# Output kept from bench_serving or run_eval (their progress bars included): far more than their summaries.
MAX_PROCESS_OUTPUT = 64 * 1024 * 1024
PROMPT_MEMORY_CHARS = 64 * 1024 * 1024
# One thread per request in flight.
MAX_CONCURRENCY = 4096
# Failures that every later request to the same server would repeat: stop the level at once.
FATAL_KINDS = ("bad_url", "refused", "unreachable", "tls", "unauthorized")
ERROR_KINDS = ("bad_url", "refused", "unreachable", "tls", "timeout", "unauthorized", "loading", "not_found", "http_error",
               "malformed_chunk", "too_large", "server_error", "incomplete_stream", "empty", "disconnected")
RANDOM_DATASET_SPEC_WARNING = (
    "speculative decoding is on and the dataset is random: random tokens make draft acceptance close to zero, so "
    "these numbers do not show what speculation gives on real text; use dataset coding to see it")


class BenchmarkError(ValueError):
    """Bad options; the message says what to fix."""


# ---------------------------------------------------------------------------------------------
# Deterministic prompts

_NOUNS = ("account", "batch", "buffer", "cache", "channel", "checkpoint", "client", "cluster", "config", "cursor", "device",
          "document", "entry", "event", "export", "feature", "file", "filter", "frame", "graph", "handler", "header", "index",
          "invoice", "item", "job", "key", "layer", "lease", "ledger", "limit", "metric", "node", "order", "packet", "page",
          "payload", "policy", "pool", "profile", "queue", "quota", "record", "region", "report", "request", "result", "route",
          "rule", "sample", "schema", "segment", "session", "shard", "signal", "slot", "snapshot", "source", "span", "stage",
          "state", "stream", "task", "tenant", "ticket", "token", "trace", "user", "version", "window", "worker")
_VERBS = ("apply", "build", "collect", "compact", "compute", "convert", "decode", "dispatch", "drain", "emit", "encode",
          "expire", "extract", "fetch", "filter", "flush", "format", "group", "load", "lookup", "merge", "normalize", "parse",
          "prepare", "prune", "publish", "rank", "refresh", "render", "resolve", "retry", "rotate", "sample", "scan",
          "schedule", "serialize", "split", "store", "summarize", "sync", "track", "update", "validate", "verify")
_ADJECTIVES = ("active", "cached", "current", "default", "dirty", "expired", "failed", "local", "max", "min", "next",
               "pending", "primary", "raw", "recent", "remote", "stale", "total", "valid")
_TYPES = ("int", "str", "float", "bool", "dict", "list", "bytes")
_EXCEPTIONS = ("ValueError", "KeyError", "RuntimeError", "TimeoutError", "LookupError")
_TASKS = (
    "Refactor `{func}` in `{path}` so that it does a single pass over its input, keep its behaviour, and show the new code.",
    "Write pytest unit tests for `{cls}` in `{path}`, covering the error paths, and explain what each test checks.",
    "There is a bug in `{func}` in `{path}`: it mishandles an empty input. Find it, fix it, and show a minimal diff.",
    "Add type hints and docstrings to every public function in `{path}`; do not change behaviour. Show the full file.",
    "Explain how data flows from `{func}` to `{cls}` in this repository, then propose one change that removes a copy.",
    "Make `{cls}` in `{path}` safe to use from several threads and explain the locking you chose.",
)
# Plain English words for the random dataset (meaningless order, like random token ids).
_RANDOM_WORDS = tuple(sorted(set(_NOUNS + _VERBS + _ADJECTIVES + (
    "about", "after", "again", "air", "along", "also", "animal", "answer", "area", "back", "base", "because", "before",
    "begin", "below", "between", "black", "blue", "body", "book", "both", "bring", "call", "came", "carry", "change",
    "city", "close", "color", "common", "country", "cover", "cross", "dark", "different", "door", "down", "draw", "during",
    "early", "earth", "east", "enough", "even", "every", "example", "face", "family", "farm", "father", "field", "figure",
    "fire", "first", "follow", "food", "force", "form", "found", "friend", "front", "full", "game", "give", "gold", "good",
    "great", "green", "ground", "grow", "half", "hand", "hard", "head", "hear", "heat", "help", "high", "hold", "home",
    "horse", "hour", "house", "idea", "island", "keep", "kind", "king", "land", "large", "last", "late", "learn", "leave",
    "letter", "life", "light", "line", "list", "little", "live", "long", "machine", "main", "make", "many", "mark",
    "measure", "might", "mile", "mind", "money", "moon", "more", "morning", "mother", "mountain", "move", "music", "name",
    "near", "never", "night", "north", "notice", "number", "often", "open", "other", "paper", "part", "people", "picture",
    "piece", "place", "plain", "plan", "plant", "point", "power", "press", "problem", "question", "quick", "rain", "read",
    "ready", "real", "river", "road", "rock", "room", "round", "school", "science", "second", "sentence", "ship", "short",
    "show", "side", "simple", "since", "size", "small", "song", "sound", "south", "space", "special", "stand", "star",
    "start", "still", "story", "street", "strong", "study", "such", "sure", "surface", "table", "tail", "test", "thing",
    "thought", "three", "through", "time", "together", "town", "travel", "tree", "true", "under", "unit", "until", "upon",
    "usual", "voice", "wait", "walk", "warm", "water", "week", "weight", "west", "wheel", "white", "whole", "wind",
    "winter", "wonder", "wood", "word", "work", "world", "write", "year", "young"))))


def _ident(rng, parts=2):
    words = [rng.choice(_ADJECTIVES)] if parts > 2 else []
    words += [rng.choice(_NOUNS)] if parts > 1 else []
    return "_".join(words + [rng.choice(_NOUNS)])


def _camel(rng):
    return rng.choice(_NOUNS).capitalize() + rng.choice(_NOUNS).capitalize() + rng.choice(("Store", "Manager", "Client", "Index",
                                                                                          "Builder", "Cache", "Router"))


def _function(rng, indent="", method=False):
    """One plausible Python function (a few branches, a loop, a docstring)."""
    name = "%s_%s" % (rng.choice(_VERBS), _ident(rng, rng.choice((1, 2))))
    args = [_ident(rng, 1) for dummy in range(rng.randint(1, 3))]
    args = sorted(set(args), key=args.index)
    typed = ["%s: %s" % (a, rng.choice(_TYPES)) for a in args]
    if method:
        typed.insert(0, "self")
    first = args[0]
    acc = _ident(rng, 2)
    ind = indent + "    "
    words = (rng.choice(_VERBS).capitalize(), rng.choice(_NOUNS), rng.choice(_NOUNS), acc.replace("_", " "))
    doc = "%s the %s of each %s and return the %s." % words
    lines = ["%sdef %s(%s) -> %s:" % (indent, name, ", ".join(typed), rng.choice(_TYPES)), '%s"""%s"""' % (ind, doc)]
    lines.append("%sif not %s:" % (ind, first))
    lines.append("%s    raise %s(\"%s must not be empty\")" % (ind, rng.choice(_EXCEPTIONS), first))
    lines.append("%s%s = %s" % (ind, acc, rng.choice(("[]", "{}", "0", "None", "set()"))))
    item = rng.choice(_NOUNS)
    lines.append("%sfor %s in %s:" % (ind, item, first))
    for dummy in range(rng.randint(1, 4)):
        cond = rng.choice(("%s is None" % item, "not %s.%s" % (item, rng.choice(_ADJECTIVES)),
                           "%s.%s > %d" % (item, rng.choice(_NOUNS), rng.randint(1, 4096)),
                           "%s in self._%s" % (item, rng.choice(_NOUNS)) if method else "len(%s) > %d" % (acc, rng.randint(2, 64))))
        lines.append("%s    if %s:" % (ind, cond))
        lines.append("%s        %s" % (ind, rng.choice(("continue", "break", "%s = %s(%s)" % (acc, rng.choice(_VERBS), item),
                                                        "self._%s.append(%s)" % (rng.choice(_NOUNS), item) if method
                                                        else "%s += 1" % acc))))
    lines.append("%s    %s = %s_%s(%s, %s)" % (ind, acc, rng.choice(_VERBS), rng.choice(_NOUNS), acc, item))
    if rng.random() < 0.4:
        lines.append("%s# %s the %s first: %s may %s it" % (ind, rng.choice(_VERBS), rng.choice(_NOUNS), _camel(rng), rng.choice(_VERBS)))
    lines.append("%sreturn %s" % (ind, acc))
    return name, lines


def _class(rng):
    name = _camel(rng)
    first = _ident(rng, 1)
    second = _ident(rng, 2)  # two words: never equal to the one-word first
    lines = ["class %s(object):" % name,
             '    """%s %s for the %s %s."""' % (rng.choice(_ADJECTIVES).capitalize(), rng.choice(_NOUNS), rng.choice(_NOUNS),
                                                 rng.choice(("layer", "service", "pipeline", "scheduler"))),
             "",
             "    def __init__(self, %s, %s=%d):" % (first, second, rng.randint(1, 512)),
             "        self._lock = threading.Lock()",
             "        self._%s = []" % rng.choice(_NOUNS),
             "        self._%s = {}" % rng.choice(_NOUNS)]
    methods = []
    for dummy in range(rng.randint(2, 4)):
        mname, body = _function(rng, "    ", method=True)
        methods.append(mname)
        lines += [""] + body
    return name, methods, lines


def _module(rng, path):
    """One file: header, imports, constants, a class and some functions. Returns (text, functions, classes)."""
    lines = ["# ---- file: %s ----" % path,
             '"""%s %s utilities."""' % (rng.choice(_NOUNS).capitalize(), rng.choice(_NOUNS)),
             "",
             "import json",
             "import logging",
             "import threading",
             "from typing import Dict, List, Optional",
             "",
             "LOG = logging.getLogger(__name__)"]
    for dummy in range(rng.randint(1, 3)):
        lines.append("%s_%s = %d" % (rng.choice(_ADJECTIVES).upper(), rng.choice(_NOUNS).upper(), rng.randint(1, 65536)))
    funcs, classes = [], []
    for dummy in range(rng.randint(1, 3)):
        if rng.random() < 0.45:
            cname, _methods, body = _class(rng)
            classes.append(cname)
        else:
            fname, body = _function(rng)
            funcs.append(fname)
        lines += ["", ""] + body
    return "\n".join(lines) + "\n\n", funcs, classes


def synthetic_code(seed, n_chars):
    """Deterministic Python "repository" text of about n_chars characters (cut at a file or line end).

    Returns (text, symbols): symbols lists (path, name, kind) of every function and class kept whole, so a
    task can name things that exist in the text.
    """
    rng = random.Random("code-%s" % (seed,))
    parts, symbols = [], []
    size = 0
    while size < n_chars:
        path = "%s/%s_%s.py" % (rng.choice(("app", "core", "lib", "svc", "pkg")), rng.choice(_NOUNS), rng.choice(_VERBS))
        text, funcs, classes = _module(rng, path)
        parts.append(text)
        symbols += [(path, f, "function") for f in funcs] + [(path, c, "class") for c in classes]
        size += len(text)
    code = "".join(parts)
    if len(code) > n_chars:
        # End at a file boundary when that keeps most of the text, else at a line end.
        cut = code.rfind("# ---- file:", 0, n_chars + 1)
        if cut < 0.97 * n_chars:
            cut = code.rfind("\n", 0, n_chars) + 1
        code = code[:cut] if cut > 0 else code[:n_chars]
        tail = code[code.rfind("# ---- file:"):]
        # a definition of the cut file counts only when its body is complete: the next top-level statement follows it
        symbols = [s for s in symbols if ("%s %s(" % ("def" if s[2] == "function" else "class", s[1])) in code
                   and not (("%s %s(" % ("def" if s[2] == "function" else "class", s[1])) in tail and not _whole(tail, s))]
    return code, symbols


def _whole(text, symbol):
    head = "%s %s(" % ("def" if symbol[2] == "function" else "class", symbol[1])
    rest = text[text.index(head) + len(head):]
    return "\n\n\n" in rest


def random_text(seed, n_chars):
    """Random words (seeded) of about n_chars characters."""
    rng = random.Random("random-%s" % (seed,))
    out, size = [], 0
    while size < n_chars:
        word = rng.choice(_RANDOM_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:max(1, n_chars)]


def build_prompt(dataset, seed, index, input_tokens, chars_per_token=DEFAULT_CHARS_PER_TOKEN):
    """The chat messages of request number index of a dataset."""
    n_chars = max(16, int(input_tokens * chars_per_token))
    key = "%s-%d" % (seed, index)
    if dataset == "random":
        return [{"role": "user", "content": random_text(key, n_chars)}]
    if dataset == "coding":
        rng = random.Random("task-" + key)
        head = "You are working in the Python repository below. Read it carefully before you answer.\n\n"
        code, symbols = synthetic_code(key, max(1, n_chars - len(head) - 240))
        funcs = [sym for sym in symbols if sym[2] == "function"] or [("main.py", "main", "function")]
        classes = [sym for sym in symbols if sym[2] == "class"] or [("main.py", "App", "class")]
        template = rng.choice(_TASKS)
        # the file named is the one that holds the function (or, for class-only tasks, the class)
        func, cls = rng.choice(funcs), rng.choice(classes)
        path = func[0] if "{func}" in template else cls[0]
        task = template.format(func=func[1], cls=cls[1], path=path)
        return [{"role": "system", "content": "You are an expert software engineer."},
                {"role": "user", "content": head + code + "\n\nTask: " + task}]
    raise BenchmarkError("unknown dataset %r: choose from %s" % (dataset, ", ".join(DATASETS)))


# ---------------------------------------------------------------------------------------------
# Streaming client


def _err(kind, message):
    return {"kind": kind, "message": message}


def stream_chat(base, payload, api_key=None, timeout=600.0, validate_certs=True, use_proxy=True, keep_text=False):
    """Send one streaming chat completion and time it. Never raises for a server or network failure.

    Returns a dict: ok, error ({kind, message} or None), ttft_s, itl_s (list), latency_s, decode_s,
    output_tokens, token_source (usage|chunks), chunks, prompt_tokens, finish_reason, text (keep_text).
    """
    url = base + CHAT_PATH
    res = {"ok": False, "error": None, "ttft_s": None, "itl_s": [], "latency_s": None, "decode_s": None, "output_tokens": 0,
           "token_source": None, "chunks": 0, "reasoning_chunks": 0, "prompt_tokens": None, "finish_reason": None, "text": "" if keep_text else None,
           "started": None, "finished": None}
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "User-Agent": "llmops.sglang"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    body = json.dumps(payload).encode("utf-8")
    _b, host, port = normalize_url(base)
    start = time.perf_counter()
    res["started"] = start
    deadline = start + float(timeout)
    resp = None
    texts = []
    usage_tokens = None
    done = False
    last = None
    received = 0
    try:
        req = urlrequest.Request(url, data=body, headers=headers, method="POST")
        resp = _opener(base, validate_certs, use_proxy).open(req, timeout=float(timeout))
        while True:
            if time.perf_counter() > deadline:
                raise FetchError("timeout", "%s did not finish streaming within %ss: raise the request timeout or check the "
                                 "server" % (url, _fmt(timeout)))
            raw = resp.readline(MAX_SSE_LINE)
            if not raw:
                break
            received += len(raw)
            if received > MAX_STREAM_BYTES:
                raise FetchError("too_large", "%s streamed more than %d bytes for one answer: this is not an SGLang chat "
                                              "stream; check url" % (url, MAX_STREAM_BYTES))
            if len(raw) == MAX_SSE_LINE and not raw.endswith(b"\n"):
                raise FetchError("malformed_chunk", "%s sent an event line longer than %d bytes: this is not an SGLang chat "
                                                    "stream; check url" % (url, MAX_SSE_LINE))
            line = raw.strip()
            if not line or line.startswith(b":"):
                continue
            if not line.startswith(b"data:"):
                if line.split(b":", 1)[0] in (b"event", b"id", b"retry"):
                    continue
                raise FetchError("malformed_chunk", "%s sent a line that is not server-sent events: %r" % (url, _short(line)))
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            try:
                obj = json.loads(data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise FetchError("malformed_chunk", "%s sent a chunk that is not JSON: %r" % (url, _short(data)))
            if not isinstance(obj, dict):
                raise FetchError("malformed_chunk", "%s sent a chunk that is not a JSON object: %r" % (url, _short(data)))
            if obj.get("error") is not None:
                err = obj["error"]
                msg = err.get("message") if isinstance(err, dict) else err
                raise FetchError("server_error", "%s reported an error in the stream: %s" % (url, _short(str(msg))))
            choices = obj.get("choices")
            if choices is None:
                choices = []
            if not isinstance(choices, list):
                raise FetchError("malformed_chunk", "%s sent a chunk whose choices is not a list: %r" % (url, _short(data)))
            for choice in choices:
                if not isinstance(choice, dict):
                    raise FetchError("malformed_chunk", "%s sent a choice that is not an object: %r" % (url, _short(data)))
                delta = choice.get("delta") or {}
                if not isinstance(delta, dict):
                    raise FetchError("malformed_chunk", "%s sent a delta that is not an object: %r" % (url, _short(data)))
                content = delta.get("content") or ""
                # With a reasoning parser the model's thinking streams as reasoning_content: output all the same.
                reasoning = delta.get("reasoning_content") or ""
                if not isinstance(content, str) or not isinstance(reasoning, str):
                    raise FetchError("malformed_chunk", "%s sent non-text content: %r" % (url, _short(data)))
                if reasoning:
                    res["reasoning_chunks"] += 1
                if content or reasoning:
                    now = time.perf_counter()
                    if last is None:
                        res["ttft_s"] = now - start
                    else:
                        res["itl_s"].append(now - last)
                    last = now
                    res["chunks"] += 1
                    if keep_text and content:
                        texts.append(content)
                if choice.get("finish_reason"):
                    res["finish_reason"] = choice["finish_reason"]
            usage = obj.get("usage")
            if isinstance(usage, dict):
                if _is_int(usage.get("completion_tokens")):
                    usage_tokens = usage["completion_tokens"]
                if _is_int(usage.get("prompt_tokens")):
                    res["prompt_tokens"] = usage["prompt_tokens"]
        if not done:
            raise FetchError("incomplete_stream", "%s closed the stream before [DONE] after %d chunks: the server may have "
                                                  "crashed or a proxy cut the connection" % (url, res["chunks"]))
        if res["chunks"] == 0 and not usage_tokens:
            raise FetchError("empty", "%s finished without any output token (finish_reason %s)" % (url, res["finish_reason"]))
        res["ok"] = True
    except FetchError as exc:
        res["error"] = _err(exc.cls, exc.message)
    except (http.client.IncompleteRead, ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
        res["error"] = _err("disconnected", "%s dropped the connection mid-answer (%s) after %d chunks" % (url, type(exc).__name__, res["chunks"]))
    except (urlerror.URLError, http.client.HTTPException, OSError) as exc:
        cls, message, _status = describe_failure(exc, url, host, port, timeout, api_key)
        if cls == "not_found":
            message = ("HTTP 404 from %s: this server has no OpenAI chat endpoint; point url at an SGLang server (not a "
                       "router without workers or another service)" % url)
        res["error"] = _err(cls, message)
    finally:
        if resp is not None:
            try:
                resp.close()
            except (OSError, http.client.HTTPException):
                pass
    end = time.perf_counter()
    res["finished"] = end
    res["latency_s"] = end - start
    if usage_tokens is not None:
        res["output_tokens"], res["token_source"] = usage_tokens, "usage"
    else:
        res["output_tokens"], res["token_source"] = res["chunks"], "chunks"
    if res["ttft_s"] is not None and last is not None:
        res["decode_s"] = last - (start + res["ttft_s"])
    if keep_text:
        res["text"] = "".join(texts)
    return res


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _short(data, limit=160):
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    return text if len(text) <= limit else text[:limit] + "..."


def _fmt(value):
    return ("%g" % value) if isinstance(value, float) else str(value)


# ---------------------------------------------------------------------------------------------
# Statistics


def percentile(values, q):
    """Linear-interpolated percentile (numpy's default); None for no values."""
    vals = sorted(values)
    if not vals:
        return None
    k = (len(vals) - 1) * (q / 100.0)
    lo = int(math.floor(k))
    hi = int(math.ceil(k))
    if lo == hi:
        return float(vals[lo])
    return vals[lo] + (vals[hi] - vals[lo]) * (k - lo)


def _r(value, digits=2):
    return None if value is None else round(float(value), digits)


def distribution(values, scale=1.0, digits=2):
    """{mean, p50, p90, p99} of values x scale (None entries when empty)."""
    vals = [v * scale for v in values]
    if not vals:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    return {"mean": _r(sum(vals) / len(vals), digits), "p50": _r(percentile(vals, 50), digits),
            "p90": _r(percentile(vals, 90), digits), "p99": _r(percentile(vals, 99), digits)}


def decode_rate(res):
    """Output tok/s of one request after its first token (None when it cannot be measured)."""
    if not res["ok"] or res["output_tokens"] < 2 or not res["decode_s"] or res["decode_s"] <= 0:
        return None
    return (res["output_tokens"] - 1) / res["decode_s"]


def summarize_level(concurrency, results, wall_s):
    """Per-level report from the measured requests (warm-up excluded)."""
    good = [r for r in results if r["ok"]]
    errors, examples = {}, []
    for r in results:
        if r["error"]:
            errors[r["error"]["kind"]] = errors.get(r["error"]["kind"], 0) + 1
            if len(examples) < MAX_ERROR_EXAMPLES and r["error"]["message"] not in examples:
                examples.append(r["error"]["message"])
    tokens = sum(r["output_tokens"] for r in good)
    rates = [x for x in (decode_rate(r) for r in good) if x is not None]
    itls = [gap for r in good for gap in r["itl_s"]]
    sources = sorted(set(r["token_source"] for r in good))
    prompts = [r["prompt_tokens"] for r in good if r["prompt_tokens"] is not None]
    aggregate = tokens / wall_s if good and wall_s > 0 else 0.0
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "succeeded": len(good),
        "failed": len(results) - len(good),
        "duration_s": _r(wall_s, 3),
        "output_tokens": tokens,
        "prompt_tokens_mean": _r(sum(prompts) / len(prompts), 1) if prompts else None,
        "aggregate_output_tok_s": _r(aggregate),
        "per_request_output_tok_s": {"mean": _r(sum(rates) / len(rates)) if rates else None,
                                     "p50": _r(percentile(rates, 50)), "min": _r(min(rates)) if rates else None},
        "ttft_ms": distribution([r["ttft_s"] for r in good if r["ttft_s"] is not None], 1000.0),
        "itl_ms": distribution(itls, 1000.0, 3),
        "e2e_ms": distribution([r["latency_s"] for r in good], 1000.0),
        "errors": errors,
        "error_examples": examples,
        "token_count_source": sources[0] if len(sources) == 1 else ("mixed" if sources else None),
    }


# ---------------------------------------------------------------------------------------------
# Runner


class Client(object):
    """Connection settings shared by every request of a run."""

    def __init__(self, url, api_key=None, timeout=600.0, validate_certs=True, use_proxy=True):
        self.base, self.host, self.port = normalize_url(url)
        try:
            check_api_key(api_key)
        except OptionError as exc:
            raise ServerInfoError(str(exc))
        self.api_key = api_key
        self.timeout = float(timeout)
        self.validate_certs = validate_certs
        self.use_proxy = use_proxy

    def chat(self, payload, keep_text=False, timeout=None):
        return stream_chat(self.base, payload, self.api_key, timeout or self.timeout, self.validate_certs, self.use_proxy, keep_text)

    def endpoint(self, name, timeout=10.0):
        return fetch_endpoint(self.base, name, self.api_key, min(timeout, self.timeout), self.validate_certs, self.use_proxy)


def discover(client):
    """(served model id or None, max_model_len or None, speculative algorithm or None, error or None)."""
    models = client.endpoint("models")
    if not models["ok"]:
        return None, None, None, models["error"]
    entries = (models.get("data") or {}).get("data") or []
    first = entries[0] if entries and isinstance(entries[0], dict) else {}
    model = first.get("id") if isinstance(first.get("id"), str) else None
    max_len = first.get("max_model_len") if _is_int(first.get("max_model_len")) else None
    info = client.endpoint("server_info")
    spec = None
    if info["ok"] and isinstance(info.get("data"), dict):
        algo = info["data"].get("speculative_algorithm")
        spec = algo if isinstance(algo, str) and algo else None
    return model, max_len, spec, None


def payload_for(messages, model, max_tokens, seed, extra_body=None, ignore_eos=True):
    body = {"model": model, "messages": messages, "max_tokens": int(max_tokens), "temperature": 0.0, "seed": seed,
            "stream": True, "stream_options": {"include_usage": True}}
    if ignore_eos:
        # SGLang's sampling option: generate exactly max_tokens, as bench_serving does.
        body["ignore_eos"] = True
    body.update(extra_body or {})
    return body


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


# ---------------------------------------------------------------------------------------------
# External tools (sglang.bench_serving, sglang.test.run_eval)


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
        out["error"] = "%s did not finish within %ss" % (" ".join(argv[:3]), _fmt(timeout))
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


def _num_or_none(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def bench_serving_level(parsed, concurrency, num_prompts):
    """A level report (same keys as summarize_level) from parse_bench_serving's result."""
    f, lat = parsed["fields"], parsed["latency"]

    def dist(name, digits=2):
        d = lat.get(name, {})
        return {"mean": _r(_num_or_none(d.get("mean")), digits), "p50": _r(_num_or_none(d.get("median")), digits),
                "p90": _r(_num_or_none(d.get("p90")), digits), "p99": _r(_num_or_none(d.get("p99")), digits)}

    completed = f.get("completed") if _is_int(f.get("completed")) else 0
    failed = f.get("failed") if _is_int(f.get("failed")) else max(0, num_prompts - completed)
    tpot = lat.get("tpot", {})
    mean_tpot, median_tpot = _num_or_none(tpot.get("mean")), _num_or_none(tpot.get("median"))
    return {
        "concurrency": concurrency,
        "requests": completed + failed,
        "succeeded": completed,
        "failed": failed,
        "duration_s": _r(_num_or_none(f.get("duration_s")), 3),
        "output_tokens": f.get("total_output_tokens") if _is_int(f.get("total_output_tokens")) else None,
        "prompt_tokens_mean": _r(f["total_input_tokens"] / float(completed), 1) if completed and _is_int(f.get("total_input_tokens")) else None,
        "aggregate_output_tok_s": _r(_num_or_none(f.get("output_throughput"))),
        # bench_serving reports TPOT (ms per output token after the first): its inverse is the decode rate.
        "per_request_output_tok_s": {"mean": _r(1000.0 / mean_tpot) if mean_tpot else None,
                                     "p50": _r(1000.0 / median_tpot) if median_tpot else None, "min": None},
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


# ---------------------------------------------------------------------------------------------
# Regression gate


def normalize_baseline(baseline):
    """{concurrency (int): tok/s (float)} from a mapping with int or string keys; BenchmarkError when malformed."""
    if baseline is None:
        return {}
    if not isinstance(baseline, dict):
        raise BenchmarkError("baseline must map concurrency to output tok/s, e.g. {1: 172, 32: 2100}")
    out = {}
    for key, value in baseline.items():
        try:
            c = int(str(key).strip())
        except ValueError:
            raise BenchmarkError("baseline key %r is not a concurrency level (an integer)" % (key,))
        try:
            number = None if isinstance(value, bool) else float(value)
        except (TypeError, ValueError, OverflowError):
            number = None
        if number is None or not math.isfinite(number) or number <= 0:
            raise BenchmarkError("baseline for concurrency %d must be a positive number of tok/s, got %r" % (c, value))
        out[c] = number
    return out


def evaluate_gate(levels, baseline, min_fraction=0.9):
    """Compare each level's aggregate output tok/s with the baseline; fail below min_fraction of it."""
    base = normalize_baseline(baseline)
    if not isinstance(min_fraction, (int, float)) or not 0 < min_fraction <= 10:
        raise BenchmarkError("min_fraction must be a number > 0 (0.9 = fail below 90%% of the baseline), got %r" % (min_fraction,))
    gate = {"enabled": bool(base), "passed": True, "min_fraction": float(min_fraction), "checks": [], "reason": None}
    if not base:
        gate["reason"] = "no baseline given"
        return gate
    measured = dict((lv["concurrency"], lv) for lv in levels)
    for c in sorted(base):
        lv = measured.get(c)
        if lv is None:
            gate["checks"].append({"concurrency": c, "baseline": base[c], "measured": None, "ratio": None, "passed": None,
                                   "note": "not measured"})
            continue
        got = lv.get("aggregate_output_tok_s") or 0.0
        ratio = got / base[c]
        ok = ratio >= min_fraction
        gate["checks"].append({"concurrency": c, "baseline": base[c], "measured": got, "ratio": round(ratio, 4), "passed": ok,
                               "note": None if ok else "below %.0f%% of the baseline" % (min_fraction * 100)})
    checked = [ch for ch in gate["checks"] if ch["passed"] is not None]
    if not checked:
        gate["passed"] = False
        gate["reason"] = ("no measured concurrency level has a baseline (baseline levels %s): measure one of them or fix the "
                          "baseline" % sorted(base))
    elif not all(ch["passed"] for ch in checked):
        gate["passed"] = False
        gate["reason"] = "; ".join("C=%d %.1f tok/s is %.0f%% of the baseline %.1f"
                                   % (ch["concurrency"], ch["measured"], ch["ratio"] * 100, ch["baseline"])
                                   for ch in checked if not ch["passed"])
    return gate


def summary_line(levels, gate):
    parts = []
    for lv in levels:
        tok = lv.get("aggregate_output_tok_s")
        text = "C=%d %s tok/s" % (lv["concurrency"], "n/a" if tok is None else ("%.0f" % tok))
        ch = next((c for c in gate.get("checks", []) if c["concurrency"] == lv["concurrency"] and c["ratio"] is not None), None)
        if ch:
            text += " (%.0f%%)" % (ch["ratio"] * 100)
        if lv.get("failed"):
            text += " %d failed" % lv["failed"]
        parts.append(text)
    verdict = "no gate" if not gate.get("enabled") else ("gate pass" if gate["passed"] else "gate FAIL")
    return ", ".join(parts) + "; " + verdict


# ---------------------------------------------------------------------------------------------
# SVG chart

_COLORS = {"aggregate": "#0072B2", "baseline": "#7f7f7f", "per_request": "#009E73", "ttft_p50": "#D55E00",
           "ttft_p99": "#E69F00", "itl_p50": "#56B4E9", "itl_p99": "#CC79A7"}


def _esc(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"))


def _nice_max(value):
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if value <= step * exp:
            return step * exp
    return 10 * exp


def _fmt_tick(value):
    return "%d" % round(value) if abs(value - round(value)) < 1e-9 else "%g" % value


def _fmt_num(value):
    return "%.0f" % value if value >= 100 else "%.3g" % value


class _Panel(object):
    """One chart: x = concurrency on a log2 scale, y linear or log10."""

    def __init__(self, x0, y0, w, h, levels, ymax=None, ymin=None, log_y=False):
        self.x0, self.y0, self.w, self.h = x0, y0, w, h
        self.levels = sorted(levels)
        self.log_y = log_y
        lo, hi = math.log2(self.levels[0]), math.log2(self.levels[-1])
        pad = 1.0 if hi == lo else 0.12 * (hi - lo)
        self.xlo, self.xhi = lo - pad, hi + pad
        self.ymin, self.ymax = ymin, ymax

    def x(self, c):
        return self.x0 + (math.log2(c) - self.xlo) / (self.xhi - self.xlo) * self.w

    def y(self, v):
        if self.log_y:
            lv = math.log10(max(v, self.ymin))
            return self.y0 + self.h - (lv - math.log10(self.ymin)) / (math.log10(self.ymax) - math.log10(self.ymin)) * self.h
        return self.y0 + self.h - (v / self.ymax) * self.h


def _frame(p, title, ylabel, yticks):
    out = ['<text x="%.1f" y="%.1f" class="title">%s</text>' % (p.x0, p.y0 - 14, _esc(title)),
           '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="frame"/>' % (p.x0, p.y0, p.w, p.h)]
    for v in yticks:
        y = p.y(v)
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>' % (p.x0, y, p.x0 + p.w, y))
        out.append('<text x="%.1f" y="%.1f" class="tick" text-anchor="end">%s</text>' % (p.x0 - 6, y + 4, _esc(_fmt_tick(v))))
    for c in p.levels:
        x = p.x(c)
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>' % (x, p.y0, x, p.y0 + p.h))
        out.append('<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%d</text>' % (x, p.y0 + p.h + 16, c))
    out.append('<text x="%.1f" y="%.1f" class="axis" text-anchor="middle">concurrent requests</text>'
               % (p.x0 + p.w / 2, p.y0 + p.h + 34))
    out.append('<text x="%.1f" y="%.1f" class="axis" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>'
               % (p.x0 - 46, p.y0 + p.h / 2, p.x0 - 46, p.y0 + p.h / 2, _esc(ylabel)))
    return out


def _series(p, points, color, dashed=False, marker="circle", labels=False, label_above=True, line=True):
    pts = [(c, v) for c, v in points if v is not None and v > 0]
    if not pts:
        return []
    out = []
    if line and len(pts) > 1:
        path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", p.x(c), p.y(v)) for i, (c, v) in enumerate(pts))
        out.append('<path d="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>'
                   % (path, color, ' stroke-dasharray="6 4"' if dashed else ""))
    for c, v in pts:
        x, y = p.x(c), p.y(v)
        if marker == "diamond":
            out.append('<path d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z" fill="white" stroke="%s" stroke-width="2"/>' % (x, y - 6, color))
        else:
            out.append('<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s" stroke="white" stroke-width="1.5"/>' % (x, y, color))
        if labels:
            # white halo: the label stays readable where it crosses a line
            out.append('<text x="%.1f" y="%.1f" class="value" text-anchor="middle" fill="%s" stroke="white" stroke-width="3" '
                       'paint-order="stroke">%s</text>' % (x, y - 10 if label_above else y + 20, color, _esc(_fmt_num(v))))
    return out


def _legend(x, y, items):
    """items: (label, color, style) with style False (line), True (dashed line), "diamond" or "ring"."""
    out = []
    for i, (label, color, style) in enumerate(items):
        yy = y + i * 18
        if style == "diamond":
            out.append('<path d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z" fill="white" stroke="%s" stroke-width="2"/>' % (x + 11, yy - 6, color))
        elif style == "ring":
            out.append('<circle cx="%.1f" cy="%.1f" r="7" fill="none" stroke="%s" stroke-width="2"/>' % (x + 11, yy, color))
        else:
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>'
                       % (x, yy, x + 22, yy, color, ' stroke-dasharray="6 4"' if style else ""))
        out.append('<text x="%.1f" y="%.1f" class="legend">%s</text>' % (x + 28, yy + 4, _esc(label)))
    return out


def _linear_ticks(vmax):
    step = vmax / 5.0
    return [step * i for i in range(6)]


def render_chart(levels, baseline=None, min_fraction=None, title="SGLang benchmark", subtitle=""):
    """Three panels (aggregate tok/s with the baseline, per-request tok/s, latency) as a standalone SVG string."""
    levels = [lv for lv in levels if isinstance(lv.get("concurrency"), int) and lv["concurrency"] >= 1]
    width, height = 1200, 490
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Arial, '
            'sans-serif">' % (width, height, width, height),
            "<style>.title{font-size:15px;font-weight:bold;fill:#222}.tick{font-size:11px;fill:#444}.axis{font-size:12px;fill:#333}"
            ".legend{font-size:11.5px;fill:#333}.value{font-size:11px;font-weight:bold}.frame{fill:none;stroke:#999}"
            ".grid{stroke:#e3e3e3}.head{font-size:18px;font-weight:bold;fill:#111}.sub{font-size:12px;fill:#555}</style>",
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="20" y="28" class="head">%s</text>' % _esc(title),
            '<text x="20" y="48" class="sub">%s</text>' % _esc(subtitle)]
    if not levels:
        return "\n".join(head + ['<text x="20" y="90" class="axis">no measured level</text>', "</svg>"]) + "\n"
    cs = sorted(set(lv["concurrency"] for lv in levels))
    base = normalize_baseline(baseline) if baseline else {}
    by_c = dict((lv["concurrency"], lv) for lv in levels)
    body = []

    # 1. aggregate output tok/s, baseline and the gate threshold
    agg = [(c, by_c[c].get("aggregate_output_tok_s")) for c in cs]
    base_pts = [(c, base[c]) for c in cs if c in base]
    top = _nice_max(max([v or 0 for _c, v in agg] + [v for _c, v in base_pts] + [1]) * 1.15)
    p1 = _Panel(80, 100, 290, 270, cs, ymax=top)
    body += _frame(p1, "Aggregate output throughput", "output tokens/s (all requests)", _linear_ticks(top))
    if base_pts and min_fraction:
        for c, v in base_pts:
            x, y = p1.x(c), p1.y(v * min_fraction)
            body.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#b00" stroke-width="2"/>' % (x - 14, y, x + 14, y))
    # markers only: a baseline holds at its own levels, a line would invent values between them
    body += _series(p1, base_pts, _COLORS["baseline"], marker="diamond", line=False)
    body += _series(p1, agg, _COLORS["aggregate"], labels=True)
    below = [(c, v) for c, v in agg if c in base and min_fraction and v is not None and v < base[c] * min_fraction]
    for c, v in below:
        body.append('<circle cx="%.1f" cy="%.1f" r="8" fill="none" stroke="#b00" stroke-width="2"/>' % (p1.x(c), p1.y(max(v, 0))))
    legend = [("measured", _COLORS["aggregate"], False)]
    if base_pts:
        legend.append(("baseline", _COLORS["baseline"], "diamond"))
        if min_fraction:
            legend.append(("gate: %.0f%% of baseline" % (min_fraction * 100), "#b00", False))
    if below:
        legend = legend[:1] + [("below the gate", "#b00", "ring")] + legend[1:]
    body += _legend(p1.x0 + 8, p1.y0 + p1.h + 56, legend)

    # 2. per-request decode rate
    per = [(c, (by_c[c].get("per_request_output_tok_s") or {}).get("mean")) for c in cs]
    top2 = _nice_max(max([v or 0 for _c, v in per] + [1]) * 1.15)
    p2 = _Panel(480, 100, 290, 270, cs, ymax=top2)
    body += _frame(p2, "Per-request output rate", "output tokens/s per request", _linear_ticks(top2))
    body += _series(p2, per, _COLORS["per_request"], labels=True)
    body += _legend(p2.x0 + 8, p2.y0 + p2.h + 56, [("mean decode rate after the first token", _COLORS["per_request"], False)])

    # 3. latency percentiles, log scale (TTFT and ITL differ by orders of magnitude)
    series = [("TTFT p50", "ttft_ms", "p50", "ttft_p50", False), ("TTFT p99", "ttft_ms", "p99", "ttft_p99", True),
              ("ITL p50", "itl_ms", "p50", "itl_p50", False), ("ITL p99", "itl_ms", "p99", "itl_p99", True)]
    vals = [v for _l, key, q, _c, _d in series for c in cs for v in [(by_c[c].get(key) or {}).get(q)] if v]
    lo = 10 ** math.floor(math.log10(min(vals))) if vals else 1.0
    hi = 10 ** math.ceil(math.log10(max(vals) * 1.05)) if vals else 1000.0
    if hi <= lo:
        hi = lo * 10
    p3 = _Panel(880, 100, 290, 270, cs, ymin=lo, ymax=hi, log_y=True)
    ticks = []
    t = lo
    while t <= hi * 1.0001:
        ticks.append(t)
        t *= 10
    body += _frame(p3, "Latency", "milliseconds (log scale)", ticks)
    legend3 = []
    for label, key, q, color, dashed in series:
        pts = [(c, (by_c[c].get(key) or {}).get(q)) for c in cs]
        body += _series(p3, pts, _COLORS[color], dashed=dashed)
        legend3.append((label, _COLORS[color], dashed))
    body += _legend(p3.x0 + 8, p3.y0 + p3.h + 56, legend3[:2])
    body += _legend(p3.x0 + 150, p3.y0 + p3.h + 56, legend3[2:])
    return "\n".join(head + body + ["</svg>"]) + "\n"
