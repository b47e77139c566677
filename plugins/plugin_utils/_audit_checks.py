# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""The accuracy audit's decisions: from what the info modules returned to the checks, the verdict and the report.

Pure Python (stdlib only). Inputs are the registered results of ``kv_cache_guard``, ``log_audit``, ``server_info``
and ``checkpoint_info`` and the text of ``systemctl show -p ActiveState -p Environment``; any of them may be
missing or a failed result, and the check that needs it is then ``unknown``. The byte sizes come from
``_kv_budget`` (bytes per token, Mamba state per slot, requests per context length), never recomputed here.

Each check is ``{id, short, title, status, summary, evidence, fix}``; status is ``fail`` (only the KV guard),
``warning``, ``note`` (a precision note), ``unknown`` (could not be checked), ``ok``, ``n/a`` or ``info``.
"""

from __future__ import absolute_import, division, print_function

import numbers
import re

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import jinja_int as _int
from ansible_collections.llmops.sglang.plugins.module_utils._kv_budget import GIB, BudgetError, concurrency, plan
from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact
from ansible_collections.llmops.sglang.plugins.plugin_utils._report_text import plain
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import registered

# The audit's own log rules (roles/audit/vars/main.yml defines their patterns): info lines it reads, not findings.
WEIGHTS_RULE = "audit_weights_loaded"
MAMBA_RULE = "audit_mamba_state_dtype"
INTERNAL_RULES = (WEIGHTS_RULE, MAMBA_RULE)
# Spellings of the SSM state dtype in the environment, the flag, the config and the log.
SSM_DTYPE_ALIASES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16", "torch.bfloat16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16", "torch.float16": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32", "torch.float32": "float32",
}
# The guard's verdict -> the KV dtype the capacity table is sized in.
KV_DTYPE_BY_VERDICT = {"fp8": "fp8_e4m3", "bf16": "bf16"}
# A pool's bytes per element -> the SSM dtype it holds (16-bit cannot tell bfloat16 from float16).
POOL_DTYPES = ((3.5, 4.5, "float32"), (1.75, 2.25, "16-bit"))
# ssm_state size is printed with two decimals: only pools of 0.1 GB or more are precise enough.
MIN_POOL_GB = 0.1
ISSUES = ("fail", "warning", "note", "unknown")
# The settings audit() reads, without their audit_ prefix, and their defaults.
DEFAULTS = {
    "unit": None, "log_file": None, "url": None, "report_dir": None,
    "expected_kv_dtype": "bf16", "min_signals": 3,
    "expected_quantization": "modelopt_fp4", "expected_quant_algo": "NVFP4",
    "expected_mamba_ssm_dtype": "float32", "spec_min_accept_length": 2.0,
    "context_lengths": [32768, 131072], "mamba_slots_per_request": 3,
}
# The same settings by the role's names: its vars/main.yml hands exactly these over (_audit_setting_names; a unit test
# keeps the two equal).
SETTINGS = tuple("audit_" + name for name in DEFAULTS)
# The role's results the checks read (its _audit_result_names), by the key audit() takes them under.
RESULTS = (("guard", "_audit_guard_run"), ("log", "_audit_log"), ("server", "_audit_server"), ("checkpoint", "_audit_ckpt"),
           ("unit_show", "_audit_unit_show"), ("model_dir", "_audit_model_dir"))
QUESTION = "Are we doing anything that could be reducing model accuracy?"
SUMMARY_LINE = "%-5s kv=%-7s weights=%-19s ssm=%-9s spec=%-11s ctx/pool=%-16s %-20s issues=%s"
NO_GUARD = "the guard did not run"


class AuditError(ValueError):
    """Settings the audit cannot work with; the message names the setting and the fix."""


def _dict(value):
    return value if isinstance(value, dict) and value else {}


def _search(pattern, text):
    m = re.search(pattern, text or "", re.M)
    return m.group(1) if m else None


def _first_text(findings, rule):
    """The first evidence line of a finding, or ''."""
    for f in findings:
        if f.get("rule") == rule:
            return (_dict((f.get("evidence") or [{}])[0])).get("text", "")
    return ""


def _check(id_, title, short, status, summary, evidence, fix=None):
    return {"id": id_, "short": short, "title": title, "status": status, "summary": summary,
            "evidence": evidence, "fix": fix}


def guard_record(run, log, settings):
    """The fact audit_guard: the kv_cache_guard result, or what stands for it when the guard could not run."""
    run = run if isinstance(run, dict) else {}
    log = log if isinstance(log, dict) else {}
    return {
        "passed": run.get("passed", False),
        # "error": the guard could not run (bad options); its message says why
        "verdict": run.get("verdict", "error"),
        "expected": settings["expected_kv_dtype"],
        "waived": run.get("waived", False),
        "waiver_reason": run.get("waiver_reason"),
        "available_signals": run.get("available_signals", 0),
        "min_signals": run.get("min_signals", settings["min_signals"]),
        "signals": run.get("signals", []),
        "table": run.get("table", ""),
        "fix": run.get("fix", run.get("msg", NO_GUARD)),
        "notes": run.get("notes", []),
        # printed by the role when the guard fails: its evidence lines come from the log
        "message": plain(run.get("msg", NO_GUARD), lines=True),
        "log_error": None if "facts" in log else log.get("msg", "log_audit did not run"),
    }


def budgets(arch, tp_size, guard_verdict, context_lengths):
    """_kv_budget.plan for bf16 (and fp8_e4m3 when the guard saw FP8), Mamba state in float32; {} when unknown.

    float32 on purpose: the running SSM dtype is inferred from the pool against this width.
    """
    out = {}
    if not arch or _int(tp_size) <= 0:
        return out
    for dtype in ["bf16"] + (["fp8_e4m3"] if guard_verdict == "fp8" else []):
        try:
            out[dtype] = plan(arch, _int(tp_size), dtype, mamba_ssm_dtype="float32", context_lengths=context_lengths)
        except BudgetError:
            pass  # a model the estimator does not cover: the checks that need the sizes say unknown
    return out


def check_kv(guard):
    status = "fail" if not guard["passed"] else ("note" if guard["waived"] else "ok")
    summary = "KV cache %s, expected %s (%d independent signal(s), %d required)" % (
        guard["verdict"], guard["expected"], _int(guard["available_signals"]), _int(guard["min_signals"]))
    if guard["waived"]:
        summary += "; FP8 accepted: %s" % guard["waiver_reason"]
    evidence = [s.get("evidence") for s in guard["signals"] if s.get("available")]
    return _check("kv_cache_dtype", "KV cache dtype", guard["verdict"], status, summary, evidence,
                  None if guard["passed"] else guard["fix"])


def weight_sources(findings, si, quant):
    """What each source says about the weight format: the log's Load weight end line, the flag, the checkpoint."""
    line = _first_text(findings, WEIGHTS_RULE)
    sources = []
    if "quant=" in line:
        method = _search(r"quant=([\w.-]+)", line)
    else:
        method = "none" if "dtype=" in line else None  # an unquantized model logs its dtype instead
    if method:
        algo = _search(r"quant_algo=([\w.-]+)", line)
        sources.append({"source": "log", "method": method, "algo": algo,
                        "text": "log (Load weight end): quant=%s, quant_algo=%s" % (method, algo)})
    if si.get("quantization"):
        sources.append({"source": "flag", "method": si["quantization"], "algo": None,
                        "text": "/server_info quantization=%s (the --quantization flag)" % si["quantization"]})
    if quant:
        method, algo = quant.get("method"), quant.get("quant_algo")
        sources.append({"source": "checkpoint", "method": method, "algo": algo,
                        "text": "checkpoint %s: method %s, quant_algo %s" % (quant.get("source", "?"), method, algo)})
    return sources


