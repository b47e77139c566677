# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check that SGLang's router spreads requests over every healthy worker.

Reads the router's worker list (/workers), sends bursts of small concurrent completions through the
router and counts, per worker, the requests it served: from the router's own per-worker counters
(Prometheus endpoint) when it exposes them, else from each worker's /metrics
(sglang:num_requests_total, needs the server's --enable-metrics). Concurrent requests matter: the
cache-aware policy sends sequential requests with no shared prefix to the least loaded worker, which
is the first one while nothing is in flight. Every prompt starts with a random token, so no prefix
is shared. Prints one JSON object; exit 0 unless the probe itself could not run.
Python 3 standard library only (runs with the host's python3).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

KEY_VAR = "SGLANG_ROUTER_API_KEY"
# The router's per-worker request outcomes (sglang-router 0.3.x exports them for its circuit breaker).
ROUTER_COUNTER = re.compile(r'^smg_worker_cb_outcomes_total\{([^}]*)\}\s+([0-9.eE+-]+)\s*$')
WORKER_COUNTER = re.compile(r'^sglang:num_requests_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def read_key(env_file):
    """The API key from the unit's EnvironmentFile (KEY=value or KEY="value"), else the environment."""
    if env_file and os.path.exists(env_file):
        with open(env_file, encoding="utf-8") as f:
            for line in f:
                name, sep, value = line.strip().partition("=")
                if sep and name.strip() == KEY_VAR:
                    value = value.strip()
                    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                        value = value[1:-1]
                    return value
    return os.environ.get(KEY_VAR, "")


def norm(url):
    return url.rstrip("/")


class Client(object):
    def __init__(self, key, timeout):
        self.key = key
        self.timeout = timeout

    def request(self, url, body=None, auth=True):
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if auth and self.key:
            headers["Authorization"] = "Bearer " + self.key
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")

    def json(self, url, body=None):
        return json.loads(self.request(url, body)[1])


def router_counts(client, metrics_url):
    """Requests per worker URL from the router's counters; None when it exports none."""
    if not metrics_url:
        return None
    try:
        text = client.request(metrics_url, auth=False)[1]
    except (urllib.error.URLError, OSError):
        return None
    counts = {}
    for line in text.splitlines():
        m = ROUTER_COUNTER.match(line)
        if m:
            labels = dict(LABEL.findall(m.group(1)))
            if "worker" in labels:
                url = norm(labels["worker"])
                counts[url] = counts.get(url, 0.0) + float(m.group(2))
    return counts or None


def worker_counts(client, workers):
    counts = {}
    for url in workers:
        try:
            text = client.request(url + "/metrics", auth=False)[1]
        except (urllib.error.URLError, OSError):
            continue
        total = [float(m.group(1)) for m in map(WORKER_COUNTER.match, text.splitlines()) if m]
        if total:
            counts[url] = sum(total)
    return counts


def burst(client, router, model, n, max_tokens):
    """n concurrent completions; returns the failures as strings."""
    failures = []
    lock = threading.Lock()

    def one():
        body = {"model": model, "prompt": "%s router probe: say ok." % uuid.uuid4().hex, "max_tokens": max_tokens, "temperature": 0}
        try:
            status = client.request(router + "/v1/completions", body)[0]
            if status != 200:
                raise RuntimeError("HTTP %d" % status)
        except Exception as e:
            with lock:
                failures.append(str(e))

    threads = [threading.Thread(target=one) for dummy in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def probe(args):
    client = Client(read_key(args.env_file), args.timeout)
    router = norm(args.router)
    result = {"ok": False, "router": router, "expected": sorted(norm(u) for u in args.expect), "requests": 0, "rounds": 0,
              "failures": [], "per_worker": {}, "source": None, "healthy": [], "unhealthy": [], "missing": []}
    listed = client.json(router + "/workers").get("workers", [])
    healthy = sorted(norm(w["url"]) for w in listed if w.get("is_healthy"))
    result["healthy"] = healthy
    result["unhealthy"] = sorted(norm(w["url"]) for w in listed if not w.get("is_healthy"))
    result["missing"] = sorted(set(result["expected"]) - set(healthy))
    if not healthy:
        result["error"] = "the router lists no healthy worker"
        return result
    models = client.json(router + "/v1/models").get("data") or [{}]
    model = models[0].get("id") or "default"
    result["model"] = model

    def counts():
        c = router_counts(client, args.metrics_url)
        if c is not None and any(u in c for u in healthy):
            result["source"] = "router_metrics"
            return c
        result["source"] = "worker_metrics"
        return worker_counts(client, healthy)

    served = dict((u, 0) for u in healthy)
    for dummy in range(args.rounds):
        before = counts()
        result["failures"] += burst(client, router, model, args.requests, args.max_tokens)
        result["requests"] += args.requests
        result["rounds"] += 1
        time.sleep(0.2)  # counters are updated when a response completes
        after = counts()
        for url in healthy:
            if url in after:
                served[url] += int(after[url] - before.get(url, 0))
        if result["failures"] or all(served.values()):
            break
    result["per_worker"] = served
    if not any(u in counts() for u in healthy):
        result["error"] = "neither the router's metrics nor the workers' /metrics count requests per worker"
        return result
    result["idle"] = sorted(u for u, n in served.items() if n == 0)
    result["ok"] = not result["failures"] and not result["idle"]
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--router", required=True, help="router base URL, e.g. http://127.0.0.1:30000")
    p.add_argument("--metrics-url", help="router Prometheus URL, e.g. http://127.0.0.1:29000/metrics")
    p.add_argument("--env-file", help="EnvironmentFile holding %s" % KEY_VAR)
    p.add_argument("--expect", nargs="*", default=[], help="worker URLs that must be healthy")
    p.add_argument("--requests", type=int, default=8, help="concurrent requests per burst")
    p.add_argument("--rounds", type=int, default=3, help="bursts at most, until every healthy worker served one")
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for one HTTP request")
    args = p.parse_args(argv)
    try:
        result = probe(args)
    except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
        result = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
