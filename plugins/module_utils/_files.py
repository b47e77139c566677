# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writing a file so that a reader never sees half of it: the one atomic write of the collection (caches, stamps,
controller reports, the files host_files installs), and the one comparison of a file with what it should hold.
Pure Python, stdlib only."""

from __future__ import annotations

import os
import stat
import tempfile


def file_mode(mode):
    """'0644' or 0o644 (YAML reads an unquoted 0644 as that int) as an int (permission bits only); ValueError names the
    bad value."""
    try:
        value = mode if isinstance(mode, int) and not isinstance(mode, bool) else int(str(mode), 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o777:
        raise ValueError("mode %r is not an octal file mode such as '0644'" % (mode,))
    return value


def holds(path, data):
    """Whether path is a regular file (not a symlink) holding exactly these bytes; reads at most len(data) + 1 bytes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
        return False
    with open(path, "rb") as f:
        return f.read(len(data) + 1) == data


def write_atomic(path, data, mode, owner=None, check=None):
    """Write bytes to path through a private temporary file in the same directory, renamed over it (a symlink at path
    is replaced, not followed). owner (uid, gid) and mode are set before the rename, and check(temporary path), when
    given, runs before it too: an exception from it leaves the old file in place. The directory must exist; OSError
    propagates, and no temporary file is left behind."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if owner is not None:
            os.chown(tmp, *owner)
        os.chmod(tmp, mode)
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def unsynced(source_find, dest_find, src, dest):
    """(relative path, size) of each file a registered find lists under src whose copy under dest is missing or of
    another size (truncated, replaced), in path order. A find that did not run (or found nothing) lists no file."""
    def keys(found, root):
        files = (found or {}).get("files") if isinstance(found, dict) else None
        return {(os.path.relpath(f["path"], root), int(f["size"])) for f in files or []}
    return sorted(keys(source_find, src) - keys(dest_find, dest))