def check_weights(findings, si, quant, settings):
    method, algo = settings["expected_quantization"], settings["expected_quant_algo"]
    sources = weight_sources(findings, si, quant)
    bad = ([s for s in sources if s["method"] != method]
           + [s for s in sources if s["method"] == method and s["algo"] and s["algo"] != algo])
    if not sources:
        short, status = "unknown", "unknown"
        summary = "no source tells the weight quantization (no 'Load weight end' line, checkpoint not readable)"
    elif bad:
        short, status = "mismatch", "warning"
        summary = "expected %s/%s, found %s" % (method, algo, "; ".join(s["text"] for s in bad))
    else:
        short, status = "%s/%s" % (sources[0]["method"], sources[0]["algo"]), "ok"
        summary = "%s/%s as expected (%s)" % (method, algo, ", ".join(s["source"] for s in sources))
    fix = None
    if bad:
        fix = ("Serve the validated checkpoint with SGLang detecting its quantization (no --quantization flag, or "
               "--quantization %s); any other weight format needs its own accuracy run (for example GSM8K) before it "
               "is trusted, then set audit_expected_quantization / audit_expected_quant_algo" % method)
    return _check("weight_quantization", "Weight quantization", short, status, summary,
                  [s["text"] for s in sources], fix)


def check_log(findings, lf, log_error, log_file=None):
    where = ("the log file %s" % log_file) if log_file else "the current invocation's log"
    listed = [f for f in findings if f.get("rule") not in INTERNAL_RULES]
    problems = [f for f in listed if f.get("severity") in ("error", "warning")]
    active = [f for f in problems if not f.get("waived")]
    waived = [f for f in problems if f.get("waived")]
    if not lf:
        short, status, summary = "unknown", "unknown", "the log could not be read: %s" % log_error
    elif active:
        short, status = "%d finding(s)" % len(active), "warning"
        summary = "%d finding(s) in %s: %s" % (
            len(active), where, ", ".join("%s x%s" % (f.get("rule"), f.get("count")) for f in active))
    else:
        short, status = "clean", "ok"
        summary = "no precision warning or error in " + where + (
            " (%d waived)" % len(waived) if waived else "")
    fixes = []
    for f in active:
        if f.get("fix") not in fixes:
            fixes.append(f.get("fix"))
    evidence = [next((e.get("text") for e in f.get("evidence") or []), None) for f in active]
    check = _check("log_findings", "Precision warnings and errors in the log", short, status, summary, evidence,
                   " ".join("%s" % x for x in fixes) or None)
    check["findings"] = listed
    return check


