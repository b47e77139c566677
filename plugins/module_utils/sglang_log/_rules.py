# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Findings of the SGLang log audit: the default rules (plain data), user rules, waivers, matching.

Each rule is a dict with:

- ``id``: stable name, used by ``allow`` waivers and in ``failed_rules``;
- ``severity``: ``error`` (fails a guard unless waived), ``warning`` or ``info``;
- ``pattern``: a Python regular expression;
- ``scope``: ``message`` (the pattern must match at the START of the message of one of SGLang's own log
  records, after its ``[time ranks]`` prefix) or ``line`` (searched anywhere in a record, prefix included);
  request echoes and access lines, which hold client text, are never matched by either;
- ``description`` and ``fix``: one sentence each, shown to the operator;
- ``lines`` (default rules): the entries of ``sglang_log._lines.LOG_LINES`` the rule keys on, which a test
  checks against SGLang's source.

Patterns should contain a plain-text run of a few characters (the scanner uses it to skip
unrelated lines cheaply); a pattern without one makes the audit inspect every line.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact_text
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._records import CLIENT_KINDS, SGLANG

SEVERITIES = ("error", "warning", "info")
SCOPES = ("message", "line")
EVIDENCE_CHARS = 500
MAX_RANKS = 1024

DEFAULT_RULES = [
    {
        "id": "fp8_kv_no_scales",
        "severity": "error",
        "scope": "message",
        "lines": ["fp8_no_scales"],
        "pattern": r"Using FP8 KV cache but no scaling factors provided",
        "description": "The KV cache is FP8 E4M3 and runs with unit (1.0) scales: keys and values are stored without calibration.",
        "fix": "Start SGLang with --kv-cache-dtype bf16, or supply calibrated scales with --quantization-param-path.",
    },
    {
        "id": "fp8_kv_effective",
        "severity": "error",
        "scope": "message",
        "lines": ["kv_pool", "kv_dtype_used"],
        "pattern": r"(?:Using KV cache dtype: |(?:[\w.-]+ ){0,6}KV Cache (?:is allocated|VA upper bound)\. dtype: )torch\.float8_\w+",
        "description": "The KV cache that was actually allocated holds FP8 values.",
        "fix": "Pass --kv-cache-dtype bf16; with 'auto' the checkpoint's kv_cache_quant_algo FP8 silently selects FP8.",
    },
    {
        "id": "kv_dtype_set_by_model",
        "severity": "warning",
        "scope": "message",
        "lines": ["kv_dtype_set_by_model"],
        "pattern": r"Setting KV cache dtype to \w+ for ",
        "description": "The model class overrode the KV cache dtype on its own.",
        "fix": "Compare kv_cache_dtype in the server_args dump with the effective dtype; pin --kv-cache-dtype explicitly.",
    },
    {
        "id": "fp8_kv_scales_unsupported",
        "severity": "error",
        "scope": "line",
        "lines": ["fp8_scales_unsupported"],
        "pattern": r"Using FP8 KV cache and scaling factors provided but model (?:%s|\S+) does not support loading scaling factors",
        "description": "KV scales were given but the model class cannot load them.",
        "fix": "Drop --quantization-param-path or use --kv-cache-dtype bf16.",
    },
    {
        "id": "moe_default_kernel_config",
        "severity": "info",
        "scope": "message",
        "lines": ["moe_default_config", "fp8_block_default_config"],
        "pattern": r"Using default (?:MoE kernel|W8A8 Block FP8 kernel) config\. Performance might be sub-optimal",
        "description": "No tuned Triton kernel config exists for this GPU and shape; the Triton path runs a generic config.",
        "fix": "Tune the kernel with SGLang's benchmark/kernels/fused_moe_triton and install the JSON, or use another MoE runner backend.",
    },
    {
        "id": "cuda_out_of_memory",
        "severity": "error",
        "scope": "line",
        "lines": ["cuda_oom"],
        "pattern": r"CUDA out of memory|OutOfMemoryError",
        "description": "A CUDA allocation failed.",
        "fix": "Lower --mem-fraction-static, --cuda-graph-max-bs or --max-running-requests, or free the GPUs.",
    },
    {
        "id": "not_enough_memory",
        "severity": "error",
        "scope": "line",
        "lines": ["not_enough_memory"],
        "pattern": r"Not enough memory\. Please try to increase --mem-fraction-static",
        "description": "No memory is left for the KV cache after the weights were loaded.",
        "fix": "Raise --mem-fraction-static or use more GPUs (larger --tp-size).",
    },
    {
        "id": "no_kernel_image",
        "severity": "error",
        "scope": "line",
        "lines": ["no_kernel_image"],
        "pattern": r"no kernel image is available for execution on the device",
        "description": "A CUDA kernel was not compiled for this GPU architecture.",
        "fix": "Install sgl-kernel / FlashInfer builds that include this GPU's architecture (sm_120a for RTX PRO 6000 Blackwell).",
    },
    {
        "id": "scheduler_exception",
        "severity": "error",
        "scope": "message",
        "lines": ["scheduler_exception"],
        "pattern": r"Scheduler hit an exception",
        "description": "A scheduler process raised an exception and the server goes down.",
        "fix": "Read the traceback in the evidence and fix its cause before restarting.",
    },
    {
        "id": "child_process_failed",
        "severity": "error",
        "scope": "message",
        "lines": ["child_sigquit"],
        "pattern": r"Received sigquit from a child process",
        "description": "An SGLang child process died and the server shut itself down.",
        "fix": "Look for the first traceback or CUDA error of the failing rank.",
    },
    {
        "id": "rank_load_mismatch",
        "severity": "error",
        "scope": "line",
        "lines": ["rank_load_mismatch"],
        "pattern": r"could finish the model loading, but there are other ranks that didn't finish loading",
        "description": "Some tensor-parallel ranks did not finish loading the model.",
        "fix": "Check every rank for OOM or a slow node.",
    },
    {
        "id": "health_check_failed",
        "severity": "error",
        "scope": "message",
        "lines": ["health_check_failed"],
        "pattern": r"Health check failed\. Server couldn't get a response",
        "description": "The server stopped answering its own health check.",
        "fix": "Check for a hung scheduler or detokenizer; restart the service.",
    },
    {
        "id": "cli_argument_error",
        "severity": "error",
        "scope": "line",
        "lines": ["argparse_unrecognized", "argparse_bad_argument"],
        "pattern": r"error: unrecognized arguments|error: argument --[\w-]+: invalid choice: '",
        "description": "The installed SGLang rejected the command line (flag renamed, removed or value not allowed).",
        "fix": "Align the flags with the installed SGLang version's --help.",
    },
    {
        "id": "kv_pool_full",
        "severity": "warning",
        "scope": "message",
        "lines": ["kv_pool_full"],
        "pattern": r"KV cache pool is full\. Retract requests",
        "description": "The KV cache ran full and requests were retracted.",
        "fix": "Lower --max-running-requests or give the KV cache more memory.",
    },
    {
        "id": "weight_not_loaded",
        "severity": "warning",
        "scope": "message",
        "lines": ["param_not_found"],
        "pattern": r"Parameter \S+ not found in params_dict",
        "description": "A checkpoint tensor has no matching model parameter and was skipped.",
        "fix": "Check that the checkpoint matches the model class and SGLang version.",
    },
]

