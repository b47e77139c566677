# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rolling upgrade behind a router: the real site.yml on 2 simulated GPU workers and 1 offline router host.

The first run deploys both workers (serial, one at a time) and the router, which must spread a burst of
concurrent requests over both. The second run changes the workers' configuration; the second worker's new
configuration never becomes ready (the simulator's ``hang`` fault), so site.yml must roll that worker back
and fail, while the first worker keeps the new configuration. Each worker leaves the router before it stops and
comes back once it serves, so a probe through the router gets an answer every second of the upgrade.
"""

import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time

import requests
import yaml

import fleet
from fleet import ROOT, lab

NETNS_PREFIX = os.environ.get("LLMOPS_LAB_NETNS_PREFIX", "lab-")
PROFILE = "rtxpro6000x8"
# Lab indexes no molecule scenario or other integration test boots (tests/unit/test_lab_indexes.py).
LAB_INDEXES = (111, 112, 113)
WORKERS = [("roll1", LAB_INDEXES[0]), ("roll2", LAB_INDEXES[1])]
ROUTER = ("rollr", LAB_INDEXES[2])
PORT = 30000
# Test-only key: the workers require it, the router sends it to them and requires it from clients.
API_KEY = "lab-rolling-key-3b9e71"
AUTH = {"Authorization": "Bearer " + API_KEY}
UNIT = "sglang-qwen"
ARGV_RECORD = "/etc/sglang/%s.argv.json" % UNIT
OLD_MRR, NEW_MRR = 32, 24
BURST = 12
SITE_TIMEOUT = 1200
COUNTER = re.compile(r"^sglang:num_requests_total\{[^}]*\} ([0-9.]+)$", re.M)


def router_version():
    with open(ROOT / "roles" / "router" / "defaults" / "main.yml", encoding="utf-8") as f:
        return yaml.safe_load(f)["router_version"]


def fetch_router_wheels():
    """The router role's wheelhouse (fetched once on the controller, as the router's molecule scenario does)."""
    dest = fleet.CACHE / "wheels" / "router"
    version = router_version()
    if not list(dest.glob("sglang_router-%s-*.whl" % version)):
        subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                        "--platform=manylinux2014_x86_64", "--python-version=3.11", "--implementation=cp", "--dest=%s" % dest,
                        "sglang-router==%s" % version], check=True, timeout=600)
    return dest


def write_inventory(path, addresses, router_wheels, upgrade):
    worker_vars = {
        # A wildcard bind address: the router reaches each worker at its ansible_host.
        "sglang_server_host": "0.0.0.0",
        "sglang_server_port": PORT,
        "sglang_server_max_running_requests": NEW_MRR if upgrade else OLD_MRR,
        "sglang_server_environment": {"HF_HUB_OFFLINE": "1", "SGLANG_SIM_LOAD_SECONDS": "1"},
        # Short budget for the upgrade: the failing worker's wait is what the run spends most on.
        "sglang_server_ready_timeout": 20 if upgrade else 90,
    }
    hosts = {name: {"ansible_host": addresses[name]} for name, _i in WORKERS}
    if upgrade:
        # The second worker's new configuration never finishes warm-up: /health stays 503.
        hosts[WORKERS[1][0]]["sglang_server_environment"] = dict(worker_vars["sglang_server_environment"], SGLANG_SIM_FAULT="hang")
    inventory = {"all": {
        "vars": {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(fleet.LAB_DIR / "id_ed25519"),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            "sglang_server_api_key": API_KEY,
        },
        "children": {
            "sglang_servers": {"hosts": hosts, "vars": worker_vars},
            "routers": {
                "hosts": {ROUTER[0]: {"ansible_host": addresses[ROUTER[0]]}},
                "vars": {
                    "router_pip_source": "wheelhouse",
                    "router_pip_wheelhouse_src": str(router_wheels),
                    # Workers are up before the router: short retry and health intervals keep the test fast.
                    "router_worker_startup_check_interval": 2,
                    "router_health_check_interval_secs": 2,
                    "router_ready_timeout": 120,
                    "router_verify_requests": 8,
                },
            },
        },
    }}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def site(inventory, extra, env, log, limit=None):
    """Run the real site.yml; its output is kept in LOG (under pytest's tmp_path) for a look after a failure."""
    cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "site.yml", "-i", str(inventory),
           "-i", str(ROOT / "tests" / "lab" / "inventory" / "lab-vars.yml"), "-e", json.dumps(extra)]
    cmd += ["--limit", limit] if limit else []
    t0 = time.monotonic()
    try:
        run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=SITE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        # What the run printed up to the kill names the task it hung in: kept in the log and in the failure.
        partial = "".join(p.decode("utf-8", "replace") if isinstance(p, bytes) else p for p in (exc.stdout, exc.stderr) if p)
        log.write_text(partial)
        raise AssertionError("site.yml did not end in %d s; its output up to then:\n%s" % (SITE_TIMEOUT, partial[-6000:])) from None
    log.write_text(run.stdout + run.stderr)
    return run, time.monotonic() - t0


