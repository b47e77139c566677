# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The journal reader on journald 252's own JSON output (tests/fixtures/tool-outputs/journal, recorded on a lab host)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _journal as j

INVOCATION = "71476cfdbad141eb89a82e1fa7cc8e24"
UNIT = "jm-record.service"
LINE_MAX = 49152


@pytest.fixture
def recorded(fixtures_dir):
    def read(name):
        return (fixtures_dir / "tool-outputs" / "journal" / name).read_bytes()
    return read


def read_all(data, require, chunk=None, **kwargs):
    got = []
    reader = j.JournalReader(got.append, require, **kwargs)
    step = chunk or max(len(data), 1)
    for i in range(0, len(data), step):
        reader.feed(data[i:i + step])
    reader.finish()
    return b"".join(got), reader


def entry(message="line", **fields):
    base = {"__CURSOR": "s=1;i=1", "_SYSTEMD_INVOCATION_ID": INVOCATION, "_SYSTEMD_UNIT": UNIT, "_TRANSPORT": "stdout", "_PID": "131",
            "_UID": "0", "_STREAM_ID": "27313ca6d0a34dbfac7fc04d4c9c7350", "MESSAGE": message}
    base.update(fields)
    return json.dumps(dict((k, v) for k, v in base.items() if v is not None)).encode() + b"\n"


def test_argv_asks_journald_for_the_trusted_fields():
    argv, require = j.unit_output("/usr/bin/journalctl", UNIT, INVOCATION, after_cursor="s=1;i=2", since="-1h")
    assert argv == ["/usr/bin/journalctl", "_SYSTEMD_INVOCATION_ID=" + INVOCATION, "_SYSTEMD_UNIT=" + UNIT, "_TRANSPORT=stdout",
                    "-o", "json", "--output-fields=" + ",".join(j.OUTPUT_FIELDS), "--all", "--no-pager",
                    "--after-cursor", "s=1;i=2", "--since", "-1h"]
    assert require == [("_SYSTEMD_INVOCATION_ID", INVOCATION), ("_SYSTEMD_UNIT", UNIT), ("_TRANSPORT", "stdout")]
    assert j.unit_output("journalctl", UNIT)[1] == [("_SYSTEMD_UNIT", UNIT), ("_TRANSPORT", "stdout")]
    # systemctl takes a name without a type as a service; journald records the full name
    assert j.unit_output("journalctl", "sglang-qwen")[1][0] == ("_SYSTEMD_UNIT", "sglang-qwen.service")
    assert j.unit_output("journalctl", "sglang@0")[1][0] == ("_SYSTEMD_UNIT", "sglang@0.service")
    assert j.unit_output("journalctl", "sglang.scope")[1][0] == ("_SYSTEMD_UNIT", "sglang.scope")
    argv, require = j.pid1_messages("journalctl", INVOCATION)
    assert argv[1:5] == ["_PID=1", "_UID=0", "_TRANSPORT=journal", "INVOCATION_ID=" + INVOCATION]
    for bad in ("", "A" * 32, "a" * 31, "a" * 31 + "\n", "../" + "a" * 29, 7):
        with pytest.raises(j.JournalError, match="is not an invocation id"):
            j.unit_output("journalctl", UNIT, bad)
        with pytest.raises(j.JournalError, match="is not an invocation id"):
            j.pid1_messages("journalctl", bad)


def test_a_units_real_output_keeps_its_lines_and_drops_the_rest_of_cut_ones(recorded):
    data = recorded("unit-output-252.jsonl")
    text, reader = read_all(data, j.unit_output("journalctl", UNIT, INVOCATION)[1])
    lines = text.split(b"\n")
    assert lines[:2] == [b"[2026-12-03 09:59:58] server_args=ServerArgs(model_path='/models/real')",
                         b"[2026-12-03 09:59:59 TP0] Load weight begin. avail mem=78.00 GB"]   # the 2nd from a child process
    # what journalctl prints as arrays of bytes comes back as the bytes written
    assert lines[2:7] == [b"\x1b[32mcoloured\x1b[0m record", b"a\ttab", b"latin-1 caf\xe9", b"del \x7f", b"c1 \xc2\x85 next line"]
    # NUL and LineMax cuts: the head stays a line, the rest (here a ready line) is never one
    assert lines[7:9] == [b"before nul", b"x" * LINE_MAX]
    assert b"ready to roll" not in text and b"after nul" not in text
    assert lines[9:] == [b"stubborn child 137", b"writer done 131", b""]
    assert reader.stats() == {"entries": 13, "kept": 11, "continuations": 2, "oversized": 0, "malformed": 0, "no_message": 0,
                              "mismatched": {"_SYSTEMD_INVOCATION_ID": 0, "_SYSTEMD_UNIT": 0, "_TRANSPORT": 0}}
    assert reader.cursor == json.loads(data.splitlines()[-1])["__CURSOR"]
    # the same, however journalctl's output is cut into chunks
    assert read_all(data, j.unit_output("journalctl", UNIT, INVOCATION)[1], chunk=7)[0] == text


