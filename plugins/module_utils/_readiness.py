# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readiness and clean stop of an SGLang server run as a systemd unit.

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

``stop_unit`` stops the unit the way systemd does (SIGTERM to the whole control group, SIGKILL after
``TimeoutStopSec``) and then proves that no process of it survived, naming each process that had to be
killed (from PID 1's own journal messages about the invocation) or that is still there.

Standard library only; no Ansible imports. Runs on the managed host (Python 3.9+).
"""

from __future__ import annotations

import os
import re
import time

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import to_int
from ansible_collections.llmops.sglang.plugins.module_utils._http import FetchError, UrlError, parse_base_url, request
from ansible_collections.llmops.sglang.plugins.module_utils._journal import (
    JournalError, JournalReader, pid1_messages, pid1_text, unit_output)
from ansible_collections.llmops.sglang.plugins.module_utils._process import stream as stream_output
from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact_argv, redact_text
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import LogAuditor
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import SystemdError, check_unit_name, show
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import run as run_command

SHOW_PROPERTIES = (
    "LoadState", "ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "MainPID", "ExecMainCode",
    "ExecMainStatus", "ExecMainStartTimestampMonotonic", "ControlGroup", "TimeoutStopUSec",
)
MASK = "********"
# Keep returned log text short: it ends up in play output.
MESSAGE_CHARS = 400
CMDLINE_CHARS = 2000
# Bytes of a health answer read (its status is what counts).
HEALTH_BODY_BYTES = 65536
# After systemd reports a dead process, journald may still hold its last lines: read again this often.
LATE_LOG_READS = 3
LATE_LOG_DELAY = 0.3
# After a fatal log line, how long the process may take to die, so the cause includes what systemd did.
FATAL_GRACE = 3.0

_LINE_PREFIX_RE = re.compile(r"^(?:\[[^\]]*\]\s*)?(?:(?:ERROR|WARNING|INFO|CRITICAL):\s+)?")
_KILL_RE = re.compile(r"Killing process (\d+) \((.*?)\) with signal SIGKILL")
_TIMED_OUT_RE = re.compile(r"State '([\w-]+)' timed out\. Killing")
_REMAINS_RE = re.compile(r"Unit process (\d+) \((.*?)\) remains running after unit stopped")
_TIMESPAN_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d|w)?")
_TIMESPAN_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


# systemctl or journalctl could not be run or did not answer as expected (the name the modules catch).
UnitError = SystemdError


# ----------------------------------------------------------------------------------------------
# helpers


def http_status(url, timeout):
    """(HTTP status or None, error text or None) of a GET, never through a proxy (_http's client)."""
    try:
        return request(url, "", timeout=timeout, use_proxy=False, max_bytes=HEALTH_BODY_BYTES)[0], None
    except FetchError as exc:
        return exc.http_status, None if exc.http_status else exc.message
    except UrlError as exc:
        return None, str(exc)


def mask_text(text):
    """Hide secrets (api_key='...', HF_TOKEN=..., --api-key X, Bearer X) in a log or command line (_redact's rules)."""
    if not text:
        return text
    return redact_text(text)


def mask_argv(argv):
    """A command line with the values of secret flags (--api-key X, --hf-token=X, --api-k X) masked (_redact's rules)."""
    return redact_argv(argv)


def clean_line(text):
    """A log record without SGLang's time/rank prefix or uvicorn's level, secrets masked, shortened."""
    text = _LINE_PREFIX_RE.sub("", text.strip(), count=1)
    return mask_text(text)[:MESSAGE_CHARS]


def parse_timespan(text):
    """Seconds of a systemd time span ("1min 30s", "90s", "500ms", "infinity"); None when unknown or infinite."""
    text = (text or "").strip()
    if not text or text == "infinity":
        return None
    total, matched = 0.0, False
    for num, unit in _TIMESPAN_RE.findall(text):
        total += float(num) * _TIMESPAN_UNITS[unit or None]
        matched = True
    return total if matched else None


def show_unit(run, systemctl, unit, properties=SHOW_PROPERTIES):
    """The unit's state, numbers as ints; a unit systemd does not know comes back with its LoadState."""
    state = show(unit, properties, systemctl, run=run, missing_ok=True)
    state["NRestarts"] = to_int(state.get("NRestarts"), 0)
    state["MainPID"] = to_int(state.get("MainPID"), 0)
    state["ExecMainStatus"] = to_int(state.get("ExecMainStatus"), 0)
    state["ExecMainStartTimestampMonotonic"] = to_int(state.get("ExecMainStartTimestampMonotonic"), 0)
    return state


_SUMMARY_KEYS = (("active_state", "ActiveState"), ("sub_state", "SubState"), ("result", "Result"), ("n_restarts", "NRestarts"),
                 ("invocation_id", "InvocationID"), ("main_pid", "MainPID"), ("exec_main_status", "ExecMainStatus"))


def unit_summary(state):
    return dict((name, state.get(key)) for name, key in _SUMMARY_KEYS)


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
        return "host_oom", "the kernel's OOM killer ended a process of the unit (host RAM, not GPU memory); %s" % how
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
        text += " (crash loop: the server died and systemd restarts it; automatic restart #%d)" % cause.get("restarts", 0)
    unit_state = cause.get("unit") or {}
    if unit_state:
        text += "; unit %s/%s, Result=%s" % (unit_state.get("active_state"), unit_state.get("sub_state"), unit_state.get("result"))
    if cause.get("phase"):
        text += "; last startup phase %s after %.1f s" % (cause["phase"], cause.get("elapsed") or 0.0)
    return text


def wait_ready(unit, url, budget, timeout, interval=1.0, invocation_id=None, n_restarts=None, probe_timeout=5.0,
               systemctl="systemctl", journalctl="journalctl", run=run_command, http=http_status, clock=time.monotonic,
               sleep=time.sleep, proc_root="/proc", stream=None):
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
            return result("failed", {"class": "unit_not_loaded", "source": "systemd",
                                     "message": "unit %s is %s (install it first)" % (unit, state.get("LoadState"))})
        if invocation_id is None:
            invocation_id = state.get("InvocationID") or None
        if n_restarts is None:
            n_restarts = state["NRestarts"]
        started = state["ExecMainStartTimestampMonotonic"] / 1e6
        elapsed = tick - started if 0 < started <= tick else tick - begin

        active = state.get("ActiveState") == "active"
        if active:
            health["status"], health["error"] = http(url, probe_timeout)
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


# ----------------------------------------------------------------------------------------------
# clean stop


def _read(path, limit=65536):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except (IOError, OSError):
        return None


def unit_processes(cgroup, proc_root="/proc"):
    """Processes whose cgroup (any hierarchy) is the unit's control group or below it."""
    if not cgroup:
        return []
    found = []
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        raw = _read(os.path.join(proc_root, name, "cgroup"))
        if raw is None:
            continue
        paths = [line.split(":", 2)[2] for line in raw.decode("utf-8", "replace").splitlines() if line.count(":") >= 2]
        if not any(p == cgroup or p.startswith(cgroup.rstrip("/") + "/") for p in paths):
            continue
        found.append(process_info(int(name), proc_root))
    return sorted((p for p in found if p is not None), key=lambda p: p["pid"])


def process_info(pid, proc_root="/proc"):
    """{pid, comm, cmdline (secrets masked), start} of a live process, or None."""
    stat = _read(os.path.join(proc_root, str(pid), "stat"))
    if stat is None:
        return None
    text = stat.decode("utf-8", "replace")
    comm = text[text.find("(") + 1:text.rfind(")")]
    fields = text[text.rfind(")") + 2:].split()
    # field 22 of stat (starttime) tells a live process from a new one that reused the pid
    start = fields[19] if len(fields) > 19 else None
    cmd = _read(os.path.join(proc_root, str(pid), "cmdline")) or b""
    argv = [a.decode("utf-8", "replace") for a in cmd.split(b"\0") if a]
    # one line: "python -c" programs span several
    cmdline = re.sub(r"\s+", " ", " ".join(mask_argv(argv))).strip()
    return {"pid": pid, "comm": comm, "cmdline": cmdline[:CMDLINE_CHARS], "start": start}


def _alive(proc, proc_root="/proc"):
    now = process_info(proc["pid"], proc_root)
    return now is not None and now["start"] == proc["start"]


def url_port(url):
    """The TCP port of an http(s) URL, by the collection's one URL rule (UrlError naming the fix otherwise)."""
    return parse_base_url(url, "url")[2]


def listening_inodes(port, proc_root="/proc"):
    """Socket inodes listening on a TCP port (IPv4 and IPv6), from /proc/net/tcp*."""
    found = set()
    for name in ("tcp", "tcp6"):
        raw = _read(os.path.join(proc_root, "net", name), 1 << 22)
        if raw is None:
            continue
        for line in raw.decode("ascii", "replace").splitlines()[1:]:
            fields = line.split()
            # local_address is HEXIP:HEXPORT; st 0A is LISTEN; field 9 is the inode
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def port_owner(cgroup, port, proc_root="/proc"):
    """True when a process of the unit listens on port, False when only others do, None when unknown."""
    inodes = listening_inodes(port, proc_root)
    if not inodes or not cgroup:
        return None
    targets = set("socket:[%s]" % i for i in inodes)
    unknown = False
    for proc in unit_processes(cgroup, proc_root):
        fd_dir = os.path.join(proc_root, str(proc["pid"]), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            unknown = True
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in targets:
                    return True
            except OSError:
                continue
    return None if unknown else False


def describe_process(proc):
    return "pid %d (%s)" % (proc["pid"], proc.get("cmdline") or proc.get("comm") or "?")


def stop_unit(unit, check_mode=False, timeout=None, systemctl="systemctl", journalctl="journalctl", run=run_command,
              proc_root="/proc", clock=time.monotonic, sleep=time.sleep):
    """Stop the unit and report what had to be killed and what survived.

    Returns a dict: changed, was_active, duration, invocation_id, timeout_stop_sec, processes (before the stop),
    killed ([{pid, comm, cmdline}] that systemd SIGKILLed after TimeoutStopSec), timed_out_state,
    survivors (processes still alive afterwards), result (systemd's Result).
    """
    check_unit_name(unit)
    before = show_unit(run, systemctl, unit)
    cgroup = before.get("ControlGroup") or ""
    procs = unit_processes(cgroup, proc_root)
    out = {"changed": False, "was_active": before.get("ActiveState") in ("active", "activating", "deactivating", "reloading"),
           "duration": 0.0, "invocation_id": before.get("InvocationID") or None, "processes": procs, "killed": [],
           "timed_out_state": None, "survivors": [], "result": before.get("Result"),
           "timeout_stop_sec": parse_timespan(before.get("TimeoutStopUSec")), "unit": unit_summary(before)}
    if not out["was_active"] and not procs:
        return out
    out["changed"] = True
    if check_mode:
        return out
    limit = timeout
    if limit is None:
        # systemd SIGKILLs after TimeoutStopSec (twice: the main process, then the rest of the group)
        limit = 2 * (out["timeout_stop_sec"] or 90.0) + 30.0
    start = clock()
    rc, dummy, err = run([systemctl, "stop", "--", unit], timeout=limit)
    out["duration"] = round(clock() - start, 2)
    if rc != 0:
        raise UnitError("systemctl stop %s failed (rc=%d): %s" % (unit, rc, err or "no error output"))
    after = show_unit(run, systemctl, unit)
    out["result"] = after.get("Result")
    out["unit"] = unit_summary(after)

    by_pid = dict((p["pid"], p) for p in procs)
    if out["invocation_id"]:
        # systemd's own messages about this invocation: PID 1's, by the trusted _PID/_UID (INVOCATION_ID= alone
        # is a field any local user can send with logger --journald)
        try:
            argv, require = pid1_messages(journalctl, out["invocation_id"])
        except JournalError:
            argv = None
        for attempt in range(LATE_LOG_READS + 1 if argv else 0):
            rc, data, err = run(argv)
            text = pid1_text(data, require) if rc == 0 else ""
            timed = _TIMED_OUT_RE.search(text)
            out["timed_out_state"] = timed.group(1) if timed else None
            out["killed"] = []
            for pid, comm in _KILL_RE.findall(text):
                known = by_pid.get(int(pid)) or {}
                out["killed"].append({"pid": int(pid), "comm": comm, "cmdline": known.get("cmdline") or comm})
            for pid, comm in _REMAINS_RE.findall(text):
                if int(pid) not in by_pid:
                    by_pid[int(pid)] = {"pid": int(pid), "comm": comm, "cmdline": comm, "start": None}
            if out["killed"] or out["result"] != "timeout":
                break
            sleep(LATE_LOG_DELAY)

    survivors = dict((p["pid"], p) for p in unit_processes(cgroup, proc_root))
    for proc in by_pid.values():
        if proc["pid"] not in survivors and proc.get("start") is not None and _alive(proc, proc_root):
            survivors[proc["pid"]] = proc
    out["survivors"] = [survivors[k] for k in sorted(survivors)]
    return out


def describe_stop(unit, report):
    """Sentences about a stop that needed SIGKILL or left processes behind; empty when it was clean."""
    parts = []
    if report["killed"]:
        procs = ", ".join(describe_process(p) for p in report["killed"])
        limit = report.get("timeout_stop_sec")
        parts.append("surviving child: %s ignored SIGTERM; systemd killed it with SIGKILL after TimeoutStopSec=%s s (state %s timed out)"
                     % (procs, "%g" % limit if limit is not None else "?", report.get("timed_out_state") or "stop-sigterm"))
    if report["survivors"]:
        parts.append("still running after the stop: %s" % ", ".join(describe_process(p) for p in report["survivors"]))
    if not parts:
        return ""
    return "%s: %s" % (unit, "; ".join(parts))
