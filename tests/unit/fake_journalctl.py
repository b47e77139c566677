# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in for ``journalctl -o cat --show-cursor [--after-cursor C]`` over a journal that grows between calls.

Run as ``python fake_journalctl.py ARGS...`` (tests put a wrapper named journalctl on PATH). The journal is the
file FAKE_JOURNAL; after the n-th call its first n * FAKE_JOURNAL_STEP bytes (cut back to a line end) are written.
A call prints what follows its ``--after-cursor`` (the start without one) up to there, then ``-- cursor: o=OFFSET``
as journalctl's ``--show-cursor`` does, and nothing at all when there is nothing new. Each call appends
``{"argv", "from", "to"}`` as a JSON line to FAKE_JOURNAL_LOG, so a test sees every byte each poll was served.
"""

import json
import os
import sys

CHUNK = 1 << 20


def main(argv):
    journal, step, log = os.environ["FAKE_JOURNAL"], int(os.environ["FAKE_JOURNAL_STEP"]), os.environ["FAKE_JOURNAL_LOG"]
    calls = 0
    if os.path.exists(log):
        with open(log) as handle:
            calls = sum(1 for dummy in handle)
    start = 0
    if "--after-cursor" in argv:
        start = int(argv[argv.index("--after-cursor") + 1].split("o=", 1)[1])
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
        left = end - start
        while left > 0:
            data = src.read(min(CHUNK, left))
            if not data:
                break
            out.write(data)
            left -= len(data)
    if end > start:
        out.write(b"-- cursor: o=%d\n" % end)
    out.flush()
    with open(log, "a") as handle:
        handle.write(json.dumps({"argv": argv, "from": start, "to": end}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
