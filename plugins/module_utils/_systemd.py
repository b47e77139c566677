# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of ``systemctl show``, how the collection runs systemd's tools (systemctl, journalctl), and the one
check of a unit file before it is installed (``verify_command``, a host_files validate command).

``show(unit, properties)`` asks for named properties (``--property=A,B -- UNIT``, always with ``LoadState``) and
returns them as a dict; a unit systemd does not know, a host without systemd or a missing systemctl is a
``SystemdError`` whose message names the fix. Standard library only; no Ansible imports. Runs on the managed
host (Python 3.9+).
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import to_int
from ansible_collections.llmops.sglang.plugins.module_utils._process import MAX_OUTPUT_BYTES, run_bounded

# systemctl show answers in milliseconds; a minute means systemd (PID 1 or D-Bus) is stuck.
SHOW_TIMEOUT = 60
# What systemd says when PID 1 is not systemd (a container or chroot without it), and a D-Bus that is not there.
_NO_SYSTEMD = ("System has not been booted with systemd", "Failed to connect to bus")
# systemd-analyze reads a unit's name from its file's name, so the new file (host_files' temporary file) is copied under
# the real name into a private directory first; its output goes to stderr, where the validate failure quotes it.
_VERIFY = ("/bin/sh -c 'd=$(mktemp -d) && cp \"$1\" \"$d/{0}\" && out=$(systemd-analyze verify --man=no \"$d/{0}\" 2>&1);"
           " rc=$?; rm -rf \"$d\"; [ -n \"$out\" ] && echo \"$out\" >&2; [ $rc -eq 0 ] {1}' verify %s")
# A unit file's name as the command above can carry it (systemd's own characters, without the backslash).
_UNIT_FILE_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+\.(service|socket|timer|target|path|mount)$")
# A unit's state as the readiness wait and the clean stop read it.
SHOW_PROPERTIES = (
    "LoadState", "ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "MainPID", "ExecMainCode",
    "ExecMainStatus", "ExecMainStartTimestampMonotonic", "ControlGroup", "TimeoutStopUSec",
)


class SystemdError(Exception):
    """systemctl or journalctl could not be run or did not answer as expected (the message names the fix)."""


def check_unit_name(unit):
    """Raise SystemdError unless unit reads as one unit name for systemctl (not empty, not an option, no whitespace)."""
    if not unit or unit.startswith("-") or any(c.isspace() for c in unit):
        raise SystemdError("unit %r is not a unit name; give a name like sglang-qwen.service" % (unit,))


def verify_command(unit_file_name, strict):
    """The validate command (``%s`` for the new file) that runs ``systemd-analyze verify`` on a unit named
    unit_file_name (``sglang-qwen.service``): it fails on systemd-analyze's exit status, and with strict on any
    warning too (an unknown key, a missing executable). ValueError when the name is not a unit file's name."""
    if not isinstance(unit_file_name, str) or not _UNIT_FILE_NAME.match(unit_file_name):
        raise ValueError("%r is not a unit file name such as sglang-router.service (letters, digits, ':', '_', '.', '@', "
                         "'-' and a unit type suffix)" % (unit_file_name,))
    return _VERIFY.format(unit_file_name, '&& [ -z "$out" ]' if strict else "")


def run(argv, timeout=None):
    """(rc, stdout bytes, stderr text) of a systemd tool, through the collection's bounded runner.

    Raises SystemdError when the tool is missing, runs past timeout or prints more than the runner keeps.
    """
    rc, out, err, timed_out, not_found = run_bounded(argv, timeout, max_bytes=MAX_OUTPUT_BYTES, text=False)
    err = err.decode("utf-8", "replace").strip()
    if not_found:
        raise SystemdError("cannot run %s: %s; this host needs systemd (install it, or give the tool's path)" % (argv[0], err))
    if timed_out:
        raise SystemdError("%s did not finish within %s s; check that systemd answers (systemctl is-system-running)"
                           % (" ".join(argv[:3]), timeout))
    if rc is None:
        raise SystemdError(err.splitlines()[0])
    return rc, out, err


def parse_show(text):
    """``systemctl show`` output (Key=Value lines) as a dict; a key given on several lines (ExecStart of a unit
    with several commands) keeps every value, one per line."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            key, value = key.strip(), value.strip()
            out[key] = out[key] + "\n" + value if key in out else value
    return out


def _failure(unit, rc, err):
    text = "systemctl show %s failed (rc=%s): %s" % (unit, rc, " ".join(err.split()) or "no error output")
    if any(marker in err for marker in _NO_SYSTEMD):
        return text + "; systemd does not run this host (PID 1 is not systemd, as in most containers): use a host booted with systemd"
    return text + "; check the unit name (systemctl list-units --all)"


def show(unit, properties, systemctl="systemctl", run=run, timeout=SHOW_TIMEOUT, missing_ok=False):  # pylint: disable=redefined-outer-name
    """The named properties of unit (strings as systemctl prints them; one left out is one systemctl does not have).

    ``LoadState`` is always read: a unit systemd does not know (``not-found``) raises SystemdError naming the fix
    unless missing_ok, for callers that report it themselves. ``run(argv, timeout)`` is the runner (default ``run``).
    """
    check_unit_name(unit)
    names = list(properties) + ([] if "LoadState" in properties else ["LoadState"])
    rc, out, err = run([systemctl or "systemctl", "show", "--property=" + ",".join(names), "--", unit], timeout=timeout)
    if rc != 0:
        raise SystemdError(_failure(unit, rc, err))
    state = parse_show(out.decode("utf-8", "replace") if isinstance(out, bytes) else out)
    if not missing_ok and state.get("LoadState") == "not-found":
        raise SystemdError("systemd knows no unit %s (LoadState=not-found): check the name with systemctl list-unit-files "
                           "'%s*', or install the unit first" % (unit, unit.split(".")[0]))
    return state


def show_unit(run, systemctl, unit, properties=SHOW_PROPERTIES):  # pylint: disable=redefined-outer-name
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