def test_entries_any_local_user_can_send_decide_nothing(recorded):
    # `journalctl INVOCATION_ID=<id>` on the lab host: PID 1's messages and two `logger --journald` entries of user
    # nobody carrying the invocation's INVOCATION_ID=, UNIT=, SYSLOG_IDENTIFIER=systemd and a MESSAGE_ID=
    data = recorded("invocation-id-252.jsonl")
    assert data.count(b'"_UID":"65534"') == 2
    text, reader = read_all(data, j.unit_output("journalctl", UNIT, INVOCATION)[1])
    assert text == b"" and reader.stats()["mismatched"]["_SYSTEMD_INVOCATION_ID"] == 8
    text, reader = read_all(data, j.pid1_messages("journalctl", INVOCATION)[1])
    assert b"Killing process 137 (python3) with signal SIGKILL" in text and b"sshd" not in text and b"decoy" not in text
    assert reader.stats()["kept"] == 6 and reader.stats()["mismatched"]["_PID"] == 2
    assert j.pid1_text(data, j.pid1_messages("journalctl", INVOCATION)[1]) == text.decode()
    # journalctl's own answer to the _PID=1 query holds the same six
    assert read_all(recorded("pid1-252.jsonl"), j.pid1_messages("journalctl", INVOCATION)[1])[0] == text


def test_other_transports_units_and_invocations_are_left_out():
    require = j.unit_output("journalctl", UNIT, INVOCATION)[1]
    data = (entry("kept") + entry("syslog", _TRANSPORT="syslog") + entry("native", _TRANSPORT="journal")
            + entry("kernel", _TRANSPORT="kernel") + entry("other unit", _SYSTEMD_UNIT="evil.service")
            + entry("old run", _SYSTEMD_INVOCATION_ID="b" * 32) + entry("no invocation", _SYSTEMD_INVOCATION_ID=None)
            + entry("two values", _SYSTEMD_UNIT=[UNIT, UNIT]) + entry("no pid", _PID=None) + entry("odd pid", _PID="1a")
            + entry("also kept", INVOCATION_ID="c" * 32, SYSLOG_IDENTIFIER="systemd", MESSAGE_ID="x", UNIT="evil.service"))
    text, reader = read_all(data, require)
    assert text == b"kept\nalso kept\n"
    stats = reader.stats()
    assert stats["mismatched"] == {"_SYSTEMD_INVOCATION_ID": 2, "_SYSTEMD_UNIT": 2, "_TRANSPORT": 3} and stats["malformed"] == 2


def test_message_shapes():
    require = j.unit_output("journalctl", UNIT, INVOCATION)[1]
    data = (entry("text \u00e9") + entry([104, 105, 0, 255]) + entry(None) + entry(["two", "values"]) + entry([256])
            + entry([True]) + entry({"a": 1}) + entry("\ud800 lone surrogate"))
    text, reader = read_all(data, require)
    assert text == "text \u00e9\n".encode() + b"hi\x00\xff\n" + b"? lone surrogate\n"
    assert reader.stats()["no_message"] == 5


def test_a_cut_line_continues_in_its_own_stream_only():
    require = j.unit_output("journalctl", UNIT, INVOCATION)[1]
    data = (entry("A" * 10, _LINE_BREAK="line-max") + entry("other stream", _STREAM_ID="f" * 32)
            + entry("forged record", _PID="140") + entry("A again") + entry("B" * 10, _LINE_BREAK="line-max")
            + entry("B more", _LINE_BREAK="line-max") + entry("B end") + entry("eof", _LINE_BREAK="eof") + entry("next"))
    text, reader = read_all(data, require)
    # a child (another _PID) writing to the same stream: the stream's next entry is still the rest of the line
    assert text == b"A" * 10 + b"\nother stream\nA again\n" + b"B" * 10 + b"\neof\nnext\n"
    assert reader.stats()["continuations"] == 3
    # a reader keeps the stream state across reads (each poll of sglang_wait_ready)
    got = []
    reader = j.JournalReader(got.append, require)
    reader.feed(entry("C", _LINE_BREAK="line-max"))
    reader.finish()
    reader.feed(entry("forged"))
    reader.finish()
    assert got == [b"C\n"]


def test_bounded_entries_and_broken_json():
    require = j.unit_output("journalctl", UNIT, INVOCATION)[1]
    huge = entry("x" * 5000)
    data = entry("one") + huge + b"{not json\n" + b"[1, 2]\n" + b"\n" + entry("two") + huge[:100]
    text, reader = read_all(data, require, chunk=1000, max_entry_bytes=4096)
    assert text == b"one\ntwo\n"
    stats = reader.stats()
    assert stats["oversized"] == 1 and stats["malformed"] == 3 and stats["entries"] == 6
    # a line with no end is skipped as it streams: the reader holds at most max_entry_bytes of it
    reader = j.JournalReader(lambda data: None, require, max_entry_bytes=4096)
    for dummy in range(1000):
        reader.feed(b"y" * 1000)
        assert len(reader._tail) <= 4096
    reader.feed(b"\n" + entry("after"))
    assert reader.kept == 1 and reader.oversized == 1


def test_messages_reach_the_sink_in_batches():
    calls = []
    reader = j.JournalReader(calls.append, j.unit_output("journalctl", UNIT, INVOCATION)[1], batch_bytes=100)
    reader.feed(b"".join(entry("m%02d" % i + "." * 40) for i in range(10)))
    assert 3 <= len(calls) <= 5 and b"".join(calls).count(b"\n") == 10
