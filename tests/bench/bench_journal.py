# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark of the log audit reading a large journal with entry metadata, against reading it as text.

Writes a real journal (journald's file format, made by ``systemd-journal-remote`` from export format) of about the
requested size: the log of bench_log_audit.py (real SGLang line formats, startup blocks, decode, prefill and access
lines) as the stdout entries of one unit invocation, with the fields journald gives a service's stdout. Then prints,
best of --repeat:

- ``journalctl -o cat``, ``-o json --output-fields=... --all`` and ``-o export`` of the invocation alone, to /dev/null
  (what journalctl itself costs per format);
- the audit as the collection ran it before (``journalctl ... -o cat`` streamed into the log auditor) and as it runs now
  (``audit_journal`` of ``_journal.unit_output``'s argv), each in a child process: wall and CPU time (journalctl
  and Python together), the child's peak RSS, and whether both give the same facts.

Usage: python tests/bench/bench_journal.py [--size-mb 1024] [--dir DIR] [--repeat N] [--keep]
Needs systemd-journal-remote (Debian: apt-get install systemd-journal-remote). A given --dir holding a journal is
reused; otherwise one is written there (or to a temp dir).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / "collections"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_log_audit import write_log  # noqa: E402  pylint: disable=wrong-import-position

UNIT = "sglang-qwen.service"
INVOCATION = "5c0a1e5b2f6f4d0c9d1f0c7e3a1b2c3d"
BOOT = "bb6cb0ca772248b484ed6538203c8dcb"
REMOTE = ("/lib/systemd/systemd-journal-remote", "/usr/lib/systemd/systemd-journal-remote")
# What journald adds to a service's stdout line (systemd 252), beside MESSAGE.
FIELDS = (b"PRIORITY=6\nSYSLOG_FACILITY=3\nSYSLOG_IDENTIFIER=python3\n_UID=996\n_GID=996\n_COMM=python3\n"
          b"_EXE=/opt/sglang/venv/bin/python3.11\n_CMDLINE=/opt/sglang/venv/bin/python -m sglang.launch_server --model-path /models/qwen\n"
          b"_CAP_EFFECTIVE=0\n_SELINUX_CONTEXT=unconfined\n_SYSTEMD_CGROUP=/system.slice/" + UNIT.encode()
          + b"\n_SYSTEMD_UNIT=" + UNIT.encode() + b"\n_SYSTEMD_SLICE=system.slice\n_SYSTEMD_INVOCATION_ID=" + INVOCATION.encode()
          + b"\n_BOOT_ID=" + BOOT.encode() + b"\n_MACHINE_ID=0f1c2e9a7b5d4c3e8f6a1b2c3d4e5f60\n_HOSTNAME=gpu01\n_TRANSPORT=stdout\n"
          b"_STREAM_ID=27313ca6d0a34dbfac7fc04d4c9c7350\n")


def write_journal(directory, size_bytes):
    """A journal of about size_bytes (all files in directory) holding a generated log as one unit's stdout."""
    remote = next((p for p in REMOTE if os.access(p, os.X_OK)), None)
    if remote is None:
        sys.exit("systemd-journal-remote is missing: apt-get install systemd-journal-remote (Debian), then run again")
    # journal files take about 3.5 bytes per byte of this log (entry objects, field items, hash tables)
    log = pathlib.Path(directory) / "source.log"
    write_log(log, size_bytes * 10 // 35)
    proc = subprocess.Popen([remote, "--output=%s/remote.journal" % directory, "--split-mode=none", "--compress=no", "-"],
                            stdin=subprocess.PIPE)
    rng = random.Random(7)
    usec, mono = 1796327829663604, 1490446070
    pid = b"4242"
    with open(log, "rb") as src:
        for line in src:
            usec += rng.randrange(1, 20000)
            mono += rng.randrange(1, 20000)
            if rng.random() < 0.2:
                pid = b"%d" % rng.choice((4242, 4301, 4302, 4303))   # the scheduler processes write to the same stream
            proc.stdin.write(b"__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_PID=%s\n%sMESSAGE=%s\n\n"
                             % (usec, mono, pid, FIELDS, line.rstrip(b"\n")))
    proc.stdin.close()
    if proc.wait() != 0:
        sys.exit("systemd-journal-remote failed")
    log.unlink()


def journal_bytes(directory):
    return sum(p.stat().st_size for p in pathlib.Path(directory).glob("*.journal"))


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible_collections.llmops.sglang.plugins.module_utils import _journal
from ansible_collections.llmops.sglang.plugins.module_utils._process import stream
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import LogAuditor, audit_journal
mode, directory, unit, inv = sys.argv[2:6]
t0 = time.perf_counter()
if mode == "cat":
    auditor = LogAuditor()
    rc, err = stream(["journalctl", "--directory=" + directory, "_SYSTEMD_INVOCATION_ID=" + inv, "-o", "cat", "--no-pager"], auditor.feed)
    res = auditor.finish()
else:
    argv, require = _journal.unit_output("journalctl", unit, inv)
    rc, err, res = audit_journal(argv[:1] + ["--directory=" + directory] + argv[1:], require)
elapsed = time.perf_counter() - t0
print(json.dumps({"rc": rc, "err": err, "elapsed": elapsed, "facts": res["facts"], "stats": res["stats"],
                  "findings": {f["rule"]: f["count"] for f in res["findings"]},
                  "rss_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def timed(argv, stdout):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, stdout=stdout, check=True).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def best(runs):
    return min(runs, key=lambda r: r[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the journal in MiB (default 1024)")
    ap.add_argument("--dir", help="journal directory to use; reused when it holds a journal, else written there")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each reading; the best time is reported")
    ap.add_argument("--keep", action="store_true", help="keep a generated temp dir")
    args = ap.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="bench-journal-")
    os.makedirs(directory, exist_ok=True)
    try:
        if not journal_bytes(directory):
            t0 = time.perf_counter()
            write_journal(directory, args.size_mb << 20)
            print("wrote a journal of %.0f MiB in %.0f s (%s)" % (journal_bytes(directory) / 2 ** 20, time.perf_counter() - t0, directory))
        size = journal_bytes(directory)
        print("journal: %.0f MiB in %d file(s)" % (size / 2 ** 20, len(list(pathlib.Path(directory).glob("*.journal")))))
        base = ["journalctl", "--directory=" + directory, "_SYSTEMD_INVOCATION_ID=" + INVOCATION, "--no-pager"]
        fields = "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID,_SYSTEMD_UNIT,_TRANSPORT,_PID,_UID,_LINE_BREAK,_STREAM_ID"
        with open(os.devnull, "wb") as null:
            for name, extra in (("cat", ["-o", "cat"]), ("json", ["-o", "json", fields, "--all"]), ("export", ["-o", "export", fields])):
                dummy, wall, cpu = best([timed(base + extra, null) for dummy in range(args.repeat)])
                print("journalctl -o %-6s to /dev/null: %6.1f s wall, %6.1f s CPU, %5.1f MiB/s of journal" % (name, wall, cpu, size / 2 ** 20 / wall))
        results = {}
        for mode in ("cat", "json"):
            runs = []
            for dummy in range(args.repeat):
                out, wall, cpu = timed([sys.executable, "-c", CHILD, str(COLLECTIONS), mode, directory, UNIT, INVOCATION], subprocess.PIPE)
                runs.append((json.loads(out), wall, cpu))
            res, wall, cpu = best(runs)
            results[mode] = res
            journal = res["stats"].get("journal")
            print("audit %-4s: %6.1f s wall, %6.1f s CPU (journalctl + Python), peak RSS %d MiB; %d lines audited%s"
                  % ("-o " + mode, wall, cpu, res["rss_peak_kb"] // 1024, res["stats"]["inspected_lines"],
                     "; entries %d, kept %d" % (journal["entries"], journal["kept"]) if journal else ""))
        same = results["cat"]["facts"] == results["json"]["facts"] and results["cat"]["findings"] == results["json"]["findings"]
        print("facts and findings equal between the two readings: %s" % same)
        if not same:
            differ = dict((k, (results["cat"]["facts"].get(k), v)) for k, v in results["json"]["facts"].items() if results["cat"]["facts"].get(k) != v)
            sys.exit("the readings disagree: %s" % json.dumps(differ))
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
