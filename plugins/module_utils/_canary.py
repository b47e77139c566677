# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Accuracy canary: deterministic questions whose answers the collection can check.

* needle: a ``# needle: VALUE`` comment is put at several depths of a synthetic Python repository of
  several sizes (tokens approximated as characters / ``chars_per_token``); the model is asked "What is
  the value of the needle? Answer with the value only." Recall at depth is what an FP8 KV cache with
  unit scales loses first on long contexts.
* coding: small fixed Python functions, "What does f(X) return? Answer with the value only."; the
  answer is parsed as a Python literal and compared with the exact expected value.
* Every request uses temperature 0 and a fixed seed, with thinking off (``chat_template_kwargs``), so
  the answers of two deploys of the same model and settings can be compared: the answers and their
  hash are the state the next run compares against (drift).
* ``parse_run_eval`` reads the score that ``python -m sglang.test.run_eval`` prints.

Standard library only, Python 3.9+.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import threading
import warnings

from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import DEFAULT_CHARS_PER_TOKEN, synthetic_code

CHECKS = ("needle", "coding")
DEFAULT_CONTEXTS = (4096, 32768, 131072)
DEFAULT_DEPTHS = (0.1, 0.5, 0.9)
NEEDLE_QUESTION = "What is the value of the needle? Answer with the value only."
STATE_VERSION = 1
MAX_ANSWER_CHARS = 300
MAX_GRADED_CHARS = 64 * 1024
# The largest needle prompt built (64 Mi characters, about 16M tokens): past it a context size is a typo.
MAX_PROMPT_CHARS = 64 * 1024 * 1024
MAX_CHARS_PER_TOKEN = 64
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
# Run with the eval's python: exit 0 when SGLang is importable (cheap: finds the package, imports nothing).
FIND_SGLANG = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('sglang') else 3)"

# name -> (code, call, expected as a Python literal). test_canary.py runs each function to prove the answers.
CODING_QUESTIONS = (
    ("alternating_sum", "def f(xs):\n    total = 0\n    for i, x in enumerate(xs):\n        if i % 2 == 0:\n            total += x\n"
                        "        else:\n            total -= x\n    return total\n", "f([5, 3, 8, 1, 4])", "13"),
    ("reverse_long_words", "def f(s):\n    return \"-\".join(w[::-1] for w in s.split() if len(w) > 2)\n",
     "f(\"the cat sat on a mat\")", "'eht-tac-tas-tam'"),
    ("count_by_initial", "def f(words):\n    counts = {}\n    for w in words:\n        counts[w[0]] = counts.get(w[0], 0) + len(w)\n"
                         "    return sorted(counts.items())\n",
     "f([\"apple\", \"avocado\", \"banana\", \"blueberry\", \"cherry\"])", "[('a', 12), ('b', 15), ('c', 6)]"),
    ("fibonacci", "def f(n):\n    if n < 2:\n        return n\n    return f(n - 1) + f(n - 2)\n", "f(15)", "610"),
    ("popcount", "def f(n):\n    count = 0\n    while n:\n        n &= n - 1\n        count += 1\n    return count\n", "f(2024)", "7"),
    ("squares_tail", "def f(n):\n    return [x * x for x in range(n) if x % 3 != 0][-3:]\n", "f(10)", "[25, 49, 64]"),
    ("floor_division", "def f(a, b):\n    return (a // b, a % b)\n", "f(-17, 5)", "(-4, 3)"),
    ("odd_values_formatted", "def f(items):\n    return \",\".join(f\"{k}={v:03d}\" for k, v in sorted(items.items()) if v % 2)\n",
     "f({\"b\": 7, \"a\": 12, \"c\": 5})", "'b=007,c=005'"),
)


class CanaryError(ValueError):
    """Bad options; the message says what to fix."""


# ---------------------------------------------------------------------------------------------
# Prompts


def needle_value(seed, context_tokens, depth):
    """A value no model can guess, different for every (seed, size, depth): e.g. K7QX-4M2D-9PLA."""
    rng = random.Random("needle-%s-%d-%.4f" % (seed, context_tokens, depth))
    chars = "".join(rng.choice(_ALPHABET) for dummy in range(12))
    return "-".join(chars[i:i + 4] for i in (0, 4, 8))


