# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one way the collection runs a program: no shell, bounded in time and in output, stdin fed from a thread.

* ``run_bounded``: run a program and keep what it printed (at most ``max_bytes``);
* ``stream``: run a program and hand its standard output to a sink chunk by chunk (a journal larger than memory);
* ``ask_python``: send a Python source to an interpreter (the request on stdin) and read the JSON of its
  marker line; ``module_source`` gives the source of one of this collection's module files to send.

A missing, hung or flooding program never raises out of ``run_bounded``: the caller reads why from its result.
Standard library only; no Ansible imports. Runs on the managed host (Python 3.9+) and on the controller.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import threading
import time

# A program's output (stdout and stderr together) kept by run_bounded: nvidia-smi -q of 8 GPUs is about
# 100 KB, lspci -vvv of a large server a few MB (docs/security.md, "Bounds").
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
CHUNK_BYTES = 1 << 20
# Bytes of a streamed program's standard error kept for its error message.
STDERR_BYTES = 4000


class NoAnswer(Exception):
    """An interpreter could not be run, did not finish in time or printed too much (the message says which)."""


def _decode(chunks):
    # as universal_newlines did: undecodable bytes replaced, \r\n and \r read as \n
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (IOError, OSError):
        pass


def _feed(stream, data):
    try:
        stream.write(data)
    except (IOError, OSError):
        pass  # the program closed its stdin or died: what it printed tells why
    finally:
        try:
            stream.close()
        except (IOError, OSError):
            pass


def _start(argv, env=None, cwd=None, input=None):  # pylint: disable=redefined-builtin
    """Popen of argv in a session of its own (so a timeout kills its children too), input fed from a thread."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL if input is None else subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    if input is not None:
        data = input.encode("utf-8") if isinstance(input, str) else input
        threading.Thread(target=_feed, args=(proc.stdin, data), daemon=True).start()
    return proc


def _pump(proc, deadline, on_out, on_err, read_bytes=65536):
    """Hand what proc prints to on_out/on_err (bytes) until both pipes close, the deadline passes ("timeout")
    or a handler returns False ("stopped"); the group is killed in the last two cases. Returns (rc, why)."""
    why = None
    handlers = {proc.stdout.fileno(): on_out, proc.stderr.fileno(): on_err}
    try:
        with selectors.DefaultSelector() as selector:
            for pipe in (proc.stdout, proc.stderr):
                selector.register(pipe, selectors.EVENT_READ)
            while selector.get_map() and why is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    why = "timeout"
                    break
                for key, _events in selector.select(left):
                    data = os.read(key.fd, read_bytes)
                    if not data:
                        selector.unregister(key.fileobj)
                    elif handlers[key.fd](data) is False:
                        why = "stopped"
                        break
    except BaseException:
        # a handler failed: leave no program running behind the error
        why = "failed"
        raise
    finally:
        if why:
            _kill_group(proc)
            if why == "failed":
                proc.stdout.close()
                proc.stderr.close()
                proc.wait()
    rc = None
    try:
        # the pipes are closed: only a program that detached from them is still running
        left = None if deadline is None else max(0.5, deadline - time.monotonic())
        rc = proc.wait(timeout=2 if why else left)
    except subprocess.TimeoutExpired:
        if why is None:
            why = "timeout"
            _kill_group(proc)
        try:
            # a process stuck in the kernel (D state) cannot die: do not wait for it for ever
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    finally:
        proc.stdout.close()
        proc.stderr.close()
        # what it left running in its group, once it ended itself (killed before that, it would exit -9)
        _kill_group(proc)
    return (None if why else rc), why


def run_bounded(argv, timeout, env=None, max_bytes=MAX_OUTPUT_BYTES, text=True, cwd=None, input=None):  # pylint: disable=redefined-builtin
    """Run argv with its output bounded in time and in size; past either, kill its whole process group.

    ``input`` (text or bytes) is written to its stdin from a thread, so a program that prints before it reads
    cannot block on a full pipe; without it stdin is /dev/null.

    Returns (rc, stdout, stderr, timed_out, not_found); stdout and stderr are text (bytes with text=False). Never
    raises for a missing, hung or flooding program: a missing one gives rc 127, not_found and the OS error in stderr;
    more than max_bytes of output (both streams together) gives rc None and a first stderr line that says so.
    timeout None waits for ever (the output is bounded all the same).
    """
    try:
        proc = _start(argv, env, cwd, input)
    except (IOError, OSError, ValueError) as exc:  # ValueError: a NUL byte in argv
        reason = getattr(exc, "strerror", None) or str(exc)
        return 127, "" if text else b"", reason if text else reason.encode("utf-8", "replace"), False, True
    out, err, size = [], [], [0]

    def keep(chunks):
        def on_data(data):
            size[0] += len(data)
            if size[0] > max_bytes:
                return False
            chunks.append(data)
            return True
        return on_data

    rc, why = _pump(proc, None if timeout is None else time.monotonic() + timeout, keep(out), keep(err))
    if why == "stopped":
        err.insert(0, b"%s printed more than %d bytes and was stopped: that is not the output it is read for\n"
                   % (os.path.basename(str(argv[0])).encode("utf-8", "replace"), max_bytes))
    if not text:
        return rc, b"".join(out), b"".join(err), why == "timeout", False
    return rc, _decode(out), _decode(err), why == "timeout", False


def stream(argv, sink, timeout=None, chunk_bytes=CHUNK_BYTES):
    """Run argv and hand its standard output to sink(bytes) as it comes, never holding it whole.

    Returns (rc, the head of its standard error as text); rc is None when it ran past timeout (killed, and the
    text says so). Raises OSError naming the program when it cannot be started.
    """
    try:
        proc = _start(argv)
    except (IOError, OSError, ValueError) as exc:
        raise OSError("cannot run %s: %s" % (argv[0], getattr(exc, "strerror", None) or exc))
    head = []

    def keep_head(data):
        if sum(len(c) for c in head) < STDERR_BYTES:
            head.append(data)

    rc, why = _pump(proc, None if timeout is None else time.monotonic() + timeout, sink, keep_head, chunk_bytes)
    err = b"".join(head)[:STDERR_BYTES].decode("utf-8", "replace").strip()
    if why == "timeout":
        err = ("%s did not finish within %s s and was stopped; %s" % (os.path.basename(str(argv[0])), timeout, err)).strip("; ")
    return rc, err


def module_source(module):
    """Source of one of this collection's module files (also inside an AnsiballZ archive), to send to an interpreter."""
    loader = getattr(module, "__loader__", None)
    if loader is not None and hasattr(loader, "get_source"):
        source = loader.get_source(module.__name__)
        if source:
            return source
    with open(module.__file__) as handle:
        return handle.read()


