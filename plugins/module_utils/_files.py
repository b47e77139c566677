# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writing a file so that a reader never sees half of it: the one atomic write of the collection (caches, stamps,
controller reports). Pure Python, stdlib only."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path, data, mode):
    """Write bytes to path through a private temporary file in the same directory, renamed over it (a symlink at path
    is replaced, not followed). The directory must exist; OSError propagates, and no temporary file is left behind."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