def needle_prompt(seed, context_tokens, depth, chars_per_token=DEFAULT_CHARS_PER_TOKEN):
    """(messages, expected value, depth of the needle in the whole prompt as a fraction of its characters)."""
    intro = "Read the source code of the Python repository below. A question about it follows the code.\n\n"
    tail = "\n\n" + NEEDLE_QUESTION
    n_chars = max(200, int(context_tokens * chars_per_token) - len(intro) - len(tail) - 40)
    # One haystack per size, so the depths of one size differ only by where the needle is.
    code, _symbols = synthetic_code("haystack-%s-%d" % (seed, context_tokens), n_chars)
    value = needle_value(seed, context_tokens, depth)
    pos = int(len(code) * depth)
    line_start = code.rfind("\n", 0, pos) + 1
    code = code[:line_start] + "# needle: %s\n" % value + code[line_start:]
    prompt = intro + code + tail
    at = len(intro) + line_start
    return [{"role": "user", "content": prompt}], value, at / float(len(prompt))


def coding_prompt(code, call):
    return [{"role": "user", "content": "Here is a Python function:\n\n```python\n%s```\n\nWhat does `%s` return? Answer with the "
                                        "value only, written as a Python literal." % (code, call)}]


def check_options(checks, contexts=DEFAULT_CONTEXTS, depths=DEFAULT_DEPTHS, chars_per_token=DEFAULT_CHARS_PER_TOKEN):
    """CanaryError naming the option when the questions cannot be built from these (before any request is sent)."""
    for check in checks:
        if check not in CHECKS:
            raise CanaryError("unknown check %r: choose from %s" % (check, ", ".join(CHECKS)))
    if isinstance(chars_per_token, bool) or not isinstance(chars_per_token, (int, float)) or \
            not 0 < chars_per_token <= MAX_CHARS_PER_TOKEN:
        raise CanaryError("chars_per_token must be a number in (0, %d], got %r" % (MAX_CHARS_PER_TOKEN, chars_per_token))
    if "needle" not in checks:
        return
    if not contexts or not depths:
        raise CanaryError("needle_contexts and needle_depths must not be empty when the needle check runs")
    for ctx in contexts:
        if isinstance(ctx, bool) or not isinstance(ctx, int) or ctx < 256:
            raise CanaryError("needle context sizes are token counts >= 256, got %r" % (ctx,))
        if ctx * chars_per_token > MAX_PROMPT_CHARS:
            raise CanaryError("needle context %d tokens makes a prompt of %d characters (chars_per_token %g), more than %d: "
                              "use a smaller context" % (ctx, ctx * chars_per_token, chars_per_token, MAX_PROMPT_CHARS))
    for depth in depths:
        if isinstance(depth, bool) or not isinstance(depth, (int, float)) or not 0.0 <= depth <= 1.0:
            raise CanaryError("needle depths are fractions between 0 and 1, got %r" % (depth,))


def build_items(checks, seed=0, contexts=DEFAULT_CONTEXTS, depths=DEFAULT_DEPTHS, chars_per_token=DEFAULT_CHARS_PER_TOKEN,
                max_model_len=None):
    """Every question to ask: [{id, check, messages, expected, ...}], and warnings for skipped sizes."""
    check_options(checks, contexts, depths, chars_per_token)
    items, warnings = [], []
    if "needle" in checks:
        for ctx in contexts:
            if max_model_len and ctx >= max_model_len:
                warnings.append("needle context %d tokens skipped: the server's context length is %d" % (ctx, max_model_len))
                continue
            for depth in depths:
                messages, value, at = needle_prompt(seed, ctx, float(depth), chars_per_token)
                items.append({"id": "needle-%d-%.2f" % (ctx, depth), "check": "needle", "messages": messages, "expected": value,
                              "context_tokens": ctx, "depth": float(depth), "prompt_depth": round(at, 4),
                              "prompt_chars": len(messages[0]["content"])})
    if "coding" in checks:
        for name, code, call, expected in CODING_QUESTIONS:
            items.append({"id": "coding-" + name, "check": "coding", "messages": coding_prompt(code, call), "expected": expected,
                          "call": call})
    return items, warnings


# ---------------------------------------------------------------------------------------------
# Grading


def _strip_answer(text):
    """The last closed ``` fence's body (its language tag dropped), else the whole text. Split, not a regex: a lazy
    body after a greedy tag backtracks quadratically on an unclosed fence (64 KiB took minutes)."""
    text = (text or "").strip()
    parts = text.split("```")
    if len(parts) < 3:
        return text
    # fences pair up in order: parts 1, 3, 5... are bodies; the last one closed is the last odd index before the end
    body = parts[len(parts) - 2 if len(parts) % 2 else len(parts) - 3]
    return re.sub(r"\A[a-zA-Z0-9_+-]*\n?", "", body, count=1).strip()