def check_spec(si, settings):
    algo = si.get("speculative_algorithm")
    accept = [s["avg_spec_accept_length"] for s in si.get("internal_states") or []
              if isinstance(s, dict) and isinstance(s.get("avg_spec_accept_length"), numbers.Number)]
    floor = settings["spec_min_accept_length"]
    low = bool(accept) and min(accept) < float(floor)
    if not si:
        short, status = "unknown", "unknown"
        summary = "/server_info not readable, so it is unknown whether speculative decoding is on"
    elif not algo:
        short, status, summary = "off", "n/a", "speculative decoding off"
    elif not accept:
        short, status = "accept ?", "unknown"
        summary = "%s on, but /server_info reports no avg_spec_accept_length" % algo
    else:
        short, status = "accept %s" % min(accept), "warning" if low else "ok"
        summary = "%s on, average accept length %s (%s or more expected)" % (algo, min(accept), floor)
    fix = None
    if low:
        fix = ("Few draft tokens are accepted: check that the draft (MTP) weights come from the same checkpoint, that "
               "the draft KV cache is not FP8 (the guard, and the FP8 warning the draft prints), and that "
               "--speculative-num-steps / --speculative-eagle-topk match the validated setup; measure again under "
               "real traffic")
    evidence = ["internal_states[*].avg_spec_accept_length=%s" % accept] if algo else []
    return _check("speculative_decoding", "Speculative-decoding acceptance", short, status, summary, evidence, fix)


