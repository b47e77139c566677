# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in for ``journalctl MATCHES -o json --output-fields=... [--after-cursor C]`` over a journal that grows between calls.

Run as ``python fake_journalctl.py ARGS...`` (tests put a wrapper named journalctl on PATH). The journal is the
text file FAKE_JOURNAL, as a unit's stdout wrote it; after the n-th call its first n * FAKE_JOURNAL_STEP bytes (cut
back to a line end) are written. A call prints one JSON line per journal entry after its ``--after-cursor`` (the
start without one) up to there, in the shape journald 252 gives a unit's stdout (``tests/fixtures/tool-outputs/
journal/unit-output-252.jsonl``, held to it by ``test_fake_journalctl.py``): ``__CURSOR`` and the fields always
printed, then the ``--output-fields`` it has; a line longer than LineMax (49152 bytes) or holding a NUL becomes
several entries, each cut one ``_LINE_BREAK=line-max``/``nul``; a message that is not printable UTF-8 is an array
of bytes. ``_SYSTEMD_INVOCATION_ID``/``_SYSTEMD_UNIT`` come from the matches given (FAKE_UNIT, ``sglang.service``,
without one); ``_PID`` is FAKE_PID (4242). Each call appends ``{"argv", "from", "to"}`` as a JSON line to
FAKE_JOURNAL_LOG, so a test sees every byte each poll was served.
"""

import json
import os
import re
import sys

CHUNK = 1 << 20
LINE_MAX = 49152
BOOT_ID = "bb6cb0ca772248b484ed6538203c8dcb"
SEQNUM_ID = "ca6d70663e1c42e5bfdaabbe0610219e"
STREAM_ID = "27313ca6d0a34dbfac7fc04d4c9c7350"
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")   # C0 controls but tab and newline, DEL, C1 controls
ALWAYS = ("__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID")


def printable(data):
    """journald's utf8_is_printable: valid UTF-8 without C0 controls (but tab and newline), DEL or C1 controls."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if UNPRINTABLE.search(text):
        return None
    return text


def entries(data, base):
    """(end offset, message bytes, line break or None) per entry of data (whole lines, or the rest of a cut one)."""
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        nul = data.find(b"\x00", pos, end)
        if nul >= 0 and nul - pos <= LINE_MAX:
            yield base + nul + 1, data[pos:nul], "nul"
            pos = nul + 1
        elif end - pos > LINE_MAX:
            yield base + pos + LINE_MAX, data[pos:pos + LINE_MAX], "line-max"
            pos += LINE_MAX
        else:
            yield base + end + 1, data[pos:end], None
            pos = end + 1


def render(end, message, line_break, fields, known):
    entry = {"__CURSOR": "s=%s;i=%x;b=%s;m=%x;t=%x;x=%016x" % (SEQNUM_ID, end, BOOT_ID, 1000 + end, 1796327829663604 + end, end),
             "__REALTIME_TIMESTAMP": str(1796327829663604 + end), "__MONOTONIC_TIMESTAMP": str(1490446070 + end), "_BOOT_ID": BOOT_ID}
    text = printable(message)
    values = dict(known, MESSAGE=text if text is not None else list(message))
    if line_break:
        values["_LINE_BREAK"] = line_break
    for name in fields:
        if name in values and name not in entry:
            entry[name] = values[name]
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def known_fields(matches, pid=None):
    """The trusted fields of the unit's stdout entries, from journalctl's matches."""
    return {"_SYSTEMD_INVOCATION_ID": matches.get("_SYSTEMD_INVOCATION_ID", "0" * 32),
            "_SYSTEMD_UNIT": matches.get("_SYSTEMD_UNIT", os.environ.get("FAKE_UNIT", "sglang.service")),
            "_TRANSPORT": "stdout", "_PID": pid or os.environ.get("FAKE_PID", "4242"), "_UID": "0", "_STREAM_ID": STREAM_ID}


def parse_argv(argv):
    """(matches, output fields or None, byte offset after --after-cursor or 0) of a journalctl argv."""
    matches = dict(a.split("=", 1) for a in argv[1:] if not a.startswith("-") and "=" in a)
    fields = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--output-fields=")), None)
    start = 0
    if "--after-cursor" in argv:
        start = int(argv[argv.index("--after-cursor") + 1].split(";i=", 1)[1].split(";", 1)[0], 16)
    return matches, fields, start


def to_json(data, base, fields, known):
    """journalctl's JSON lines for the entries of data (whole lines, at byte offset base of the journal)."""
    return b"".join(render(e, m, b, fields, known) for e, m, b in entries(data, base))


def pid1_json(text, invocation_id, fields=("MESSAGE", "_PID", "_UID", "_TRANSPORT", "INVOCATION_ID")):
    """systemd's own messages (one per line of text) about an invocation, as journalctl prints them."""
    known = {"_PID": "1", "_UID": "0", "_TRANSPORT": "journal", "INVOCATION_ID": invocation_id, "SYSLOG_IDENTIFIER": "systemd"}
    return to_json(text, 0, fields, known)


def main(argv):
    journal, step, log = os.environ["FAKE_JOURNAL"], int(os.environ["FAKE_JOURNAL_STEP"]), os.environ["FAKE_JOURNAL_LOG"]
    calls = 0
    if os.path.exists(log):
        with open(log) as handle:
            calls = sum(1 for dummy in handle)
    matches, fields, start = parse_argv(["journalctl"] + argv)
    if "json" not in argv or fields is None:
        sys.stderr.write("fake journalctl: only -o json --output-fields=... is answered, got %r\n" % (argv,))
        return 2
    known = known_fields(matches)
    out = sys.stdout.buffer
    with open(journal, "rb") as src:
        size = os.fstat(src.fileno()).st_size
        end = min(size, (calls + 1) * step)
        if end < size:
            src.seek(max(end - CHUNK, 0))
            tail = src.read(end - max(end - CHUNK, 0))
            end -= len(tail) - tail.rfind(b"\n") - 1   # back to a line end
        end = max(end, start)
        src.seek(start)
        pos, carry = start, b""
        while pos < end:
            data = carry + src.read(min(CHUNK, end - pos))
            pos += len(data) - len(carry)
            cut = len(data) if pos >= end else data.rfind(b"\n") + 1
            if cut == 0:
                carry = data    # a line longer than a chunk: read on
                continue
            out.write(to_json(data[:cut], pos - len(data), fields, known))
            carry = data[cut:]
    out.flush()
    with open(log, "a") as handle:
        handle.write(json.dumps({"argv": argv, "from": start, "to": end}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
