# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one program runner: time and output bounds, stdin from a thread, a missing program."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto_probe, _process


def gone(pid):
    """The process ended (a zombie that no one reaped yet counts as ended)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (IOError, OSError):
        return True


def script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_hung_program_and_its_children_are_killed(tmp_path):
    # the child keeps the pipe open too: the whole process group must go
    hang = script(tmp_path / "hang.sh", "sleep 60 &\necho $! > %s/child\nsleep 60\n" % tmp_path)
    start = time.monotonic()
    rc, out, err, timed_out, not_found = _process.run_bounded([hang], 1)
    assert timed_out and rc is None and not not_found and time.monotonic() - start < 10
    time.sleep(0.2)
    assert gone(int((tmp_path / "child").read_text()))


def test_a_missing_program_is_named_not_raised(tmp_path):
    rc, out, err, timed_out, not_found = _process.run_bounded([str(tmp_path / "nope")], 1)
    assert (rc, out, timed_out, not_found) == (127, "", False, True) and "No such file" in err
    rc, out, err, timed_out, not_found = _process.run_bounded([str(tmp_path / "nope")], 1, text=False)
    assert (rc, out, not_found) == (127, b"", True) and isinstance(err, bytes)


def test_output_is_kept_and_newlines_read_as_text():
    rc, out, err, timed_out, not_found = _process.run_bounded(["/bin/sh", "-c", "printf 'a\\r\\nb\\n'; echo oops >&2; exit 3"], 10)
    assert (rc, out, err, timed_out, not_found) == (3, "a\nb\n", "oops\n", False, False)


def test_a_flood_is_stopped_at_the_bound(tmp_path):
    flood = script(tmp_path / "flood.sh", "exec yes 'ERR! 0, NVIDIA H200'\n")
    rc, out, err, timed_out, not_found = _process.run_bounded([flood], 30, max_bytes=1 << 20)
    assert rc is None and not timed_out and not not_found
    assert len(out) <= 1 << 20 and err.startswith("flood.sh printed more than 1048576 bytes and was stopped")


def test_stdin_is_fed_from_a_thread_while_the_program_prints():
    # 4 MiB each way: written in one call, a program that answers before it has read everything would dead-lock
    data = b"x" * (4 << 20)
    rc, out, err, timed_out, not_found = _process.run_bounded(["/bin/cat"], 30, input=data, text=False)
    assert (rc, len(out), timed_out) == (0, len(data), False) and out == data
    rc, out, err, timed_out, not_found = _process.run_bounded(["/bin/cat"], 10, input="héllo")
    assert out == "héllo"
    rc, out, err, timed_out, not_found = _process.run_bounded(["/bin/cat"], 10)
    assert (rc, out) == (0, "")  # no input: /dev/null, not the caller's stdin


def test_stream_hands_over_chunks_and_keeps_the_head_of_stderr(tmp_path):
    chunks = []
    noisy = script(tmp_path / "noisy.sh", "head -c 3000000 /dev/zero\nyes err | head -c 100000 >&2\nexit 4\n")
    rc, err = _process.stream([noisy], chunks.append, chunk_bytes=65536)
    assert rc == 4 and sum(len(c) for c in chunks) == 3000000 and max(len(c) for c in chunks) <= 65536
    assert err.startswith("err\nerr") and len(err) <= _process.STDERR_BYTES


def test_stream_timeout_and_missing_program(tmp_path):
    hang = script(tmp_path / "hang.sh", "echo start\nsleep 60\n")
    chunks = []
    rc, err = _process.stream([hang], chunks.append, timeout=1)
    assert rc is None and "hang.sh did not finish within 1 s" in err and b"".join(chunks) == b"start\n"
    with pytest.raises(OSError, match="cannot run .*/nope: No such file"):
        _process.stream([str(tmp_path / "nope")], chunks.append)


def test_a_failing_sink_leaves_no_program_behind(tmp_path):
    endless = script(tmp_path / "endless.sh", "echo $$ > %s/pid\nexec yes\n" % tmp_path)

    def sink(data):
        raise ValueError("stop")
    with pytest.raises(ValueError):
        _process.stream([endless], sink)
    time.sleep(0.2)
    assert gone(int((tmp_path / "pid").read_text()))


ECHO_SCRIPT = """
import sys

try:
    from ansible_collections.llmops.sglang.plugins.module_utils._script_answer import answer
except ImportError:
    pass

MARKER = "M="


def main(request, result):
    print("noise from a library")
    print("noise on stderr", file=sys.stderr)
    result["n"] = request["n"] + 1
    return result


if __name__ == "__main__":
    answer(main, MARKER)
"""


def script_module(tmp_path, source):
    path = tmp_path / "echo_script.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("echo_script", str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ask_python_sends_the_answer_channel_ahead_of_the_script(tmp_path):
    echo = script_module(tmp_path, ECHO_SCRIPT)
    answer, rc, printed = _process.ask_python(sys.executable, echo, '{"n": 41}', 60)
    assert answer["n"] == 42 and answer["python_version"].startswith("3.") and rc == 0
    # what the libraries print goes to stderr: stdout holds the answer line alone
    assert printed == "noise from a library\nnoise on stderr\n"
    silent = script_module(tmp_path, "MARKER = 'M='\nprint('M=not json')\n")
    answer, rc, printed = _process.ask_python(sys.executable, silent, "", 60)
    assert answer is None and printed == "M=not json\n"  # nothing on stderr: what it printed on stdout instead


def test_ask_python_names_each_failure(tmp_path):
    sleepy = script_module(tmp_path, "import time\nMARKER = 'M='\nif __name__ == '__main__':\n    time.sleep(30)\n")
    with pytest.raises(_process.NoAnswer, match="cannot run .*/nope: No such file"):
        _process.ask_python(str(tmp_path / "nope"), sleepy, "", 5)
    with pytest.raises(_process.NoAnswer, match="did not answer within 1 s .*raise sglang_timeout"):
        _process.ask_python(sys.executable, sleepy, "", 1, timeout_fix="raise sglang_timeout")
    loud = script_module(tmp_path, "MARKER = 'M='\nprint('x' * 5000)\n")
    with pytest.raises(_process.NoAnswer, match="printed more than 1000 bytes"):
        _process.ask_python(sys.executable, loud, "", 30, max_bytes=1000)


def test_module_source_is_the_file():
    with open(_kv_auto_probe.__file__) as handle:
        assert _process.module_source(_kv_auto_probe) == handle.read()


def test_a_program_that_closes_its_output_early_keeps_its_exit_code_and_its_leftovers_die(tmp_path):
    # closed pipes are not the end of the program: killing its group right then made it exit -9
    rc, out, err, timed_out, not_found = _process.run_bounded(["sh", "-c", "exec >/dev/null 2>&1; sleep 0.5; exit 3"], 10)
    assert (rc, timed_out) == (3, False)
    # a child it left running, detached from the pipes, is killed once the program ended
    pidfile = tmp_path / "child.pid"
    rc, out, err, timed_out, not_found = _process.run_bounded(
        ["sh", "-c", "sleep 30 >/dev/null 2>&1 </dev/null & echo $! > %s; exit 0" % pidfile], 10)
    assert rc == 0
    pid = int(pidfile.read_text())
    for _attempt in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the detached child %d still runs" % pid)
