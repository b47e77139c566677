# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/unit/fake_journalctl.py speaks journald 252's JSON: given what the recorded unit wrote, it prints the entries
journalctl printed on the lab host (tests/fixtures/tool-outputs/journal/unit-output-252.jsonl), field for field."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import fake_journalctl

FAKE = pathlib.Path(fake_journalctl.__file__)
INVOCATION = "71476cfdbad141eb89a82e1fa7cc8e24"
FIELDS = "MESSAGE,_SYSTEMD_INVOCATION_ID,_SYSTEMD_UNIT,_TRANSPORT,_PID,_UID,_LINE_BREAK,_STREAM_ID"
# Values that name one boot, stream, process or moment: the fake has its own.
VOLATILE = ("__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID", "_PID", "_STREAM_ID")


def written(entries):
    """The bytes the unit wrote, from its entries: each ends in a newline unless journald cut it (LineMax, NUL)."""
    out = b""
    for e in entries:
        msg = e["MESSAGE"].encode() if isinstance(e["MESSAGE"], str) else bytes(e["MESSAGE"])
        out += msg + {"line-max": b"", "nul": b"\x00"}.get(e.get("_LINE_BREAK"), b"\n")
    return out


def test_the_fake_prints_what_journald_printed(fixtures_dir, tmp_path):
    raw = (fixtures_dir / "tool-outputs" / "journal" / "unit-output-252.jsonl").read_bytes()
    real = [json.loads(line) for line in raw.splitlines()]
    # journalctl's own encoding: compact, UTF-8 unescaped
    assert all(line == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":")).encode() for line in raw.splitlines())
    (tmp_path / "journal").write_bytes(written(real))
    env = dict(os.environ, FAKE_JOURNAL=str(tmp_path / "journal"), FAKE_JOURNAL_STEP=str(1 << 30), FAKE_JOURNAL_LOG=str(tmp_path / "log"))
    argv = ["_SYSTEMD_INVOCATION_ID=" + INVOCATION, "_SYSTEMD_UNIT=jm-record.service", "_TRANSPORT=stdout", "-o", "json",
            "--output-fields=" + FIELDS, "--all", "--no-pager"]
    out = subprocess.run([sys.executable, str(FAKE)] + argv, env=env, stdout=subprocess.PIPE, check=True).stdout
    fake = [json.loads(line) for line in out.splitlines()]
    assert len(fake) == len(real) == 13
    for mine, theirs in zip(fake, real):
        assert sorted(mine) == sorted(theirs)
        assert dict((k, v) for k, v in mine.items() if k not in VOLATILE) == dict((k, v) for k, v in theirs.items() if k not in VOLATILE)
        assert all(type(mine[k]) is type(theirs[k]) for k in VOLATILE) and len(mine["_BOOT_ID"]) == len(theirs["_BOOT_ID"])
        assert [part[:2] for part in mine["__CURSOR"].split(";")] == [part[:2] for part in theirs["__CURSOR"].split(";")]
    # the printable rule: UTF-8 with tab and newline is a string; other controls, DEL, C1 and Latin-1 are arrays
    utf8 = json.loads((fixtures_dir / "tool-outputs" / "journal" / "printable-utf8-252.jsonl").read_bytes())
    assert fake_journalctl.printable(utf8["MESSAGE"].encode()) == utf8["MESSAGE"]
    # a poll goes on after the last entry's cursor
    again = subprocess.run([sys.executable, str(FAKE)] + argv + ["--after-cursor", fake[6]["__CURSOR"]], env=env,
                           stdout=subprocess.PIPE, check=True).stdout
    assert [json.loads(line)["MESSAGE"] for line in again.splitlines()] == [e["MESSAGE"] for e in real[7:]]