def kv_pool_tokens(si, lf):
    """max_total_num_tokens (from /server_info, else the log) and where it came from; (None, 'log') when unknown."""
    if si.get("max_total_num_tokens"):
        return si["max_total_num_tokens"], "/server_info"
    return lf.get("max_total_num_tokens") or None, "log"


def check_context(si, models, lf, arch):
    native = arch.get("max_position_embeddings")
    first_model = _dict(models[0]) if models else {}
    candidates = [(si.get("context_length"), "/server_info context_length"),
                  (first_model.get("max_model_len"), "/v1/models max_model_len"),
                  (native, "checkpoint max_position_embeddings")]
    ctx, ctx_source = next((c for c in candidates if c[0]), (None, "unknown"))
    cap, cap_source = kv_pool_tokens(si, lf)
    beyond = native is not None and ctx is not None and _int(ctx) > _int(native)
    short = "%s/%s" % (ctx or "?", cap or "?")
    fix = None
    if not (ctx and cap):
        status = "unknown"
        summary = "context length %s (%s), KV capacity %s: not both known" % (ctx or "?", ctx_source, cap or "?")
    else:
        too_long = _int(cap) < _int(ctx)
        status = "warning" if too_long else ("note" if beyond else "ok")
        summary = "context length %s (%s), KV pool %s tokens = %.1f full-length request(s)%s" % (
            ctx, ctx_source, cap, _int(cap) / max(_int(ctx), 1),
            "; beyond the native %s (RoPE scaling)" % native if beyond else "")
        if too_long:
            fix = ("A request at the full context length does not fit in the KV pool, so SGLang rejects or retracts "
                   "it: lower --context-length or give the KV cache more memory (--mem-fraction-static, more GPUs)")
        elif beyond:
            fix = ("The context length exceeds what the model was trained for; quality past %s tokens depends on "
                   "RoPE scaling: validate long-context accuracy or lower --context-length" % native)
    evidence = ["max_total_num_tokens %s (%s)" % (cap, cap_source)] if cap else []
    return _check("context_capacity", "Context length against KV capacity", short, status, summary, evidence, fix)


def ssm_pool_bytes_per_element(pool, bf16_budget):
    """Bytes per element of the Mamba SSM state the server allocated (0 when the sizes cannot tell)."""
    mamba = (bf16_budget or {}).get("mamba")
    elems = _int(mamba.get("ssm_bytes_per_slot_per_gpu")) // 4 if mamba else 0  # the budget is in float32
    size_gb, slots = pool.get("ssm_state_gb") or 0, pool.get("max_mamba_cache_size") or 0
    if elems > 0 and size_gb >= MIN_POOL_GB and slots > 0:
        return size_gb * GIB / slots / elems
    return 0


