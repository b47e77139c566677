# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Real files that are not regular files, put where a test wants a reader to find one, and a watchdog for a call that
could block for ever on them."""

import os
import socket
import tempfile
import threading

# What a reader may meet in a file's place: a FIFO with no writer (open() blocks for ever), a bound UNIX socket
# (open() fails with ENXIO), a symlink to a character device that never ends (/dev/zero).
KINDS = ("fifo", "socket", "dev_zero")


def make_odd(path, kind):
    """Replace path (a pathlib.Path; removed first when it exists) with a real thing of ``kind``. A socket stays bound
    until the test's process ends (returned, so the caller may close it)."""
    if os.path.lexists(str(path)):
        os.remove(str(path))
    if kind == "fifo":
        os.mkfifo(str(path))
        return None
    if kind == "dev_zero":
        os.symlink("/dev/zero", str(path))
        return None
    if kind == "socket":
        # bound under a short directory (a UNIX socket path is at most 107 bytes), then moved into place
        short = tempfile.mkdtemp(prefix="sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(os.path.join(short, "s"))
        sock.listen(1)
        os.rename(os.path.join(short, "s"), str(path))
        os.rmdir(short)
        return sock
    raise ValueError(kind)


def within(seconds, call, *args, **kwargs):
    """(result, exception) of call, run on a daemon thread; AssertionError when it is still running after seconds
    (a reader blocked in open() on a FIFO: the test fails instead of hanging)."""
    out = {}

    def target():
        try:
            out["result"] = call(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 (handed to the test, which judges it)
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "%s was still blocked after %s s" % (getattr(call, "__name__", call), seconds)
    return out.get("result"), out.get("error")
