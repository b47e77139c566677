# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark and canary prompts, deterministic from a seed.

* ``random``: random English words (meaningless order, like bench_serving's random token ids).
* ``coding``: a synthetic but realistic Python repository with a coding task that names a function or class
  of it. ``synthetic_code`` is also the canary's needle haystack.

Token counts are approximated as characters / ``chars_per_token`` (4 by default). Standard library only.
"""

from __future__ import annotations

import random

DATASETS = ("random", "coding")
DEFAULT_CHARS_PER_TOKEN = 4.0


class BenchmarkError(ValueError):
    """Bad benchmark options; the message says what to fix."""


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
