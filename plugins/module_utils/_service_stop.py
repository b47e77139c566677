# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A clean stop of an SGLang server run as a systemd unit, and the proof of it.

``stop_unit`` stops the unit the way systemd does (SIGTERM to the whole control group, SIGKILL after
``TimeoutStopSec``) and then proves that no process of it survived, naming each process that had to be killed (from
PID 1's own journal messages about the invocation) or that is still there.

Standard library only; no Ansible imports. Runs on the managed host (Python 3.9+).
"""

from __future__ import annotations

import re
import time

from ansible_collections.llmops.sglang.plugins.module_utils._journal import JournalError, pid1_messages, pid1_text
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import SystemdError, check_unit_name, show_unit, unit_summary
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import run as run_command
from ansible_collections.llmops.sglang.plugins.module_utils._unit_processes import alive, describe_process, unit_processes

# After a stop, journald may still hold PID 1's last messages about it: read again this often.
LATE_LOG_READS = 3
LATE_LOG_DELAY = 0.3

_KILL_RE = re.compile(r"Killing process (\d+) \((.*?)\) with signal SIGKILL")
_TIMED_OUT_RE = re.compile(r"State '([\w-]+)' timed out\. Killing")
_REMAINS_RE = re.compile(r"Unit process (\d+) \((.*?)\) remains running after unit stopped")
_TIMESPAN_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d|w)?")
_TIMESPAN_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}

# systemctl or journalctl could not be run or did not answer as expected (the name the module catches).
UnitError = SystemdError


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
        if proc["pid"] not in survivors and proc.get("start") is not None and alive(proc, proc_root):
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
