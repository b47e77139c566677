# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a no-change re-run of site.yml spends its time: boots N lab hosts (default 8), deploys once, then
re-runs site.yml in one batch (serial N, forks N, pipelining on) and prints wall time, the controller's CPU
time, changed per host, and the tasks that cost the controller most (callback tests/bench/callbacks/task_cpu.py).

Usage: python tests/bench/profile_site.py [--hosts 8] [--first-index 131] [--prefix prof] [--top 30]
       [--rerun-only] [--keep] [--no-preload]
--rerun-only re-runs against hosts left running by an earlier --keep. Needs root (the lab) and `make setup`.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "lab"))
import fleet  # noqa: E402  pylint: disable=wrong-import-position

CALLBACKS = pathlib.Path(__file__).resolve().parent / "callbacks"


def rerun(inventory, n, top, preload=True):
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "tasks.json"
        callbacks = "task_cpu,llmops.sglang.preload" if preload else "task_cpu"
        extra_env = {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": callbacks, "TASK_CPU_JSON": str(report)}
        run = fleet.run_site(inventory, n, n, True, extra_env=extra_env)
        tasks = json.loads(report.read_text()) if report.is_file() else []
    print("re-run of %d hosts: %.1f s wall, %.1f s controller CPU (%.1f s per host), %d task runs, changed %s"
          % (n, run.seconds, run.cpu_s, run.cpu_s / n, sum(t["runs"] for t in tasks),
             sorted({r.get("changed", 0) for r in run.recap.values()})))
    print("%7s %7s %5s  %s" % ("cpu s", "wall s", "runs", "task (summed over its runs; all hosts of a batch at once)"))
    for t in tasks[:top]:
        print("%7.2f %7.2f %5d  %s" % (t["cpu_s"], t["wall_s"], t["runs"], t["task"]))
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--prefix", default="prof")
    parser.add_argument("--first-index", type=int, default=131)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--rerun-only", action="store_true", help="hosts are running from an earlier --keep")
    parser.add_argument("--keep", action="store_true", help="leave the hosts running")
    parser.add_argument("--no-preload", action="store_true", help="without the callback llmops.sglang.preload (to compare)")
    args = parser.parse_args()
    names = fleet.host_names(args.prefix, args.hosts)
    inventory = fleet.ROOT / ".lab" / ("%s-inventory.json" % args.prefix)
    try:
        if not args.rerun_only:
            fleet.down(names)
            fleet.up(names, args.first_index)
            fleet.stage_wheelhouse(names)
            fleet.write_inventory(inventory, names)
            first = fleet.run_site(inventory, args.hosts, args.hosts, True)
            print("first deploy of %d hosts: %.1f s wall, %.1f s controller CPU" % (args.hosts, first.seconds, first.cpu_s))
            if first.problems(names, rerun=False):
                sys.exit("first deploy failed: " + "; ".join(first.problems(names, rerun=False)))
        run = rerun(inventory, args.hosts, args.top, preload=not args.no_preload)
        if run.problems(names, rerun=True):
            sys.exit("re-run: " + "; ".join(run.problems(names, rerun=True)))
    finally:
        if not args.keep:
            fleet.down(names)


if __name__ == "__main__":
    main()