def check_mamba(findings, si, lf, arch, env, bf16_budget, settings):
    expected = settings["expected_mamba_ssm_dtype"]
    hybrid = _int(arch.get("num_linear_attention_layers")) > 0 or lf.get("mamba_pool") is not None
    env_dtype = _search(r"(?:^|\s|\")SGLANG_MAMBA_SSM_DTYPE=([\w.]+)", env)
    # SGLang: the environment wins over the flag, the flag over the model config; float32 otherwise
    declared, declared_source = next(c for c in [
        (env_dtype, "unit Environment SGLANG_MAMBA_SSM_DTYPE"),
        (si.get("mamba_ssm_dtype"), "--mamba-ssm-dtype, read from /server_info"),
        (arch.get("mamba_ssm_dtype"), "checkpoint config mamba_ssm_dtype"),
        ("float32", "SGLang's default")] if c[0])
    logged = _search(r"ssm_dtype=(?:torch\.)?(\w+)", _first_text(findings, MAMBA_RULE))
    pool = _dict(lf.get("mamba_pool"))
    bpe = ssm_pool_bytes_per_element(pool, bf16_budget)
    pool_dtype = next((name for low, high, name in POOL_DTYPES if low <= bpe <= high), None)
    sources = [{"dtype": SSM_DTYPE_ALIASES.get(declared, declared), "text": "%s: %s" % (declared_source, declared)}]
    if logged:
        sources.append({"dtype": SSM_DTYPE_ALIASES.get(logged, logged),
                        "text": "log 'Mamba2 state dtype': ssm_dtype=%s" % logged})
    if pool_dtype:
        sources.append({"dtype": pool_dtype, "text": "Mamba pool (%s): %d slots, ssm_state %.2f GB -> %.2f bytes/element" % (
            pool.get("rank", "?"), pool["max_mamba_cache_size"], pool["ssm_state_gb"], bpe)})
    # a 16-bit pool only differs from float32: it agrees with any 16-bit expectation
    off = [s for s in sources if s["dtype"] != expected and not (expected != "float32" and s["dtype"] == "16-bit")]
    fix = None
    if not hybrid:
        short, status = ("unknown", "unknown") if not arch else ("n/a", "n/a")
        summary = ("the architecture is unknown (checkpoint not readable) and the log shows no Mamba pool" if not arch
                   else "the model has no linear-attention (Mamba) layers")
    else:
        short, status = (off[0]["dtype"], "note") if off else (declared, "ok")
        summary = "SSM state %s (%s)%s%s%s" % (
            declared, declared_source,
            ", pool %.2f bytes/element (%s)" % (bpe, pool_dtype) if pool_dtype else "",
            ", log ssm_dtype=%s" % logged if logged else "",
            "; %s expected" % expected if off else "")
        if off:
            kept = next((s["dtype"] for s in off if s["dtype"] != "16-bit"), "16-bit")
            fix = ("Precision note: the recurrent SSM state of the %s linear-attention layers is kept in %s and "
                   "accumulates rounding over long sequences. Drop --mamba-ssm-dtype / SGLANG_MAMBA_SSM_DTYPE (SGLang "
                   "keeps it in float32 by default) and restart, unless the extra Mamba slots are needed and the "
                   "accuracy was validated" % (arch.get("num_linear_attention_layers", "?"), kept))
    return _check("mamba_ssm_dtype", "Mamba SSM state dtype", short, status, summary,
                  [s["text"] for s in sources], fix)


