# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's verdicts (the KV cache guard, the GPU preflight, the accuracy canary) as Prometheus metrics in a
node_exporter textfile (``verdict_metrics``): which metrics each verdict gives, and the file's atomic write.

A file holds only what the verdict says, never the time of the run, so a run with the same verdict rewrites nothing
(``changed`` false). Each run that is not in check mode still sets the file's modification time: node_exporter exports
it as ``node_textfile_mtime_seconds``, and the alert rules' staleness check reads that (docs/monitoring.md).

Pure Python, standard library only; runs on hosts.
"""

from __future__ import annotations

import os

from ansible_collections.llmops.sglang.plugins.module_utils import _files
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import RenderError, render

# The directory the Debian and Ubuntu package prometheus-node-exporter reads (its built-in
# --collector.textfile.directory; /etc/default/prometheus-node-exporter sets no other).
DEFAULT_DIR = "/var/lib/prometheus/node-exporter"
PREFIX = "llmops_sglang_"
FILE_MODE = 0o644  # node_exporter runs as the prometheus user
MAX_EXISTING_BYTES = 1 << 20


class MetricsError(Exception):
    """A result that is not the verdict it claims to be, or a file that cannot be written; says the cause and fix."""


def _dict(value):
    return value if isinstance(value, dict) else {}


def _flag(value):
    return value is True


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _family(name, help_text, samples, kind="gauge"):
    return {"name": PREFIX + name, "help": help_text, "type": kind, "samples": samples}


def _sample(labels, value, **more):
    merged = dict(labels)
    merged.update(more)
    return {"labels": merged, "value": value}


def kv_guard(result, labels):
    """The KV cache guard's record (the audit role's ``audit_guard``, or kv_cache_guard's result)."""
    verdict = str(result.get("verdict") or "error")
    expected = str(result.get("expected") or "unknown")
    signals = [s for s in result.get("signals") or [] if isinstance(s, dict) and s.get("name")]
    families = [
        _family("kv_guard_ok", "1 when the KV cache guard passed (the KV cache is the expected dtype, or FP8 under a written "
                "waiver), 0 when it failed or could not run; kv_dtype is what the signals found.",
                [_sample(labels, _flag(result.get("passed")), kv_dtype=verdict, expected_kv_dtype=expected)]),
        _family("kv_guard_waived", "1 when the guard passed only under a written FP8 waiver.",
                [_sample(labels, _flag(result.get("waived")))]),
        _family("kv_guard_signals_available", "Independent KV dtype signals the guard could read.",
                [_sample(labels, _number(result.get("available_signals")) or 0)]),
        _family("kv_guard_signals_required", "Independent KV dtype signals the guard requires (min_signals).",
                [_sample(labels, _number(result.get("min_signals")) or 0)]),
    ]
    if signals:
        families.append(_family("kv_guard_signal_info", "One series per guard signal; verdict is the dtype it shows "
                                "(unknown when it could not be read).",
                                [_sample(labels, 1, signal=str(s["name"]), verdict=str(s.get("verdict") or "unknown"))
                                 for s in signals]))
    return families


def gpu_preflight(result, labels):
    """The GPU preflight's verdict (the gpu_preflight role's ``gpu_preflight_result``)."""
    checks = [c for c in result.get("checks") or [] if isinstance(c, dict) and c.get("rule")]
    return [
        _family("gpu_preflight_ok", "1 when every GPU preflight rule passed (warnings and waived rules included), else 0.",
                [_sample(labels, _flag(result.get("passed")))]),
        _family("gpu_preflight_check_ok", "Per preflight rule: 0 when it failed, else 1; status is ok, warn, waived or "
                "skipped.", [_sample(labels, c["status"] != "fail", rule=str(c["rule"]), status=str(c["status"]))
                             for c in checks]),
        _family("gpu_preflight_warnings", "Preflight rules that warn (not waived).",
                [_sample(labels, len(result.get("warnings") or []))]),
    ]


