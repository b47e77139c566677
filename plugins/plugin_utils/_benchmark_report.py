# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""What the benchmark role decides and records around its two modules: which baseline the gate uses, this run's
history entry, the JSON report, the end-of-play summary and the two verdicts.

The role passes its settings by variable name (``benchmark_dataset``, ...) and the modules' registered results.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import truthy as _truthy
from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError
from ansible_collections.llmops.sglang.plugins.plugin_utils._report_text import plain
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import registered

PREFIX = "benchmark_"
# The controller's files of one host (under benchmark_report_dir/HOST).
HISTORY_FILE = "history.jsonl"
CANARY_STATE_FILE = "canary-state.json"
# One history line is about 1 KB: far more runs than any trend shows.
MAX_FILE_BYTES = 64 * 1024 * 1024
# Keys of a registered result that are Ansible's, not the module's (and the chart, saved as its own file).
_NOT_REPORTED = ("invocation", "changed", "failed")


def _setting(settings, name, default=None):
    return settings.get(PREFIX + name, default)


def _dict(value):
    return value if isinstance(value, dict) else {}


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


# Module option <- role setting (benchmark_<name>); None: absent when the setting is empty (null, "", 0).
BENCHMARK_OPTIONS = (
    ("url", "url"), ("api_key", None), ("validate_certs", "validate_certs"), ("ca_path", None), ("client_cert", None), ("client_key", None),
    ("model", None), ("engine", "engine"), ("concurrency", "concurrency"),
    ("dataset", "dataset"), ("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"), ("rounds", "rounds"),
    ("num_requests", None), ("duration", None), ("warmup_requests", "warmup_requests"), ("timeout", "request_timeout"),
    ("seed", "seed"), ("extra_body", "extra_body"), ("python", "python"), ("tokenizer", None),
    ("min_fraction", "min_fraction"),
)
CANARY_OPTIONS = (
    ("url", "url"), ("api_key", None), ("validate_certs", "validate_certs"), ("ca_path", None), ("client_cert", None), ("client_key", None),
    ("model", None), ("checks", "canary_checks"),
    ("needle_contexts", "canary_needle_contexts"), ("needle_depths", "canary_needle_depths"),
    ("needle_min_recall", "canary_needle_min_recall"), ("coding_min_score", "canary_coding_min_score"),
    ("timeout", "canary_timeout"), ("seed", "seed"), ("fail_on_drift", "canary_fail_on_drift"),
)
RUN_EVAL_OPTIONS = (("enabled", "run_eval"), ("python", "python"), ("num_examples", "run_eval_num_examples"),
                    ("min_score", "run_eval_min_score"))
# Every setting the role hands over (its vars/main.yml lists them as _benchmark_setting_names; a unit test keeps the two
# equal): the modules' options, then what the baseline, the record and the reports read.
SETTINGS = tuple(PREFIX + name for name in dict.fromkeys(
    [name or option for table in (BENCHMARK_OPTIONS, CANARY_OPTIONS, RUN_EVAL_OPTIONS) for option, name in table]
    + ["baseline", "profile", "canary", "fail", "render_png", "report_dir", "trend_runs"]))
# The results the phases read (_benchmark_result_names).
RESULTS = ("_benchmark_profiles", "_benchmark_plan", "_benchmark_result", "_benchmark_canary")


def read_text(path):
    """The text of a controller file of the role, or None when it does not exist; BenchmarkError past MAX_FILE_BYTES."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BenchmarkError("cannot read %s (%s): fix its permissions or remove it" % (path, exc.strerror or exc))
    if len(data) > MAX_FILE_BYTES:
        raise BenchmarkError("%s is larger than %d bytes: move old content out of it" % (path, MAX_FILE_BYTES))
    return data.decode("utf-8", "replace")


def host_dir(settings, host):
    """The host's report directory on the controller: benchmark_report_dir/HOST."""
    return os.path.join(str(_setting(settings, "report_dir")), str(host))


def canary_state(directory):
    """The canary's last good answers kept in directory, or None when there are none."""
    path = os.path.join(directory, CANARY_STATE_FILE)
    text = read_text(path)
    if text is None:
        return None
    try:
        state = json.loads(text)
    except ValueError:
        state = None
    if not isinstance(state, dict):
        raise BenchmarkError("%s is not the canary's JSON state: delete it (the next passing run writes it again)" % path)
    return state