# Findings of the audit's state, not of a pattern: the facts module decides when one applies (a rule's fields, no pattern).
# A late startup record is a warning, never an error: any client holding the API key can make SGLang write one, and
# an error would let it fail a correct deployment.
LATE_STARTUP_RULE = "startup_record_after_ready"
STATE_RULES = [
    {
        "id": LATE_STARTUP_RULE,
        "severity": "warning",
        "description": "Unexpected startup record after the server was ready: a record that looks like SGLang's startup "
                       "(server_args dump, KV pool, token budget, FP8 warning, ready line...) came after the HTTP server "
                       "accepted requests. From there on clients can make SGLang write any line, so it is not a fact; the "
                       "facts are those of the start before it. A second real start appended to the same file looks the same.",
        "fix": "If the server was restarted, audit the unit's journal (the current invocation only) or give each start its "
               "own log file; otherwise a client wrote this record through one of the request sites docs/security.md lists.",
    },
]

_RULE_KEYS = ("id", "severity", "scope", "pattern", "description", "fix")


class LogAuditError(ValueError):
    """Bad rules or waivers; the message names the cause and the fix."""


def required_literals(pattern):
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
        unknown = sorted(set(user) - set(_RULE_KEYS))
        if unknown:
            raise LogAuditError("rule %r has unknown keys %s: use only %s" % (rid, ", ".join(unknown), ", ".join(_RULE_KEYS)))
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
        if spec.get("scope") not in (None,) + SCOPES:
            raise LogAuditError("rule %r has scope %r: use one of %s" % (spec["id"], spec.get("scope"), ", ".join(SCOPES)))
        if not isinstance(spec.get("pattern"), str) or not spec["pattern"]:
            raise LogAuditError("rule %r has no pattern: give a non-empty regular expression" % spec["id"])
        try:
            compiled.append(Rule(spec))
        except re.error as exc:
            raise LogAuditError("rule %r: pattern %r is not a valid regular expression (%s)" % (spec["id"], spec["pattern"], exc))
    return compiled


