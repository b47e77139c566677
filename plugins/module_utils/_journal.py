# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of the systemd journal: ``journalctl -o json`` entries judged by the fields only journald sets.

The text of a journal entry is written by whoever logged it; its trusted fields (names starting with ``_``) are
set by journald from the kernel's view of the writer and cannot be sent by a client. ``JournalReader`` takes
journalctl's JSON output in chunks of any size, keeps an entry only when each required trusted field has the
expected value, and hands the messages of the kept entries to a sink as lines:

* ``unit_output``: what the unit's server printed - ``_SYSTEMD_INVOCATION_ID`` of the invocation (or, for the
  unit's whole journal, of some invocation), ``_SYSTEMD_UNIT``, ``_TRANSPORT=stdout``. journald sets all three
  from the writing process: on systemd 252 a stdout stream entry carries the ``_PID`` of the process that wrote
  it (a child writing to the inherited stdout shows its own PID, with the stream's ``_STREAM_ID``), and the
  unit and invocation come from that process's control group. So they already say "a process of this
  invocation wrote it"; a list of PIDs cannot say more, and would lose the lines of a worker that died before
  the read (the tracebacks that matter most). ``_PID`` is required to be a PID, no more. Fields a client sets
  (``INVOCATION_ID=``, ``SYSLOG_IDENTIFIER=``, ``MESSAGE_ID=``, ``UNIT=``) are never read, and the journal,
  syslog and kernel transports are never the server's output.
* ``pid1_messages``: systemd's own messages about an invocation (``_PID=1``, ``_UID=0``,
  ``_TRANSPORT=journal``), for the stop report.

