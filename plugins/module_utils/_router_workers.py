# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One SGLang server's place behind SGLang routers: take it out (and let its requests finish) before a restart,
put it back once it serves again.

It speaks the worker API of sglang-router 0.3 (the Rust model gateway): ``GET /workers`` lists
``{"workers": [{"id", "url", "is_healthy", "load", ...}]}``, ``DELETE /workers/{id}`` and ``POST /workers``
(``{"url", "api_key"}``) answer 202 and apply in the background, so every change is followed until the listing
shows it. A router removes a worker from routing at once; requests it already sent there run to their end, which
the drain waits for on the server's own gauges (``sglang:num_running_reqs`` + ``sglang:num_queue_reqs``, or their
``sglang_`` spelling).
"""

from __future__ import annotations

import time
from urllib import parse as urlparse

from ansible_collections.llmops.sglang.plugins.module_utils._http import FetchError, OptionError, check_api_key, request
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import sglang_samples
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import (
    ServerInfoError,
    fetch_endpoint,
    normalize_url,
    parse_json_object,
)

# SGLang's gauges, without the prefix: _prometheus.sglang_samples reads either spelling.
IN_FLIGHT_GAUGES = ("num_running_reqs", "num_queue_reqs")
# A router that does not answer routes nothing: there is nothing to take this server out of.
DOWN = ("refused", "unreachable")


class RouterError(Exception):
    """A router answered, but not as this module needs; the message names the router and the fix."""


def url_key(url):
    """What makes two worker URLs the same: scheme, host (case-insensitive) and port; ServerInfoError if bad."""
    base, host, port = normalize_url(url)
    return urlparse.urlsplit(base).scheme, host.lower(), port


def workers_of(listing, router):
    """The worker entries of a GET /workers answer; RouterError when it is not one."""
    workers = listing.get("workers") if isinstance(listing, dict) else None
    if not isinstance(workers, list) or not all(isinstance(w, dict) and w.get("id") and w.get("url") for w in workers):
        raise RouterError("%s/workers did not list workers as sglang-router 0.3 does ({\"workers\": [{\"id\", \"url\", ...}]}): "
                          "check that the URL points at an SGLang router of release 0.3 or later" % router)
    return workers


def matching(workers, url):
    key = url_key(url)
    return [w for w in workers if _same(w["url"], key)]


def _same(url, key):
    try:
        return url_key(url) == key
    except ServerInfoError:
        return False


def in_flight(metrics):
    """Running + queued requests from parsed /metrics (summed over data-parallel ranks); None without the gauges."""
    found = [s["value"] for name in IN_FLIGHT_GAUGES for s in sglang_samples(metrics, name) if isinstance(s["value"], float)]
    return int(sum(found)) if found else None


class Router(object):
    """One router's worker API."""

    def __init__(self, url, api_key=None, timeout=10.0, tls=None):
        self.url = normalize_url(url)[0]
        try:
            check_api_key(api_key)
        except OptionError as exc:
            raise ServerInfoError(str(exc))
        self.api_key = api_key
        self.timeout = timeout
        self.tls = tls

    def _call(self, path, method="GET", payload=None):
        try:
            status, body, _ctype = request(self.url, path, method, payload, self.api_key, self.timeout, self.tls)
        except FetchError as exc:
            if exc.cls == "unauthorized":
                exc.message = ("HTTP %d from %s%s: the router %s; api_key must be the router's --api-key (the router role's "
                               "router_api_key, sglang_server_router_api_key for the server role)"
                               % (exc.http_status, self.url, path, "rejected the API key" if self.api_key else "requires an API key"))
            elif exc.cls == "not_found":
                exc.message = ("HTTP 404 from %s%s: this router has no worker API; sglang-router 0.3 or later has it"
                               % (self.url, path))
            raise
        # an empty body is fine (DELETE, POST); anything else must be a JSON object, its nesting bounded
        return parse_json_object(body, self.url + path, self.api_key) if body.strip() else {}

    def workers(self):
        return workers_of(self._call("/workers"), self.url)

    def remove(self, worker_id):
        self._call("/workers/%s" % urlparse.quote(str(worker_id), safe=""), "DELETE")

    def add(self, url, worker_api_key=None):
        payload = {"url": url}
        if worker_api_key:
            payload["api_key"] = worker_api_key
        self._call("/workers", "POST", payload)


