# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decide from independent signals whether an SGLang server keeps its KV cache in bf16.

Pure Python (stdlib only, Python 3.9+). ``evaluate`` takes the raw inputs (launch argv, the
checkpoint as read by ``_checkpoint.inspect_checkpoint``, a ``/server_info`` answer, the log
facts of ``sglang_log._log_audit``) and returns one verdict per signal with its evidence. What the server
says is read by the rules of its release (``_server_info.kv_summary``: ``/server_info`` version,
else the log dump's format, else 0.5.23):

argv         ``--kv-cache-dtype`` of the launch command (absent means ``auto``). When no argv
             is given, the running server's record of the flag as typed: ``launch_command`` of
             ``/server_info`` (0.5.20+); for 0.5.16-style servers the ServerArgs dump in the log,
             else the top-level ``kv_cache_dtype``. A backend rule of FP8_RULES (SGLang sets
             fp8_e4m3 over any flag) makes it fp8, naming the rule.
checkpoint   what the checkpoint makes ``auto`` resolve to (FP8 KV metadata -> fp8_e4m3), or what
             an architecture rule of FP8_RULES sets ``auto`` to. SGLang consults the checkpoint
             only when the server args still say ``auto`` after argument processing; otherwise
             this row repeats them.
server       0.5.23 rules (0.5.17+): the top-level ``kv_cache_dtype`` (server args after argument
             resolution; without ``/server_info``, the same value from a log dump known to be a
             dict); 0.5.16 rules: ``internal_states[*].kv_cache_dtype``, where each scheduler
             records what ``auto`` resolved to. ``auto`` proves nothing.
log_dtype    ``KV Cache is allocated. dtype: torch.X`` (``Using KV cache dtype: torch.X`` of older releases).
pool_bytes   bytes per element of the ``KV Cache is allocated`` pools, from #tokens, the
             logged K (or KV) size, the model's full-attention layers, KV heads per rank and
             head dim (about 2 for bf16, 1 for fp8).
fp8_warning  ``Using FP8 KV cache but no scaling factors provided``: present -> fp8; absent ->
             unknown (SGLang checks the server args, which under ``auto`` still say ``auto``).

The checkpoint is the one the server runs (``served_model``): the launch argv's ``--model-path``/``--model`` (as
SGLang's parser reads them), checked against ``/server_info`` ``model_path``; the log's model path only adds a note.
A disagreement, or a ``checkpoint_given`` naming another directory, fails the guard naming both.

Counting: a signal is *available* when its verdict is not ``unknown``. argv and checkpoint are
one source: the checkpoint counts only when the flag is ``auto`` (then argv itself is
``unknown``); with an explicit flag argv counts and the checkpoint row repeats it uncounted.
The checkpoint resolves the setting the running server got (log dump, /server_info) when known;
if that is ``auto`` while the unit's argv is explicit, the row still does not count.
So the counted (independent) signals are at most one of argv/checkpoint plus server,
log_dtype, pool_bytes and fp8_warning. Every available signal, counted or not, must agree.

A log read from a plain file (``log_source`` ``file``) is not the journal: no field says which process wrote a line,
whether that process still runs, or which start it belongs to (docs/security.md, "A log file"). Its signals (and
the dump standing in for argv or server) are shown and must agree, but they count as one signal, and only when the
file describes the server answering now (``log_file_binding``: the log's ``max_total_num_tokens``, the KV pool the
KV dtype sizes, and its model path equal the live ``/server_info``'s); otherwise none of them counts.
"""

from __future__ import annotations

import math
import os

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_budget as kb
from ansible_collections.llmops.sglang.plugins.module_utils import _redact
from ansible_collections.llmops.sglang.plugins.module_utils._coerce import dtype_name, whole_number
from ansible_collections.llmops.sglang.plugins.module_utils._launch_args import (
    ATTENTION_BACKEND_FLAGS,
    KV_FLAG,
    parse_launch_argv,
)
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import kv_release, kv_summary, parse_version

SIGNALS = ("argv", "checkpoint", "server", "log_dtype", "pool_bytes", "fp8_warning")
# Where log_facts come from: the unit's journal (entries judged by journald's own fields) or a plain file.
LOG_SOURCES = ("journal", "file")
# The signals read from the log, and the labels of the log dump standing in for argv or the server.
LOG_SIGNALS = ("log_dtype", "pool_bytes", "fp8_warning")
LOG_DUMP_LABELS = ("log ServerArgs dump", "log server_args dump")
VERDICTS = ("bf16", "fp8", "other", "unknown")
RESULT_VERDICTS = ("bf16", "fp8", "other", "mixed", "insufficient")
# expected option -> the verdict that passes
EXPECTED = {"bf16": "bf16", "fp8_e4m3": "fp8"}
DEFAULT_MIN_SIGNALS = 3
MAX_POOLS = 256
MAX_EVIDENCE = 600

BF16_NAMES = ("bf16", "bfloat16")
FP8_NAMES = ("fp8", "fp8_e4m3", "fp8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
OTHER_NAMES = ("float16", "fp16", "half", "float32", "fp32", "float", "mxfp8", "nvfp4", "fp4_e2m1", "fp4_mx_block16",
               "float4_e2m1fn_x2", "uint8")
INFERRED = {"bfloat16": "bf16", "fp8": "fp8", "float32": "other", "fp4": "other"}

FP8_WARNING = "Using FP8 KV cache but no scaling factors provided"
WHY_FP8 = ("the checkpoint's kv_cache_quant_algo FP8 makes --kv-cache-dtype auto choose an FP8 E4M3 KV cache, and with "
           "no k/v scales loaded SGLang runs it with scale 1.0 (less accurate, worst on long reasoning)")
HOW_TO = {
    "argv": "pass argv (the launch command as a list) or unit (the systemd unit running SGLang)",
    "checkpoint": "set checkpoint to the model directory served",
    "server": "set url (and api_key) of the running server and make sure it is up",
    "log_dtype": "pass log_audit's facts as log_facts (the log must include SGLang's INFO lines from TP0)",
    "pool_bytes": "pass log_facts with the 'KV Cache is allocated' lines, checkpoint for the architecture, and the "
                  "tp_size (from the ServerArgs dump, argv, the server or the tp_size option)",
    "fp8_warning": "only ever says fp8 (its absence proves nothing)",
}

# SGLang's own argument rules that set --kv-cache-dtype fp8_e4m3 (sglang/srt/arg_groups/ of the release named): a
# backend rule acts over any flag, an explicit bf16 included; an architecture rule only on auto. The architecture
# rules are _kv_auto.RULES' "kv" rows (one table); the backend rule is the guard's own (a backend is no checkpoint
# fact). A unit test reads the rules from the installed SGLang's source, so this table cannot drift from it.
# (SGLang 0.5.16 refused tokenspeed_mla without fp8_e4m3 instead of changing the flag.)
FP8_RULES_RELEASE = _kv_auto.SGLANG_VERSION
BACKEND_RULES = (
    {"kind": "attention backend", "names": ("tokenspeed_mla",), "flags": ATTENTION_BACKEND_FLAGS,
     "over": "any", "source": "arg_groups/serving_hook.py", "when": None},
)
FP8_RULES = BACKEND_RULES + tuple(
    {"kind": "architecture", "names": row["architectures"], "flags": (), "over": "auto", "source": row["at"][0],
     "when": row.get("when")}
    for row in _kv_auto.RULES if row["kind"] == "kv" and row["value"] == "fp8_e4m3")
WHY_SCALE = ("with no k/v scales loaded SGLang runs an FP8 E4M3 KV cache with scale 1.0 (less accurate, worst on long "
             "reasoning)")


class GuardError(ValueError):
    """Unusable guard options; the message says what to fix."""


# ---------------------------------------------------------------------------------------------
# Small helpers


def classify_dtype(name):
    """bf16 / fp8 / other / auto / unknown for a CLI or torch dtype name."""
    key = dtype_name(name)
    if key is None:
        return "unknown"
    if key == "auto":
        return "auto"
    if key in BF16_NAMES:
        return "bf16"
    if key in FP8_NAMES:
        return "fp8"
    if key in OTHER_NAMES or "fp4" in key or "float4" in key:
        return "other"
    return "unknown"


def _text(value, limit=120):
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _dict(value):
    return value if isinstance(value, dict) else None


def _signal(name, verdict, evidence, counted=None, source=None):
    available = verdict != "unknown"
    if len(evidence) > MAX_EVIDENCE:
        evidence = evidence[:MAX_EVIDENCE] + "..."
    return {"name": name, "verdict": verdict, "available": available,
            "counted": available if counted is None else (available and counted),
            "evidence": evidence, "source": source}


# ---------------------------------------------------------------------------------------------
# Launch command


SECRET_FLAGS = _redact.SECRET_FLAGS
REDACTED = _redact.MASK


def redact_argv(argv, secret=None):
    """A copy of argv with the values of --api-key-like flags (and the given secret) masked (_redact's rules)."""
    if not isinstance(argv, (list, tuple)):
        return argv
    return _redact.redact_argv(argv, [secret] if secret else ())


# ---------------------------------------------------------------------------------------------
# The checkpoint served


def _same_path(a, b):
    """The same directory, as written or through symlinks (read on the host the guard runs on)."""
    return os.path.normpath(a) == os.path.normpath(b) or os.path.realpath(a) == os.path.realpath(b)


def served_model(argv=None, server_info=None):
    """The model directory the server runs: the launch argv's --model-path/--model (argparse: the last one wins), else
    the running server's /server_info model_path; never the log. {path, source, argv, server, conflict}: conflict names
    both when they differ (the unit changed without a restart, or another server answers the URL)."""
    from_argv = parse_launch_argv(argv)["model_path"] if argv is not None else None
    # a unit's ${VAR} or $VAR: systemd fills it in at start, so only the running server's answer knows the value
    from_argv = None if from_argv and (from_argv.startswith("$") or "${" in from_argv) else from_argv
    from_server = server_info.get("model_path") if isinstance(server_info, dict) else None
    from_server = from_server if isinstance(from_server, str) and from_server else None
    out = {"path": from_argv or from_server, "source": "argv" if from_argv else ("/server_info" if from_server else None),
           "argv": from_argv, "server": from_server, "conflict": None}
    if from_argv and from_server and not _same_path(from_argv, from_server):
        out["conflict"] = ("the launch command serves --model-path %s but the running server's /server_info model_path is "
                           "%s: restart the unit so the server runs what its unit says, or point url at that unit's "
                           "server" % (_text(from_argv, 300), _text(from_server, 300)))
    return out


def checkpoint_to_inspect(served, given=None):
    """(directory to inspect or None, why none or None): the served model's directory, or the checkpoint option where
    the server names no local directory (a hub id or a relative path); an option naming another directory than the
    one served is a conflict the guard fails on (see evaluate's checkpoint_given)."""
    path = served.get("path") if isinstance(served, dict) else None
    if given:
        return given, None
    if path and os.path.isabs(path):
        return path, None
    if path:
        return None, ("the server runs %s, not an absolute path (a hub id, or relative to the unit's working directory): "
                      "set checkpoint to its local directory" % _text(path, 300))
    return None, None


def _checkpoint_conflict(served, given):
    path = served["path"]
    if given and path and os.path.isabs(path) and not _same_path(given, path):
        return ("the checkpoint given is %s but the server runs %s (%s): the guard judges the checkpoint served; drop the "
                "checkpoint option or set it to that directory" % (_text(given, 300), _text(path, 300), served["source"]))
    return None


# ---------------------------------------------------------------------------------------------
# Signals


def fp8_rule(backends=None, architecture=None):
    """The FP8_RULES entry that sets fp8_e4m3 for these attention backends (flag -> value) or this architecture.

    (rule, what it matched) or (None, None); backend rules first (they act over any flag).
    """
    for rule in FP8_RULES:
        if rule["kind"] == "attention backend":
            for flag in rule["flags"]:
                if (backends or {}).get(flag) in rule["names"]:
                    return rule, "%s %s" % (flag, backends[flag])
        elif architecture in rule["names"]:
            return rule, "architecture %s" % architecture
    return None, None


def rule_text(rule, matched):
    """What an FP8 rule does, naming it and where SGLang has it."""
    what = "over any flag" if rule["over"] == "any" else "when the flag is auto"
    when = (" " + rule["when"]) if rule["when"] else ""
    return "%s makes SGLang %s set %s fp8_e4m3 %s%s (sglang/srt/%s)" % (
        matched, FP8_RULES_RELEASE, KV_FLAG, what, when, rule["source"])


def _launch_flag(inputs, facts, server_sum, release):
    """Where the KV flag as typed comes from: (value or None, label, known, problem, parsed launch command or None).

    argv/unit first, else the running server's record of it: 0.5.23 (0.5.20+): /server_info launch_command;
    0.5.16: the log's ServerArgs dump, else the top-level kv_cache_dtype of /server_info. Without /server_info,
    a dump not known to be a dict counts as the flag, as it always did.
    """
    argv_in = inputs.get("argv")
    source = inputs.get("argv_source") if isinstance(inputs.get("argv_source"), str) else "argv"
    argv_error = inputs.get("argv_error")
    if argv_in is None and server_sum is not None and server_sum["launch_command"] is not None and release != "0.5.16":
        argv_in, source = server_sum["launch_command"].split(), "/server_info launch_command"
    if argv_in is not None:
        parsed = parse_launch_argv(argv_in)
        if parsed["problem"]:
            return None, source, False, parsed["problem"], parsed
        value = parsed["kv_cache_dtype"]
        if value is not None and "$" in value:
            return None, source, False, ("%s is set from an environment variable (%s) that systemd expands at start, "
                                         "so the unit does not show the value: write the value in ExecStart"
                                         % (KV_FLAG, _text(value))), parsed
        if value is None:
            if parsed["config_file"]:
                return None, source, False, ("%s is not on the command line but --config %s may set it: put %s on the "
                                             "command line" % (KV_FLAG, _text(parsed["config_file"]), KV_FLAG)), parsed
            if not parsed["sglang"]:
                return None, source, False, ("the command (%d words) does not look like an SGLang launch "
                                             "(no sglang.launch_server, 'sglang serve' or --model-path), so a missing "
                                             "%s proves nothing: pass the SGLang command itself"
                                             % (parsed["words"], KV_FLAG)), parsed
            return "auto", "%s: no %s (SGLang's default is auto)" % (source, KV_FLAG), True, None, parsed
        return value, "%s: %s" % (source, _text(parsed["flag_form"])), True, None, parsed
    if isinstance(argv_error, str) and argv_error:
        return None, source, False, "%s: %s" % (source, argv_error), None
    dump = facts.get("kv_cache_dtype_configured") if facts is not None else None
    # a dict dump (0.5.19+) holds the resolved value, the server signal's; a repr dump the flag (see kv_release)
    if isinstance(dump, str) and facts.get("server_args_format") != "dict" and (server_sum is None or release == "0.5.16"):
        return dump, "log ServerArgs dump: kv_cache_dtype=%r" % dump, True, None, None
    if server_sum is not None and release == "0.5.16" and isinstance(server_sum["flag"], str):
        return server_sum["flag"], "%s=%r" % (server_sum["flag_from"], server_sum["flag"]), True, None, None
    return None, source, False, None, None


def _running_setting(facts, server_sum):
    """The running server's kv_cache_dtype after SGLang's argument processing (log dump first, then /server_info).

    In every release this is what the model runner gets: ``auto`` there is resolved from the checkpoint, any
    other value is the KV dtype.
    """
    if facts is not None and isinstance(facts.get("kv_cache_dtype_configured"), str):
        return facts["kv_cache_dtype_configured"], "the log's ServerArgs dump"
    if server_sum is not None and isinstance(server_sum["top_level"], str):
        return server_sum["top_level"], "/server_info"
    return None, None


def _same_flag(a, b):
    ca, cb = classify_dtype(a), classify_dtype(b)
    if ca in ("bf16", "auto") or cb in ("bf16", "auto"):
        return ca == cb
    return dtype_name(a) == dtype_name(b)


def argv_signal(value, label, known, problem, backend_rule=None):
    if not known:
        why = problem or "no launch command: " + HOW_TO["argv"]
        return _signal("argv", "unknown", why, source=label)
    cls = classify_dtype(value)
    if backend_rule is not None and dtype_name(value) != "fp8_e4m3":
        # the launch configuration gives FP8 whatever the flag says
        return _signal("argv", "fp8", "%s, but %s" % (label, rule_text(*backend_rule)), source=label)
    if cls == "auto":
        return _signal("argv", "unknown", "%s -> auto: the checkpoint decides (see checkpoint)" % label, source=label)
    if cls == "unknown":
        return _signal("argv", "unknown", "%s: %r is not a known KV dtype" % (label, _text(value)), source=label)
    return _signal("argv", cls, "%s (explicit)" % label, source=label)


def _checkpoint_kv(ckpt):
    quant = _dict(ckpt.get("quantization")) or {}
    auto = ckpt.get("kv_cache_dtype_auto", quant.get("kv_cache_dtype_auto"))
    legacy = quant.get("kv_cache_dtype_auto_without_hf_fallback")
    algo = ckpt.get("kv_cache_quant_algo", quant.get("kv_cache_quant_algo"))
    source = ckpt.get("kv_cache_quant_source", quant.get("kv_cache_quant_source"))
    return auto, legacy, algo, source


def _checkpoint_decided(ckpt):
    """(the SGLang rule that decided the checkpoint's auto answer or None, the GPU it was decided for or None)."""
    kv_auto = _dict((_dict(ckpt.get("quantization")) or {}).get("kv_auto")) or {}
    rule, decided_for = kv_auto.get("decided_by_rule"), kv_auto.get("decided_for")
    return (rule if isinstance(rule, str) else None), (decided_for if isinstance(decided_for, str) else None)


def checkpoint_architecture(ckpt):
    arch = _dict(ckpt.get("architecture")) if ckpt else None
    names = arch.get("architectures") if arch else None
    return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None


def checkpoint_signal(ckpt, ckpt_error, setting, setting_label, setting_known, argv_counted=False, arch_rule=None):
    """What the KV dtype is given the checkpoint, for the server args' setting (auto: the checkpoint decides)."""
    if ckpt_error:
        return _signal("checkpoint", "unknown", "cannot read the checkpoint: %s" % _text(ckpt_error, 300))
    if ckpt is None:
        return _signal("checkpoint", "unknown", "not given: " + HOW_TO["checkpoint"])
    auto, legacy, algo, source = _checkpoint_kv(ckpt)
    scales = ckpt.get("kv_scales_present")
    where = ("kv_cache_quant_algo %s in %s" % (algo, source)) if algo else "no KV-cache quantization metadata"
    setting_cls = classify_dtype(setting) if setting_known else "unknown"
    if setting_cls in ("bf16", "fp8", "other"):
        return _signal("checkpoint", setting_cls, "not auto (%s): SGLang does not consult the checkpoint's KV metadata "
                       "(%s) for an explicit value; same source as argv, not counted" % (setting_label, where),
                       counted=False)
    auto_cls = classify_dtype(auto)
    legacy_cls = classify_dtype(legacy)
    if arch_rule is not None and not arch_rule[0]["when"]:
        # the architecture decides before the checkpoint's quantization is looked at
        auto, auto_cls = "fp8_e4m3", "fp8"
        detail = rule_text(*arch_rule)
    elif auto_cls in ("unknown", "auto"):
        return _signal("checkpoint", "unknown", "cannot tell what auto resolves to from the checkpoint (%s)" % where)
    else:
        decided_rule, decided_for = _checkpoint_decided(ckpt)
        if decided_rule:
            # an architecture or GPU rule of the server args set the KV dtype before the checkpoint's metadata was read
            detail = "SGLang's rule %s makes auto resolve to %s on %s (%s)" % (decided_rule, auto, decided_for, where)
        else:
            detail = "%s makes auto resolve to %s%s" % (where, auto, " on %s" % decided_for if decided_for else "")
            if arch_rule is not None:
                detail += "; and %s" % rule_text(*arch_rule)
    if auto_cls == "fp8":
        detail += "; no k_scale/v_scale tensors, so scale 1.0" if scales is False else ""
    if legacy_cls not in ("unknown", "auto") and legacy_cls != auto_cls and arch_rule is None:
        detail += (" (SGLang releases without the hf_quant_config.json fallback resolve it to %s instead; the riskier "
                   "reading is kept)" % legacy)
    if setting_cls == "auto":
        if argv_counted:
            # the unit's explicit flag already counts for the launch configuration
            return _signal("checkpoint", auto_cls, "flag auto (%s): %s; not counted: argv already counts for the launch "
                           "configuration" % (setting_label, detail), counted=False)
        return _signal("checkpoint", auto_cls, "flag auto (%s): %s" % (setting_label, detail))
    return _signal("checkpoint", "unknown", "the launch flag is unknown, so this only says what auto would do: %s"
                   % detail)


def server_signal(server_sum, server_error, facts=None):
    """What the running server reports, read with its release's rules (see _server_info.kv_summary)."""
    release = server_sum["release"] if server_sum else None
    dump = facts.get("kv_cache_dtype_configured") if facts else None
    if server_sum is None and facts is not None and facts.get("server_args_format") == "dict" and isinstance(dump, str):
        # SGLang 0.5.19+ logs the server args after argument resolution: the value /server_info would show
        values, head = [dump], "log server_args dump (a dict: SGLang 0.5.19 or newer, after argument resolution) " \
                               "kv_cache_dtype=%r" % dump
        if server_error:
            head += "; /server_info not read: %s" % _text(server_error, 200)
        release = "0.5.23"
    elif server_error:
        return _signal("server", "unknown", "server not reachable: %s" % _text(server_error, 400))
    elif server_sum is None:
        return _signal("server", "unknown", "not queried: " + HOW_TO["server"])
    else:
        values = server_sum["server_kv"]
        head = "SGLang %s rules (%s): %s=%s" % (server_sum["release"], server_sum["release_from"],
                                                server_sum["server_kv_from"], _text(values, 200))
    if not values:
        return _signal("server", "unknown", head + ": no KV dtype reported" + (
            " by any scheduler" if release == "0.5.16" else ""))
    classes = [classify_dtype(v) for v in values]
    decided = [c for c in classes if c not in ("auto", "unknown")]
    if not decided:
        if release == "0.5.16":
            why = "'auto' means the scheduler kept the flag string; that proves nothing across SGLang versions"
        else:
            why = ("auto: the model runner resolves it from the checkpoint at load and SGLang 0.5.17 or newer reports "
                   "that resolution nowhere in /server_info; this proves nothing (see checkpoint, log_dtype, pool_bytes)")
        return _signal("server", "unknown", "%s: %s" % (head, why))
    # ranks cannot really differ; if they do, the non-bf16 one decides
    bad = [c for c in decided if c != "bf16"]
    return _signal("server", bad[0] if bad else "bf16", head)


def log_dtype_signal(facts):
    if facts is None:
        return _signal("log_dtype", "unknown", "no log facts: " + HOW_TO["log_dtype"])
    eff = facts.get("kv_dtype_effective")
    src = "'Using KV cache dtype' / 'KV Cache is allocated. dtype' line"
    if not isinstance(eff, str):
        pools = facts.get("kv_pools") if isinstance(facts.get("kv_pools"), list) else []
        eff = next((p.get("dtype") for p in pools if isinstance(p, dict) and isinstance(p.get("dtype"), str)), None)
        src = "'KV Cache is allocated. dtype' line"
    if not isinstance(eff, str):
        return _signal("log_dtype", "unknown", "the log has no 'Using KV cache dtype: torch.X' or 'KV Cache is "
                       "allocated. dtype: torch.X' line (log level above INFO, or a log from before the KV pool)")
    cls = classify_dtype(eff)
    if cls in ("auto", "unknown"):
        return _signal("log_dtype", "unknown", "log effective KV dtype %r (%s) is not a known dtype" % (_text(eff), src))
    return _signal("log_dtype", cls, "log effective KV dtype %s (%s)" % (eff, src))


def _pool_observed(pool):
    tokens = whole_number(pool.get("tokens"), digits=True, minimum=1)
    if tokens is None:
        return None
    for key in ("k_gb", "kv_gb"):
        size = pool.get(key)
        if isinstance(size, (int, float)) and not isinstance(size, bool) and math.isfinite(size) and size >= 0:
            return {"tokens": tokens, key: float(size)}
    return None


def pool_signal(facts, arch, tp_size, tp_label):
    if facts is None:
        return _signal("pool_bytes", "unknown", "no log facts: " + HOW_TO["pool_bytes"])
    pools = facts.get("kv_pools")
    pools = [p for p in pools if isinstance(p, dict)][:MAX_POOLS] if isinstance(pools, list) else []
    if not pools:
        return _signal("pool_bytes", "unknown", "the log has no 'KV Cache is allocated' line with pool sizes")
    if arch is None:
        return _signal("pool_bytes", "unknown", "needs the model architecture: set checkpoint")
    if tp_size is None:
        return _signal("pool_bytes", "unknown", "tp_size unknown: set tp_size, or give argv / a log with the "
                       "ServerArgs dump / url")
    try:
        cell = kb.kv_cell(arch, tp_size, "bf16")
    except (kb.BudgetError, TypeError, ValueError, KeyError, AttributeError) as exc:
        return _signal("pool_bytes", "unknown", "cannot size the KV cell: %s" % _text(str(exc), 300))
    draft_cell = dict(cell, full_attention_layers=1)
    targets, drafts, skipped = [], 0, 0
    for pool in pools:
        obs = _pool_observed(pool)
        if obs is None:
            skipped += 1
            continue
        try:
            got = kb.infer_kv_dtype(obs, cell)
            if got["inferred_kv_dtype"] is None and kb.infer_kv_dtype(obs, draft_cell)["inferred_kv_dtype"]:
                drafts += 1  # the speculative draft's pool: one layer
                continue
        except (kb.BudgetError, TypeError, ValueError, KeyError, ZeroDivisionError, OverflowError):
            skipped += 1
            continue
        targets.append((pool, got))
    geometry = "%d full-attention layers x %d KV head(s) per rank x head_dim %d at tp_size %d (%s)" % (
        cell["full_attention_layers"], cell["kv_heads_per_rank"], cell["head_dim"], tp_size, tp_label)
    notes = []
    if drafts:
        notes.append("%d draft pool(s) ignored" % drafts)
    if skipped:
        notes.append("%d pool line(s) without #tokens or size skipped" % skipped)
    decided = [(p, g) for p, g in targets if g["inferred_kv_dtype"] in INFERRED]
    if not decided:
        why = targets[0][1]["note"] if targets and targets[0][1].get("note") else "no usable pool line"
        return _signal("pool_bytes", "unknown", "%s; %s%s" % (why, geometry, ("; " + ", ".join(notes)) if notes else ""))
    verdicts = [INFERRED[g["inferred_kv_dtype"]] for _p, g in decided]
    bad = [v for v in verdicts if v != "bf16"]
    verdict = bad[0] if bad else "bf16"
    pool, got = decided[verdicts.index(verdict)]
    size_key = "K size" if got["size_field"] == "k_gb" else "KV size"
    agree = sum(1 for v in verdicts if v == verdict)
    evidence = "%s: #tokens %d, %s %.2f GB -> %.3f bytes/element (%s) over %s; %d of %d pool(s) agree" % (
        pool.get("rank") or "pool", got["tokens"], size_key, got["size_gib"], got["bytes_per_element"],
        got["inferred_kv_dtype"], geometry, agree, len(decided))
    if notes:
        evidence += "; " + ", ".join(notes)
    return _signal("pool_bytes", verdict, evidence)


def fp8_warning_signal(facts):
    if facts is None:
        return _signal("fp8_warning", "unknown", "no log facts: " + HOW_TO["log_dtype"])
    if facts.get("fp8_scale_warning") is True:
        return _signal("fp8_warning", "fp8", "log: '%s ... Defaulting to scaling factors of 1.0' -> FP8 E4M3 KV cache "
                       "with scale 1.0" % FP8_WARNING)
    return _signal("fp8_warning", "unknown", "warning absent: proves nothing (SGLang checks the server args, which under "
                   "auto still say auto, so an FP8 KV cache chosen by auto never prints it)")


# ---------------------------------------------------------------------------------------------
# A log file


def log_file_binding(facts, server_sum, server_info):
    """(bound, why): whether a log file's facts describe the server that answers now. The KV pool's size
    (max_total_num_tokens) follows the KV dtype (FP8 holds about twice the tokens of bf16), so a file of another start,
    or one that another start appended to, shows another number; the model path must be the same too."""
    if server_sum is None:
        return False, "the live server's /server_info did not answer, so nothing ties the file to the server running now"
    logged, live = whole_number(facts.get("max_total_num_tokens")), server_sum.get("max_total_num_tokens")
    if logged is None or live is None:
        return False, ("%s has no max_total_num_tokens to tie the file to the server running now"
                       % ("the file" if logged is None else "/server_info"))
    if logged != live:
        return False, ("the file's max_total_num_tokens %d is not the live server's %d: it describes another start (an "
                       "earlier one, or one appended to the same file)" % (logged, live))
    paths = [v for v in (facts.get("model_path"), (server_info or {}).get("model_path")) if isinstance(v, str) and v]
    if len(paths) == 2 and os.path.normpath(paths[0]) != os.path.normpath(paths[1]):
        return False, "the file's model_path %s is not the live server's %s" % (_text(paths[0], 300), _text(paths[1], 300))
    return True, "max_total_num_tokens %d equals the live server's" % live


def _from_log(signal):
    if signal["name"] in LOG_SIGNALS:
        return True
    label = signal["source"] if signal["name"] == "argv" else signal["evidence"] if signal["name"] == "server" else ""
    return isinstance(label, str) and label.startswith(LOG_DUMP_LABELS)


def file_signals(signals, bound, why):
    """The signals with a log file's counting: its signals count as one when bound, else none of them."""
    out, kept = [], False
    for s in signals:
        if _from_log(s) and s["counted"]:
            if bound and not kept:
                kept = True
                s = dict(s, evidence="%s; from a log file, counted once for the file (%s)" % (s["evidence"], why))
            else:
                s = dict(s, counted=False, evidence="%s; from a log file, not counted (%s)" % (
                    s["evidence"], "the file already counts once" if bound else why))
        out.append(s)
    return out


# ---------------------------------------------------------------------------------------------
# Verdict


def _tp_size(inputs, facts, server_sum, parsed_argv):
    for value, label in ((inputs.get("tp_size"), "tp_size option"),
                         (facts.get("tp_size") if facts else None, "log ServerArgs dump"),
                         (server_sum.get("tp_size") if server_sum else None, "/server_info"),
                         (parsed_argv.get("tp_size") if parsed_argv else None, "argv")):
        tp = whole_number(value, digits=True, minimum=1)
        if tp is not None:
            return tp, label
    return None, None


def _overall(signals, expected_cls, min_signals):
    available = [s for s in signals if s["available"]]
    counted = sum(1 for s in signals if s["counted"])
    classes = sorted(set(s["verdict"] for s in available))
    if not classes:
        return "insufficient", counted
    if len(classes) > 1:
        return "mixed", counted
    only = classes[0]
    if only in ("bf16", expected_cls) and counted < min_signals:
        return "insufficient", counted
    return only, counted


def render_table(signals):
    rows = [("signal", "verdict", "counted", "evidence")]
    for s in signals:
        rows.append((s["name"], s["verdict"], "yes" if s["counted"] else "no", s["evidence"]))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = max(len(r[2]) for r in rows)
    lines = []
    for i, (a, b, c, d) in enumerate(rows):
        lines.append("%-*s | %-*s | %-*s | %s" % (w0, a, w1, b, w2, c, d))
        if i == 0:
            lines.append("%s-+-%s-+-%s-+-%s" % ("-" * w0, "-" * w1, "-" * w2, "-" * 8))
    return "\n".join(lines)


def _over_any_note():
    """Which launch settings override an explicit bf16, from FP8_RULES."""
    names = ["%s %s" % (rule["flags"][0], name) for rule in FP8_RULES if rule["over"] == "any" for name in rule["names"]]
    return "; in SGLang %s only %s overrides an explicit bf16" % (FP8_RULES_RELEASE, " or ".join(names))


def _fix(verdict, signals, counted, min_signals, explicit_flag, checkpoint_fp8, backend_rule=None, arch_rule=None):
    by = dict((s["name"], s) for s in signals)
    parts = []
    if verdict in ("fp8", "other", "mixed"):
        if backend_rule is not None:
            parts.append("%s: choose another attention backend in the unit's ExecStart and restart the unit"
                         % rule_text(*backend_rule))
        elif explicit_flag and by["argv"]["verdict"] != "bf16":
            parts.append("the launch command sets %s explicitly to a non-bf16 value: change it to --kv-cache-dtype "
                         "bf16 in the unit's ExecStart and restart the unit" % KV_FLAG)
        elif arch_rule is not None:
            parts.append("%s: set --kv-cache-dtype bf16 in the unit's ExecStart and restart the unit"
                         % rule_text(*arch_rule))
        else:
            parts.append("launch SGLang with --kv-cache-dtype bf16 (in the unit's ExecStart) and restart the unit; "
                         "SGLang does not consult the checkpoint's KV metadata for an explicit value" + _over_any_note())
        if backend_rule is not None or (arch_rule is not None and not checkpoint_fp8):
            parts.append("Why: " + WHY_SCALE)
        elif checkpoint_fp8 or verdict == "fp8":
            parts.append("Why: " + WHY_FP8)
    if verdict == "mixed":
        parts.append("The signals disagree: if the unit was changed, restart it so the server, its log and the unit "
                     "describe the same invocation, and pass only the current invocation's log facts")
    if verdict == "insufficient":
        missing = ["%s (%s)" % (s["name"], HOW_TO[s["name"]]) for s in signals
                   if not s["available"] and s["name"] != "fp8_warning"
                   and not (s["name"] == "argv" and by["checkpoint"]["counted"])
                   and not (s["name"] == "checkpoint" and explicit_flag)]
        parts.append("Only %d independent signal(s) available, %d required: make more available: %s"
                     % (counted, min_signals, "; ".join(missing) if missing else "no other source can be added"))
    return ". ".join(parts)


def _restart_notes(inputs, flag, flag_known, server_sum, release, run_value, run_label, backend_rule, arch_rule):
    """A note when the unit's flag is not the one the running server was started with (changed without a restart)."""
    if inputs.get("argv") is None or not flag_known:
        return []
    if release != "0.5.16" and server_sum is not None and server_sum["launch_flag"] is not None:
        # SGLang 0.5.20+ shows the flag as typed
        running, label = server_sum["launch_flag"], "/server_info launch_command"
    elif run_value is not None:
        running, label = run_value, run_label
        set_by_rule = backend_rule is not None or (classify_dtype(flag) == "auto" and arch_rule is not None)
        if release != "0.5.16" and dtype_name(running) == "fp8_e4m3" and set_by_rule:
            return []  # SGLang's own rule turned the flag into fp8_e4m3
    else:
        return []
    if _same_flag(flag, running):
        return []
    return ["the launch command has --kv-cache-dtype %s but %s shows the running server was started with %s: the "
            "unit changed without a restart; restart it" % (flag, label, running)]


def max_countable(expected_cls):
    """Signals that can ever count for a verdict (the FP8 warning never says bf16)."""
    return 5 if expected_cls == "fp8" else 4


def evaluate(inputs):
    """Verdicts of every signal and the overall decision (see the module docstring for the rules).

    ``inputs`` keys (all optional except as noted): ``argv`` (list), ``argv_source`` (label),
    ``argv_error`` (why argv could not be read), ``checkpoint`` (``inspect_checkpoint`` result),
    ``checkpoint_error``, ``server_info`` (a /server_info JSON object), ``server_error``,
    ``log_facts`` (``sglang_log._log_audit`` facts), ``tp_size``, ``expected`` (bf16 or fp8_e4m3),
    ``waiver_reason`` (required for fp8_e4m3), ``min_signals`` (default 3), ``checkpoint_given`` (the directory the
    caller named, checked against the one served), ``log_source`` (``journal``, the default, or ``file``: see the
    module docstring).

    The model served comes from the launch argv and /server_info (``served_model``); a disagreement between them, or
    with ``checkpoint_given``, fails the guard (verdict ``mixed``) naming both values.
    """
    if not isinstance(inputs, dict):
        raise GuardError("inputs must be a dict")
    expected = inputs.get("expected", "bf16") or "bf16"
    if not isinstance(expected, str) or expected not in EXPECTED:
        raise GuardError("expected must be one of %s, got %r" % (", ".join(EXPECTED), expected))
    expected_cls = EXPECTED[expected]
    waiver = inputs.get("waiver_reason")
    if expected_cls == "fp8" and not (isinstance(waiver, str) and waiver.strip()):
        raise GuardError("expected fp8_e4m3 needs waiver_reason: say why an FP8 KV cache (scale 1.0 without "
                         "calibrated k/v scales) is acceptable here")
    min_signals = inputs.get("min_signals", DEFAULT_MIN_SIGNALS)
    min_signals = DEFAULT_MIN_SIGNALS if min_signals is None else min_signals
    if whole_number(min_signals) is None or not 1 <= whole_number(min_signals) <= max_countable(expected_cls):
        raise GuardError("min_signals must be an integer from 1 to %d (the independent signals that can say %s), "
                         "got %r" % (max_countable(expected_cls), expected_cls, min_signals))
    min_signals = whole_number(min_signals)
    log_source = inputs.get("log_source") or "journal"
    if log_source not in LOG_SOURCES:
        raise GuardError("log_source must be one of %s, got %r" % (", ".join(LOG_SOURCES), log_source))

    facts = _dict(inputs.get("log_facts"))
    ckpt = _dict(inputs.get("checkpoint"))
    ckpt_error = inputs.get("checkpoint_error") or (None if ckpt is not None or inputs.get("checkpoint") is None
                                                    else "checkpoint input is not a dict")
    server_error = inputs.get("server_error")
    info = inputs.get("server_info")
    if info is not None and not isinstance(info, dict) and not server_error:
        server_error = "the /server_info answer is not a JSON object"
    # the release's reporting rules: /server_info's version, else the log's server_args dump
    dump_format = facts.get("server_args_format") if facts else None
    server_sum = kv_summary(info, dump_format) if isinstance(info, dict) and not server_error else None
    release = server_sum["release"] if server_sum else kv_release(None, dump_format)[0]
    version = parse_version(server_sum["version"]) if server_sum else None
    rules_apply = version is None or version >= parse_version(FP8_RULES_RELEASE)

    flag, flag_label, flag_known, problem, parsed = _launch_flag(inputs, facts, server_sum, release)
    backend_rule = fp8_rule(backends=parsed["backends"]) if parsed and rules_apply else (None, None)
    backend_rule = backend_rule if backend_rule[0] is not None and dtype_name(flag) != "fp8_e4m3" else None
    arch_rule = fp8_rule(architecture=checkpoint_architecture(ckpt)) if rules_apply else (None, None)
    arch_rule = arch_rule if arch_rule[0] is not None else None
    run_value, run_label = _running_setting(facts, server_sum)
    notes = _restart_notes(inputs, flag, flag_known, server_sum, release, run_value, run_label, backend_rule, arch_rule)
    # the checkpoint resolves what the running server's model runner got, when that is known
    if run_value is not None:
        ck_value, ck_label, ck_known = run_value, run_label + " kv_cache_dtype=%r" % run_value, True
    elif backend_rule is not None and flag_known:
        ck_value, ck_label, ck_known = "fp8_e4m3", flag_label + ", set to fp8_e4m3 by " + backend_rule[1], True
    else:
        ck_value, ck_label, ck_known = flag, flag_label, flag_known
    ck_auto = ck_known and classify_dtype(ck_value) == "auto"
    arch = _dict(ckpt.get("architecture")) if ckpt else None
    tp_size, tp_label = _tp_size(inputs, facts, server_sum, parsed)

    argv_sig = argv_signal(flag, flag_label, flag_known, problem, backend_rule)
    signals = [
        argv_sig,
        checkpoint_signal(ckpt, ckpt_error, ck_value, ck_label, ck_known, argv_sig["counted"],
                          arch_rule if ck_auto or not ck_known else None),
        server_signal(server_sum, server_error, facts),
        log_dtype_signal(facts),
        pool_signal(facts, arch, tp_size, tp_label),
        fp8_warning_signal(facts),
    ]
    if facts is not None and log_source == "file":
        bound, why = log_file_binding(facts, server_sum, info if server_sum is not None else None)
        signals = file_signals(signals, bound, why)
        if not bound:
            notes.append("the log file's signals do not count: %s" % why)
    verdict, counted = _overall(signals, expected_cls, min_signals)
    passed = verdict == expected_cls or (expected_cls == "fp8" and verdict == "bf16")
    waived = passed and expected_cls == "fp8" and verdict == "fp8"
    explicit_flag = classify_dtype(ck_value if ck_known else None) in ("bf16", "fp8", "other")
    auto, _legacy, _algo, _src = _checkpoint_kv(ckpt) if ckpt else (None, None, None, None)
    fix = None if passed else _fix(verdict, signals, counted, min_signals, explicit_flag, classify_dtype(auto) == "fp8",
                                   backend_rule, arch_rule if ck_auto else None)
    if facts is not None and ckpt is not None and isinstance(facts.get("model_path"), str) and isinstance(ckpt.get("path"), str):
        if os.path.isabs(facts["model_path"]) and os.path.normpath(facts["model_path"]) != os.path.normpath(ckpt["path"]):
            notes.append("the log's model_path %s is not the checkpoint given (%s): the checkpoint signal may describe "
                         "another model" % (facts["model_path"], ckpt["path"]))
    served = served_model(inputs.get("argv"), info if server_sum is not None else None)
    conflicts = [c for c in (served["conflict"], _checkpoint_conflict(served, inputs.get("checkpoint_given"))) if c]
    if conflicts:
        verdict, passed, waived = "mixed", False, False
        fix = ". ".join(conflicts + ([fix] if fix else []))
    table = render_table(signals)
    return {
        "verdict": verdict,
        "passed": passed,
        "expected": expected,
        "waived": waived,
        "waiver_reason": waiver if waived else None,
        "available_signals": counted,
        "min_signals": min_signals,
        "signals": signals,
        "table": table,
        "fix": fix,
        "notes": notes,
        "model": dict(served, checkpoint=ckpt.get("path") if ckpt else None),
        "message": _message(verdict, passed, waived, counted, min_signals, expected, table, fix, waiver),
    }


def _message(verdict, passed, waived, counted, min_signals, expected, table, fix, waiver):
    if passed:
        head = "KV cache guard passed: verdict %s from %d independent signal(s) (%d required)" % (verdict, counted, min_signals)
        if waived:
            head += "; FP8 KV cache waived: %s" % waiver
        return head + "\n" + table
    head = ("KV cache guard failed: verdict %s, expected %s (%d independent signal(s) available, %d required)"
            % (verdict, expected, counted, min_signals))
    return "%s\n%s\nFix: %s" % (head, table, fix)
