# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A fleet of lab hosts running the real site.yml: shared by tests/bench/bench_scale.py and
tests/integration/test_site_fleet.py.

Hosts get the caller's own names and indexes (``lab up NAME INDEX PROFILE`` in parallel, not
``up-many``, which numbers from 1), an inventory of only those hosts (``lab inventory`` lists every
running host, other people's too), the runtime's air-gapped wheelhouse, and are torn down one by one
(``lab down NAME``, never ``down-all``). site.yml runs with tests/lab/inventory/lab-vars.yml, the way
``make lab`` runs it, with the controller settings under test (serial, forks, pipelining).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "lab" / "bin" / "lab"
LAB_VARS = ROOT / "tests" / "lab" / "inventory" / "lab-vars.yml"
PLAYBOOK = ROOT / "site.yml"
ANSIBLE_PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
CACHE = pathlib.Path(os.environ.get("LLMOPS_CACHE", ROOT / ".cache"))
LAB_DIR = pathlib.Path(os.environ.get("LLMOPS_LAB_DIR", ROOT / ".lab"))
# The runtime's stand-in wheel (what lab-vars.yml pins), as the Makefile's lab target fetches it.
WHEELS = ("packaging==25.0",)

RECAP_RE = re.compile(r"^(\S+)\s+:\s+(ok=\d+.*)$", re.M)
# One summary row (playbooks/summary.yml): host, preflight, kv verdict, service state, what it runs, benchmark.
SUMMARY_RE = re.compile(r"^\s+(?P<host>\S+)\s+(?P<preflight>\S+)\s+(?P<kv>\S+)\s+"
                        r"(?P<service>(?:ready|NOT READY|n/a)(?: after (?P<after>[\d.]+)s)?(?P<restarted>, restarted)?(?:, node \d+/\d+)?)\s+"
                        r"(?P<runs>\S+(?: \([a-z ]+\))?)\s+(?P<bench>\S.*)$",
                        re.M)


def lab(*args, check=True, timeout=600):
    return subprocess.run([str(LAB), *args], check=check, capture_output=True, text=True, timeout=timeout)


def host_names(prefix, count):
    return ["%s%d" % (prefix, i) for i in range(1, count + 1)]


def down(names):
    """Power off and remove these hosts only (in parallel); unknown names are a no-op."""
    procs = [subprocess.Popen([str(LAB), "down", n], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for n in names]
    errors = []
    for p in procs:
        err = p.communicate(timeout=120)[1]
        if p.returncode != 0:
            errors.append(err)
    if errors:
        raise RuntimeError("lab down failed: " + " | ".join(e.strip() for e in errors))


def up(names, first_index, profile="rtxpro6000x8"):
    """Boot NAME[i] at index first_index + i (GPU profile, or none), in parallel; return the hosts' JSON lines from `lab up`."""
    down(names)   # a host left over from an interrupted run keeps its name: start clean
    procs = [subprocess.Popen([str(LAB), "up", n, str(first_index + i)] + ([profile] if profile else []),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, n in enumerate(names)]
    hosts, errors = [], []
    for n, p in zip(names, procs):
        out, err = p.communicate(timeout=300)
        if p.returncode != 0:
            errors.append("%s: %s" % (n, err.strip()[-500:]))
            continue
        hosts.extend(json.loads(line) for line in out.splitlines() if line.startswith("{"))
    if errors:
        down(names)
        raise RuntimeError("lab up failed: " + " | ".join(errors))
    return hosts


def stage_wheelhouse(names):
    """Copy the runtime's wheels into each host's /opt/sglang/wheelhouse (the hosts reach no index)."""
    src = CACHE / "wheels" / "lab"
    if not list(src.glob("*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(src), *WHEELS], check=True)
    for n in names:
        dest = LAB_DIR / "run" / n / "root" / "opt" / "sglang" / "wheelhouse"
        dest.mkdir(parents=True, exist_ok=True)
        for whl in src.glob("*.whl"):
            shutil.copy2(whl, dest / whl.name)


def write_inventory(path, names, group="sglang_servers"):
    """An SSH inventory of these hosts only, from `lab list` (which lists every running lab host)."""
    running = {h["name"]: h for h in (json.loads(line) for line in lab("list").stdout.splitlines() if line.startswith("{"))}
    missing = [n for n in names if n not in running]
    if missing:
        raise RuntimeError("not running: " + ", ".join(missing))
    inventory = {"all": {
        "vars": {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(LAB_DIR / "id_ed25519"),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        },
        "children": {group: {"hosts": {n: {"ansible_host": running[n]["address"]} for n in names}}},
    }}
    pathlib.Path(path).write_text(json.dumps(inventory, indent=2) + "\n", encoding="utf-8")   # JSON is YAML
    return path


@dataclasses.dataclass
class PlayRun:
    """One ansible-playbook run: wall time, controller CPU time (ansible-playbook, its workers, ssh and the
    tasks delegated to localhost), exit code, PLAY RECAP and summary rows per host."""
    seconds: float
    cpu_s: float
    rc: int
    recap: dict
    summary: dict
    output: str

    def total(self, key):
        return sum(r.get(key, 0) for r in self.recap.values())

    def problems(self, hosts, rerun):
        """What is wrong with this run, as readable lines (empty = all good)."""
        out = []
        if self.rc != 0:
            out.append("ansible-playbook exited %d" % self.rc)
        for h in hosts:
            r, s = self.recap.get(h), self.summary.get(h)
            if r is None:
                out.append("%s: no PLAY RECAP line" % h)
                continue
            bad = {k: r.get(k, 0) for k in ("failed", "unreachable") if r.get(k, 0)}
            if rerun and r.get("changed", 0):
                bad["changed"] = r["changed"]
            if bad:
                out.append("%s: %s" % (h, ", ".join("%s=%d" % kv for kv in bad.items())))
            if s is None or not s["service"].startswith("ready") or s["kv"] != "bf16" or s["preflight"] != "passed":
                out.append("%s: summary says %s" % (h, s["line"] if s else "nothing"))
            elif rerun and s["restarted"]:
                out.append("%s: the server was restarted on a no-change run" % h)
        return out


def parse_recap(output):
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))} for m in RECAP_RE.finditer(output)}


def task_outcomes(output, name):
    """{host: [ok|changed|skipping|failed|fatal, ...]} of every run of the task whose header contains name."""
    outcomes = {}
    for section in output.split("\nTASK [")[1:]:
        header, _sep, body = section.partition("\n")
        if name in header:
            for state, host in re.findall(r"^(ok|changed|skipping|failed|fatal): \[([^\]]+)\]", body, re.M):
                outcomes.setdefault(host, []).append(state)
    return outcomes


def parse_summary(output):
    rows = {}
    for m in SUMMARY_RE.finditer(output):
        if m.group("host") == "host":
            continue
        rows[m.group("host")] = {"preflight": m.group("preflight"), "kv": m.group("kv"), "service": m.group("service"), "runs": m.group("runs"),
                                 "ready_after": float(m.group("after")) if m.group("after") else None,
                                 "restarted": bool(m.group("restarted")), "line": m.group(0).strip()}
    return rows


def ansible_env(forks, pipelining, strategy=None):
    """The controller settings under test, over the repository's ansible.cfg (forks 16, pipelining on)."""
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
        "ANSIBLE_HOST_KEY_CHECKING": "false",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_PIPELINING": "true" if pipelining else "false",
    })
    if strategy:
        env["ANSIBLE_STRATEGY"] = strategy
    return env


