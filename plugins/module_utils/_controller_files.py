# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reports written on the controller by the controller itself (the action plugin llmops.sglang.controller_files).

Pure Python (stdlib only). ``save(directory, files, mode, check)`` creates the directory, then writes each file whose
content or mode differs, atomically (a temporary file in the same directory, then a rename), so a reader never sees half
a report. Unchanged files are not touched: a second run reports nothing changed. Reading what is there is bounded by
the new content's size.
"""

from __future__ import annotations

import os
import stat

from ansible_collections.llmops.sglang.plugins.module_utils._files import write_atomic


class ControllerFilesError(Exception):
    """Bad arguments or a directory that cannot be written; the message names the cause and the fix."""


def _mode(mode):
    """'0644' or 0o644 (YAML reads an unquoted 0644 as that int) as an int."""
    try:
        value = mode if isinstance(mode, int) and not isinstance(mode, bool) else int(str(mode), 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o777:
        raise ControllerFilesError("mode %r is not an octal file mode such as '0644'" % (mode,))
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
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(data) or stat.S_IMODE(st.st_mode) != mode:
        return False
    with open(path, "rb") as f:
        return f.read(len(data) + 1) == data


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
