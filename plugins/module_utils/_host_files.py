# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A role's directories and files on the host, compared and installed in one module run (llmops.sglang.host_files).

Pure Python (stdlib only). ``install(directories, files, check, run)`` creates each missing directory, fixes owner and
mode, and writes each file whose content differs atomically (temporary file with owner and mode set, the validate
command on it, then a rename), or only fixes owner and mode when the content is right. Reading a file to compare is
bounded by the new content's size. On an unchanged host nothing is written and the result says so, per path, so a
role can skip the rest of its work in the same run. The diff shows, per path that changes, the state, owner, group and
mode before and after (a created directory too) and the old and new text of a file (never a secret file's).
"""

from __future__ import annotations

import grp
import os
import pwd
import shlex
import stat

from ansible_collections.llmops.sglang.plugins.module_utils._files import file_mode, holds, write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact

# A diff shows text up to this size; larger or binary content is summarised.
DIFF_LIMIT = 256 * 1024
# What an entry that does not say gets (the module's argument spec uses the same).
DEFAULTS = {"directory": {"owner": "root", "group": "root", "mode": "0755"},
            "file": {"owner": "root", "group": "root", "mode": "0644"}}


def entry_spec(kind, **more):
    """The argument spec of one directory or file entry."""
    return dict({k: {"type": "raw" if k == "mode" else "str", "default": v} for k, v in DEFAULTS[kind].items()},
                path={"type": "path", "required": True}, **more)


def argument_spec():
    """The options directories and files, one spec for host_files (which installs them) and host_state (which compares
    them in check mode): a role gives both modules the same entries."""
    files = entry_spec("file", content={"type": "str"}, secret_content={"type": "str", "no_log": True}, validate={"type": "str"})
    return {"directories": {"type": "list", "elements": "dict", "default": [], "options": entry_spec("directory")},
            "files": {"type": "list", "elements": "dict", "default": [], "options": files,
                      "mutually_exclusive": [["content", "secret_content"]], "required_one_of": [["content", "secret_content"]]}}


def secret_safe(module_class):
    """AnsibleModule writes a list option to the host's journal as its repr, where a multi-line secret_content no
    longer matches its no_log value (the newlines are escaped) and would be logged whole: this subclass of
    module_class (host_files' and host_state's) writes the invocation line from the options with every no_log value
    masked in the structure first. (A function, so that a tool that swaps AnsibleModule to read the argument spec
    still sees the call.)"""

    class Module(module_class):
        def _log_invocation(self):
            params = redact(self.params, secrets=sorted(self.no_log_values))
            self.log("Invoked with %s" % " ".join("%s=%s" % item for item in sorted(params.items())), log_args=params)

    return Module


class HostFilesError(Exception):
    """Bad arguments, an unknown owner, a failed validation or a path that cannot be written; the message names the
    cause and the fix."""


def _ids(entry, check):
    """(uid, gid) of the entry's owner and group; in check mode an account not created yet reads as None."""
    try:
        uid = pwd.getpwnam(entry["owner"]).pw_uid
        gid = grp.getgrnam(entry["group"]).gr_gid
    except KeyError:
        if check:
            return None
        raise HostFilesError("%s: owner %s or group %s does not exist on the host; create the account first (the role "
                             "that owns it) or set another owner" % (entry["path"], entry["owner"], entry["group"])) from None
    return uid, gid


def _checked(entry, kind):
    entry = dict(DEFAULTS[kind], **{k: v for k, v in entry.items() if v is not None})
    path = entry.get("path")
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path or path.rstrip("/") != path:
        raise HostFilesError("%s path %r must be an absolute path without a trailing '/'" % (kind, path))
    for key in ("owner", "group"):
        if not isinstance(entry[key], str) or not entry[key] or "\0" in entry[key]:
            raise HostFilesError("%s: %s %r is not an account name; set the name of a user or group" % (path, key, entry[key]))
    try:
        mode = file_mode(entry["mode"])
    except ValueError as exc:
        raise HostFilesError("%s: %s" % (path, exc)) from None
    validate = entry.get("validate")
    if validate is not None and (not isinstance(validate, str) or "%s" not in validate):
        raise HostFilesError("%s: validate %r must be a command with %%s where the new file's path goes" % (path, validate))
    return dict(entry, mode=mode)


def _differs(path, ids, mode, isdir):
    """(what differs at path, its lstat or None): [] when nothing, else some of 'missing', 'type', 'content', 'owner',
    'mode'."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ["missing"], None
    if isdir != stat.S_ISDIR(st.st_mode) or (not isdir and not stat.S_ISREG(st.st_mode)):
        return ["type"], st
    found = []
    if ids is None or (st.st_uid, st.st_gid) != ids:
        found.append("owner")
    if stat.S_IMODE(st.st_mode) != mode:
        found.append("mode")
    return found, st


def account_name(lookup, number):
    """The name pwd.getpwuid or grp.getgrgid gives for number, else the number as text (an id without an account)."""
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def _state(st):
    if st is None:
        return "absent"
    return {stat.S_IFDIR: "directory", stat.S_IFREG: "file", stat.S_IFLNK: "link"}.get(stat.S_IFMT(st.st_mode), "other")


def _attributes_diff(entry, kind, st, differs):
    """Before and after of what differs besides the content, as ansible.builtin.file shows it: the state when the path
    is created or replaced (with the new owner, group and mode), else the owner and group, or the mode, that change."""
    path, after_mode = entry["path"], "%04o" % entry["mode"]
    before, after = {"path": path}, {"path": path}
    if "missing" in differs or "type" in differs:
        before["state"], after["state"] = _state(st), kind
        after.update(owner=entry["owner"], group=entry["group"], mode=after_mode)
    if "owner" in differs:
        before.update(owner=account_name(pwd.getpwuid, st.st_uid), group=account_name(grp.getgrgid, st.st_gid))
        after.update(owner=entry["owner"], group=entry["group"])
    if "mode" in differs:
        before["mode"], after["mode"] = "%04o" % stat.S_IMODE(st.st_mode), after_mode
    return {"before_header": path, "after_header": path, "before": before, "after": after}


def _text(data):
    if len(data) > DIFF_LIMIT or b"\0" in data:
        return "(%d bytes, not shown)\n" % len(data)
    return data.decode("utf-8", "replace")


def _diff(path, data, st):
    """The old and new text; the old only from a regular file (a symlink in its place is not followed)."""
    before = b""
    if st is not None and stat.S_ISREG(st.st_mode):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            fd = None
        if fd is not None:
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    before = f.read(DIFF_LIMIT + 1)
    return {"before_header": path, "after_header": path, "before": _text(before), "after": _text(data)}


def _validator(command, run, path, secret):
    def check(tmp):
        rc, out, err = run(shlex.split(command.replace("%s", shlex.quote(tmp))))
        if rc != 0:
            # a validator may quote the file it read: a secret file's output is not repeated
            said = "(output not shown: the file holds a secret)" if secret else (err or out).strip()[-2000:]
            raise HostFilesError("%s failed its validation (%s, rc %s): %s; nothing was installed, fix the content"
                                 % (path, command.split()[0], rc, said))
    return check


def install(directories, files, check=False, run=None):
    """Directories first, then files. Each entry: path, owner, group, mode; a file also content (text, or
    secret_content: never diffed, never returned) and validate (a command with %s for the temporary file, run with
    run(argv) -> (rc, stdout, stderr)). Returns {changed, paths: {path: {changed, existed, differs}}, diff: [...]}."""
    paths, diffs = {}, []
    directories = [_checked(d, "directory") for d in directories or []]
    files = [_checked(f, "file") for f in files or []]
    for entry in directories + files:
        if entry["path"] in paths:
            raise HostFilesError("%s is listed twice; list each path once" % entry["path"])
        paths[entry["path"]] = None
    try:
        for entry in directories:
            path, ids = entry["path"], _ids(entry, check)
            differs, st = _differs(path, ids, entry["mode"], True)
            if "type" in differs:
                raise HostFilesError("%s exists and is not a directory: move it away" % path)
            if differs:
                diffs.append(_attributes_diff(entry, "directory", st, differs))
            if differs and not check:
                os.makedirs(path, mode=0o755, exist_ok=True)
                os.chown(path, *ids)
                os.chmod(path, entry["mode"])
            paths[path] = {"changed": bool(differs), "existed": "missing" not in differs, "differs": differs}
        for entry in files:
            path, ids, secret = entry["path"], _ids(entry, check), entry.get("secret_content") is not None
            text = entry["secret_content"] if secret else entry.get("content")
            if not isinstance(text, str):
                raise HostFilesError("%s: give its text as content (or secret_content)" % path)
            data = text.encode("utf-8", "surrogateescape")
            differs, st = _differs(path, ids, entry["mode"], False)
            if "type" in differs and os.path.isdir(path):
                raise HostFilesError("%s is a directory: move it away" % path)
            if "missing" not in differs and "type" not in differs and not holds(path, data):
                differs.insert(0, "content")
            rewrite = bool({"missing", "type", "content"} & set(differs))
            if rewrite and not secret:
                diffs.append(_diff(path, data, st))
            if set(differs) - {"content"}:
                diffs.append(_attributes_diff(entry, "file", st, differs))
            if differs and not check:
                if rewrite:
                    validate = entry.get("validate")
                    write_atomic(path, data, entry["mode"], ids, _validator(validate, run, path, secret) if validate else None)
                else:
                    os.chown(path, *ids)
                    os.chmod(path, entry["mode"])
            paths[path] = {"changed": bool(differs), "existed": "missing" not in differs, "differs": differs}
    except OSError as exc:
        raise HostFilesError("cannot install %s: %s; check that its directory exists (list it under directories) and "
                             "is writable by the task's user (become)" % (exc.filename or "a file", exc.strerror or exc)) from None
    return {"changed": any(p["changed"] for p in paths.values()), "paths": paths, "diff": diffs}
