# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A Hugging Face Hub download that is stopped when it stops making progress.

* ``StallWatch`` decides from samples (seconds, bytes on disk) whether a download stalled: the bytes have not
  changed for ``stall_timeout`` seconds. A hung connection writes nothing, so the bytes under the download
  directory (the hub's ``.cache/huggingface/download/*.incomplete`` partial files included) stay put; a slow one
  still grows.
* ``dir_bytes`` measures those bytes (regular files only, bounded in entries).
* ``run_download`` runs the hub CLI in a session of its own (the token only in its environment), samples the bytes
  every few seconds and, on a stall, stops the whole group (SIGTERM, then SIGKILL): the CLI resumes from the partial
  files on the next run. Its answer says how the download ended, with the message for a stall.

Standard library only; no Ansible imports. Runs on the managed host (Python 3.9+).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import tempfile
import time

# Seconds without growth after which a download counts as stalled (the role's default).
DEFAULT_STALL_TIMEOUT = 600
# What the CLI printed that is kept for the message (it prints little with progress bars off), and what it may print
# in all before it is stopped (its output waits in temporary files).
OUTPUT_BYTES = 64 * 1024
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
# Files and directories looked at per sample: a checkpoint has a few hundred.
MAX_ENTRIES = 100000
# Seconds a stopped CLI has to exit on SIGTERM before the group is killed.
TERM_GRACE = 10.0


class StallWatch(object):
    """Whether a download stalled, from samples of the bytes it has on disk.

    The clock starts at ``start`` (the download's start): a download that never writes a byte stalls
    ``stall_timeout`` seconds after it. A sample whose bytes differ from the last one's is progress: more bytes, or
    fewer (a partial file the CLI started again). ``stall_timeout`` 0 never stalls.
    """

    def __init__(self, stall_timeout, start):
        self.stall_timeout = stall_timeout
        self.last = None
        self.changed_at = start

    def see(self, now, size):
        """Record a sample; the seconds since the bytes last changed when that makes the download stalled, else None."""
        if self.last is not None and size != self.last:
            self.changed_at = now
        self.last = size
        idle = now - self.changed_at
        return idle if self.stall_timeout and idle >= self.stall_timeout else None


def dir_bytes(path, max_entries=MAX_ENTRIES):
    """Bytes of the regular files under path (symlinks not followed); a file that vanishes between the listing and
    its stat counts 0. At most max_entries entries are looked at."""
    total, seen = 0, 0
    for root, dirs, files in os.walk(path):
        for name in files:
            seen += 1
            if seen > max_entries:
                return total
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
        seen += len(dirs)
        if seen > max_entries:
            return total
    return total


def mib(size):
    return "%.1f MiB" % (size / 1048576.0)


def stall_message(idle, size, local_dir, stall_timeout):
    """The failure of a stalled download: the cause, what was done, and the fixes."""
    return ("no progress for %d s (stall_timeout %d): the bytes under %s, the hub's .incomplete partial files "
            "included, stayed at %s, so the download was stopped; the next run resumes it. Check the host's network "
            "and proxy (HTTPS_PROXY, NO_PROXY), that the HF token may read the repository, and the hub's status; on a "
            "slow or busy link raise stall_timeout (the sglang_runtime role's sglang_runtime_download_stall_timeout)"
            % (int(idle), stall_timeout, local_dir, mib(size)))


def _tail(handle):
    """The last OUTPUT_BYTES of a temporary output file, as lines."""
    handle.seek(0, os.SEEK_END)
    handle.seek(max(0, handle.tell() - OUTPUT_BYTES))
    return handle.read().decode("utf-8", "replace").splitlines()


def _stop(proc):
    """SIGTERM to the CLI's whole group, SIGKILL to what is left after TERM_GRACE seconds."""
    for sig, wait in ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, TERM_GRACE)):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_download(argv, local_dir, env, stall_timeout=DEFAULT_STALL_TIMEOUT, sample_every=5.0, clock=time.monotonic):
    """Run the hub CLI argv until it exits or stalls: {rc, stalled, idle_s, bytes, stdout_lines, stderr_lines, msg}.

    rc is None for a CLI that could not start (msg says why) or was stopped for a stall (stalled true, msg
    stall_message's). Samples come every sample_every seconds (less when stall_timeout is short).
    """
    every = min(sample_every, max(stall_timeout / 4.0, 0.1)) if stall_timeout else sample_every
    result = {"rc": None, "stalled": False, "idle_s": None, "bytes": None, "stdout_lines": [], "stderr_lines": [],
              "msg": ""}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                    start_new_session=True)
        except (OSError, ValueError) as exc:
            result["msg"] = "cannot run %s (%s): set the hub CLI's path (hf, in the runtime venv)" % (
                argv[0], getattr(exc, "strerror", None) or exc)
            return result
        watch = StallWatch(stall_timeout, clock())
        try:
            while True:
                try:
                    result["rc"] = proc.wait(timeout=every)
                    break
                except subprocess.TimeoutExpired:
                    pass
                printed = os.fstat(out.fileno()).st_size + os.fstat(err.fileno()).st_size
                if printed > MAX_OUTPUT_BYTES:
                    _stop(proc)
                    result["msg"] = ("%s printed more than %d bytes and was stopped: that is not the hub CLI (set its path, "
                                     "hf in the runtime venv)" % (argv[0], MAX_OUTPUT_BYTES))
                    break
                size = dir_bytes(local_dir)
                idle = watch.see(clock(), size)
                if idle is not None:
                    _stop(proc)
                    result.update(stalled=True, idle_s=int(idle), msg=stall_message(idle, size, local_dir, stall_timeout))
                    break
        finally:
            if proc.poll() is None:
                _stop(proc)
        result["bytes"] = dir_bytes(local_dir)
        result["stdout_lines"], result["stderr_lines"] = _tail(out), _tail(err)
    if result["rc"] is not None and result["rc"] != 0:
        result["msg"] = "%s exited with rc %s" % (os.path.basename(str(argv[0])), result["rc"])
    return result
