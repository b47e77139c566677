# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""Reports written on the controller by the controller itself (the action plugin llmops.sglang.controller_files).

Pure Python (stdlib only). ``save(directory, files, mode, check)`` creates the directory, then writes each file whose
content or mode differs, atomically (a temporary file in the same directory, then a rename), so a reader never sees half
a report. Unchanged files are not touched: a second run reports nothing changed. Reading what is there is bounded by
the new content's size.
"""

from __future__ import annotations

import os

from ansible_collections.llmops.sglang.plugins.module_utils._files import file_mode as _file_mode, holds, write_atomic


class ControllerFilesError(Exception):
    """Bad arguments or a directory that cannot be written; the message names the cause and the fix."""


def _mode(mode):
    try:
        value = _file_mode(mode)
    except ValueError as exc:
        raise ControllerFilesError(str(exc)) from None
    return value


def check_files(files):
    """{name: content} with plain file names (no directory part) and text content, else ControllerFilesError."""
    if not isinstance(files, dict) or not files:
        raise ControllerFilesError("files must be a mapping of file name to content with at least one entry")
    for name, content in files.items():
        if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name:
            raise ControllerFilesError("file name %r must be a plain name inside dir (no '/', not '.' or '..')" % (name,))
        if not isinstance(content, str):
            raise ControllerFilesError("the content of %s must be text, not %s: render it with to_nice_json or a template"
                                       % (name, type(content).__name__))
    return files


def _same(path, data, mode):
    return holds(path, data) and os.lstat(path).st_mode & 0o7777 == mode


def save(directory, files, mode="0644", check=False):
    """Write files into directory; returns {changed, dir, written: [paths written, or that would be in check mode]}."""
    if not isinstance(directory, str) or not directory.strip():
        raise ControllerFilesError("dir must be a directory path on the controller")
    directory = os.path.abspath(os.path.expanduser(directory))
    check_files(files)
    file_mode = _mode(mode)
    written = []
    try:
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise ControllerFilesError("%s exists and is not a directory: move it away or choose another dir" % directory)
        created = not os.path.isdir(directory)
        if created and not check:
            os.makedirs(directory, mode=0o755, exist_ok=True)
        for name in sorted(files):
            path = os.path.join(directory, name)
            data = files[name].encode("utf-8", "surrogateescape")
            if created or not _same(path, data, file_mode):
                written.append(path)
                if not check:
                    write_atomic(path, data, file_mode)
    except OSError as exc:
        raise ControllerFilesError("cannot write the reports in %s on the controller: %s; make the directory writable "
                                   "by the user running ansible-playbook, or set another report directory"
                                   % (directory, exc.strerror or exc))
    return {"changed": bool(written) or created, "dir": directory, "written": written}
