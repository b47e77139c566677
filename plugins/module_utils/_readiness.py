# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readiness of an SGLang server run as a systemd unit (its clean stop is ``_service_stop``).

``wait_ready`` polls three sources once per interval until the server answers its health endpoint or one of
them shows that it never will:

* ``systemctl show``: the unit failed, exited, or systemd restarted it (``NRestarts`` grew, a new
  ``InvocationID``, ``SubState=auto-restart``: a crash loop);
* the journal of the unit's invocation (its stdout/stderr entries by their trusted fields, ``_journal``; read
  incrementally with the last entry's cursor and parsed by the SGLang log auditor): the startup phase reached
  and fatal errors (CUDA OOM, no kernel image, an exception, the port already in use, a rejected command line);
* the health URL (``/health_generate``): 200 means ready.

A call waits at most ``timeout`` seconds and then reports ``waiting`` with the phase reached, so a caller can
print progress between calls; the overall ``budget`` counts from the start of the unit's main process, so it
holds across calls.

Standard library only; no Ansible imports. Runs on the managed host (Python 3.9+).
"""

from __future__ import annotations

import re
import time

from ansible_collections.llmops.sglang.plugins.module_utils._http import FetchError, UrlError, parse_base_url, request
from ansible_collections.llmops.sglang.plugins.module_utils._journal import JournalError, JournalReader, unit_output
from ansible_collections.llmops.sglang.plugins.module_utils._process import stream as stream_output
from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact_text
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import UNIT_CAUSES, LogAuditor
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import SystemdError, check_unit_name, show_unit, unit_summary
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import run as run_command
from ansible_collections.llmops.sglang.plugins.module_utils._unit_processes import port_owner

MASK = "********"
# Keep returned log text short: it ends up in play output.
MESSAGE_CHARS = 400
# Bytes of a health answer read (its status is what counts).
HEALTH_BODY_BYTES = 65536
# After systemd reports a dead process, journald may still hold its last lines: read again this often.
LATE_LOG_READS = 3
LATE_LOG_DELAY = 0.3
# After a fatal log line, how long the process may take to die, so the cause includes what systemd did.
FATAL_GRACE = 3.0

_LINE_PREFIX_RE = re.compile(r"^(?:\[[^\]]*\]\s*)?(?:(?:ERROR|WARNING|INFO|CRITICAL):\s+)?")


# systemctl or journalctl could not be run or did not answer as expected (the name the modules catch).
UnitError = SystemdError


# ----------------------------------------------------------------------------------------------
# helpers


def http_status(url, timeout, tls=None):
    """(HTTP status or None, error text or None) of a GET, never through a proxy (_http's client; tls: _http.Tls)."""
    try:
        return request(url, "", timeout=timeout, tls=tls, use_proxy=False, max_bytes=HEALTH_BODY_BYTES)[0], None
    except FetchError as exc:
        return exc.http_status, None if exc.http_status else exc.message
    except UrlError as exc:
        return None, str(exc)


def mask_text(text):
    """Hide secrets (api_key='...', HF_TOKEN=..., --api-key X, Bearer X) in a log or command line (_redact's rules)."""
    if not text:
        return text
    return redact_text(text)


def url_port(url):
    """The TCP port of an http(s) URL, by the collection's one URL rule (UrlError naming the fix otherwise)."""
    return parse_base_url(url, "url")[2]


def clean_line(text):
    """A log record without SGLang's time/rank prefix or uvicorn's level, secrets masked, shortened."""
    text = _LINE_PREFIX_RE.sub("", text.strip(), count=1)
    return mask_text(text)[:MESSAGE_CHARS]


# ----------------------------------------------------------------------------------------------
# the journal of one invocation


class JournalTracker(object):
    """Follows the journal of one invocation of a unit and keeps the SGLang log audit of it current.

    The journal is read with entry metadata (``_journal``): only the unit's stdout/stderr lines of this
    invocation reach the audit. Each update reads only the entries after the last one read (``--after-cursor``
    with the last entry's ``__CURSOR``), streamed into the audit chunk by chunk: memory stays bounded however
    large the journal grows. ``stream(argv, sink)`` runs journalctl and hands its output to sink; it returns
    (rc, stderr text).
    """

    def __init__(self, stream, journalctl, invocation_id, unit):
        self.stream = stream
        self.journalctl = journalctl
        self.invocation_id = invocation_id
        self.unit = unit
        self.auditor = LogAuditor()
        self.error = None
        self.reader = None
        try:
            self._require = unit_output(journalctl, unit, invocation_id)[1]
        except JournalError as exc:
            self._require, self.error = None, str(exc)
            return
        self.reader = JournalReader(self.auditor.feed, self._require)

    @property
    def cursor(self):
        return self.reader.cursor if self.reader is not None else None

    @property
    def bytes(self):
        return self.reader.bytes if self.reader is not None else 0

    def update(self):
        if self.reader is None:
            return
        argv = unit_output(self.journalctl, self.unit, self.invocation_id, after_cursor=self.reader.cursor)[0]
        before = self.reader.entries
        try:
            rc, err = self.stream(argv, self.reader.feed)
        except (OSError, UnitError) as exc:
            self.error = str(exc)
            return
        finally:
            self.reader.finish()
        if rc != 0:
            # journalctl exits 1 without a word when nothing matches yet
            if not (rc == 1 and self.reader.entries == before and not err):
                self.error = "journalctl failed (rc=%d): %s" % (rc, err or "no error output")
            return
        self.error = None

    @property
    def phase(self):
        return self.auditor.progress()["phase"]

    @property
    def ready_line(self):
        return self.auditor.progress()["ready"]

    def fatal(self):
        """{"class", "message"} of the first fatal error the log shows, or None."""
        fatal = self.auditor.progress()["fatal"]
        if fatal is None:
            return None
        return {"class": fatal["class"], "message": clean_line(fatal["message"] or "")}

    def facts(self):
        """What the journal showed so far, for the result."""
        progress = self.auditor.progress()
        return {"fatal": self.fatal(), "ready_line": progress["ready"], "kv_dtype_effective": progress["kv_dtype_effective"],
                "kv_cache_dtype_configured": progress["kv_cache_dtype_configured"],
                "max_total_num_tokens": progress["max_total_num_tokens"], "bytes_read": self.bytes, "error": self.error,
                "journal": self.reader.stats() if self.reader is not None else None}


def _stream_through(run):
    """A stream() made of a run() that returns the whole output (for callers that give their own run)."""
    def stream(argv, sink):
        rc, out, err = run(argv)
        if out:
            sink(out)
        return rc, err
    return stream


# ----------------------------------------------------------------------------------------------
# readiness


def _exit_text(state):
    code, status = state.get("ExecMainCode"), state.get("ExecMainStatus")
    if code in ("2", "3") or state.get("Result") in ("signal", "core-dump"):
        return "the main process was killed by signal %s" % status
    return "the main process exited with status %s" % status


def _failure_reason(state):
    """(class, message) from systemd alone for a unit that stopped or failed."""
    result = state.get("Result") or "unknown"
    how = _exit_text(state)
    if result == "oom-kill":
        return "host_oom", "the kernel's OOM killer ended a process of the unit (%s); %s" % (UNIT_CAUSES["host_oom"], how)
    if result == "start-limit-hit":
        return "crash_loop", "systemd gave up restarting the unit (start limit hit); %s" % how
    if state.get("ActiveState") == "failed":
        return "exited", "%s (Result=%s)" % (how, result)
    return "exited", "the unit is %s/%s: %s" % (state.get("ActiveState"), state.get("SubState"), how)


def _restart_count(state, baseline):
    """Automatic restarts since the wait began, counting one systemd has scheduled but not yet made."""
    pending = 1 if state.get("SubState") == "auto-restart" else 0
    return max(1, state["NRestarts"] - (baseline or 0) + pending)


def _restarted_or_dead(state, invocation_id, n_restarts):
    """(systemd restarted the unit since the baseline, the unit is down)."""
    restarted = (state["NRestarts"] > n_restarts or state.get("SubState") == "auto-restart"
                 or bool(invocation_id and state.get("InvocationID") not in (None, "", invocation_id)))
    return restarted, state.get("ActiveState") in ("failed", "inactive", "deactivating")


def describe_cause(unit, cause):
    text = "%s is not ready: %s: %s" % (unit, cause["class"], cause["message"])
    if cause.get("crash_loop") and cause["class"] != "crash_loop":
        text += " (crash loop: %s; automatic restart #%d)" % (UNIT_CAUSES["crash_loop"], cause.get("restarts", 0))
    unit_state = cause.get("unit") or {}
    if unit_state:
        text += "; unit %s/%s, Result=%s" % (unit_state.get("active_state"), unit_state.get("sub_state"), unit_state.get("result"))
    if cause.get("phase"):
        text += "; last startup phase %s after %.1f s" % (cause["phase"], cause.get("elapsed") or 0.0)
    return text


def wait_ready(unit, url, budget, timeout, interval=1.0, invocation_id=None, n_restarts=None, probe_timeout=5.0,
               systemctl="systemctl", journalctl="journalctl", run=run_command, http=http_status, clock=time.monotonic,
               sleep=time.sleep, proc_root="/proc", stream=None, tls=None):
    """Poll until ready, failed, the budget is spent (failed) or this call's timeout passed (waiting).

    The journal is read with ``stream(argv, sink)`` (default: journalctl streamed in chunks); a caller that gives
    its own ``run`` and no ``stream`` has the journal read through that ``run``.

    Returns a dict: status (ready, waiting or failed), ready, phase, phases ([{phase, at}], seconds since the
    main process started), elapsed, waited, polls, cause (None or {class, message, source, ...}), unit
    (systemd state), health ({url, status, error}), log ({fatal, kv_dtype_effective, ...} or None),
    invocation_id and n_restarts_baseline (pass both to the next call).
    """
    check_unit_name(unit)
    begin = clock()
    port = url_port(url)
    history, tracker, state = [], None, {}
    last_phase, elapsed, polls = None, 0.0, 0
    health = {"url": url, "status": None, "error": None}

    def result(status, cause=None):
        log = None
        if tracker is not None:
            log = tracker.facts()
        phase = "ready" if status == "ready" else (history[-1]["phase"] if history else "starting")
        if cause is not None:
            cause.update(phase=phase, elapsed=round(elapsed, 1), unit=unit_summary(state))
        return {"status": status, "ready": status == "ready", "phase": phase, "phases": history, "elapsed": round(elapsed, 1),
                "waited": round(clock() - begin, 1), "polls": polls, "cause": cause, "unit": unit_summary(state),
                "health": dict(health), "log": log, "invocation_id": invocation_id, "n_restarts_baseline": n_restarts}

    def note(phase, at):
        if phase != (history[-1]["phase"] if history else None):
            history.append({"phase": phase, "at": round(at, 1)})

    while True:
        polls += 1
        tick = clock()
        state = show_unit(run, systemctl, unit)
        if state.get("LoadState") not in (None, "loaded"):
            elapsed = tick - begin
            return result("failed", {"class": "unit_not_loaded", "source": "systemd", "message": "unit %s is %s (%s)"
                                     % (unit, state.get("LoadState"), UNIT_CAUSES["unit_not_loaded"])})
        if invocation_id is None:
            invocation_id = state.get("InvocationID") or None
        if n_restarts is None:
            n_restarts = state["NRestarts"]
        started = state["ExecMainStartTimestampMonotonic"] / 1e6
        elapsed = tick - started if 0 < started <= tick else tick - begin

        active = state.get("ActiveState") == "active"
        if active:
            health["status"], health["error"] = http(url, probe_timeout, tls)
        else:
            health["status"], health["error"] = None, "unit is %s" % state.get("ActiveState")
        if health["status"] == 200:
            owner = port_owner(state.get("ControlGroup"), port, proc_root)
            if owner is False:
                # another process answers on this port (the unit itself will fail to bind)
                health["status"], health["error"] = None, "port %d answered by a process outside %s" % (port, unit)
            else:
                note("ready", elapsed)
                return result("ready")

        if tracker is None and invocation_id:
            tracker = JournalTracker(stream or (stream_output if run is run_command else _stream_through(run)), journalctl,
                                     invocation_id, unit)
        if tracker is not None:
            tracker.update()
            last_phase = tracker.phase
            note(last_phase, elapsed)

        restarted, dead = _restarted_or_dead(state, invocation_id, n_restarts)
        fatal = tracker.fatal() if tracker is not None else None
        if fatal is not None and not (restarted or dead):
            # SGLang tears its process tree down after a fatal error: wait briefly for systemd to see it
            grace_end = clock() + FATAL_GRACE
            while clock() < grace_end and not (restarted or dead):
                sleep(0.2)
                state = show_unit(run, systemctl, unit)
                restarted, dead = _restarted_or_dead(state, invocation_id, n_restarts)
        if (restarted or dead) and fatal is None and tracker is not None:
            # the process is gone; journald may not have written its last lines yet
            for dummy in range(LATE_LOG_READS):
                sleep(LATE_LOG_DELAY)
                tracker.update()
                fatal = tracker.fatal()
                if fatal is not None:
                    note("failed", elapsed)
                    break
        if fatal is not None or restarted or dead:
            if fatal is not None:
                cause = {"class": fatal["class"], "message": fatal["message"], "source": "journal"}
            elif restarted:
                if state.get("SubState") == "auto-restart":
                    died = _exit_text(state)
                else:
                    # the restarted process runs already: its exit status says nothing about the one that died
                    died = "the server process died"
                cause = {"class": "crash_loop", "source": "systemd",
                         "message": "%s and systemd restarts the unit (Restart=); automatic restart #%d"
                         % (died, _restart_count(state, n_restarts))}
            else:
                cls, message = _failure_reason(state)
                cause = {"class": cls, "message": message, "source": "systemd"}
            cause["crash_loop"] = bool(restarted)
            cause["restarts"] = _restart_count(state, n_restarts) if restarted else 0
            return result("failed", cause)

        if elapsed >= budget:
            answer = "HTTP %s" % health["status"] if health["status"] is not None else health["error"]
            return result("failed", {"class": "timeout", "source": "budget",
                                     "message": "not ready after %.0f s (budget %d s), stuck in phase %s; %s answered %s"
                                     % (elapsed, budget, last_phase or "starting", url, answer)})
        if clock() - begin >= timeout:
            return result("waiting")
        sleep(max(0.0, interval - (clock() - tick)))
