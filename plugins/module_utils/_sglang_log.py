# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Streaming audit of SGLang server logs.

The input is read as bytes in chunks and split into lines here, so memory stays constant: a line
longer than ``max_line_bytes`` keeps its head and the rest is only counted.

Most lines of a long-running server are decode/prefill/HTTP lines that matter to nobody. The scan
therefore never looks at every line: each interesting line must contain one of a set of plain
literals (built-in keys plus the plain-text runs of each rule's pattern). For every literal the
scanner picks its rarest byte (from a byte-frequency sample of the input), finds that byte with
``bytes.find`` (memchr) and probes the literal around it with ``startswith``; literals made of
common bytes only are searched whole. Only lines that pass are decoded and parsed; lines holding
ANSI codes are checked again with the codes removed. Line numbers of a file are counted afterwards,
and only up to the last evidence line.

Parsing understands the prefixes seen in real logs: ``[date time DPn PPn TPn EPn]``, time-only
``[HH:MM:SS TPn]``, ``[gpu=N]``, ``LEVEL file.py:N:`` tags, and outer prefixes added by journald,
container runtimes, Ray and docker compose; ANSI colour codes; tqdm bars with a record glued to
their end; ``\\r``-joined progress updates; logs flattened with `` \u23ce `` separators.
"""

from __future__ import annotations

import re
import subprocess
import tempfile

from ansible_collections.llmops.sglang.plugins.module_utils._sglang_log_rules import DEFAULT_RULES, SEVERITIES

CHUNK_BYTES = 1 << 20
DEFAULT_MAX_LINE_BYTES = 256 * 1024
# Caps on what the result may hold, so a pathological input cannot grow it without bound.
MAX_KV_POOLS = 256
MAX_RANKS = 1024
EVIDENCE_CHARS = 500
# A traceback still open after this many prefixed lines of other ranks is treated as cut off.
TRACEBACK_INTERLEAVE_LIMIT = 200
# Occurrences per MiB of a literal's rarest byte above which the literal is searched whole: a probe
# (memchr, then startswith) costs about 0.2 us, a whole-literal search about 0.5 ms per MiB.
PROBE_LIMIT_PER_MIB = 2500
# Re-sample byte frequencies after this many bytes (sooner when the plan searches many literals
# whole, as after a startup burst), on blocks at least PLAN_MIN_BYTES long.
REPLAN_BYTES = 16 << 20
REPLAN_EXPENSIVE_BYTES = 2 << 20
PLAN_MIN_BYTES = 64 << 10
# Lines parsed one by one after a traceback ends or after a chain / "Exception ignored in" marker; a
# marker only applies to a traceback that starts within this window.
FOLLOW_LINES = 4
# A plan with more whole-literal searches than this counts as expensive (re-sampled sooner).
CHEAP_FIND_LITERALS = 2

PHASES = ("starting", "loading_weights", "kv_pool_allocated", "capturing_cuda_graphs", "warming_up", "ready")
FATAL_CLASSES = ("none", "cuda_oom", "no_kernel_image", "python_exception", "truncated_traceback", "port_in_use",
                 "cli_argument_error")

TRACEBACK_HEADER = "Traceback (most recent call last)"

# Literals every interesting line contains (on top of one literal per rule).
BUILTIN_LITERALS = (
    "KV cache",                 # Using FP8 KV cache / Using KV cache dtype / Setting KV cache dtype
    "Cache is allocated",       # KV and Mamba pools
    "server_args",
    "max_total_num_tokens=",
    "tp_size=",
    "ready to roll",
    TRACEBACK_HEADER,
    "Exception ignored in",
    "above exception",          # chained tracebacks
    "Load weight",
    "Capture ",
    "Memory pool end",
    "Uvicorn running",
    "Error",
    "Exception",
    "CUDA error",
    "Total. latency",           # offline benchmark finished (bench_one_batch)
    "Benchmark Result",         # offline throughput benchmark finished
    "Warmup ...",               # bench_one_batch goes on
    "Benchmark ...",
    "SGLang version",
    "sglang==",
    "bind on address",          # uvicorn cannot listen on the server port
    "ddress already in use",
    "error: unrecognized arguments",    # argparse rejected the command line
    "error: argument -",
    "error: the following arguments are required",
)

_ANSI_PATTERN = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])"
_ANSI_RE = re.compile(_ANSI_PATTERN)
_ANSI_BYTES_RE = re.compile(_ANSI_PATTERN.encode("ascii"))
# Physical-line pieces that hold separate records: tqdm \r updates and flattened logs.
_RECORD_SPLIT_RE = re.compile("\r| ?\u23ce ?")
# A record glued to the end of a progress bar (no whitespace before its prefix).
_GLUED_RE = re.compile(r"(?<=\S)(?=\[(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?: [A-Z_]+\d+)*\] )"
                       r"|(?<=\S)(?=Traceback \(most recent call last\))")
_OUTER_RE = re.compile(
    r"(?:"
    # container runtime RFC 3339 (nano) stamp, optionally followed by journald's host and ident
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?(?: [^\s\[]+ [^\s:\[]+(?:\[\d+\])?:)? "
    # journald/syslog short format
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)? [^\s\[]+ [^\s:\[]+(?:\[\d+\])?: "
    # Ray actor
    r"|\(\w+ pid=\d+(?:, ip=[\d.]+)?\) "
    # docker compose
    r"|[\w][\w.-]*\s*\| "
    r")")
_SGL_PREFIX_RE = re.compile(
    r"\[(?:(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)|gpu=(?P<gpu>\d+))\] ?")
_LEVEL_TAG_RE = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w./-]+\.py:\d+: ")
_RANK_PART_RE = re.compile(r"([A-Z_]+)(\d+)")

_DUMP_KV_RE = re.compile(r"[(,{]\s*'?kv_cache_dtype'?\s*[=:]\s*'([^']*)'")
_DUMP_MODEL_RE = re.compile(r"[(,{]\s*'?model_path'?\s*[=:]\s*'([^']*)'")
_DUMP_TP_RE = re.compile(r"[(,{]\s*'?tp_size'?\s*[=:]\s*(\d+)")
_TP_FIELD_RE = re.compile(r"\btp_size=(\d+)")
_MAX_TOKENS_RE = re.compile(r"max_total_num_tokens=(\d+)(?:,|\s*$)")
_EFFECTIVE_RE = re.compile(r"(?:Using KV cache dtype: |KV Cache is allocated\. dtype: )(torch\.\w+)")
_KV_POOL_RE = re.compile(
    r"KV Cache is allocated\.(?:\s*dtype: (?P<dtype>torch\.\w+),)?(?:\s*#tokens: (?P<tokens>\d+),)?"
    r"\s*(?:K size: (?P<k>[\d.]+) ?GB, V size: (?P<v>[\d.]+) ?GB|KV size: (?P<kv>[\d.]+) ?GB)?")
_MAMBA_RE = re.compile(
    r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<size>\d+), conv_state size: (?P<conv>[\d.]+) ?GB, "
    r"ssm_state size: (?P<ssm>[\d.]+) ?GB(?:.*?intermediate_ssm_state_cache size: (?P<issm>[\d.]+) ?GB)?"
    r"(?:.*?intermediate_conv_window_cache size: (?P<iconv>[\d.]+) ?GB)?")
_CAPTURE_RE = re.compile(r"Capture [\w ]*graph begin")
_VERSION_RE = re.compile(r"(?:SGLang version|sglang==)[:=\s]*v?(\d+\.\d+(?:\.\d+)?(?:[.-]?(?:post|rc|dev)\d+)?(?:\+[\w.]+)?)")
# Startup failures that are no Python exception: the port is taken (uvicorn's "[Errno 98] error while attempting to
# bind on address (...): address already in use") or argparse rejected the command line. Case-sensitive, so that
# the literals above always select the lines these match.
_PORT_RE = re.compile(r"error while attempting to bind on address|[Aa]ddress already in use")
_ARGPARSE_RE = re.compile(r"\berror: (?:unrecognized arguments:|argument -[-\w/]+:|the following arguments are required:)")
_EXCEPTION_LINE_RE = re.compile(r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::\s|:?$)")
# Whitespace plus what invalid UTF-8 decodes to: neither may hide a message's start.
_BLANK = " \t\r\n\x00\ufffd"
_CHAIN_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")
_OFFLINE_AGAIN_MARKERS = ("Warmup ...", "Benchmark ...")


class LogAuditError(ValueError):
    """Bad rules or waivers; the message names the cause and the fix."""


# ----------------------------------------------------------------------------------------------
# Rules


def _required_literals(pattern):
    """Return, per top-level alternative of pattern, the plain-text runs a match must contain.

    The result is a list (one entry per alternative) of lists of runs, longest first. Returns None
    when some alternative has no run of two or more characters (the rule is then checked on every line).
    """
    if pattern.startswith("(?") and not pattern.startswith(("(?:", "(?P", "(?=", "(?!", "(?<")):
        return None  # inline flags (e.g. case-insensitive) make literals useless
    branches, depth, cur, i = [], 0, [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            cur.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            cur.append(pattern[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "|" and depth == 0:
            branches.append(cur)
            cur = []
        else:
            cur.append(c)
        i += 1
    branches.append(cur)
    alternatives = []
    for tokens in branches:
        runs, run, depth = [], "", 0
        for n, tok in enumerate(tokens):
            nxt = tokens[n + 1] if n + 1 < len(tokens) else ""
            if tok == "(":
                depth += 1
            if depth or tok in ("(", ")"):
                if tok == ")":
                    depth -= 1
                runs.append(run)
                run = ""
                continue
            char = None
            if len(tok) == 1 and tok not in ".^$*+?{}[]|":
                char = tok
            elif len(tok) == 2 and tok[0] == "\\" and not tok[1].isalnum():
                char = tok[1]
            if char is None or nxt in ("?", "*") or nxt.startswith("{"):
                runs.append(run)  # a class, an escape or an optional character ends the run
                run = ""
                continue
            run += char
            if nxt == "+":
                runs.append(run)
                run = ""
        runs.append(run)
        runs = sorted(set(r for r in runs if len(r) >= 2), key=len, reverse=True)
        if not runs:
            return None
        alternatives.append(runs)
    return alternatives


class _Rule(object):
    __slots__ = ("id", "severity", "pattern", "description", "fix", "regex", "literals")

    def __init__(self, spec):
        self.id = spec["id"]
        self.severity = spec["severity"]
        self.pattern = spec["pattern"]
        self.description = spec.get("description") or ""
        self.fix = spec.get("fix") or ""
        self.regex = re.compile(self.pattern)
        self.literals = _required_literals(self.pattern)


def build_rules(rules=None):
    """Merge user rules into the defaults (same id overrides its fields, a new id adds a rule)."""
    merged = [dict(r) for r in DEFAULT_RULES]
    index = dict((r["id"], n) for n, r in enumerate(merged))
    for n, user in enumerate(rules or []):
        if not isinstance(user, dict):
            raise LogAuditError("rules[%d] must be a dict with id, severity, pattern, description and fix, got %r" % (n, user))
        rid = user.get("id")
        if not isinstance(rid, str) or not rid.strip():
            raise LogAuditError("rules[%d] has no id: give every rule a non-empty string id" % n)
        unknown = sorted(set(user) - {"id", "severity", "pattern", "description", "fix"})
        if unknown:
            raise LogAuditError("rule %r has unknown keys %s: use only id, severity, pattern, description, fix" % (rid, ", ".join(unknown)))
        if rid in index:
            merged[index[rid]].update(user)
        else:
            missing = [k for k in ("severity", "pattern") if k not in user]
            if missing:
                raise LogAuditError("new rule %r lacks %s: a rule that does not override a default needs severity and pattern"
                                    % (rid, " and ".join(missing)))
            index[rid] = len(merged)
            merged.append(dict(user))
    compiled = []
    for spec in merged:
        if spec.get("severity") not in SEVERITIES:
            raise LogAuditError("rule %r has severity %r: use one of %s" % (spec["id"], spec.get("severity"), ", ".join(SEVERITIES)))
        if not isinstance(spec.get("pattern"), str) or not spec["pattern"]:
            raise LogAuditError("rule %r has no pattern: give a non-empty regular expression" % spec["id"])
        try:
            compiled.append(_Rule(spec))
        except re.error as exc:
            raise LogAuditError("rule %r: pattern %r is not a valid regular expression (%s)" % (spec["id"], spec["pattern"], exc))
    return compiled


def build_waivers(allow=None, rules=None):
    """Map rule id -> reason; every waiver needs a known rule and a non-empty reason."""
    known = set(r.id for r in rules) if rules is not None else None
    waivers = {}
    for n, item in enumerate(allow or []):
        if not isinstance(item, dict):
            raise LogAuditError("allow[%d] must be a dict with rule and reason, got %r" % (n, item))
        rid, reason = item.get("rule"), item.get("reason")
        if not isinstance(rid, str) or not rid:
            raise LogAuditError("allow[%d] has no rule: name the rule id to waive" % n)
        if not isinstance(reason, str) or not reason.strip():
            raise LogAuditError("allow[%d] waives %r without a reason: say why the finding is acceptable" % (n, rid))
        unknown = sorted(set(item) - {"rule", "reason"})
        if unknown:
            raise LogAuditError("allow[%d] has unknown keys %s: use only rule and reason" % (n, ", ".join(unknown)))
        if known is not None and rid not in known:
            raise LogAuditError("allow[%d] waives unknown rule %r: known rules are %s" % (n, rid, ", ".join(sorted(known))))
        waivers[rid] = reason.strip()
    return waivers


def prefilter_literals(rules=None):
    """The literals a line must contain to be parsed (None in the list: a rule that needs every line)."""
    lits = list(BUILTIN_LITERALS)
    for rule in build_rules(rules):
        if rule.literals is None:
            lits.append(None)
        else:
            lits.extend(runs[0] for runs in rule.literals)
    return lits


# ----------------------------------------------------------------------------------------------
# Helpers


def _gb(value):
    return float(value) if value is not None else None


def _rank_sort_key(rank):
    return [(name, int(num)) for name, num in _RANK_PART_RE.findall(rank)] or [(rank, 0)]


def _classify(text):
    low = text.lower()
    if "out of memory" in low or "outofmemoryerror" in low:
        return "cuda_oom"
    if "no kernel image is available" in low:
        return "no_kernel_image"
    return "python_exception"


def _minimal_alternatives(alternatives):
    """Drop alternatives (lists of runs a line must all contain) implied by a kept single literal."""
    singles = []
    for runs in sorted((a for a in alternatives if len(a) == 1), key=lambda a: len(a[0])):
        if not any(k in runs[0] for k in singles):
            singles.append(runs[0])
    kept = [[lit] for lit in singles]
    for runs in alternatives:
        if len(runs) > 1 and not any(k in r for r in runs for k in singles) and runs not in kept:
            kept.append(runs)
    return kept


# ----------------------------------------------------------------------------------------------
# The auditor


class LogAuditor(object):
    """Feed bytes with feed(), then call finish() once for the result dict.

    Line numbers are counted while scanning unless ``line_counter`` is given: a callable that maps
    a sorted list of byte offsets of the input to their 1-based line numbers (for a file, a second
    read up to the last offset needed). Only evidence and fatal lines need one, so a long log whose
    findings all sit near its start is never counted to its end.
    """

    def __init__(self, rules=None, allow=None, max_evidence=3, max_line_bytes=DEFAULT_MAX_LINE_BYTES, line_counter=None):
        if isinstance(max_evidence, bool) or not isinstance(max_evidence, int) or max_evidence < 0:
            raise LogAuditError("max_evidence must be an integer >= 0, got %r" % (max_evidence,))
        if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes < 1024:
            raise LogAuditError("max_line_bytes must be an integer >= 1024, got %r" % (max_line_bytes,))
        self._rules = build_rules(rules)
        self._waivers = build_waivers(allow, self._rules)
        self._max_evidence = max_evidence
        self._max_line = max_line_bytes
        self._line_counter = line_counter
        alternatives = [[lit] for lit in BUILTIN_LITERALS]
        self._scan_all = False
        for rule in self._rules:
            if rule.literals is None:
                self._scan_all = True
            else:
                alternatives.extend(rule.literals)
        # each entry: the runs (bytes) one of which a line must hold for this alternative to match
        self._alternatives = [[r.encode("utf-8") for r in runs] for runs in _minimal_alternatives(alternatives)]
        self._groups = None         # byte -> literals selected by that byte
        self._find_literals = []    # literals searched whole
        self._plan_size = 0
        self._since_plan = 0
        # stream state
        self._offset = 0            # input offset of the next byte fed
        self._pending = b""         # unterminated line carried to the next chunk
        self._pending_at = 0
        self._skipping = False      # inside the dropped tail of an over-long line
        self._lineno = 1            # line of the next byte (only when counting while scanning)
        self._follow = 0            # lines still to parse one by one
        self._marker_left = 0       # lines a chain / ignored marker stays valid
        self._inspected = 0
        self._truncated = 0
        self._dropped = 0
        self._finished = None
        self._hits = {}
        # traceback state
        self._tb = None
        self._tb_seq = 0
        self._last_chain = None
        self._chain_pending = None
        self._ignored_pending = False
        self._offline_done = False
        self._starts = 0
        self._reset_facts()

    # -- facts ---------------------------------------------------------------------------------

    def _reset_facts(self):
        self.fp8_scale_warning = False
        self.kv_cache_dtype_configured = None
        self.kv_dtype_effective = None
        self.dump_tp_size = None
        self.other_tp_size = None
        self.model_path = None
        self.max_total_num_tokens = None
        self.kv_pools = []
        self.kv_pools_dropped = 0
        self.mamba_pool = None
        self.ready = False
        self.fatal = None
        self.sglang_version = None
        self.ranks_seen = set()
        self.phase = 0              # index into PHASES

    def _progressed(self):
        return self.phase > 0 or self.ready or self.fatal is not None or bool(self.kv_pools)

    def _advance(self, phase):
        idx = PHASES.index(phase)
        if idx > self.phase:
            self.phase = idx

    # -- streaming -----------------------------------------------------------------------------

    def feed(self, data):
        """Audit the next piece of the input (bytes of any size; lines may span calls)."""
        if not data:
            return
        if self._finished is not None:
            raise LogAuditError("feed() after finish()")
        base = self._offset
        self._offset += len(data)
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self._dropped += len(data)
                return
            self._dropped += nl
            self._skipping = False
            self._lineno += 1
            data = data[nl + 1:]
            base += nl + 1
            if not data:
                return
        last = data.rfind(b"\n")
        if last < 0:
            if not self._pending:
                self._pending_at = base
            self._hold(self._pending + data)
            return
        start = 0
        if self._pending:
            # the line carried over from the previous chunk ends here: parse it alone, then the chunk in place
            start = data.find(b"\n") + 1
            line = self._pending + data[:start]
            self._pending = b""
            self._scan(line, 0, len(line), self._pending_at)
        if start <= last:
            self._scan(data, start, last + 1, base)
        self._pending_at = base + last + 1
        self._hold(data[last + 1:])

    def _hold(self, rest):
        """Keep an unterminated line for the next chunk; past max_line_bytes parse its head and drop the rest."""
        if len(rest) <= self._max_line:
            self._pending = rest
            return
        self._scan(rest, 0, self._max_line, self._pending_at)
        self._truncated += 1
        self._dropped += len(rest) - self._max_line
        self._skipping = True
        self._pending = b""

    def finish(self):
        """End of input: returns the result dict (the same one on later calls)."""
        if self._finished is None:
            if self._pending:
                self._scan(self._pending, 0, len(self._pending), self._pending_at)
                self._pending = b""
            if self._tb is not None:
                self._close_traceback(None)
            self._finished = self._result()
        return self._finished

    # -- block scan ----------------------------------------------------------------------------

    def _plan(self, block, start, end):
        """Choose, per alternative, the rarest byte to look for (from a sample of this block)."""
        size = end - start
        step = max(size // 4, 1)
        sample = b"".join(block[p:p + 8192] for p in range(start, end, step))
        scale = float(1 << 20) / max(len(sample), 1)
        freq = {}

        def rate(byte):
            # occurrences per MiB: each costs one probe
            if byte not in freq:
                freq[byte] = sample.count(bytes((byte,))) * scale
            return freq[byte]

        groups, finds = {}, []
        for runs in self._alternatives:
            # any run of the alternative will do: take the one holding the rarest byte
            byte, lit = min(((min(set(r), key=rate), r) for r in runs), key=lambda bl: rate(bl[0]))
            if rate(byte) > PROBE_LIMIT_PER_MIB:
                finds.append(runs[0])  # searched whole: the longest run skips fastest
                continue
            offsets = tuple(i for i, b in enumerate(lit) if b == byte)
            groups.setdefault(bytes((byte,)), []).append((lit, offsets))
        self._groups = groups
        self._find_literals = finds
        self._plan_size = size
        self._since_plan = 0

    def _candidates(self, block, start, end):
        """Offsets of line starts in [start, end) whose line head (max_line_bytes) holds a literal."""
        found = set()
        rfind, find, startswith, cap = block.rfind, block.find, block.startswith, self._max_line
        for needle, entries in self._groups.items():
            pos = find(needle, start, end)
            while pos >= 0:
                hit = -1
                for lit, offsets in entries:
                    for k in offsets:
                        if pos - k >= start and startswith(lit, pos - k, end):
                            hit = pos - k
                            break
                    if hit >= 0:
                        break
                if hit < 0:
                    pos = find(needle, pos + 1, end)
                    continue
                s = rfind(b"\n", start, hit) + 1
                if s < start:
                    s = start
                if hit + len(lit) - s > cap:
                    # past the head of an over-long line; another literal may still fit
                    pos = find(needle, pos + 1, end)
                    continue
                found.add(s)
                e = find(b"\n", pos, end)
                if e < 0:
                    break
                pos = find(needle, e, end)
        for lit in self._find_literals:
            pos = find(lit, start, end)
            while pos >= 0:
                s = rfind(b"\n", start, pos) + 1
                if s < start:
                    s = start
                if pos + len(lit) - s <= cap:
                    found.add(s)
                e = find(b"\n", pos, end)
                if e < 0:
                    break
                pos = find(lit, e, end)
        # a colour code may split a literal: check such lines again without the codes
        pos = find(b"\x1b", start, end)
        while pos >= 0:
            s = rfind(b"\n", start, pos) + 1
            if s < start:
                s = start
            e = find(b"\n", pos, end)
            if e < 0:
                e = end
            if s not in found and pos - s < cap:
                clean = _ANSI_BYTES_RE.sub(b"", block[s:min(e, s + cap)])
                if any(r in clean for runs in self._alternatives for r in runs):
                    found.add(s)
            pos = find(b"\x1b", e, end)
        return sorted(found)

    def _scan(self, block, start, end, base):
        """Parse the interesting lines of block[start:end]; block[0] is at input offset base."""
        size = end - start
        if self._groups is None or (size >= PLAN_MIN_BYTES and (
                self._plan_size < PLAN_MIN_BYTES or self._since_plan >= REPLAN_BYTES
                or (len(self._find_literals) > CHEAP_FIND_LITERALS and self._since_plan >= REPLAN_EXPENSIVE_BYTES))):
            self._plan(block, start, end)
        self._since_plan += size
        starts = None if self._scan_all else self._candidates(block, start, end)
        find, count, cap = block.find, block.count, self._max_line
        counting = self._line_counter is None
        lineno, counted = self._lineno, start
        pos, idx = start, 0
        while pos < end:
            if starts is not None and self._tb is None and not self._follow:
                # nothing pending: jump to the next candidate line
                while idx < len(starts) and starts[idx] < pos:
                    idx += 1
                if idx >= len(starts):
                    break
                pos = starts[idx]
                idx += 1
            elif self._follow:
                self._follow -= 1
            e = find(b"\n", pos, end)
            if e < 0:
                e = end
            if counting:
                lineno += count(b"\n", counted, pos)
                counted = pos
                loc = lineno
            else:
                loc = base + pos
            if e - pos > cap:
                self._truncated += 1
                self._dropped += e - pos - cap
                raw = block[pos:pos + cap]
            else:
                raw = block[pos:e]
            self._inspected += 1
            self._line(raw, loc)
            pos = e + 1
        if counting:
            self._lineno = lineno + count(b"\n", counted, end)

    # -- line and record parsing ---------------------------------------------------------------

    def _line(self, raw, loc):
        if self._marker_left:
            self._marker_left -= 1
            if not self._marker_left:
                self._chain_pending = None
                self._ignored_pending = False
        text = raw.decode("utf-8", "replace")
        if "\x1b" in text:
            text = _ANSI_RE.sub("", text)
        parts = _RECORD_SPLIT_RE.split(text) if ("\r" in text or "\u23ce" in text) else (text,)
        for part in parts:
            if "[" in part or "Traceback" in part:
                for rec in _GLUED_RE.split(part):
                    self._record(rec, loc)
            else:
                self._record(part, loc)

    def _record(self, rec, loc):
        for dummy in range(3):
            m = _OUTER_RE.match(rec)
            if not m:
                break
            rec = rec[m.end():]
        m = _SGL_PREFIX_RE.match(rec)
        if m:
            if m.group("gpu") is not None:
                rank = "gpu" + m.group("gpu")
            else:
                rank = m.group("ranks").strip() or "main"
            msg = rec[m.end():]
            t = _LEVEL_TAG_RE.match(msg)
            if t:
                msg = msg[t.end():]
            if rank != "main" and len(self.ranks_seen) < MAX_RANKS:
                self.ranks_seen.add(rank)
        else:
            rank, msg = None, rec

        tb = self._tb
        if tb is not None:
            if m:
                # another process's line printed into the traceback
                tb["interleaved"] += 1
                if tb["interleaved"] > TRACEBACK_INTERLEAVE_LIMIT:
                    self._close_traceback(None)
            elif not rec.strip() or rec[0] in " \t":
                if rec.strip():
                    tb["last_frame"] = rec.strip()
                return  # frame, source or caret line
            elif TRACEBACK_HEADER in rec:
                self._close_traceback(None)
            else:
                self._close_traceback(rec.strip(), loc)
                self._rules_on(rec, tb["rank"], loc)
                return

        stripped = msg.strip(_BLANK)
        if TRACEBACK_HEADER in msg:
            self._open_traceback(rank, loc)
            self._rules_on(rec, rank, loc)
            return
        if stripped.startswith("Exception ignored in"):
            # the traceback that follows is printed while an object is collected: not fatal
            self._ignored_pending = True
            self._follow, self._marker_left = FOLLOW_LINES, FOLLOW_LINES + 1
        elif stripped.startswith(_CHAIN_MARKERS) and self._last_chain is not None:
            self._chain_pending = self._last_chain
            self._follow, self._marker_left = FOLLOW_LINES, FOLLOW_LINES + 1

        self._facts(msg, stripped, rank, m is not None, loc)
        self._rules_on(rec, rank, loc)

    def _facts(self, msg, stripped, rank, prefixed, loc):
        if "server_args" in msg:
            at = msg.find("server_args=")
            if at >= 0:
                self._dump(msg[at:])
        if stripped.startswith("max_total_num_tokens="):
            mt = _MAX_TOKENS_RE.match(stripped)
            if mt:
                self.max_total_num_tokens = int(mt.group(1))
                self._advance("warming_up")
        if prefixed and self.other_tp_size is None and "tp_size=" in msg and "server_args" not in msg:
            mt = _TP_FIELD_RE.search(msg)
            if mt:
                self.other_tp_size = int(mt.group(1))
        if "KV cache" in msg:
            if "Using FP8 KV cache but no scaling factors provided" in msg:
                self.fp8_scale_warning = True
            me = _EFFECTIVE_RE.search(msg)
            if me and self.kv_dtype_effective is None:
                self.kv_dtype_effective = me.group(1)
        if "Cache is allocated" in msg:
            self._pool(msg, rank)
        if "Load weight" in msg:
            self._advance("loading_weights")
        elif "Memory pool end" in msg:
            self._advance("kv_pool_allocated")
        elif "Capture " in msg and _CAPTURE_RE.search(msg):
            self._advance("capturing_cuda_graphs")
        elif "Uvicorn running" in msg:
            self._advance("warming_up")
        if "ready to roll" in msg and "The server is fired up and ready to roll!" in msg:
            self.ready = True
            self._advance("ready")
        if "SGLang version" in msg or "sglang==" in msg:
            mv = _VERSION_RE.search(msg)
            if mv:
                self.sglang_version = mv.group(1)
        # a traceback after an offline benchmark printed its results is exit noise, not a failed start
        if "Total. latency" in stripped or "Benchmark Result" in stripped:
            self._offline_done = True
        elif stripped.startswith(_OFFLINE_AGAIN_MARKERS):
            self._offline_done = False
        # exception text without a Traceback header, or a bare CUDA runtime error
        if stripped.startswith("CUDA error") or (
                ("Error" in stripped or "Exception" in stripped) and _EXCEPTION_LINE_RE.match(stripped)):
            self._set_fatal(_classify(stripped), stripped, loc, rank, None)
        elif "ddress" in stripped and _PORT_RE.search(stripped):
            self._set_fatal("port_in_use", stripped, loc, rank, None)
        elif "error: " in stripped and _ARGPARSE_RE.search(stripped):
            self._set_fatal("cli_argument_error", stripped, loc, rank, None)

    def _pool(self, msg, rank):
        self._advance("kv_pool_allocated")
        mk = _KV_POOL_RE.search(msg)
        if mk:
            if mk.group("dtype") and self.kv_dtype_effective is None:
                self.kv_dtype_effective = mk.group("dtype")
            if len(self.kv_pools) < MAX_KV_POOLS:
                self.kv_pools.append({
                    "rank": rank or "main",
                    "tokens": int(mk.group("tokens")) if mk.group("tokens") else None,
                    "k_gb": _gb(mk.group("k")),
                    "v_gb": _gb(mk.group("v")),
                    "kv_gb": _gb(mk.group("kv")),
                    "dtype": mk.group("dtype"),
                })
            else:
                self.kv_pools_dropped += 1
        mm = _MAMBA_RE.search(msg)
        if mm and self.mamba_pool is None:
            self.mamba_pool = {
                "rank": rank or "main",
                "max_mamba_cache_size": int(mm.group("size")),
                "conv_state_gb": float(mm.group("conv")),
                "ssm_state_gb": float(mm.group("ssm")),
                "intermediate_ssm_state_gb": _gb(mm.group("issm")),
                "intermediate_conv_window_gb": _gb(mm.group("iconv")),
            }

    def _dump(self, dump):
        if self._progressed():
            # a new server start in the same input: facts describe the latest start
            self._reset_facts()
        self._starts += 1
        mk = _DUMP_KV_RE.search(dump)
        self.kv_cache_dtype_configured = mk.group(1) if mk else None
        mm = _DUMP_MODEL_RE.search(dump)
        self.model_path = mm.group(1) if mm else None
        mt = _DUMP_TP_RE.search(dump)
        self.dump_tp_size = int(mt.group(1)) if mt else None

    # -- tracebacks and fatal errors -----------------------------------------------------------

    def _open_traceback(self, rank, loc):
        if self._tb is not None:
            self._close_traceback(None)
        self._tb_seq += 1
        chain = self._chain_pending if self._chain_pending is not None else self._tb_seq
        self._tb = {
            "rank": rank, "loc": loc, "last_frame": None, "interleaved": 0, "chain": chain,
            "harmless": self._ignored_pending or self._offline_done,
        }
        self._chain_pending = None
        self._ignored_pending = False

    def _close_traceback(self, exc_line, loc=None):
        tb, self._tb = self._tb, None
        self._last_chain = tb["chain"]
        self._follow = FOLLOW_LINES  # a chained traceback may follow
        if tb["harmless"]:
            return
        if exc_line is None:
            msg = "traceback cut before its exception line"
            if tb["last_frame"]:
                msg += " (last frame: %s)" % tb["last_frame"]
            self._set_fatal("truncated_traceback", msg, tb["loc"], tb["rank"], tb["chain"])
        else:
            self._set_fatal(_classify(exc_line), exc_line, loc, tb["rank"], tb["chain"])

    def _set_fatal(self, cls, message, loc, rank, chain):
        cur = self.fatal
        replace = (
            cur is None
            or (cur["class"] == "truncated_traceback" and cls != "truncated_traceback")
            # a chained exception supersedes the one it was raised while handling
            or (chain is not None and cur["chain"] == chain and cls != "truncated_traceback")
        )
        if replace:
            self.fatal = {"class": cls, "message": message[:EVIDENCE_CHARS], "line": loc, "rank": rank or "main", "chain": chain}

    # -- rules ---------------------------------------------------------------------------------

    def _rules_on(self, rec, rank, loc):
        for rule in self._rules:
            alts = rule.literals
            if alts is not None:
                for runs in alts:
                    if runs[0] in rec:
                        break
                else:
                    continue
            if rule.regex.search(rec) is None:
                continue
            hit = self._hits.get(rule.id)
            if hit is None:
                hit = self._hits[rule.id] = {"count": 0, "per_rank": {}, "evidence": []}
            hit["count"] += 1
            key = rank or "main"
            if key in hit["per_rank"] or len(hit["per_rank"]) < MAX_RANKS:
                hit["per_rank"][key] = hit["per_rank"].get(key, 0) + 1
            if len(hit["evidence"]) < self._max_evidence:
                hit["evidence"].append({"line": loc, "rank": key, "text": rec.strip()[:EVIDENCE_CHARS]})

    # -- result --------------------------------------------------------------------------------

    def _result(self):
        locs = [ev["line"] for hit in self._hits.values() for ev in hit["evidence"]]
        if self.fatal is not None:
            locs.append(self.fatal["line"])
        if self._line_counter is not None and locs:
            offsets = sorted(set(locs))
            lines = dict(zip(offsets, self._line_counter(offsets)))
        else:
            lines = None

        def line_of(loc):
            return lines[loc] if lines is not None else loc

        fatal = {"class": "none", "message": None, "line": None, "rank": None}
        if self.fatal is not None:
            fatal = {"class": self.fatal["class"], "message": self.fatal["message"], "line": line_of(self.fatal["line"]),
                     "rank": self.fatal["rank"]}
        tp = self.dump_tp_size if self.dump_tp_size is not None else self.other_tp_size
        facts = {
            "fp8_scale_warning": self.fp8_scale_warning,
            "kv_cache_dtype_configured": self.kv_cache_dtype_configured,
            "kv_dtype_effective": self.kv_dtype_effective,
            "tp_size": tp,
            "model_path": self.model_path,
            "max_total_num_tokens": self.max_total_num_tokens,
            "kv_pools": self.kv_pools,
            "mamba_pool": self.mamba_pool,
            "ready": self.ready,
            "fatal": fatal,
            "sglang_version": self.sglang_version,
            "ranks_seen": sorted(self.ranks_seen, key=_rank_sort_key),
            "phase": "failed" if self.fatal is not None else PHASES[self.phase],
            "starts": self._starts,
        }
        findings, failed = [], []
        for rule in self._rules:
            hit = self._hits.get(rule.id)
            if hit is None:
                continue
            waived = rule.id in self._waivers
            findings.append({
                "rule": rule.id,
                "severity": rule.severity,
                "description": rule.description,
                "fix": rule.fix,
                "count": hit["count"],
                "per_rank": dict(sorted(hit["per_rank"].items(), key=lambda kv: _rank_sort_key(kv[0]))),
                "evidence": [dict(ev, line=line_of(ev["line"])) for ev in hit["evidence"]],
                "waived": waived,
                "waiver_reason": self._waivers.get(rule.id),
            })
            if rule.severity == "error" and not waived:
                failed.append(rule.id)
        stats = {
            "bytes": self._offset,
            "inspected_lines": self._inspected,
            "truncated_lines": self._truncated,
            "dropped_bytes": self._dropped,
            "kv_pools_dropped": self.kv_pools_dropped,
        }
        return {"facts": facts, "findings": findings, "failed_rules": failed, "stats": stats}


def _file_line_counter(path, chunk_bytes=CHUNK_BYTES):
    """Line numbers of sorted byte offsets of a file, read once up to the last offset."""
    def count(offsets):
        out, line, pos = [], 1, 0
        with open(path, "rb") as stream:
            for off in offsets:
                while pos < off:
                    data = stream.read(min(chunk_bytes, off - pos))
                    if not data:
                        break
                    line += data.count(b"\n")
                    pos += len(data)
                out.append(line)
        return out
    return count


def audit_stream(stream, chunk_bytes=CHUNK_BYTES, **kwargs):
    """Audit a binary file object, read in chunks (lines are numbered while scanning)."""
    auditor = LogAuditor(**kwargs)
    read = stream.read
    while True:
        data = read(chunk_bytes)
        if not data:
            break
        auditor.feed(data)
    return auditor.finish()


def audit_path(path, chunk_bytes=CHUNK_BYTES, **kwargs):
    """Audit a log file; line numbers come from a second read that stops at the last one needed."""
    kwargs.setdefault("line_counter", _file_line_counter(path, chunk_bytes))
    with open(path, "rb") as stream:
        return audit_stream(stream, chunk_bytes=chunk_bytes, **kwargs)


def audit_command(argv, chunk_bytes=CHUNK_BYTES, **kwargs):
    """Run argv (no shell) and audit its standard output while it streams.

    Returns (rc, the head of its standard error as text, result). The output is never held whole:
    a journal can be far larger than memory.
    """
    auditor = LogAuditor(**kwargs)
    with tempfile.TemporaryFile() as errfile:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errfile, stdin=subprocess.DEVNULL)
        try:
            read = proc.stdout.read
            while True:
                data = read(chunk_bytes)
                if not data:
                    break
                auditor.feed(data)
        finally:
            proc.stdout.close()
            rc = proc.wait()
        errfile.seek(0)
        err = errfile.read(4000).decode("utf-8", "replace").strip()
    return rc, err, auditor.finish()


def audit_bytes(data, **kwargs):
    auditor = LogAuditor(**kwargs)
    auditor.feed(data)
    return auditor.finish()