def _options(settings, table):
    out = {}
    for option, name in table:
        if name is not None:
            out[option] = _setting(settings, name)
        elif _setting(settings, option):
            out[option] = _setting(settings, option)
    return out


def module_options(settings, host, baseline=None):
    """The options the role gives llmops.sglang.benchmark and llmops.sglang.accuracy_canary: {benchmark, accuracy_canary}.

    Both report failures in their result (fail_on_regression, fail_on_failure off): the role writes the reports first
    and fails afterwards. The canary's previous answers are the state kept in the host's report directory, when there
    is one.
    """
    if not isinstance(settings, dict):
        raise BenchmarkError("settings must map benchmark_* variables to their values")
    bench = _options(settings, BENCHMARK_OPTIONS)
    bench.update(baseline=baseline or {}, fail_on_regression=False, chart_title="SGLang benchmark: %s" % host)
    canary = _options(settings, CANARY_OPTIONS)
    canary.update(fail_on_failure=False, run_eval=_options(settings, RUN_EVAL_OPTIONS))
    previous = canary_state(host_dir(settings, host))
    if previous is not None:
        canary["previous"] = previous
    return {"benchmark": bench, "accuracy_canary": canary}


def choose_baseline(settings, profiles=None):
    """{ok, baseline, note, error}: the gate's baseline, why the gate is off when a profile does not fit, or (ok false)
    why none can be chosen.

    benchmark_baseline wins; else the profile named benchmark_profile in the profiles document ({profiles: {...}}),
    whose numbers hold for its own dataset only (the reference was measured with random tokens).
    """
    if not isinstance(settings, dict):
        raise BenchmarkError("settings must map benchmark_* variables to their values")
    given = _setting(settings, "baseline")
    if given is not None:
        return {"ok": True, "baseline": given, "note": "", "error": ""}
    doc = profiles if isinstance(profiles, dict) else {}
    table = doc.get("profiles") or {}
    if not isinstance(table, dict):
        table = {}
    name = _setting(settings, "profile")
    if not isinstance(name, (str, int)) or name not in table:
        return {"ok": False, "baseline": {}, "note": "", "error": (
            "benchmark_profile %s is not in the baseline file (profiles: %s): add it to benchmark_baseline_file or set "
            "benchmark_baseline" % (name, ", ".join(str(p) for p in table)))}
    profile = table[name] if isinstance(table[name], dict) else {}
    dataset = profile.get("dataset") or "random"
    if dataset != _setting(settings, "dataset"):
        return {"ok": True, "baseline": {}, "note": "gate off: profile %s was measured with the %s dataset" % (name, dataset),
                "error": ""}
    return {"ok": True, "baseline": profile.get("output_tok_s") or {}, "note": "", "error": ""}


def history_runs(text, keep):
    """The last ``keep`` runs of history.jsonl (one JSON object a line, blank lines skipped)."""
    runs = []
    for number, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        try:
            run = json.loads(line)
        except ValueError:
            raise BenchmarkError("history.jsonl line %d is not JSON: repair or delete that line" % number)
        runs.append(run)
    try:
        keep = int(keep)
    except (TypeError, ValueError, OverflowError):
        raise BenchmarkError("benchmark_trend_runs must be a number of runs, got %r" % (keep,))
    return runs[-keep:]


def _by_level(levels, pick):
    return dict((str(lv.get("concurrency")), pick(lv)) for lv in levels)


def _without(result, keys):
    return dict((k, v) for k, v in (result or {}).items() if k not in keys)


def _verdict(judged, passed, what, host, failure, success):
    # play output (the role's assert): the failure carries the server's error text
    return {"judged": judged, "passed": passed,
            "msg": plain("%s of %s%s" % (what, host, (": %s" % success) if passed else (" failed: %s" % failure)), lines=True)}