journald cuts a stdout line at ``LineMax`` (48 KiB by default) and marks the entry ``_LINE_BREAK=line-max``;
the next entry of the same stream is the rest of that line, so its start is whatever the writer printed there
(a client's prompt): it is never a record and is dropped (counted as ``continuations``). So is the rest after a
NUL byte (``_LINE_BREAK=nul``). ``MESSAGE`` may be a string, an array of bytes (not UTF-8, or control
characters) or missing. A JSON line longer than ``max_entry_bytes`` is skipped and counted, so memory stays
bounded whatever an entry holds. The cursor (``__CURSOR``) of the last entry read lets the next read go on
from there (``--after-cursor``).

Standard library only; no Ansible imports. Runs on the managed host (Python 3.9+).
"""

from __future__ import annotations

import json

# Fields journalctl prints per entry (it always adds __CURSOR, the timestamps and _BOOT_ID).
OUTPUT_FIELDS = ("MESSAGE", "_SYSTEMD_INVOCATION_ID", "_SYSTEMD_UNIT", "_TRANSPORT", "_PID", "_UID", "_LINE_BREAK", "_STREAM_ID")
# One JSON line: a LineMax line of 48 KiB printed as an array of bytes ("255, ") is about 300 KiB.
MAX_ENTRY_BYTES = 1 << 20
# Messages handed to the sink at once (one call per chunk of journalctl's output, or per this many bytes).
BATCH_BYTES = 1 << 20
# Streams whose last line was cut, remembered at most (a unit has a handful).
MAX_STREAMS = 4096
# _LINE_BREAK values after which the stream's next entry is the rest of a line.
SPLIT_BREAKS = ("line-max", "nul")
# Text kept from PID 1's messages about one invocation (a stop that killed many processes stays far below).
PID1_TEXT_BYTES = 1 << 20
_HEX32 = frozenset("0123456789abcdef")
# Unit types: a name without one of these suffixes is a service to systemctl, and journald records it so.
UNIT_SUFFIXES = (".service", ".socket", ".target", ".device", ".mount", ".automount", ".swap", ".timer", ".path", ".slice", ".scope")


class JournalError(ValueError):
    """A journal query that cannot be made safely (the message names the fix)."""


def _journal_args(journalctl, matches, fields, after_cursor=None, since=None):
    argv = [journalctl] + ["%s=%s" % kv for kv in matches] + ["-o", "json", "--output-fields=" + ",".join(fields), "--all",
                                                              "--no-pager"]
    # --all: without it journalctl prints a field over 4096 bytes as null
    if after_cursor:
        argv += ["--after-cursor", after_cursor]
    if since:
        argv += ["--since", since]
    return argv


def _check_invocation(invocation_id):
    if not (isinstance(invocation_id, str) and len(invocation_id) == 32 and set(invocation_id) <= _HEX32):
        raise JournalError("%r is not an invocation id (32 lower-case hex digits, as systemctl show --property=InvocationID "
                           "prints it)" % (invocation_id,))


def full_unit_name(unit):
    """The unit's name as journald records it in _SYSTEMD_UNIT: systemctl reads "sglang-qwen" as sglang-qwen.service."""
    return unit if unit.endswith(UNIT_SUFFIXES) else unit + ".service"


def unit_output(journalctl, unit, invocation_id=None, after_cursor=None, since=None):
    """(argv, required fields) that read what the unit's processes printed to stdout/stderr.

    With invocation_id: that invocation only; without (the unit's whole journal): every invocation's.
    """
    require = [("_SYSTEMD_UNIT", full_unit_name(unit)), ("_TRANSPORT", "stdout")]
    if invocation_id is not None:
        _check_invocation(invocation_id)
        require.insert(0, ("_SYSTEMD_INVOCATION_ID", invocation_id))
    return _journal_args(journalctl, require, OUTPUT_FIELDS, after_cursor, since), require


def pid1_messages(journalctl, invocation_id):
    """(argv, required fields) that read systemd's own messages about one invocation of a unit."""
    _check_invocation(invocation_id)
    # INVOCATION_ID= is a field any client can send: it narrows the query, the trusted _PID/_UID decide
    require = [("_PID", "1"), ("_UID", "0"), ("_TRANSPORT", "journal"), ("INVOCATION_ID", invocation_id)]
    return _journal_args(journalctl, require, ("MESSAGE", "_PID", "_UID", "_TRANSPORT", "INVOCATION_ID")), require


def message_bytes(value):
    """MESSAGE as journalctl's JSON gives it -> bytes, or None (missing, null, several values, not bytes)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace")     # "replace": a lone surrogate from a \\ud800 escape
    if isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in value):
        return bytes(value)
    return None


class JournalReader(object):
    """Parse ``journalctl -o json`` output fed in chunks; sink(bytes) gets the kept messages, each ending in a newline.

    require: [(field, value)] every kept entry must carry exactly (one string value each). ``stats()`` counts what
    was read and why entries were not kept; ``cursor`` is the last entry's ``__CURSOR`` (None before one).
    """

    def __init__(self, sink, require, max_entry_bytes=MAX_ENTRY_BYTES, batch_bytes=BATCH_BYTES):
        self._sink = sink
        self._require = tuple(require)
        self._max = max_entry_bytes
        self._batch_bytes = batch_bytes
        self._tail = b""
        self._skipping = False
        self._broken = {}          # stream -> True: its last entry was cut, the next one is the rest
        self._batch, self._batched = [], 0
        self.cursor = None
        self.entries = self.kept = self.continuations = self.oversized = self.malformed = self.no_message = 0
        self.mismatched = dict((field, 0) for field, dummy in self._require)
        self.bytes = 0             # journalctl output read

    def feed(self, data):
        self.bytes += len(data)
        if self._skipping:
            cut = data.find(b"\n")
            if cut < 0:
                return
            data, self._skipping = data[cut + 1:], False
        if self._tail:
            data = self._tail + data
        cut = data.rfind(b"\n") + 1
        self._tail = data[cut:]
        if len(self._tail) > self._max:
            self.entries += 1
            self.oversized += 1
            self._tail, self._skipping = b"", True
        if cut:
            # journalctl writes UTF-8 (other bytes go out as arrays); json.loads of a str is twice as fast as of bytes
            entry = self._entry
            for line in data[:cut].decode("utf-8", "replace").split("\n")[:-1]:
                entry(line)
        self._flush()

    def finish(self):
        """End of output: a last line without its newline was cut by journalctl's end and is not an entry."""
        if self._tail:
            self.entries += 1
            self.malformed += 1
            self._tail = b""
        self._flush()

    def _flush(self):
        if self._batch:
            batch, self._batch, self._batched = self._batch, [], 0
            self._sink(b"".join(batch))

    def _entry(self, line):
        if not line:
            return
        self.entries += 1
        if len(line) > self._max:
            self.oversized += 1
            return
        try:
            entry = json.loads(line)
        except ValueError:
            self.malformed += 1
            return
        if not isinstance(entry, dict):
            self.malformed += 1
            return
        cursor = entry.get("__CURSOR")
        if isinstance(cursor, str):
            self.cursor = cursor
        for field, value in self._require:
            if entry.get(field) != value:
                self.mismatched[field] += 1
                return
        if entry.get("_TRANSPORT") == "stdout":
            pid = entry.get("_PID")
            if not (isinstance(pid, str) and pid.isascii() and pid.isdigit()):
                self.malformed += 1
                return
            stream = entry.get("_STREAM_ID")
            stream = stream if isinstance(stream, str) else "pid:" + pid    # journald before 235: no _STREAM_ID
            continued = self._broken.pop(stream, False)
            if entry.get("_LINE_BREAK") in SPLIT_BREAKS:
                if len(self._broken) >= MAX_STREAMS:
                    self._broken.clear()
                self._broken[stream] = True
            if continued:
                self.continuations += 1
                return
        message = message_bytes(entry.get("MESSAGE"))
        if message is None:
            self.no_message += 1
            return
        self.kept += 1
        self._batch.append(message + b"\n")
        self._batched += len(message) + 1
        if self._batched >= self._batch_bytes:
            self._flush()

    def stats(self):
        """Counts: entries (JSON lines), kept, continuations, oversized, malformed, no_message, mismatched {field: n};
        each entry is in exactly one of the others."""
        return {"entries": self.entries, "kept": self.kept, "continuations": self.continuations, "oversized": self.oversized,
                "malformed": self.malformed, "no_message": self.no_message, "mismatched": dict(self.mismatched)}


def read(stream, argv, require, sink, **kwargs):
    """Run journalctl through stream(argv, on_output) -> (rc, stderr text) and read it: (rc, err, reader)."""
    reader = JournalReader(sink, require, **kwargs)
    rc, err = stream(argv, reader.feed)
    reader.finish()
    return rc, err, reader


def pid1_text(output, require):
    """PID 1's messages in journalctl's whole JSON output (bytes) as text, one per line, at most PID1_TEXT_BYTES."""
    kept = []
    size = [0]

    def keep(data):
        if size[0] < PID1_TEXT_BYTES:
            kept.append(data[:PID1_TEXT_BYTES - size[0]])
            size[0] += len(kept[-1])
    reader = JournalReader(keep, require)
    reader.feed(output)
    reader.finish()
    return b"".join(kept).decode("utf-8", "replace")