def served(urls):
    """Each worker's own request counter (its /metrics, not the router's view)."""
    counts = []
    for url in urls:
        text = requests.get(url + "/metrics", timeout=10).text
        m = COUNTER.search(text)
        assert m, "no sglang:num_requests_total in %s/metrics" % url
        counts.append(int(float(m.group(1))))
    return counts


def burst(router_url, n=BURST):
    """Concurrent completions through the router; random first words so no prefix pins them to one worker."""
    def one(i):
        body = {"model": "default", "prompt": "%d rolling check %d" % (random.randrange(10 ** 12), i), "max_tokens": 200}
        return requests.post(router_url + "/v1/completions", json=body, headers=AUTH, timeout=60).status_code
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def spread(router_url, worker_urls):
    before = served(worker_urls)
    codes = burst(router_url)
    after = served(worker_urls)
    return codes, [a - b for a, b in zip(after, before)]


def wait_router_healthy(router_url, worker_urls, timeout=60):
    """The router's readiness and worker list once both workers are healthy again (or the last seen at timeout)."""
    end = time.monotonic() + timeout
    while True:
        ready = requests.get(router_url + "/readiness", timeout=10)
        workers = requests.get(router_url + "/workers", headers=AUTH, timeout=10).json().get("workers", [])
        healthy = sorted(w["url"] for w in workers if w.get("is_healthy"))
        if (ready.status_code == 200 and ready.json().get("healthy_workers") == 2 and healthy == sorted(worker_urls)) or time.monotonic() > end:
            return ready, healthy
        time.sleep(1)


class Prober(threading.Thread):
    """One small completion through the router every second while site.yml upgrades the workers behind it."""

    def __init__(self, router_url):
        super().__init__(daemon=True)
        self.url, self.codes, self.times, self.halt = router_url + "/v1/completions", [], [], threading.Event()

    def run(self):
        while not self.halt.is_set():
            self.times.append(time.strftime("%H:%M:%S"))
            try:
                body = {"model": "default", "prompt": "%d during the upgrade" % random.randrange(10 ** 12), "max_tokens": 4}
                self.codes.append(str(requests.post(self.url, json=body, headers=AUTH, timeout=30).status_code))
            except requests.RequestException as exc:
                self.codes.append(type(exc).__name__)
            self.halt.wait(1)


def router_pid():
    return int(lab("ssh", ROUTER[0], "systemctl show -p MainPID --value sglang-router").stdout)


def process(name):
    """The running server on a worker: argv record, unit state, main process command line and its SGLANG_SIM_ environment."""
    script = ("set -e; cat %s; echo '@@'; systemctl is-active %s || true; pid=$(systemctl show -p MainPID --value %s); echo \"$pid\"; "
              "echo '@@'; tr '\\0' '\\n' </proc/$pid/cmdline; echo '@@'; tr '\\0' '\\n' </proc/$pid/environ | grep '^SGLANG_SIM_' || true"
              % (ARGV_RECORD, UNIT, UNIT))
    out = lab("ssh", name, script).stdout
    record, state, cmdline, environ = out.split("@@\n")
    active, pid = state.split()
    return {"record": json.loads(record), "active": active, "pid": int(pid),
            "cmdline": cmdline.split(), "environ": environ.split()}


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def server_info(url):
    return requests.get(url + "/server_info", headers=AUTH, timeout=10).json()