def _until(check, timeout, interval, clock, sleep):
    """Poll check() until it returns something truthy or timeout passes; its last value."""
    deadline = clock() + timeout
    while True:
        value = check()
        if value or clock() >= deadline:
            return value
        sleep(interval)


def leave(router, url, timeout=30.0, check_mode=False, interval=0.5, clock=time.monotonic, sleep=time.sleep):
    """Take the server at url out of one router: {router, action, worker_ids, healthy_left}.

    action: "removed", "absent" (it was not listed), "down" (the router does not answer: it routes nothing).
    """
    result = {"router": router.url, "action": "absent", "worker_ids": [], "healthy_left": None}
    try:
        workers = router.workers()
    except FetchError as exc:
        if exc.cls in DOWN:
            result.update(action="down", message=exc.message)
            return result
        raise
    mine = matching(workers, url)
    others = [w for w in workers if w not in mine]
    result["healthy_left"] = len([w for w in others if w.get("is_healthy")])
    if not mine:
        return result
    result.update(action="removed", worker_ids=[w["id"] for w in mine])
    if check_mode:
        return result
    for w in mine:
        router.remove(w["id"])
    if not _until(lambda: not matching(router.workers(), url), timeout, interval, clock, sleep):
        raise RouterError("%s still lists %s %ss after it accepted the removal: check the router's log"
                          % (router.url, url, timeout))
    return result


def join(router, url, worker_api_key=None, timeout=60.0, check_mode=False, interval=0.5, clock=time.monotonic,
         sleep=time.sleep):
    """Put the server at url (back) into one router and wait until the router lists it healthy."""
    result = {"router": router.url, "action": "present", "worker_ids": []}
    try:
        mine = matching(router.workers(), url)
    except FetchError as exc:
        if exc.cls in DOWN:
            # When it starts, a router takes its workers from its command line, this one included.
            result.update(action="down", message=exc.message)
            return result
        raise
    if mine and all(w.get("is_healthy") for w in mine):
        result["worker_ids"] = [w["id"] for w in mine]
        return result
    result["action"] = "added" if not mine else "waited"
    if check_mode:
        return result
    if not mine:
        router.add(url, worker_api_key)

    def healthy():
        now = matching(router.workers(), url)
        return now if now and all(w.get("is_healthy") for w in now) else None

    mine = _until(healthy, timeout, interval, clock, sleep)
    if not mine:
        raise RouterError("%s did not list %s as a healthy worker within %ss: check that the router reaches "
                          "it (its address and port from the router host) and the router's log" % (router.url, url, timeout))
    result["worker_ids"] = [w["id"] for w in mine]
    return result


def drain(metrics_url, api_key=None, timeout=300.0, interval=1.0, clock=time.monotonic, sleep=time.sleep, tls=None):
    """Wait until the server has no running or queued request: {in_flight_before, in_flight, waited_s, drained}.

    in_flight is None when the server has no metrics (--enable-metrics off) or does not answer: nothing to wait for.
    """
    start = clock()
    seen = []

    def idle():
        res = fetch_endpoint(metrics_url, "metrics", api_key, timeout=10, tls=tls)
        value = in_flight(res["data"]["metrics"]) if res["ok"] else None
        seen.append(value)
        return value is None or value == 0

    drained = _until(idle, timeout, interval, clock, sleep)
    return {"in_flight_before": seen[0], "in_flight": seen[-1], "waited_s": round(clock() - start, 1),
            "drained": drained and seen[-1] == 0}
