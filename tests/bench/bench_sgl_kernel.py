# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark of the sgl_kernel role: how long a run takes when nothing changed.

Boots one lab host (tests/lab/bin/lab), prepares it like the molecule scenario sgl_kernel/default
(wheelhouse, the fixture kernel project as a file:// git repository), then runs the scenario's
converge playbook: once to build (real nvcc, real cuobjdump) and then --repeat more times with
nothing changed. Prints the seconds of each run; a re-run that reports a change fails the bench.

Usage: python tests/bench/bench_sgl_kernel.py [--index 59] [--name sgk-bench] [--repeat 1] [--keep]
Needs root (the lab) and the repository's venv (make setup).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "lab" / "bin" / "lab"
SCENARIO = ROOT / "extensions" / "molecule" / "sgl_kernel" / "default"
RECAP_RE = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def run_playbook(playbook, inventory, env, extra=()):
    """Run ansible-playbook; return (seconds, {host: changed}), raising on failure."""
    argv = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), str(playbook)] + list(extra)
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-6000:])
        raise SystemExit("%s failed (rc %d)" % (playbook.name, proc.returncode))
    changed = dict((m.group(1), int(m.group(3))) for m in RECAP_RE.finditer(proc.stdout))
    return seconds, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--index", type=int, default=59, help="lab index (address 10.78.0.(10+INDEX)); default 59")
    parser.add_argument("--name", default="sgk-bench", help="lab host name")
    parser.add_argument("--repeat", type=int, default=1, help="no-change re-runs to time")
    parser.add_argument("--keep", action="store_true", help="leave the lab host running")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the lab needs root")

    scenario = yaml.safe_load((SCENARIO / "molecule.yml").read_text())
    group_vars = dict(scenario["provisioner"]["inventory"]["group_vars"]["all"])
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-sgl-kernel-"))
    group_vars["sgl_kernel_controller_dir"] = str(work / "sgl-kernel")

    up = subprocess.run([str(LAB), "up", args.name, str(args.index)], stdout=subprocess.PIPE, text=True, check=True)
    host = json.loads([line for line in up.stdout.splitlines() if line.startswith("{")][-1])
    try:
        inventory = work / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {
            "hosts": {args.name: {"ansible_host": host["address"]}},
            "vars": dict(group_vars, ansible_user="root", ansible_ssh_private_key_file=str(ROOT / ".lab" / "id_ed25519"),
                         ansible_ssh_common_args="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"),
        }}))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_PIPELINING="true",
                   MOLECULE_PROJECT_DIRECTORY=str(ROOT), MOLECULE_EPHEMERAL_DIRECTORY=str(work))
        seconds, dummy = run_playbook(SCENARIO / "prepare.yml", inventory, env, ["-e", "sgk_prepare_hosts=" + args.name])
        print("prepare (wheelhouse, git repo): %.1f s" % seconds)
        seconds, changed = run_playbook(SCENARIO / "converge.yml", inventory, env)
        print("first run (build, verify, install): %.1f s, changed=%d" % (seconds, changed.get(args.name, -1)))
        times = []
        for dummy in range(args.repeat):
            seconds, changed = run_playbook(SCENARIO / "converge.yml", inventory, env)
            if changed.get(args.name) != 0:
                raise SystemExit("a no-change re-run reported changed=%s" % changed.get(args.name))
            times.append(seconds)
            print("no-change re-run: %.1f s, changed=0" % seconds)
        if len(times) > 1:
            print("no-change re-run median: %.1f s over %d runs" % (statistics.median(times), len(times)))
    finally:
        if not args.keep:
            subprocess.run([str(LAB), "down", args.name], check=False)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
