# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Play time of site.yml against the number of hosts, and a projection for a large fleet.

For each host count (default 1, 4 and 8) it boots fresh lab hosts (names PREFIX1.., indexes from
--first-index, GPU profile rtxpro6000x8), then runs the real site.yml with tests/lab/inventory/lab-vars.yml:

- the first deploy once, all hosts in one batch (serial = host count, forks 16, pipelining on);
- the no-change re-run (--repeat times, the fastest kept) for each controller setting of a small
  matrix: serial 1 (the play's default, rolling) or all hosts in one batch, forks 5 (Ansible's
  default) or 16 (>= host count), pipelining off or on, strategy linear or free. Settings that act
  the same at a host count (forks above the batch size, free with one host a batch) run once.

Prints one table row per setting and, from a least-squares fit of the measured times, the model
    time = fixed + sum over batches of (per-batch work(batch size) + server readiness)
for --target hosts (default 100) at several serial settings, once with the simulator's readiness and
once with --ready-s seconds (the real 397B server's load, weights + CUDA graphs; an assumption).
Exits non-zero when a run fails or a no-change re-run reports changed != 0 on any host.

Usage: python tests/bench/bench_scale.py [--hosts 1,4,8] [--first-index 121] [--prefix scale]
       [--ready-s 600] [--target 100] [--repeat 1] [--json FILE] [--logs DIR] [--keep]
       python tests/bench/bench_scale.py --from-json FILE [--ready-s S] [--target N]   (no measuring)
Needs root (the lab), the repository's venv and .cache/sglang-venv (make setup).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "lab"))
import fleet  # noqa: E402  pylint: disable=wrong-import-position

# (serial, forks, pipelining, strategy) for the no-change re-runs; serial None = every host in one batch.
MATRIX = (
    (1, 5, False, "linear"),      # Ansible's defaults, the play's default serial
    (1, 5, True, "linear"),
    (None, 5, True, "linear"),
    (None, 16, False, "linear"),
    (None, 16, True, "linear"),   # the repository's ansible.cfg, one batch
    (None, 16, True, "free"),
)
FIRST = (None, 16, True, "linear")


def effective(setting, hosts):
    """The setting as it acts on `hosts` hosts: a batch never uses more forks than it has hosts, and
    the free strategy only differs from linear when a batch has more than one host."""
    serial, forks, pipelining, strategy = setting
    batch = hosts if serial is None else min(serial, hosts)
    return batch, min(forks, batch), pipelining, strategy if batch > 1 else "linear"


def fit(points):
    """Least-squares line through (x, y) points: (intercept, slope); a single point gives slope 0."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    my = sum(ys) / len(ys)
    if len(set(xs)) < 2:
        return (my, 0.0)
    mx = sum(xs) / len(xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return (my - slope * mx, slope)


def batches(serial, hosts):
    """Batch sizes as Ansible cuts them: serial is an int, a percentage or a list of those (the last repeats)."""
    spec = serial if isinstance(serial, list) else [serial]
    out, left, i = [], hosts, 0
    while left > 0:
        s = spec[min(i, len(spec) - 1)]
        size = max(1, int(float(s[:-1]) / 100.0 * hosts)) if isinstance(s, str) and s.endswith("%") else int(s)
        out.append(min(size, left))
        left -= out[-1]
        i += 1
    return out


def project(fixed, work, ready, serial, hosts):
    """Seconds for one play over `hosts` hosts: fixed + per batch (work(b) + ready)."""
    a, m = work
    return fixed + sum(a + m * b + ready for b in batches(serial, hosts))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", default="1,4,8", help="host counts, comma separated (at most 16)")
    parser.add_argument("--prefix", default="scale", help="host name prefix (hosts PREFIX1..PREFIXN)")
    parser.add_argument("--first-index", type=int, default=121, help="lab index of PREFIX1 (address 10.78.0.(10+INDEX))")
    parser.add_argument("--profile", default="rtxpro6000x8", help="simulated GPU profile of every host")
    parser.add_argument("--ready-s", type=float, default=600.0,
                        help="readiness of the real server after a restart, seconds (397B NVFP4: weight load + CUDA graphs); default 600")
    parser.add_argument("--target", type=int, default=100, help="fleet size to project to")
    parser.add_argument("--repeat", type=int, default=1, help="no-change re-runs per setting; the table keeps the fastest")
    parser.add_argument("--json", help="also write every measurement and the projection here")
    parser.add_argument("--logs", default=str(fleet.ROOT / "tests" / "output" / "bench-scale"), help="ansible-playbook logs, one per run")
    parser.add_argument("--keep", action="store_true", help="leave the largest fleet running")
    parser.add_argument("--from-json", help="measure nothing: print the table and projection of an earlier --json FILE (e.g. for another --ready-s)")
    args = parser.parse_args()
    if args.from_json:
        saved = json.loads(pathlib.Path(args.from_json).read_text(encoding="utf-8"))
        print_table(saved["rows"])
        print_projection(saved["rows"], saved["fixed_s"], args)
        return 0
    counts = sorted({int(x) for x in args.hosts.split(",")})
    if os.geteuid() != 0:
        raise SystemExit("the lab needs root")
    if not counts or counts[0] < 1 or counts[-1] > 16:
        raise SystemExit("--hosts: counts between 1 and 16")
    if not (fleet.ROOT / ".cache" / "sglang-venv" / "bin" / "python").exists():
        raise SystemExit("the drift check needs .cache/sglang-venv: run make setup")
    logs = pathlib.Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)

    rows, problems = [], []
    print("cores %d, load average %s at start" % (os.cpu_count() or 0, " ".join("%.2f" % x for x in os.getloadavg())), flush=True)
    # The fixed cost, measured alone: site.yml over an empty fleet (start, parse, the plays that match nothing).
    empty = fleet.write_inventory(logs / "inventory-0.json", [])
    empties = [fleet.run_site(empty, 1, 5, True) for attempt in range(3)]
    if any(r.rc != 0 for r in empties):
        raise SystemExit("site.yml failed on an empty fleet:\n" + empties[-1].output[-3000:])
    fixed = min(r.seconds for r in empties)
    print(" 0 hosts: site.yml with no hosts %.1f s (fastest of 3)" % fixed, flush=True)
    for n in counts:
        names = fleet.host_names(args.prefix, n)
        t0 = time.monotonic()
        fleet.up(names, args.first_index, args.profile)
        boot_s = time.monotonic() - t0
        try:
            fleet.stage_wheelhouse(names)
            inventory = fleet.write_inventory(logs / ("inventory-%d.json" % n), names)
            first = fleet.run_site(inventory, n, FIRST[1], FIRST[2], strategy=FIRST[3], log_path=logs / ("first-%d.log" % n))
            bad = first.problems(names, rerun=False)
            ready = [s["ready_after"] for s in first.summary.values() if s["ready_after"] is not None]
            rows.append({"hosts": n, "batch": n, "forks": min(FIRST[1], n), "pipelining": True, "strategy": "linear", "kind": "first",
                         "seconds": round(first.seconds, 1), "cpu_s": round(first.cpu_s, 1), "changed": first.total("changed"), "boot_s": round(boot_s, 1),
                         "ready_max_s": max(ready) if ready else None})
            print("%2d hosts: booted in %.1f s, first deploy %.1f s, controller CPU %.1f s (changed %d, readiness up to %s s)"
                  % (n, boot_s, first.seconds, first.cpu_s, first.total("changed"), rows[-1]["ready_max_s"]), flush=True)
            if bad:
                problems += ["%d hosts, first deploy: %s" % (n, p) for p in bad]
                continue   # re-runs of a failed deploy measure nothing
            done = set()
            for setting in MATRIX:
                batch, forks, pipelining, strategy = key = effective(setting, n)
                if key in done:
                    continue
                done.add(key)
                times, cpus, changed = [], [], 0
                what = "serial %d forks %2d pipelining %-3s %-6s" % (batch, forks, "on" if pipelining else "off", strategy)
                for i in range(args.repeat):
                    run = fleet.run_site(inventory, batch, forks, pipelining, strategy=strategy,
                                         log_path=logs / ("rerun-%d-s%d-f%d-p%d-%s-%d.log" % (n, batch, forks, pipelining, strategy, i)))
                    times.append(round(run.seconds, 1))
                    cpus.append(round(run.cpu_s, 1))
                    changed = max(changed, run.total("changed"))
                    print("%2d hosts: re-run %s %6.1f s, controller CPU %5.1f s, changed %d" % (n, what, run.seconds, run.cpu_s, run.total("changed")),
                          flush=True)
                    problems += ["%d hosts, re-run %s: %s" % (n, what, p) for p in run.problems(names, rerun=True)]
                # The fastest of the repeats: the one least slowed down by whatever else the machine ran.
                rows.append({"hosts": n, "batch": batch, "forks": forks, "pipelining": pipelining, "strategy": strategy, "kind": "rerun",
                             "seconds": min(times), "all_s": times, "cpu_s": min(cpus), "changed": changed})
        finally:
            if not (args.keep and n == counts[-1]):
                fleet.down(names)

    print_table(rows)
    projection = print_projection(rows, fixed, args)
    print("cores %d, load average %s at end" % (os.cpu_count() or 0, " ".join("%.2f" % x for x in os.getloadavg())))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"rows": rows, "fixed_s": fixed, "projection": projection, "problems": problems}, indent=2) + "\n",
                                           encoding="utf-8")
    if problems:
        print("\nFAILED:\n  " + "\n  ".join(problems))
        return 1
    print("\nall no-change re-runs: changed=0 on every host")
    return 0


def setting_of(row):
    return (row["batch"], row["forks"], row["pipelining"], row["strategy"])


def print_table(rows):
    print("\n%5s %6s %5s %10s %8s %15s %9s %11s %16s"
          % ("hosts", "serial", "forks", "pipelining", "strategy", "first deploy s", "re-run s", "re-run CPU", "changed (re-run)"))
    for n in sorted({r["hosts"] for r in rows}):
        first = [r for r in rows if r["hosts"] == n and r["kind"] == "first"]
        reruns = [r for r in rows if r["hosts"] == n and r["kind"] == "rerun"]
        for r in reruns:
            deploy = "%.1f" % first[0]["seconds"] if first and setting_of(r) == setting_of(first[0]) else "-"
            cpu = "%.1f" % r["cpu_s"] if r.get("cpu_s") else "-"
            print("%5d %6d %5d %10s %8s %15s %9.1f %11s %16d" % (n, r["batch"], r["forks"], "on" if r["pipelining"] else "off", r["strategy"],
                                                                 deploy, r["seconds"], cpu, r["changed"]))
        if first and not reruns:
            print("%5d %6d %5d %10s %8s %15.1f %9s %11s %16s" % (n, first[0]["batch"], first[0]["forks"], "on", "linear", first[0]["seconds"], "-", "-", "-"))
    print("(re-run CPU: controller CPU seconds of the run: ansible-playbook, its forks, ssh, tasks delegated to localhost)")


def print_projection(rows, fixed, args):
    """Fit the model on the measured rows (pipelining on, forks >= batch) and project to --target hosts."""
    linear = [r for r in rows if r["kind"] == "rerun" and r["pipelining"] and r["strategy"] == "linear"]
    rolling = [(r["hosts"], r["seconds"]) for r in linear if r["batch"] == 1]
    one_batch = [(r["batch"], r["seconds"]) for r in linear if r["batch"] == r["hosts"] == r["forks"]]
    firsts = [r for r in rows if r["kind"] == "first"]
    if not rolling or not firsts:
        print("\nno projection: needs the serial 1 re-runs and a first deploy")
        return None
    if len({p[0] for p in rolling}) < 2:
        print("\n(one host count: the fits below have no slope; measure 2 or more host counts for a projection)")
    intercept, per_batch1 = fit(rolling)
    # Per-batch work excludes the time the batch waits for its servers to become ready.
    deploy = fit([(r["batch"], r["seconds"] - fixed - (r["ready_max_s"] or 0.0)) for r in firsts])
    # A serial 1 run over N hosts is N batches of one host: N observations of work(1).
    rerun = fit([(b, s - fixed) for b, s in one_batch] + [(1, (s - fixed) / n) for n, s in rolling for host in range(n)])
    sim_ready = max((r["ready_max_s"] or 0.0) for r in firsts)
    print("\nmodel: time = fixed + sum over batches b of (work(b) + readiness); fitted on the rows above (pipelining on, forks >= batch, linear)")
    print("  fixed (start, parse, plays with no host to run on): %.1f s measured (serial 1 re-runs' intercept: %.1f s)" % (fixed, intercept))
    print("  re-run work per batch:  %.1f s + %.2f s x batch size (serial 1 re-runs: %.1f s per host)" % (rerun[0], rerun[1], per_batch1))
    print("  deploy work per batch:  %.1f s + %.2f s x batch size (first deploys, readiness taken out)" % deploy)
    print("  readiness per batch:    lab simulator %.1f s; real 397B server %.0f s (--ready-s, an assumption: measure yours)" % (sim_ready, args.ready_s))
    settings = [1, "10%", "25%", [1, "10%", "25%"], "100%"]
    out = {"fixed_s": fixed, "rerun_work": rerun, "deploy_work": deploy, "sim_ready_s": sim_ready, "ready_s": args.ready_s, "hosts": args.target, "rows": []}
    cpu = [(r["hosts"], r["cpu_s"] / r["hosts"]) for r in linear if r["batch"] == r["hosts"] == r["forks"] and r.get("cpu_s")]
    if cpu:
        print("  controller CPU per host and no-change run: %s" % ", ".join("%.1f s (%d hosts)" % (per_host, n) for n, per_host in cpu))
    print("\n%d hosts (forks >= batch size)" % args.target)
    print("%-18s %8s %14s %20s %18s" % ("serial", "batches", "re-run", "deploy, lab ready", "deploy, real ready"))
    for s in settings:
        nb = len(batches(s, args.target))
        re_s = project(fixed, rerun, 0.0, s, args.target)
        lab_s = project(fixed, deploy, sim_ready, s, args.target)
        real_s = project(fixed, deploy, args.ready_s, s, args.target)
        label = json.dumps(s) if isinstance(s, list) else str(s)
        print("%-18s %8d %12.0f s %18.0f s %13.0f s (%s)" % (label, nb, re_s, lab_s, real_s, hours(real_s)))
        out["rows"].append({"serial": s, "batches": nb, "rerun_s": re_s, "deploy_lab_s": lab_s, "deploy_real_s": real_s})
    print("The slope (seconds per host in a batch) is this controller's CPU: %d cores that also run the hosts." % (os.cpu_count() or 0))
    return out


def hours(seconds):
    return "%dh%02dm" % divmod(int(round(seconds / 60.0)), 60)


if __name__ == "__main__":
    sys.exit(main())