def capacity(si, lf, guard_verdict, plans, settings):
    """Concurrent requests at each context length: KV pool, Mamba slots and max_running_requests, whichever is least."""
    tokens = kv_pool_tokens(si, lf)[0]
    kv_dtype = KV_DTYPE_BY_VERDICT.get(guard_verdict)
    bpt = (plans.get(kv_dtype) or {}).get("kv_bytes_per_token_per_gpu")
    bpt_bf16 = (plans.get("bf16") or {}).get("kv_bytes_per_token_per_gpu")
    slots = _dict(lf.get("mamba_pool")).get("max_mamba_cache_size") or None
    running = si.get("max_running_requests")
    lengths = settings["context_lengths"]
    try:
        rows = concurrency(bpt or 0, lengths, _int(tokens) if tokens else None, _int(slots) if slots else None,
                           settings["mamba_slots_per_request"])
    except BudgetError as exc:
        raise AuditError("%s: set audit_context_lengths to positive token counts and audit_mamba_slots_per_request "
                         "to 1 or more" % exc)
    table = []
    for row in rows:
        length = row["context_length"]
        label = "%dK" % (length // 1024) if length % 1024 == 0 else "%d" % length
        limits = [x for x in (row["kv_limited_requests"], row["mamba_limited_requests"], running) if x is not None]
        concurrent = min(limits) if limits else None
        # FP8 halves the bytes per token: the same pool holds half as many tokens in bf16
        bf16 = (_int(tokens) * _int(bpt) // max(_int(bpt_bf16), 1) // length
                if kv_dtype == "fp8_e4m3" and tokens and bpt and bpt_bf16 else None)
        mamba, kv = row["mamba_limited_requests"], row["kv_limited_requests"]
        table.append({
            "context_length": length, "label": label, "kv_dtype": kv_dtype, "kv_tokens": tokens,
            "kv_gib_per_request": round(row["kv_gib_per_request"], 3) if bpt else None,
            "kv_limited_requests": kv, "mamba_limited_requests": mamba, "max_running_requests": running,
            "concurrent_requests": concurrent, "bf16_kv_limited_requests": bf16,
            "text": "%s: %s concurrent (KV %s%s%s)%s" % (
                label, concurrent, kv, ", Mamba %s" % mamba if mamba is not None else "",
                ", max running %s" % running if running is not None else "",
                ", %s by KV in bf16" % bf16 if bf16 is not None else ""),
        })
    return table


def check_capacity(table):
    known = any(r["kv_tokens"] for r in table)
    return _check("kv_capacity", "KV capacity at long contexts",
                  " ".join("%s:%s" % (r["label"], r["concurrent_requests"] or "?") for r in table),
                  "info" if known else "unknown",
                  "; ".join(r["text"] for r in table) if known
                  else "the KV pool size is unknown (no /server_info, no max_total_num_tokens line)",
                  [r["text"] for r in table])


def verdict(checks):
    """FAIL when the guard fails, WARN on a warning or an unknown check, NOTE on a precision note, else OK."""
    status = set(c["status"] for c in checks)
    if "fail" in status:
        return "FAIL"
    if status & {"warning", "unknown"}:
        return "WARN"
    return "NOTE" if "note" in status else "OK"


def _settings(settings):
    if not isinstance(settings, dict):
        raise AuditError("settings must be a dict (the role's _audit_settings), got %s" % type(settings).__name__)
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise AuditError("unknown settings %s: use %s" % (", ".join(unknown), ", ".join(sorted(DEFAULTS))))
    out = dict(DEFAULTS, **settings)
    lengths = out["context_lengths"]
    if not isinstance(lengths, (list, tuple)):
        raise AuditError("audit_context_lengths must be a list of token counts, got %r" % (lengths,))
    try:
        float(out["spec_min_accept_length"])
    except (TypeError, ValueError):
        raise AuditError("audit_spec_min_accept_length must be a number, got %r" % (out["spec_min_accept_length"],))
    return out


def audit(facts, settings):
    """Every check, the capacity table, the verdict, the report, the summary line and the set_stats text.

    facts: {host, guard, log, server, checkpoint, unit_show, model_dir}, each as the role registered it
    (missing, skipped or failed results count as unknown). settings: see DEFAULTS.
    """
    if not isinstance(facts, dict):
        raise AuditError("facts must be a dict {host, guard, log, server, checkpoint, unit_show, model_dir}")
    settings = _settings(settings)
    log, server, ckpt = _dict(facts.get("log")), _dict(facts.get("server")), _dict(facts.get("checkpoint"))
    si, lf = _dict(server.get("server_info")), _dict(log.get("facts"))
    arch, quant = _dict(ckpt.get("architecture")), _dict(ckpt.get("quantization"))
    models = server.get("models") or []
    findings = log.get("findings") or []
    unit_show = facts.get("unit_show")
    unit_show = (unit_show.get("stdout") if isinstance(unit_show, dict) else unit_show) or ""
    env = _search(r"^Environment=(.*)$", unit_show) or ""
    unit_state = _search(r"^ActiveState=(.*)$", unit_show)

    guard = guard_record(facts.get("guard"), log, settings)
    plans = budgets(arch, lf.get("tp_size") or si.get("tp_size"), guard["verdict"], settings["context_lengths"])
    table = capacity(si, lf, guard["verdict"], plans, settings)
    checks = [
        check_kv(guard),
        check_weights(findings, si, quant, settings),
        check_log(findings, lf, guard["log_error"], settings["log_file"]),
        check_spec(si, settings),
        check_context(si, models, lf, arch),
        check_mamba(findings, si, lf, arch, env, plans.get("bf16"), settings),
        check_capacity(table),
    ]
    result = verdict(checks)
    issues = [c["id"] for c in checks if c["status"] in ISSUES]
    by_id = dict((c["id"], c["short"]) for c in checks)
    host = facts.get("host")
    report = {
        "host": host,
        "question": QUESTION,
        "verdict": result,
        "kv_cache_guard": dict((k, v) for k, v in guard.items() if k not in ("message", "log_error")),
        "checks": checks,
        "capacity": table,
        "deployment": {
            "unit": settings["unit"],
            # null: the unit's journal is the log
            "log_file": settings["log_file"],
            "unit_state": "unknown" if unit_state is None else unit_state,
            "url": settings["url"],
            "checkpoint": facts.get("model_dir"),
            "server_reachable": bool(si),
            "server_errors": server.get("errors", []),
            "sglang_version": si.get("version", lf.get("sglang_version")),
            # the flag as typed (launch_command on SGLang 0.5.20+): the top-level kv_cache_dtype is the resolved value
            "kv_cache_dtype_flag": _dict(server.get("kv_cache_dtype")).get("flag") or lf.get("kv_cache_dtype_configured"),
            "tp_size": si.get("tp_size", lf.get("tp_size")),
            "checkpoint_error": None if "architecture" in ckpt else ckpt.get("msg", "not inspected"),
        },
        "log": {
            "error": guard["log_error"],
            "invocation_id": _dict(log.get("source")).get("invocation_id"),
            "phase": lf.get("phase"),
            "starts": lf.get("starts"),
            "fatal": lf.get("fatal"),
            "failed_rules": log.get("failed_rules", []),
        },
    }
    # play output: the shorts carry values the server and the log gave (a quantization name, a dtype)
    line = SUMMARY_LINE % tuple(plain(v) for v in (
        result, by_id["kv_cache_dtype"], by_id["weight_quantization"], by_id["mamba_ssm_dtype"],
        by_id["speculative_decoding"], by_id["context_capacity"], by_id["kv_capacity"], ",".join(issues) or "-"))
    return {
        "guard": guard,
        "checks": checks,
        "capacity": table,
        "verdict": result,
        "report": report,
        "summary": {"verdict": result, "kv": guard["verdict"], "passed": guard["passed"], "issues": issues,
                    "report": "%s/%s/audit.json" % (settings["report_dir"], host), "line": line},
        "stats": stats(result, guard, checks, issues, line, report),
    }


def stats(result, guard, checks, issues, line, report):
    """What set_stats publishes per host: AWX keeps it with the job (its artifacts), after the execution environment
    and its report files are gone. The verdict, the guard's counts, each check's status, where the server was read and
    the summary line; no evidence. Through _redact (the one redaction rule) and plain (the line carries server values)."""
    deployment = report["deployment"]
    return redact({
        "verdict": result,
        "kv": guard["verdict"],
        "passed": guard["passed"],
        "signals": "%s of %s" % (guard["available_signals"], guard["min_signals"]),
        "issues": issues,
        "checks": dict((c["id"], c["status"]) for c in checks),
        "source": {"unit": deployment["unit"], "log_file": deployment["log_file"], "url": deployment["url"]},
        "line": plain(line),
    })


def checks(settings, results, host):
    """The role's phase: its settings by their audit_ names (SETTINGS), its results by name (RESULTS), the host."""
    if not isinstance(settings, dict) or not isinstance(results, dict):
        raise AuditError("the role hands over its settings and results as mappings (_audit_settings, _audit_results)")
    missing = [name for name in SETTINGS if name not in settings]
    if missing:
        raise AuditError("settings missing: %s (the role's _audit_setting_names lists them)" % ", ".join(missing))
    facts = dict((key, registered(results, name)) for key, name in RESULTS)
    facts["host"] = host
    return audit(facts, dict((name[len("audit_"):], settings[name]) for name in SETTINGS))


# The phases of the role's one filter, llmops.sglang.audit_plan: each takes the settings first.
PHASES = {"checks": checks}
ERRORS = (AuditError,)
