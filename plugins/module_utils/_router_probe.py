# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check that SGLang's router spreads requests over every healthy worker.

Waits until the router's ``/readiness`` counts enough healthy workers, reads its worker list (``/workers``), sends
bursts of small concurrent completions through it and counts, per worker, the requests each one served: from the
router's own per-worker counters (``smg_worker_cb_outcomes_total{worker=...}`` on its Prometheus port) when it
exports them, else from each worker's ``/metrics`` (``sglang:num_requests_total``, either spelling, needs ``--enable-metrics``).
Concurrent requests matter: the cache-aware policy sends sequential requests with no shared prefix to the least
loaded worker, which is the first one while nothing is in flight. Every prompt starts with a random token, so no
prefix is shared.

HTTP, URLs and the Prometheus text format are the collection's (``_server_info``, ``_router_workers``).
"""

from __future__ import annotations

import threading
import time
import uuid

from ansible_collections.llmops.sglang.plugins.module_utils._http import FetchError, request
from ansible_collections.llmops.sglang.plugins.module_utils._router_workers import Router, RouterError, url_key
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import (
    ServerInfoError,
    fetch_endpoint,
    parse_json_object,
)
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import parse_prometheus, sglang_samples

ROUTER_COUNTER = "smg_worker_cb_outcomes_total"
# SGLang's counter, without the prefix: _prometheus.sglang_samples reads either spelling.
WORKER_COUNTER = "num_requests_total"
# Counters are updated when a response completes, a moment after the client has it.
SETTLE_SECONDS = 0.2


class ProbeError(Exception):
    """The probe could not run (the router did not get ready, did not answer, answered nonsense)."""


def _key(url):
    try:
        return url_key(url)
    except ServerInfoError:
        return None


def wait_ready(router, need, timeout, interval=2.0, clock=None, sleep=None, tls=None):
    """Poll GET /readiness until it answers 200 with at least ``need`` healthy workers; its answer, or ProbeError.
    (clock and sleep are looked up at call time, so a test's or the fuzz sandbox's stand-ins apply.)"""
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    deadline = clock() + timeout
    while True:
        try:
            _status, body, _ctype = request(router, "/readiness", "GET", timeout=10, tls=tls)
            answer = parse_json_object(body, router + "/readiness")
            last = "healthy_workers %s of total_workers %s" % (answer.get("healthy_workers"), answer.get("total_workers"))
            healthy = answer.get("healthy_workers")
            if isinstance(healthy, int) and not isinstance(healthy, bool) and healthy >= need:
                return answer
        except FetchError as exc:
            last = exc.message
        if clock() >= deadline:
            raise ProbeError("the router at %s was not ready with %d healthy worker(s) within %ss (last: %s): check that "
                             "the router reaches the workers (their address and port from the router host) and its journal"
                             % (router, need, timeout, last))
        sleep(interval)


def router_counts(metrics_url, timeout, tls=None):
    """Requests per worker (by URL key) from the router's counters; None when it exports none or does not answer."""
    if not metrics_url:
        return None
    try:
        _status, body, _ctype = request(metrics_url, "", "GET", timeout=timeout, tls=tls, accept="text/plain")
    except (FetchError, ServerInfoError):
        return None
    counts = {}
    for sample in parse_prometheus(body, prefix=ROUTER_COUNTER)["metrics"].get(ROUTER_COUNTER, []):
        key = _key(sample["labels"].get("worker", ""))
        if key is not None and isinstance(sample["value"], float):
            counts[key] = counts.get(key, 0.0) + sample["value"]
    return counts or None


def worker_counts(workers, timeout, tls=None):
    """Requests per worker (by URL key) from each worker's own /metrics; workers without the counter are left out."""
    counts = {}
    for url in workers:
        res = fetch_endpoint(url, "metrics", timeout=timeout, tls=tls)
        samples = sglang_samples(res["data"]["metrics"], WORKER_COUNTER) if res["ok"] else []
        values = [s["value"] for s in samples if isinstance(s["value"], float)]
        if values:
            counts[_key(url)] = sum(values)
    return counts