def read_marker(stdout, marker):
    """The JSON after the last line of stdout that starts with marker (None when there is none or it is not JSON)."""
    answer = None
    for line in stdout.splitlines():
        if line.startswith(marker):
            try:
                answer = json.loads(line[len(marker):])
            except ValueError:
                answer = None
    return answer


def ask_python(python, script, request, timeout, env=None, max_bytes=MAX_OUTPUT_BYTES, timeout_fix="raise the timeout"):
    """Run a script module of this collection (one that ends in ``answer(main, MARKER)``) with ``python -c``, the
    source of ``_script_answer`` sent ahead of its own and request (text) on stdin. Bytecode is never written (a
    read-only look into someone's install).

    Returns (answer, rc, printed): answer is the JSON of its MARKER line or None, printed its stderr (its stdout when
    stderr is empty) to show when there is no answer. Raises NoAnswer naming the cause when the interpreter cannot
    be run, runs past timeout (then ``timeout_fix`` says what to raise) or prints more than max_bytes.
    """
    from ansible_collections.llmops.sglang.plugins.module_utils import _script_answer
    source = module_source(_script_answer) + "\n\n" + module_source(script)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", **(env or {}))
    rc, stdout, stderr, timed_out, not_found = run_bounded([python, "-c", source], timeout, env=env, max_bytes=max_bytes,
                                                           input=request)
    if timed_out:
        raise NoAnswer("%s did not answer within %s s (importing SGLang is slow on a cold cache); %s"
                       % (python, timeout, timeout_fix))
    if not_found:
        raise NoAnswer("cannot run %s: %s" % (python, stderr))
    if rc is None:
        raise NoAnswer(stderr.splitlines()[0])
    return read_marker(stdout, script.MARKER), rc, stderr if stderr.strip() else stdout
