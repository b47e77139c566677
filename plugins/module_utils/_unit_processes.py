# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The processes of a systemd unit's control group, read from /proc: who they are (command line with secrets masked),
whether one is still the same process, and whether one of them listens on a TCP port.

Every read is bounded (``_read``'s limit); a process that is gone or hidden reads as absent. Standard library only;
runs on the managed host (sglang_wait_ready, sglang_service_stop).
"""

from __future__ import annotations

import os
import re

from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact_argv

CMDLINE_CHARS = 2000


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
    """{pid, comm, cmdline (secrets masked by _redact's rules), start} of a live process, or None."""
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
    cmdline = re.sub(r"\s+", " ", " ".join(redact_argv(argv))).strip()
    return {"pid": pid, "comm": comm, "cmdline": cmdline[:CMDLINE_CHARS], "start": start}


def alive(proc, proc_root="/proc"):
    now = process_info(proc["pid"], proc_root)
    return now is not None and now["start"] == proc["start"]


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