def build_waivers(allow=None, rules=None):
    """Map rule id -> reason; every waiver needs a known rule and a non-empty reason."""
    known = set(r.id for r in rules) | set(r["id"] for r in STATE_RULES) if rules is not None else None
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


class Rule(object):
    __slots__ = ("id", "severity", "scope", "pattern", "description", "fix", "regex", "literals")

    def __init__(self, spec):
        self.id = spec["id"]
        self.severity = spec["severity"]
        self.scope = spec.get("scope") or "line"
        self.pattern = spec["pattern"]
        self.description = spec.get("description") or ""
        self.fix = spec.get("fix") or ""
        self.regex = re.compile(self.pattern)
        self.literals = required_literals(self.pattern)


class RuleMatcher(object):
    """Counts, per rule, the records that match, per rank, with the first ``max_evidence`` as evidence."""

    def __init__(self, rules, waivers, max_evidence):
        self.rules = rules
        self.waivers = waivers
        self.max_evidence = max_evidence
        self.hits = {}

    def on_record(self, rec, rank, loc):
        kind = rec.kind
        if kind in CLIENT_KINDS:
            return
        for rule in self.rules:
            alts = rule.literals
            if alts is not None:
                for runs in alts:
                    if runs[0] in rec.text:
                        break
                else:
                    continue
            if rule.scope == "message":
                if kind != SGLANG or rule.regex.match(rec.msg) is None:
                    continue
            elif rule.regex.search(rec.text) is None:
                continue
            self._hit(rule.id, rank, loc, rec.text)

    def on_late_startup_record(self, rec, rank, loc):
        """A startup record after the acceptance point: the finding of LATE_STARTUP_RULE (its text redacted)."""
        self._hit(LATE_STARTUP_RULE, rank, loc, rec.text, redact=True)

    def _hit(self, rule_id, rank, loc, text, redact=False):
        hit = self.hits.get(rule_id)
        if hit is None:
            hit = self.hits[rule_id] = {"count": 0, "per_rank": {}, "evidence": []}
        hit["count"] += 1
        key = rank or "main"
        if key in hit["per_rank"] or len(hit["per_rank"]) < MAX_RANKS:
            hit["per_rank"][key] = hit["per_rank"].get(key, 0) + 1
        if len(hit["evidence"]) < self.max_evidence:
            # only the evidence kept is redacted (a late record may be a dump holding the API key)
            text = text.strip()[:EVIDENCE_CHARS]
            hit["evidence"].append({"line": loc, "rank": key, "text": redact_text(text) if redact else text})

    def evidence_locations(self):
        return [ev["line"] for hit in self.hits.values() for ev in hit["evidence"]]

    def findings(self, line_of, rank_key):
        """(findings, failed rule ids) in rule order."""
        findings, failed = [], []
        for rule in list(self.rules) + [Rule(dict(spec, pattern="$^")) for spec in STATE_RULES]:
            hit = self.hits.get(rule.id)
            if hit is None:
                continue
            waived = rule.id in self.waivers
            findings.append({
                "rule": rule.id,
                "severity": rule.severity,
                "description": rule.description,
                "fix": rule.fix,
                "count": hit["count"],
                "per_rank": dict(sorted(hit["per_rank"].items(), key=lambda kv: rank_key(kv[0]))),
                "evidence": [dict(ev, line=line_of(ev["line"])) for ev in hit["evidence"]],
                "waived": waived,
                "waiver_reason": self.waivers.get(rule.id),
            })
            if rule.severity == "error" and not waived:
                failed.append(rule.id)
        return findings, failed
