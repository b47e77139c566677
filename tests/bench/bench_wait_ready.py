# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark of sglang_wait_ready's journal reads: polls x bytes read, and peak RSS, on a large journal.

The journal (the log of tests/bench/bench_log_audit.py, 1 GiB by default) grows by an equal share before
each poll; journalctl is tests/unit/fake_journalctl.py behind a wrapper (it serves the entries after
``--after-cursor`` as journald's JSON and logs the journal bytes it served). The readiness tracker runs in a child process, as the module
does: each poll reads with ``--after-cursor`` and feeds the log audit chunk by chunk. Printed: bytes per
poll (of JSON), the journal bytes served against the journal's size (each byte read once) and against what re-reading the journal
from its start on every poll would cost, the wall time, and the child's peak RSS next to its RSS with the
modules imported and nothing read.

Usage: python tests/bench/bench_wait_ready.py [--size-mb 1024] [--polls 16] [--path FILE] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / "collections"
FAKE_JOURNALCTL = ROOT / "tests" / "unit" / "fake_journalctl.py"
sys.path.insert(0, str(ROOT / "tests" / "bench"))
from bench_log_audit import write_log  # noqa: E402  pylint: disable=wrong-import-position

TRACKER_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.llmops.sglang.plugins.module_utils._process import stream
from ansible_collections.llmops.sglang.plugins.module_utils._readiness import JournalTracker
base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracker = JournalTracker(stream, sys.argv[2], "0" * 32, "sglang.service")
polls = []
t0 = time.perf_counter()
for dummy in range(int(sys.argv[3])):
    before, t = tracker.bytes, time.perf_counter()
    tracker.update()
    polls.append({"bytes": tracker.bytes - before, "seconds": time.perf_counter() - t, "phase": tracker.phase,
                  "error": tracker.error})
print(json.dumps({"polls": polls, "elapsed": time.perf_counter() - t0, "facts": tracker.facts(), "rss_base_kb": base_kb,
                  "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated journal in MiB (default 1024)")
    ap.add_argument("--polls", type=int, default=16, help="polls while the journal grows to its size (default 16)")
    ap.add_argument("--path", help="journal file to use; reused when it exists, else written there")
    ap.add_argument("--keep", action="store_true", help="keep a generated temp file")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="sglang-bench-journal-")
    path = args.path or os.path.join(work, "journal.log")
    try:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            print("reusing %s (%.1f MiB)" % (path, os.path.getsize(path) / 2.0 ** 20))
        else:
            t0 = time.perf_counter()
            n = write_log(path, args.size_mb << 20)
            print("wrote %s: %.1f MiB in %.1f s" % (path, n / 2.0 ** 20, time.perf_counter() - t0))
        size = os.path.getsize(path)
        journalctl = os.path.join(work, "journalctl")
        with open(journalctl, "w") as handle:
            handle.write('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, FAKE_JOURNALCTL))
        os.chmod(journalctl, 0o755)
        env = dict(os.environ, FAKE_JOURNAL=path, FAKE_JOURNAL_STEP=str(size // args.polls + 1),
                   FAKE_JOURNAL_LOG=os.path.join(work, "calls"))
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", TRACKER_CHILD, str(COLLECTIONS), journalctl, str(args.polls + 1)],
                             check=True, stdout=subprocess.PIPE, env=env).stdout
        wall = time.perf_counter() - t0
        report = json.loads(out)
        with open(env["FAKE_JOURNAL_LOG"]) as handle:
            calls = [json.loads(line) for line in handle]

        mib = 2.0 ** 20
        read = sum(p["bytes"] for p in report["polls"])
        served = sum(c["to"] - c["from"] for c in calls)
        rereading = sum(c["to"] for c in calls)     # each poll from the start of the journal
        print("journal: %s, %.1f MiB, grown in %d steps; %d polls" % (path, size / mib, args.polls, len(calls)))
        for n, (poll, call) in enumerate(zip(report["polls"], calls), 1):
            print("  poll %2d: %s, read %7.1f MiB (journal offsets %d..%d) in %.2f s, phase %s"
                  % (n, " ".join(call["argv"][-2:]) if "--after-cursor" in call["argv"] else "from the start",
                     poll["bytes"] / mib, call["from"], call["to"], poll["seconds"], poll["phase"]))
        print("read %.1f MiB of JSON in total for a %.1f MiB journal (journalctl served %.1f MiB of it); re-reading from the "
              "start on every poll would serve %.1f MiB" % (read / mib, size / mib, served / mib, rereading / mib))
        print("tracker: %.2f s in its polls, %.2f s wall with start-up" % (report["elapsed"], wall))
        print("tracker peak RSS: %.1f MiB (the interpreter with the modules imported: %.1f MiB; the polls added %.1f MiB)"
              % (report["rss_peak_kb"] / 1024.0, report["rss_base_kb"] / 1024.0,
                 (report["rss_peak_kb"] - report["rss_base_kb"]) / 1024.0))
        facts = report["facts"]
        print("tracker summary: %s" % json.dumps({k: facts[k] for k in ("ready_line", "kv_dtype_effective", "bytes_read", "error")}))
    finally:
        for name in ("journalctl", "calls"):
            if os.path.exists(os.path.join(work, name)):
                os.unlink(os.path.join(work, name))
        if not args.path and not args.keep and os.path.exists(path):
            os.unlink(path)
        if not os.listdir(work):
            os.rmdir(work)


if __name__ == "__main__":
    main()
