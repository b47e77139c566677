#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: router_probe
short_description: Check that an SGLang router spreads requests over every healthy worker
version_added: 0.1.0
description:
  - Waits until the router's C(/readiness) counts enough healthy workers (every one of O(workers) with
    O(require_all_workers), else one), for up to O(ready_timeout) seconds. The router registers a worker only once
    the worker answers.
  - Then reads the router's worker list (C(GET /workers)), sends bursts of O(requests) concurrent small completions
    through it and counts, per worker, the requests each one served, from the router's own per-worker counters
    (C(smg_worker_cb_outcomes_total) at O(metrics_url)) or, when it exports none, from each worker's C(/metrics)
    (C(sglang:num_requests_total), or C(sglang_num_requests_total), needs the server's C(--enable-metrics)). It repeats the burst up to O(rounds)
    times until every healthy worker has served one.
  - Fails unless every request succeeded and every healthy worker served some, and, with O(require_all_workers),
    every worker of O(workers) is healthy.
  - Concurrent requests matter, since the cache-aware policy sends sequential requests with no shared prefix to the
    least loaded worker, which is the first one while nothing is in flight. Every prompt starts with a random token,
    so no two share a prefix.
  - Talks HTTP with the Python standard library only; sends real completions, so it changes nothing but costs a
    little GPU time.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.http_client.tls
attributes:
  check_mode:
    support: none
    details:
      - It sends completions, so it does not run in check mode (the task is skipped).
  diff_mode:
    support: none
options:
  url:
    description: The router's base URL as seen from where the module runs.
    type: str
    required: true
  metrics_url:
    description: The router's Prometheus URL (C(http://HOST:PORT/metrics)); unset, the workers' own counters are read.
    type: str
  api_key:
    description: The router's API key (its C(--api-key)), sent as C(Authorization Bearer); never returned.
    type: str
  workers:
    description: The worker URLs the router is configured with (the router role's C(--worker-urls)).
    type: list
    elements: str
    default: []
  require_all_workers:
    description: Require every worker of O(workers) healthy; false, one healthy worker is enough.
    type: bool
    default: true
  ready_timeout:
    description: Seconds to wait until the router is ready with its workers.
    type: float
    default: 600
  requests:
    description: Concurrent completions per burst.
    type: int
    default: 8
  rounds:
    description: Bursts at most, until every healthy worker served one.
    type: int
    default: 3
  max_tokens:
    description: C(max_tokens) of each completion.
    type: int
    default: 8
  timeout:
    description: Seconds for one HTTP request.
    type: float
    default: 120
seealso:
  - module: llmops.sglang.router_worker
"""

EXAMPLES = r"""
- name: Check that the router on this host spreads requests over both servers
  llmops.sglang.router_probe:
    url: http://127.0.0.1:30000
    metrics_url: http://127.0.0.1:29000/metrics
    api_key: "{{ router_api_key }}"
    workers: [http://10.0.0.11:30000, http://10.0.0.12:30000]
  register: routing
"""

RETURN = r"""
msg:
  description: What the probe found, or why it failed.
  returned: always
  type: str
  sample: "8 requests in 1 burst(s) reached 2 worker(s): {...} (router_metrics)"
ok:
  description: Every request succeeded and every healthy worker served some (O(require_all_workers) aside).
  returned: when the router answered
  type: bool
router:
  description: The router's base URL.
  returned: when the router answered
  type: str
expected:
  description: O(workers), sorted.
  returned: when the router answered
  type: list
  elements: str
healthy:
  description: The workers the router lists healthy, as it lists them.
  returned: when the router answered
  type: list
  elements: str
unhealthy:
  description: The workers the router lists but not healthy.
  returned: when the router answered
  type: list
  elements: str
missing:
  description: Workers of O(workers) the router does not list healthy.
  returned: when the router answered
  type: list
  elements: str
model:
  description: The model the completions asked for (the router's first C(/v1/models) entry).
  returned: when a healthy worker is listed
  type: str
requests:
  description: Completions sent.
  returned: when the router answered
  type: int
rounds:
  description: Bursts sent.
  returned: when the router answered
  type: int
per_worker:
  description: Requests each healthy worker served during the bursts.
  returned: when the router answered
  type: dict
  sample: {"http://10.0.0.11:30000": 5, "http://10.0.0.12:30000": 3}
source:
  description: Where the counts come from, V(router_metrics) or V(worker_metrics).
  returned: when the router answered
  type: str
idle:
  description: Healthy workers that served nothing.
  returned: when the router answered
  type: list
  elements: str
failures:
  description: Why completions failed (the key masked).
  returned: when the router answered
  type: list
  elements: str
error:
  description: Why the probe could not count (no healthy worker, no counter).
  returned: when it could not count
  type: str
readiness:
  description: The router's last C(/readiness) answer.
  returned: when the router got ready
  type: dict
  sample: {"status": "ready", "healthy_workers": 2, "total_workers": 2}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils._http import TLS_ARGUMENT_SPEC, OptionError, tls_from_params
from ansible_collections.llmops.sglang.plugins.module_utils._router_probe import ProbeError, probe, verdict, wait_ready
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import ServerInfoError, normalize_url


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            metrics_url=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            workers=dict(type="list", elements="str", default=[]),
            require_all_workers=dict(type="bool", default=True),
            ready_timeout=dict(type="float", default=600),
            requests=dict(type="int", default=8),
            rounds=dict(type="int", default=3),
            max_tokens=dict(type="int", default=8, no_log=False),
            timeout=dict(type="float", default=120),
            **TLS_ARGUMENT_SPEC,
        ),
        supports_check_mode=False,
    )
    p = module.params
    for what in ("requests", "rounds", "max_tokens"):
        if p[what] < 1:
            module.fail_json(msg="%s must be at least 1, got %d" % (what, p[what]))
    for what in ("ready_timeout", "timeout"):
        if not p[what] > 0:
            module.fail_json(msg="%s must be a number of seconds > 0, got %s" % (what, p[what]))
    try:
        for url in [p["url"]] + ([p["metrics_url"]] if p["metrics_url"] else []) + p["workers"]:
            normalize_url(url)
        need = len(p["workers"]) if p["require_all_workers"] and p["workers"] else 1
        tls = tls_from_params(p)
        readiness = wait_ready(normalize_url(p["url"])[0], need, p["ready_timeout"], tls=tls)
        result = probe(p["url"], p["workers"], p["metrics_url"], p["api_key"] or None, p["requests"], p["rounds"],
                       p["max_tokens"], p["timeout"], tls=tls)
    except OptionError as exc:
        module.fail_json(msg=str(exc))
    except ServerInfoError as exc:
        module.fail_json(msg="%s (url, metrics_url and workers are URLs such as http://127.0.0.1:30000)" % exc)
    except ProbeError as exc:
        module.fail_json(msg=str(exc))
    result["readiness"] = readiness
    passed, msg = verdict(result, p["require_all_workers"])
    if not passed:
        module.fail_json(msg=msg, **result)
    module.exit_json(changed=False, msg=msg, **result)


if __name__ == "__main__":
    main()