def run_record(settings, result, canary, host, gate_note="", now=None):
    """This run's record: {entry, history, report, summary, stats, chart, png, benchmark, canary}.

    ``entry`` is the history line; ``history`` the earlier runs of the host directory's history.jsonl that the report's trend
    shows; ``report`` the JSON report; ``summary`` the end-of-play line; ``stats`` {host: summary}; ``chart`` the SVG
    chart or None; ``png`` whether to render it as PNG; ``benchmark`` and ``canary`` the verdicts ({judged, passed,
    msg}) of the role's last tasks (judged: benchmark_fail is on and it ran). ``now``: the run's time (UTC,
    ISO 8601), now by default.
    """
    if not isinstance(settings, dict):
        raise BenchmarkError("settings must map benchmark_* variables to their values")
    if now is None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if not isinstance(result, dict) or not (canary is None or isinstance(canary, dict)):
        raise BenchmarkError("result and canary must be the registered results of llmops.sglang.benchmark and "
                             "llmops.sglang.accuracy_canary")
    canary = canary if _truthy(_setting(settings, "canary")) else None
    levels = [lv for lv in result.get("levels") or [] if isinstance(lv, dict)] if isinstance(result.get("levels"), list) else []
    gate = _dict(result.get("gate"))
    error = result.get("error")
    entry = {
        "time": now,
        "host": host,
        "url": _setting(settings, "url"),
        "model": result.get("model"),
        "engine": _setting(settings, "engine"),
        "dataset": _setting(settings, "dataset"),
        "input_tokens": _setting(settings, "input_tokens"),
        "output_tokens": _setting(settings, "output_tokens"),
        "output_tok_s": _by_level(levels, lambda lv: lv.get("aggregate_output_tok_s")),
        "ttft_p50_ms": _by_level(levels, lambda lv: _dict(lv.get("ttft_ms")).get("p50")),
        "failed_requests": sum(_number(lv.get("failed")) for lv in levels),
        "gate": gate.get("passed") if gate.get("enabled") else None,
        "error": error.get("kind") if isinstance(error, dict) else None,
        "canary": canary.get("summary") if canary else None,
        "canary_passed": canary.get("passed") if canary else None,
        "canary_hash": canary.get("hash") if canary else None,
    }
    history = history_runs(read_text(os.path.join(host_dir(settings, host), HISTORY_FILE)), _setting(settings, "trend_runs", 10))
    summary = "%s" % (result.get("summary") or "FAILED: %s" % (result.get("msg") or ""))
    if canary is not None:
        summary += " | canary: %s" % (canary.get("summary") or "FAILED: %s" % (canary.get("msg") or ""))
    summary = plain(summary)  # the end-of-play line and set_stats
    judge = _truthy(_setting(settings, "fail"))
    bench_ok = "levels" in result and error is None and (bool(gate.get("passed")) or not gate.get("enabled"))
    return {
        "entry": entry,
        "history": history,
        "report": {"run": entry, "benchmark": _without(result, ("chart_svg",) + _NOT_REPORTED), "gate_note": gate_note,
                   "canary": _without(canary, _NOT_REPORTED), "trend": history},
        "summary": summary,
        "stats": {host: summary},
        "chart": result.get("chart_svg"),
        "png": _truthy(_setting(settings, "render_png")) and result.get("chart_svg") is not None,
        "benchmark": _verdict(judge, bench_ok, "Benchmark", host, result.get("msg") or summary, result.get("summary")),
        "canary": _verdict(judge and canary is not None, bool((canary or {}).get("passed")), "Accuracy canary", host,
                           (canary or {}).get("msg") or (canary or {}).get("summary"), (canary or {}).get("summary")),
    }


def _role_inputs(settings, results):
    if not isinstance(settings, dict) or not isinstance(results, dict):
        raise BenchmarkError("the role hands over its settings and results as mappings (_benchmark_settings, _benchmark_results)")
    missing = [name for name in SETTINGS if name not in settings]
    if missing:
        raise BenchmarkError("settings missing: %s (the role's _benchmark_setting_names lists them)" % ", ".join(missing))
    return lambda name: registered(results, "_benchmark_" + name)


def plan(settings, results, host):
    """The role's plan, computed once: the gate's baseline ({ok, baseline, note, error}) and the two modules' options."""
    r = _role_inputs(settings, results)
    baseline = choose_baseline(settings, r("profiles"))
    return {"baseline": baseline, "options": module_options(settings, host, baseline["baseline"])}


def record(settings, results, host):
    """The run's record (run_record) from the benchmark's and the canary's results and the plan's gate note."""
    r = _role_inputs(settings, results)
    return run_record(settings, r("result"), r("canary"), host, ((r("plan") or {}).get("baseline") or {}).get("note") or "")


# The phases of the role's one filter, llmops.sglang.benchmark_plan: each takes the settings first.
PHASES = {"plan": plan, "record": record}
ERRORS = (BenchmarkError,)