def run_site(inventory, serial, forks, pipelining, log_path=None, strategy=None, extra_vars=None, timeout=1800, extra_env=None):
    """site.yml with lab-vars.yml, timed. Each run gets its own SSH ControlPath directory, so no run
    reuses the SSH masters of the one before (every run starts cold, like a fresh AWX job)."""
    argv = [str(ANSIBLE_PLAYBOOK), str(PLAYBOOK), "-i", str(inventory), "-i", str(LAB_VARS),
            "-e", "lab_root=%s" % ROOT, "-e", "sglang_serial=%s" % serial]
    for k, v in (extra_vars or {}).items():
        argv += ["-e", json.dumps({k: v})]
    env = dict(ansible_env(forks, pipelining, strategy), **(extra_env or {}))
    with tempfile.TemporaryDirectory(prefix="cp-", dir="/tmp") as cp_dir:   # short: ssh socket paths are limited
        env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = cp_dir
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)
        seconds = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if log_path:
        pathlib.Path(log_path).write_text(proc.stdout, encoding="utf-8")
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return PlayRun(seconds, cpu_s, proc.returncode, parse_recap(proc.stdout), parse_summary(proc.stdout), proc.stdout)


def health(name, port=30000):
    """HTTP status of the server's /health, asked from inside the host (it listens on 127.0.0.1); 0 = no answer."""
    probe = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:%d/health', timeout=5).status)" % port
    out = lab("ssh", name, 'python3 -c "%s"' % probe, check=False, timeout=60)
    lines = out.stdout.split()
    return int(lines[-1]) if out.returncode == 0 and lines and lines[-1].isdigit() else 0