def value_matches(answer, expected):
    """The needle value is the whole answer (quotes, backticks and a final period aside) or a standalone token in it."""
    text = _strip_answer(answer)
    bare = text.strip().strip("`'\"").rstrip(".").strip().strip("`'\"")
    if bare.upper() == expected.upper():
        return True
    return re.search(r"(?<![A-Za-z0-9-])%s(?![A-Za-z0-9-])" % re.escape(expected), text, re.I) is not None


def _candidates(answer):
    text = _strip_answer(answer)
    out = [text]
    ticks = re.findall(r"`([^`\n]+)`", text)
    if ticks:
        out.append(ticks[-1])
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if lines:
        out.append(lines[-1])
    m = re.search(r"(?:returns?|is|=)\s*:?\s*(.+?)\s*\.?\s*$", text, re.S)
    if m:
        out.append(m.group(1))
    seen, uniq = set(), []
    for c in out:
        c = c.strip().rstrip(".").strip()
        if c and c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def literal_matches(answer, expected):
    """The answer is the expected Python value (parsed as a literal; an unquoted string also counts)."""
    want = ast.literal_eval(expected)
    for cand in _candidates(answer):
        try:
            with warnings.catch_warnings():
                # the model's text is not Python: "invalid escape sequence" and the like are no news
                warnings.simplefilter("ignore")
                got = ast.literal_eval(cand)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            got = cand if isinstance(want, str) else None
        if got is not None and type(got) is type(want) and got == want:
            return True
    return False


def grade(item, answer):
    # the questions want a few characters; a longer answer is graded on its start (and bounded work)
    answer = (answer or "")[:MAX_GRADED_CHARS]
    if item["check"] == "needle":
        return value_matches(answer, item["expected"])
    return literal_matches(answer, item["expected"])


# ---------------------------------------------------------------------------------------------
# Running


def payload_for(messages, model, seed, max_tokens, disable_thinking=True, extra_body=None):
    body = {"model": model, "messages": messages, "max_tokens": int(max_tokens), "temperature": 0.0, "top_p": 1.0, "seed": seed,
            "stream": True, "stream_options": {"include_usage": True}}
    if disable_thinking:
        # Qwen3-style templates: answer directly, no reasoning block (the answer must be in content).
        body["chat_template_kwargs"] = {"enable_thinking": False}
    body.update(extra_body or {})
    return body


def ask_all(client, items, model, seed=0, max_tokens=64, parallel=2, disable_thinking=True, extra_body=None, timeout=None):
    """Ask every item (parallel workers); fills item['answer'], ['correct'], ['error'], ['prompt_tokens']."""
    lock = threading.Lock()
    queue = list(range(len(items)))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
            item = items[i]
            res = client.chat(payload_for(item["messages"], model, seed, max_tokens, disable_thinking, extra_body), keep_text=True,
                              timeout=timeout)
            item["prompt_tokens"] = res["prompt_tokens"]
            item["latency_s"] = round(res["latency_s"], 3) if res["latency_s"] is not None else None
            if not res["ok"]:
                item["answer"], item["correct"], item["error"] = None, False, res["error"]
                continue
            text = (res["text"] or "").strip()
            if not text and res["reasoning_chunks"]:
                item["answer"], item["correct"] = "", False
                item["error"] = {"kind": "no_content", "message": "the model answered only in reasoning_content (thinking): keep "
                                                                  "disable_thinking on, or raise max_tokens"}
                continue
            item["answer"] = text[:MAX_ANSWER_CHARS]
            item["correct"] = grade(item, text)
            item["error"] = None

    threads = [threading.Thread(target=worker, name="canary-%d" % n) for n in range(max(1, min(parallel, len(items))))]
    for t in threads:
        t.daemon = True
        t.start()
    for t in threads:
        t.join()
    return items


def score_check(items, check, threshold):
    mine = [it for it in items if it["check"] == check]
    correct = sum(1 for it in mine if it.get("correct"))
    total = len(mine)
    score = correct / float(total) if total else 0.0
    errors = {}
    for it in mine:
        if it.get("error"):
            errors[it["error"]["kind"]] = errors.get(it["error"]["kind"], 0) + 1
    public = []
    for it in mine:
        row = dict((k, v) for k, v in it.items() if k != "messages")
        public.append(row)
    return {"enabled": True, "passed": total > 0 and score >= threshold, "score": round(score, 4), "threshold": threshold,
            "correct": correct, "total": total, "errors": errors, "items": public}


# A question the model answered, if only in its reasoning: graded (wrong), not a request failure.
MODEL_ANSWER_KINDS = ("no_content",)