def burst(router, api_key, model, n, max_tokens, timeout, tls=None):
    """n concurrent completions through the router; the failures as messages."""
    failures = []
    lock = threading.Lock()

    def one():
        body = {"model": model, "prompt": "%s router probe: say ok." % uuid.uuid4().hex, "max_tokens": max_tokens,
                "temperature": 0}
        try:
            request(router, "/v1/completions", "POST", body, api_key, timeout, tls)
        except FetchError as exc:
            with lock:
                failures.append(exc.message)

    threads = [threading.Thread(target=one) for _i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def probe(router_url, expected, metrics_url=None, api_key=None, requests=8, rounds=3, max_tokens=8, timeout=120.0,
          sleep=time.sleep, tls=None):
    """Send up to ``rounds`` bursts of ``requests`` completions until every healthy worker served one.

    Returns {ok, router, expected, healthy, unhealthy, missing, model, requests, rounds, failures, per_worker,
    source, idle, error}; ok: every request succeeded and every healthy worker served some.
    """
    api = Router(router_url, api_key or None, timeout=timeout, tls=tls)
    router = api.url
    result = {"ok": False, "router": router, "expected": sorted(expected), "requests": 0, "rounds": 0, "failures": [],
              "per_worker": {}, "source": None, "healthy": [], "unhealthy": [], "missing": [], "idle": []}
    try:
        listed = api.workers()
    except (FetchError, RouterError) as exc:
        raise ProbeError(getattr(exc, "message", None) or str(exc))
    healthy = sorted(w["url"] for w in listed if w.get("is_healthy"))
    keys = dict((_key(u), u) for u in healthy)
    result["healthy"] = healthy
    result["unhealthy"] = sorted(w["url"] for w in listed if not w.get("is_healthy"))
    result["missing"] = sorted(u for u in expected if _key(u) not in keys)
    if not healthy:
        result["error"] = "the router lists no healthy worker"
        return result
    try:
        _status, body, _ctype = request(router, "/v1/models", "GET", None, api_key, timeout, tls)
        models = parse_json_object(body, router + "/v1/models", api_key).get("data") or [{}]
    except FetchError as exc:
        raise ProbeError(exc.message)
    result["model"] = (models[0] if isinstance(models[0], dict) else {}).get("id") or "default"

    def counts():
        by_router = router_counts(metrics_url, timeout, tls)
        if by_router is not None and any(k in by_router for k in keys):
            result["source"] = "router_metrics"
            return by_router
        result["source"] = "worker_metrics"
        return worker_counts(healthy, timeout, tls)

    served = dict((k, 0) for k in keys)
    for _i in range(rounds):
        before = counts()
        result["failures"] += burst(router, api_key, result["model"], requests, max_tokens, timeout, tls)
        result["requests"] += requests
        result["rounds"] += 1
        sleep(SETTLE_SECONDS)
        after = counts()
        for k in keys:
            if k in after:
                served[k] += int(after[k] - before.get(k, 0))
        if result["failures"] or all(served.values()):
            break
    result["per_worker"] = dict((keys[k], n) for k, n in served.items())
    if not any(k in counts() for k in keys):
        result["error"] = "neither the router's metrics nor the workers' /metrics count requests per worker"
        return result
    result["idle"] = sorted(keys[k] for k, n in served.items() if n == 0)
    result["ok"] = not result["failures"] and not result["idle"]
    return result


def verdict(result, require_all_workers=True):
    """(passed, message) of a probe result: every request answered, every healthy worker served some, and with
    require_all_workers every expected worker healthy."""
    passed = bool(result["ok"]) and not (require_all_workers and result["missing"])
    if passed:
        return True, ("%d requests in %d burst(s) reached %d worker(s): %s (%s)"
                      % (result["requests"], result["rounds"], len(result["per_worker"]), result["per_worker"],
                         result["source"]))
    return False, ("%sRouting check failed: healthy workers %s, not healthy or not registered %s, requests served per "
                   "worker %s (%s), failed requests %s. Check the router's journal and the workers that served nothing."
                   % ((result["error"] + ". ") if result.get("error") else "", result["healthy"], result["missing"],
                      result["per_worker"], result["source"] or "no counter", sorted(set(result["failures"]))))
