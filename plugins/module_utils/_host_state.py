"""What a role would change on a host, read in one module run (llmops.sglang.host_state): service accounts, Debian
packages, paths, small files, read-only commands, and directories and files compared as llmops.sglang.host_files
compares them. It changes nothing, so a role can skip its writes, as one include, when nothing differs.

What it compares it reads with the arguments the role's writes get (one YAML anchor for both): an account as
ansible.builtin.group and ansible.builtin.user would change it (GROUP_ARGS, USER_ARGS) and its home as host_files
would, packages as ansible.builtin.apt would install them (APT_ARGS), directories and files as host_files would
write them (its own code, in check mode). Only the arguments it compares are accepted, so an argument added to a write
fails the read until it is compared here too, rather than never reaching a host where nothing else differs.

Pure Python (stdlib only). Every read is bounded: files by ``read_limit`` bytes, commands in time and output.
"""

from __future__ import annotations

import base64
import grp
import os
import pwd
import stat

from ansible_collections.llmops.sglang.plugins.module_utils._files import NotRegularFile, read_regular
from ansible_collections.llmops.sglang.plugins.module_utils._host_files import account_name, install
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded

# The arguments of ansible.builtin.group, ansible.builtin.user and ansible.builtin.apt that host_state compares, with
# those modules' own defaults: the argument specs of its options accounts[].group, accounts[].user and apt.
PRESENT = {"type": "str", "choices": ["present"], "default": "present"}
GROUP_ARGS = {"name": {"type": "str", "required": True}, "system": {"type": "bool", "default": False}, "state": PRESENT}
USER_ARGS = {"name": {"type": "str", "required": True}, "group": {"type": "str"}, "groups": {"type": "list", "elements": "str"},
             "append": {"type": "bool", "default": False}, "system": {"type": "bool", "default": False},
             "shell": {"type": "str"}, "home": {"type": "path"}, "create_home": {"type": "bool", "default": True},
             "comment": {"type": "str"}, "state": PRESENT}
APT_ARGS = {"name": {"type": "list", "elements": "str", "required": True}, "state": PRESENT}
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


def _member(user, name):
    """Whether user is in group name (its primary group counts)."""
    group = _group(name)
    return group is not None and (user.pw_name in group.gr_mem or group.gr_gid == user.pw_gid)


def _groups_differ(user, wanted, append):
    """Whether ansible.builtin.user would change the supplementary groups: with append, a group it is not in; without,
    any other set than wanted."""
    if wanted is None:
        return False
    if append:
        return not all(_member(user, name) for name in wanted)
    current = {g.gr_name for g in grp.getgrall() if user.pw_name in g.gr_mem and g.gr_gid != user.pw_gid}
    primary = {name for name in wanted if getattr(_group(name), "gr_gid", None) == user.pw_gid}
    return current != set(wanted) - primary


def account_drift(account):
    """What the account's writes would change, from the arguments they get: account["group"] for ansible.builtin.group,
    account["user"] for ansible.builtin.user and account["home"] (optional) for host_files' directories. [] when
    nothing, else some of 'group', 'user', 'primary_group', 'groups', 'shell', 'home', 'comment', 'home_dir'. An
    existing account is never made a system one (system, as in those modules, counts only when they create it)."""
    group_args, user_args, home = account["group"], account["user"], account.get("home")
    if _group(group_args["name"]) is None:
        return ["group"]
    try:
        user = pwd.getpwnam(user_args["name"])
    except KeyError:
        return ["user"]
    found = []
    primary = user_args.get("group")
    if primary is not None and (_group(primary) is None or _group(primary).gr_gid != user.pw_gid):
        found.append("primary_group")
    if _groups_differ(user, user_args.get("groups"), user_args.get("append")):
        found.append("groups")
    for key, field in (("shell", "pw_shell"), ("home", "pw_dir"), ("comment", "pw_gecos")):
        if user_args.get(key) is not None and getattr(user, field) != user_args[key]:
            found.append(key)
    # the user module creates a missing home of an existing user (create_home defaults to true)
    missing_home = user_args.get("create_home", True) and not os.path.exists(user_args.get("home") or user.pw_dir)
    if missing_home or (home is not None and install([home], [], check=True)["changed"]):
        found.append("home_dir")
    return found


def missing_packages(names, timeout=60):
    """The Debian packages of names that dpkg does not list as installed (all of them where dpkg-query is missing):
    what ansible.builtin.apt with state present would install."""
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
    owner, group = account_name(pwd.getpwuid, st.st_uid), account_name(grp.getgrgid, st.st_gid)
    return {"exists": True, "isdir": stat.S_ISDIR(st.st_mode), "isreg": stat.S_ISREG(st.st_mode),
            "owner": owner, "group": group, "mode": "%04o" % stat.S_IMODE(st.st_mode)}


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


def gather(accounts=None, apt=None, paths=None, read=None, commands=None, directories=None, files=None,
           read_limit=READ_LIMIT):
    """Everything asked for, keyed as the module returns it. Accounts and commands are keyed by user and name; apt is
    ansible.builtin.apt's arguments (name, state)."""
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
        "accounts": {a["user"]["name"]: {"drift": account_drift(a)} for a in accounts or []},
        "packages_missing": missing_packages((apt or {}).get("name") or []),
        "stat": {p: stat_path(p) for p in paths or []},
        "read": {p: read_file(p, read_limit) for p in read or []},
        "commands": {c["name"]: run_command(c) for c in commands or []},
        # compared only, never written (check mode of host_files)
        "files": install(directories or [], files or [], check=True)["paths"] if directories or files else {},
        "changed": False,
    }