def canary(result, labels):
    """The accuracy canary's result (the accuracy_canary module's, as the benchmark role registers it)."""
    checks = dict((name, _dict(check)) for name, check in sorted(_dict(result.get("checks")).items()))
    enabled = [(name, c) for name, c in checks.items() if c.get("enabled") and c.get("available", True)]
    model = dict(labels)
    if result.get("model") and "model" not in model:
        model["model"] = str(result["model"])
    families = [
        _family("canary_ok", "1 when every enabled accuracy canary check reached its threshold (and, when asked, no "
                "answer drifted), else 0.", [_sample(model, _flag(result.get("passed")))]),
        _family("canary_check_ok", "Per canary check (needle, coding, run_eval): 1 when it reached its threshold.",
                [_sample(model, _flag(c.get("passed")), check=name) for name, c in enabled]),
        _family("canary_score", "Per canary check: the share of questions answered right (0 to 1).",
                [_sample(model, _number(c.get("score")), check=name) for name, c in enabled
                 if _number(c.get("score")) is not None]),
        _family("canary_threshold", "Per canary check: the score it must reach.",
                [_sample(model, _number(c.get("threshold")), check=name) for name, c in enabled
                 if _number(c.get("threshold")) is not None]),
    ]
    drift = _dict(result.get("drift"))
    if drift.get("compared"):
        families.append(_family("canary_drift", "1 when an answer differs from the last good run's.",
                                [_sample(model, _flag(drift.get("drift")))]))
    return families


SOURCES = {"kv_guard": kv_guard, "gpu_preflight": gpu_preflight, "canary": canary}


def file_name(source):
    return "%s%s.prom" % (PREFIX, source)


def text(source, result, labels=None):
    """The textfile of one verdict; MetricsError naming the cause when the inputs are not usable."""
    if source not in SOURCES:
        raise MetricsError("source %r is not one of %s" % (source, ", ".join(sorted(SOURCES))))
    if not isinstance(result, dict) or not result:
        raise MetricsError("the %s result is empty or not a dict: pass the registered result of the task that "
                           "decided it" % source)
    labels = labels or {}
    if not isinstance(labels, dict) or not all(v is None or isinstance(v, (str, int, float)) for v in labels.values()):
        raise MetricsError("labels must be a dict of strings or numbers, got %r" % (labels,))
    # a null value is no label: a server audited from a log file has no unit, so no unit label (never unit="None")
    labels = dict((str(k), str(v)) for k, v in labels.items() if v is not None)
    try:
        return render(SOURCES[source](result, labels))
    except RenderError as exc:
        raise MetricsError("%s metrics: %s" % (source, exc))


def _read_existing(path):
    try:
        data = _files.read_regular(path, MAX_EXISTING_BYTES)
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def publish(directory, source, content, check_mode, now=None):
    """Put content in DIRECTORY/llmops_sglang_SOURCE.prom: atomically (temporary file in the same directory, fsync,
    rename; mode 0644) when it differs, else only the modification time is set (the last run, for staleness alerts).

    No directory (None or ''), or a missing one, writes nothing: node_exporter's textfile collector is not set up there, and a file nobody reads
    would only hide that. Returns {path, changed, written, heartbeat, not_written, before}.
    """
    path = os.path.join(directory or "", file_name(source))
    out = {"path": path, "changed": False, "written": False, "heartbeat": False, "not_written": None, "before": None}
    if not directory:
        out["not_written"] = "no textfile directory given: metrics are off"
        return out
    if not os.path.isdir(directory):
        out["not_written"] = ("no directory %s: install prometheus-node-exporter (its textfile collector reads that "
                              "directory) or set the textfile directory the collector reads" % directory)
        return out
    data = content.encode("utf-8")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    same = st is not None and _files.holds(path, data) and (st.st_mode & 0o7777) == FILE_MODE
    if not same:
        out["before"] = _read_existing(path) if st is not None else None
        out["changed"] = True
        if check_mode:
            return out
        try:
            _files.write_atomic(path, data, FILE_MODE)
        except OSError as exc:
            raise MetricsError("cannot write %s: %s (the play needs become: true to write the textfile directory)"
                               % (path, exc.strerror or exc))
        out["written"] = True
        return out
    if not check_mode:
        try:
            os.utime(path, None if now is None else (now, now))
        except OSError as exc:
            raise MetricsError("cannot set the modification time of %s: %s" % (path, exc.strerror or exc))
        out["heartbeat"] = True
    return out