def request_failure(items):
    """{kind, message, count, total} when some question got no answer from the chat endpoint (HTTP error, refused, a
    stream that is not a chat stream...), else None. Such a run says nothing about the model: it is never graded as
    wrong answers, never compared and never kept as the last good answers."""
    failed = [it for it in items if it.get("error") and it["error"]["kind"] not in MODEL_ANSWER_KINDS]
    if not failed:
        return None
    first = failed[0]["error"]
    return {"kind": first["kind"], "message": "the chat endpoint did not answer %d of %d questions (%s: %s)"
            % (len(failed), len(items), first["kind"], first["message"]), "count": len(failed), "total": len(items)}


def answers_of(items):
    """{id: answer} (None for failed requests): what the next run compares with."""
    return dict((it["id"], it.get("answer")) for it in items)


def answers_hash(answers):
    return hashlib.sha256(json.dumps(answers, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def compare(previous, answers):
    """Drift against the last good state ({hash, answers}); tolerant of a missing or foreign state."""
    digest = answers_hash(answers)
    out = {"compared": False, "previous_hash": None, "hash": digest, "drift": False, "changed": [], "added": [], "removed": []}
    if not isinstance(previous, dict) or not isinstance(previous.get("answers"), dict):
        return out
    prev = previous["answers"]
    out["compared"] = True
    out["previous_hash"] = previous.get("hash") if isinstance(previous.get("hash"), str) else answers_hash(prev)
    out["changed"] = sorted(k for k in answers if k in prev and prev[k] != answers[k])
    out["added"] = sorted(k for k in answers if k not in prev)
    out["removed"] = sorted(k for k in prev if k not in answers)
    out["drift"] = bool(out["changed"])
    return out


def state_of(answers, items, model):
    return {"version": STATE_VERSION, "hash": answers_hash(answers), "model": model, "answers": answers,
            "correct": dict((it["id"], bool(it.get("correct"))) for it in items)}


# ---------------------------------------------------------------------------------------------
# sglang.test.run_eval

_SCORE_RE = re.compile(r"^Score:\s*([0-9]*\.?[0-9]+)\s*$", re.M)
_REPEAT_RE = re.compile(r"^Repeat:\s*(\d+),\s*mean:\s*([0-9]*\.?[0-9]+)\s*$", re.M)
_ACCURACY_RE = re.compile(r"^Accuracy:\s*([0-9]*\.?[0-9]+)\s*$", re.M)
_LATENCY_RE = re.compile(r"^(?:Total latency|Mean latency|Latency):\s*([0-9]*\.?[0-9]+)\s*s\s*$", re.M)
_THROUGHPUT_RE = re.compile(r"^Output throughput:\s*([0-9]*\.?[0-9]+)\s*token/s\s*$", re.M)


def parse_run_eval(text):
    """{score, repeat, latency_s, output_tok_s} from run_eval's (or few_shot_gsm8k's) output; score None when absent."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = {"score": None, "repeat": None, "latency_s": None, "output_tok_s": None}
    rep = _REPEAT_RE.findall(text)
    score = _SCORE_RE.findall(text)
    acc = _ACCURACY_RE.findall(text)
    if rep:
        out["repeat"], out["score"] = int(rep[-1][0]), float(rep[-1][1])
    elif score:
        out["score"] = float(score[-1])
    elif acc:
        out["score"] = float(acc[-1])
    lat = _LATENCY_RE.findall(text)
    if lat:
        out["latency_s"] = float(lat[-1])
    thr = _THROUGHPUT_RE.findall(text)
    if thr:
        out["output_tok_s"] = float(thr[-1])
    return out


def run_eval_argv(python, base, eval_name="gsm8k", num_examples=200, num_threads=64, model=None, extra_args=None):
    argv = [python, "-m", "sglang.test.run_eval", "--base-url", base, "--eval-name", eval_name, "--num-examples", str(num_examples),
            "--num-threads", str(num_threads)]
    if model:
        argv += ["--model", model]
    return argv + list(extra_args or [])


def summary_line(checks, drift):
    parts = []
    for name in ("needle", "coding", "run_eval"):
        c = checks.get(name)
        if not c or not c.get("enabled"):
            continue
        if name == "run_eval":
            parts.append("%s %s" % (c.get("eval_name", "eval"), "n/a" if c.get("score") is None else "%.3f" % c["score"]))
        else:
            parts.append("%s %d/%d" % (name, c["correct"], c["total"]))
        if not c.get("passed"):
            parts[-1] += " FAIL"
    if drift.get("compared"):
        parts.append("drift: %d changed" % len(drift["changed"]) if drift["drift"] else "no drift")
    else:
        parts.append("first run")
    return ", ".join(parts)
