# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A lab unit's ExecStart: writes to stdout what an SGLang server under attack writes, for journald to record.

    journal_writer.py LOG FORGED [LINE_MAX]

1. the lines of LOG (a real SGLang log), the first half from this process and the rest from a child writing to
   the inherited stdout, as SGLang's scheduler processes do;
2. one line of each shape journalctl prints as an array of bytes or splits (ANSI colours, a tab, Latin-1, DEL,
   a C1 control, a NUL);
3. per line of FORGED: a line LINE_MAX (journald's LineMax, 48 KiB by default) bytes long, then that line: journald
   cuts the whole at LineMax, so the forged line becomes an entry of its own, as the rest of a long prompt does;
4. a child that ignores SIGTERM (systemd has to SIGKILL it at TimeoutStopSec), then ``writer done`` and a wait.

Standard library only: runs with the lab host's python3.
"""

import os
import signal
import subprocess
import sys
import time

SHAPES = (b"\x1b[32mcoloured\x1b[0m record", b"a\ttab", b"latin-1 caf\xe9", b"del \x7f", b"c1 \xc2\x85 next line",
          b"before nul\x00after nul")


def main(argv):
    log, forged = argv[0], argv[1]
    line_max = int(argv[2]) if len(argv) > 2 else 48 * 1024
    out = sys.stdout.buffer
    with open(log, "rb") as handle:
        lines = handle.read().splitlines(True)
    half = len(lines) // 2
    out.write(b"".join(lines[:half]))
    out.flush()
    child = "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read()[int(sys.argv[2]):]); sys.stdout.flush()"
    subprocess.run([sys.executable, "-c", child, log, str(sum(len(x) for x in lines[:half]))], check=True)
    for shape in SHAPES:
        out.write(shape + b"\n")
    with open(forged, "rb") as handle:
        for line in handle.read().splitlines(True):
            out.write(b"x" * line_max + line)
    out.flush()
    stubborn = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('stubborn child %d' % os.getpid(), flush=True); time.sleep(3600)")
    subprocess.Popen([sys.executable, "-c", stubborn])
    time.sleep(0.5)
    out.write(b"writer done %d\n" % os.getpid())
    out.flush()
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
