# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a role would change on a host, read in one module run (llmops.sglang.host_state): service accounts, Debian
packages, paths, small files, read-only commands, and directories and files compared as llmops.sglang.host_files
compares them. It changes nothing, so a role can skip its writes, as one include, when nothing differs.

Pure Python (stdlib only). Every read is bounded: files by ``read_limit`` bytes, commands in time and output.
"""

from __future__ import annotations

import base64
import grp
import os
import pwd
import stat

from ansible_collections.llmops.sglang.plugins.module_utils._files import NotRegularFile, file_mode, read_regular
from ansible_collections.llmops.sglang.plugins.module_utils._host_files import install
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded

READ_LIMIT = 1024 * 1024
MAX_READ_LIMIT = 64 * 1024 * 1024
MAX_TIMEOUT = 24 * 3600
COMMAND_OUTPUT_LIMIT = 16 * 1024 * 1024


class HostStateError(Exception):
    """Bad arguments; the message names the entry and the fix."""


def _group(name):
    try:
        return grp.getgrnam(name)
    except KeyError:
        return None


def account_drift(account):
    """What ansible.builtin.group, ansible.builtin.user (append, create_home) and the home directory's owner and mode
    would change for this account: [] when nothing, else some of 'group', 'user', 'primary_group', 'groups', 'shell',
    'home', 'comment', 'home_dir'."""
    group = _group(account["group"])
    if group is None:
        return ["group"]
    try:
        user = pwd.getpwnam(account["user"])
    except KeyError:
        return ["user"]
    found = []
    if user.pw_gid != group.gr_gid:
        found.append("primary_group")
    for name in account.get("groups") or []:
        member = _group(name)
        if member is None or (account["user"] not in member.gr_mem and member.gr_gid != user.pw_gid):
            found.append("groups")
            break
    for key, field in (("shell", "pw_shell"), ("home", "pw_dir"), ("comment", "pw_gecos")):
        if account.get(key) is not None and getattr(user, field) != account[key]:
            found.append(key)
    try:
        st = os.lstat(account.get("home") or user.pw_dir)
    except FileNotFoundError:
        st = None
    if (st is None or not stat.S_ISDIR(st.st_mode) or (st.st_uid, st.st_gid) != (user.pw_uid, group.gr_gid)
            or stat.S_IMODE(st.st_mode) != file_mode(account.get("home_mode") or "0750")):
        found.append("home_dir")
    return found


def missing_packages(names, timeout=60):
    """The Debian packages of names that dpkg does not list as installed (all of them where dpkg-query is missing)."""
    if not names:
        return []
    rc, out, _err, _timed_out, _not_found = run_bounded(
        ["dpkg-query", "-W", "-f=${Package}\t${db:Status-Status}\n", "--"] + list(names), timeout, max_bytes=READ_LIMIT)
    installed = set()
    for line in (out or "").splitlines() if rc in (0, 1) else []:   # rc 1: some name is unknown to dpkg
        package, _tab, status = line.partition("\t")
        if status == "installed":
            installed.add(package)
    return [n for n in names if n.split(":")[0] not in installed]


def stat_path(path):
    """exists, isdir, isreg, owner, group and mode of path (symlinks followed, as ansible.builtin.stat does)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):   # ValueError: a NUL byte in the path
        return {"exists": False}
    owner, group = _name(pwd.getpwuid, st.st_uid), _name(grp.getgrgid, st.st_gid)
    return {"exists": True, "isdir": stat.S_ISDIR(st.st_mode), "isreg": stat.S_ISREG(st.st_mode),
            "owner": owner, "group": group, "mode": "%04o" % stat.S_IMODE(st.st_mode)}


def _name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def read_file(path, limit):
    """{exists, content (base64, as ansible.builtin.slurp returns it)}; a file over limit bytes is not read and says
    so in error (content null), a missing one reads as exists false. Only a regular file is opened (_files.open_regular)."""
    try:
        data = read_regular(path, limit)
    except NotRegularFile:
        return {"exists": True, "content": None, "error": "%s is not a regular file and was not read" % path}
    except FileNotFoundError:
        return {"exists": False, "content": None, "error": None}
    except (OSError, ValueError) as exc:   # ValueError: a NUL byte in the path
        return {"exists": True, "content": None, "error": "cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc)}
    if len(data) > limit:
        return {"exists": True, "content": None, "error": "%s is larger than %d bytes and was not read" % (path, limit)}
    return {"exists": True, "content": base64.b64encode(data).decode("ascii"), "error": None}


def run_command(command):
    """One read-only command, bounded in time and output: rc, stdout, stderr; not_found when its program is missing
    (a venv not created yet), timed_out past its timeout."""
    rc, out, err, timed_out, not_found = run_bounded([str(a) for a in command["argv"]], command.get("timeout", 60),
                                                     max_bytes=COMMAND_OUTPUT_LIMIT)
    return {"rc": rc, "stdout": out, "stderr": err[-4000:], "timed_out": timed_out, "not_found": not_found}


def gather(accounts=None, packages=None, paths=None, read=None, commands=None, directories=None, files=None,
           read_limit=READ_LIMIT):
    """Everything asked for, keyed as the module returns it. Accounts and commands are keyed by user and name."""
    if not isinstance(read_limit, int) or not 0 < read_limit <= MAX_READ_LIMIT:
        raise HostStateError("read_limit %r must be between 1 and %d bytes" % (read_limit, MAX_READ_LIMIT))
    names = [c.get("name") for c in commands or []]
    if any(not isinstance(n, str) or not n for n in names) or len(set(names)) != len(names):
        raise HostStateError("every command needs a name of its own (its result is keyed by it): %s" % names)
    for command in commands or []:
        if not command.get("argv"):
            raise HostStateError("command %s has no argv: give the program and its arguments as a list" % command["name"])
        timeout = command.get("timeout", 60)
        if not isinstance(timeout, int) or not 0 < timeout <= MAX_TIMEOUT:
            raise HostStateError("command %s: timeout %r must be between 1 and %d seconds" % (command["name"], timeout, MAX_TIMEOUT))
    return {
        "accounts": {a["user"]: {"drift": account_drift(a)} for a in accounts or []},
        "packages_missing": missing_packages(packages or []),
        "stat": {p: stat_path(p) for p in paths or []},
        "read": {p: read_file(p, read_limit) for p in read or []},
        "commands": {c["name"]: run_command(c) for c in commands or []},
        # compared only, never written (check mode of host_files)
        "files": install(directories or [], files or [], check=True)["paths"] if directories or files else {},
        "changed": False,
    }
