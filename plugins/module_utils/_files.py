# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writing a file so that a reader never sees half of it: the one atomic write of the collection (caches, stamps,
controller reports, the files host_files installs), the one comparison of a file with what it should hold, and the
one way to open a file someone else staged (a checkpoint's JSON and shards): only a regular file, never blocking.
Pure Python, stdlib only."""

from __future__ import annotations

import errno
import os
import stat
import tempfile


# What a path is when it is not a regular file, by its stat mode.
FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
              (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class NotRegularFile(ValueError):
    """A path that names a directory, FIFO, socket or device where a regular file belongs; ``kind`` says which."""

    def __init__(self, path, kind):
        ValueError.__init__(self, "%s is %s, not a regular file" % (path, kind))
        self.path, self.kind = path, kind


def file_kind(mode):
    """'a FIFO (named pipe)', 'a socket', ... for a stat mode that is not a regular file's; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in FILE_KINDS if test(mode)), "not a regular file")


def open_regular(path):
    """A binary file object of path, opened only when it is a regular file (symlinks followed).

    Opened with O_NONBLOCK, so a FIFO without a writer or a device cannot hang the open, then judged by fstat of the
    open descriptor (no race with a rename): a directory, FIFO, socket or device raises NotRegularFile. A UNIX socket
    cannot be opened at all (ENXIO): NotRegularFile too. Other OSErrors (missing, permission) propagate as open raises
    them. A regular file ignores O_NONBLOCK, so reads of it behave as usual.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
        try:
            kind = file_kind(os.stat(path).st_mode)
        except OSError:
            raise exc
        raise NotRegularFile(path, kind or "not a regular file")
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind:
            raise NotRegularFile(path, kind)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, limit):
    """At most limit + 1 bytes of a regular file (more than limit says the file is larger than that); open_regular's
    errors otherwise."""
    with open_regular(path) as handle:
        return handle.read(limit + 1)


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
    given, runs before it too: an exception from it leaves the old file in place. The data reaches the disk before the
    rename, so a crash leaves the old file or the new one, never an empty one. The directory must exist; OSError
    propagates, and no temporary file is left behind."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
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