def test_rolling_upgrade_behind_router(tmp_path, ansible_env):
    # SSH masters of this run only (ansible.cfg keeps them 60 s): none left from an earlier host on the same address.
    control_dir = tempfile.mkdtemp(prefix="rollcp")
    ansible_env = dict(ansible_env, ANSIBLE_SSH_CONTROL_PATH_DIR=control_dir)
    workers = [n for n, _i in WORKERS]
    names = workers + [ROUTER[0]]
    router_wheels = fetch_router_wheels()
    try:
        hosts = fleet.up(workers, WORKERS[0][1], PROFILE) + fleet.up([ROUTER[0]], ROUTER[1], None)
        addresses = {h["name"]: h["address"] for h in hosts}
        assert sorted(addresses) == sorted(names), addresses
        # The router host reaches no index: only the lab subnet (its workers) stays routable.
        route = subprocess.run(["ip", "-n", NETNS_PREFIX + ROUTER[0], "route", "show", "default"], capture_output=True, text=True, check=True)
        if route.stdout.strip():
            subprocess.run(["ip", "-n", NETNS_PREFIX + ROUTER[0], "route", "del", "default"], check=True)
        route = subprocess.run(["ip", "-n", NETNS_PREFIX + ROUTER[0], "route", "show", "default"], capture_output=True, text=True, check=True)
        assert route.stdout.strip() == "", route.stdout
        fleet.stage_wheelhouse(workers)   # the runtime's stand-in wheels, as `make lab` copies them in
        worker_urls = ["http://%s:%d" % (addresses[n], PORT) for n, _i in WORKERS]
        router_url = "http://%s:%d" % (addresses[ROUTER[0]], PORT)
        reports = tmp_path / "reports"
        extra = {"lab_root": str(ROOT), "gpu_preflight_report_dir": str(reports), "audit_report_dir": str(reports),
                 "benchmark_report_dir": str(reports)}

        # 1. First deploy: both workers, then the router over both.
        inventory = write_inventory(tmp_path / "deploy.yml", addresses, router_wheels, upgrade=False)
        deploy, deploy_s = site(inventory, extra, ansible_env, tmp_path / "deploy.log")
        print("\nsite.yml deploy: %.1f s" % deploy_s)
        assert deploy.returncode == 0, deploy.stdout[-4000:] + deploy.stderr[-2000:]
        first = fleet.parse_recap(deploy.stdout)
        assert sorted(first) == sorted(names) and all(r["failed"] == 0 for r in first.values()), first

        ready = requests.get(router_url + "/readiness", timeout=10)
        assert ready.status_code == 200 and ready.json()["healthy_workers"] == 2 and ready.json()["total_workers"] == 2, ready.text
        assert requests.post(router_url + "/v1/completions", json={"model": "default", "prompt": "x", "max_tokens": 2}, timeout=30).status_code == 401
        codes, per_worker = spread(router_url, worker_urls)
        print("deploy burst through the router: %s of %d served per worker %s" % (codes.count(200), BURST, dict(zip(worker_urls, per_worker))))
        assert codes == [200] * BURST, codes
        assert min(per_worker) > 0 and sum(per_worker) == BURST, dict(zip(worker_urls, per_worker))

        old = {n: process(n) for n, _i in WORKERS}
        for name, _i in WORKERS:
            assert old[name]["active"] == "active", old[name]
            assert flag_value(old[name]["record"]["args"], "--max-running-requests") == str(OLD_MRR), old[name]["record"]
            assert flag_value(old[name]["cmdline"], "--max-running-requests") == str(OLD_MRR), old[name]["cmdline"]

        # 2. Upgrade: new max_running_requests on both; the second worker's new configuration never gets ready.
        inventory = write_inventory(tmp_path / "upgrade.yml", addresses, router_wheels, upgrade=True)
        router_before = router_pid()
        prober = Prober(router_url)
        prober.start()
        try:
            upgrade, upgrade_s = site(inventory, extra, ansible_env, tmp_path / "upgrade.log")
        finally:
            prober.halt.set()
            prober.join()
        print("site.yml upgrade (second worker fails readiness, rolled back): %.1f s" % upgrade_s)
        print("requests through the router during the upgrade: %d, answers %s; not 200 at %s"
              % (len(prober.codes), {c: prober.codes.count(c) for c in sorted(set(prober.codes))},
                 [(t, c) for t, c in zip(prober.times, prober.codes) if c != "200"]))
        out = upgrade.stdout
        assert upgrade.returncode != 0, out[-4000:]
        second = fleet.parse_recap(out)
        w1, w2 = WORKERS[0][0], WORKERS[1][0]
        assert second[w1]["failed"] == 0 and second[w2]["failed"] >= 1, second
        # The cause and the rollback, in the failing task's message (YAML output may fold long lines).
        flat = re.sub(r"\s+", " ", out)
        assert re.search(r"fatal: \[%s\]" % w2, out), out[-4000:]
        assert re.search(r"%s\.service is not ready: timeout: not ready after \d+ s \(budget 20 s\), stuck in phase \w+; "
                         r"http://127\.0\.0\.1:%d/health_generate answered HTTP 503" % (UNIT, PORT), flat), out[-4000:]
        assert "Rolled back %s.service to the previous unit" % UNIT in flat and "it is ready again" in flat, out[-4000:]

        new = {n: process(n) for n, _i in WORKERS}
        # Worker 1 restarted with the new configuration and kept it.
        assert new[w1]["active"] == "active" and new[w1]["pid"] != old[w1]["pid"], (old[w1], new[w1])
        assert flag_value(new[w1]["record"]["args"], "--max-running-requests") == str(NEW_MRR), new[w1]["record"]
        assert flag_value(new[w1]["cmdline"], "--max-running-requests") == str(NEW_MRR), new[w1]["cmdline"]
        assert server_info(worker_urls[0])["max_running_requests"] == NEW_MRR
        # Worker 2 was restarted (the failed attempt, then the rollback) and runs the old configuration again.
        assert new[w2]["active"] == "active" and new[w2]["pid"] != old[w2]["pid"], (old[w2], new[w2])
        assert flag_value(new[w2]["record"]["args"], "--max-running-requests") == str(OLD_MRR), new[w2]["record"]
        assert "SGLANG_SIM_FAULT" not in new[w2]["record"]["environment"], new[w2]["record"]
        assert flag_value(new[w2]["cmdline"], "--max-running-requests") == str(OLD_MRR), new[w2]["cmdline"]
        assert not any(e.startswith("SGLANG_SIM_FAULT=") for e in new[w2]["environ"]), new[w2]["environ"]
        assert server_info(worker_urls[1])["max_running_requests"] == OLD_MRR
        for url in worker_urls:
            assert requests.get(url + "/health", timeout=10).status_code == 200, url

        # Each worker left the router before its stop and came back only once it served what passed the guard (worker 2:
        # its previous configuration): the router, the same process throughout, answered every request of the upgrade.
        assert router_pid() == router_before
        assert len(prober.codes) >= 10 and set(prober.codes) == {"200"}, list(zip(prober.times, prober.codes))
        left = fleet.task_outcomes(out, "Take the server out of its routers")
        back = fleet.task_outcomes(out, "Add the server to the routers that do not list it")
        # Worker 2 leaves twice (its stop, then the rollback's stop: already out) and comes back once.
        assert left == {w1: ["changed"], w2: ["changed", "ok"]}, left
        assert back == {w1: ["changed"], w2: ["changed"]}, back
        ready, healthy = wait_router_healthy(router_url, worker_urls)
        assert ready.status_code == 200 and ready.json()["healthy_workers"] == 2, ready.text
        assert healthy == sorted(worker_urls), healthy
        # Bursts repeat for a while should the policy favour one worker at first; both must serve some.
        t0 = time.monotonic()
        while True:
            codes, per_worker = spread(router_url, worker_urls)
            print("%.0f s after the upgrade, burst through the router: %s of %d served per worker %s"
                  % (time.monotonic() - t0, codes.count(200), BURST, dict(zip(worker_urls, per_worker))))
            if min(per_worker) > 0 or time.monotonic() - t0 > 120:
                break
            time.sleep(5)
        assert codes == [200] * BURST, codes
        assert min(per_worker) > 0 and sum(per_worker) == BURST, dict(zip(worker_urls, per_worker))

        # 3. A serving worker missing from the router (a rollout interrupted between leaving and coming back) goes back
        # on the next run, which changes nothing else.
        listed = requests.get(router_url + "/workers", headers=AUTH, timeout=10).json()["workers"]
        ids = [w["id"] for w in listed if w["url"] == worker_urls[1]]
        assert len(ids) == 1, listed
        assert requests.delete(router_url + "/workers/" + ids[0], headers=AUTH, timeout=10).status_code == 202
        ready, healthy = wait_router_healthy(router_url, worker_urls, timeout=5)
        assert healthy == [worker_urls[0]], healthy
        inventory = write_inventory(tmp_path / "heal.yml", addresses, router_wheels, upgrade=False)
        heal, heal_s = site(inventory, extra, ansible_env, tmp_path / "heal.log", limit=w2)
        print("site.yml on %s, out of the router: %.1f s" % (w2, heal_s))
        assert heal.returncode == 0, heal.stdout[-4000:]
        assert fleet.parse_recap(heal.stdout)[w2]["changed"] == 1, fleet.parse_recap(heal.stdout)
        assert fleet.task_outcomes(heal.stdout, "Add the server to the routers that do not list it") == {w2: ["changed"]}
        assert process(w2)["pid"] == new[w2]["pid"]
        ready, healthy = wait_router_healthy(router_url, worker_urls, timeout=30)
        assert healthy == sorted(worker_urls), healthy
    finally:
        fleet.down(names)
        shutil.rmtree(control_dir, ignore_errors=True)
    assert not any((fleet.LAB_DIR / "run" / n).exists() for n in names)
