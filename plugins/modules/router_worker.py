#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: router_worker
short_description: Take an SGLang server out of its routers before a restart, and put it back
version_added: 0.1.0
description:
  - Talks to the worker API of SGLang routers (sglang-router 0.3 or later, C(GET/POST /workers),
    C(DELETE /workers/{id})) over HTTP, with the Python standard library only.
  - With O(state=absent) the server at O(worker_url) is removed from every router of O(routers) that lists it,
    and the task waits until each router stops listing it. The routers then send new requests to the other
    workers; requests already sent run to their end. With O(drain_url) the task then waits, up to
    O(drain_timeout) seconds, until the server's own gauges (C(sglang:num_running_reqs) and
    C(sglang:num_queue_reqs) of C(/metrics), or their C(sglang_) spelling) show no request left, so a restart cuts none.
  - With O(state=present) the server is added to each router of O(routers) that does not list it, and the task
    waits until every router lists it healthy. This also heals a rollout interrupted between the two.
  - A router that does not answer (connection refused, unreachable) routes nothing, so it is skipped, with a
    warning when taking the server out (when putting it in, a router that starts later takes its workers from
    its command line). A router that answers with an error fails the task with the cause and the fix.
  - The same URL spelled differently (host case, default port) is the same worker.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.http_client.tls
attributes:
  check_mode:
    support: full
    details:
      - In check mode the routers are only read; C(changed) says whether the server would be removed or added.
  diff_mode:
    support: none
options:
  routers:
    description:
      - Base URLs of the routers (C(http://HOST:PORT)), as seen from where the module runs.
    type: list
    elements: str
    required: true
  worker_url:
    description:
      - The server's URL as the routers list it (what the router role writes to C(--worker-urls)).
    type: str
    required: true
  state:
    description:
      - V(absent) takes the server out of the routers (and drains it with O(drain_url)); V(present) puts it in.
    type: str
    choices: [absent, present]
    default: absent
  api_key:
    description:
      - The routers' API key (C(--api-key) of the router), required by their worker API when set. V(present) also
        hands it to the routers as the server's key, as the router role does for the workers on its command line.
    type: str
  timeout:
    description:
      - Seconds each router may take to apply a removal, or to list an added server as healthy.
    type: float
    default: 60
  drain_url:
    description:
      - With O(state=absent), the server's base URL as seen from where the module runs (its metrics must be on,
        C(--enable-metrics)); the task waits until no request runs or waits there. Unset, or a server without
        metrics, means no wait.
    type: str
  drain_timeout:
    description:
      - Seconds to wait for the server's requests to finish; after that the task returns with a warning naming
        how many still run (the restart that follows cuts them).
    type: float
    default: 300
notes:
  - A router restarted later takes its workers from its command line again, whatever was removed at run time.
  - Taking out the last healthy worker of a router is allowed (a single-replica fleet has no other choice), with a
    warning, since that router answers errors until the server is back.
seealso:
  - module: llmops.sglang.sglang_service_stop
  - module: llmops.sglang.sglang_wait_ready
"""

EXAMPLES = r"""
- name: Take this server out of the routers and let its requests finish
  llmops.sglang.router_worker:
    routers: [http://10.0.0.5:30000]
    worker_url: http://10.0.0.11:30000
    api_key: "{{ sglang_server_api_key }}"
    drain_url: http://127.0.0.1:30000
    drain_timeout: 600
  register: left

- name: Put it back once it serves again
  llmops.sglang.router_worker:
    routers: [http://10.0.0.5:30000]
    worker_url: http://10.0.0.11:30000
    api_key: "{{ sglang_server_api_key }}"
    state: present
"""

RETURN = r"""
worker_url:
  description: The server's URL, as given.
  returned: always
  type: str
  sample: http://10.0.0.11:30000
routers:
  description: What happened at each router, in the order of O(routers).
  returned: always
  type: list
  elements: dict
  contains:
    router:
      description: The router's base URL.
      type: str
    action:
      description:
        - V(removed) or V(added) (in check mode, would be); V(absent) (not listed, nothing to remove);
          V(present) (listed and healthy already); V(waited) (listed, now healthy); V(down) (the router did not
          answer; skipped).
      type: str
    worker_ids:
      description: The router's ids for the server (removed, or listed after the addition).
      type: list
      elements: str
    healthy_left:
      description: With O(state=absent), the healthy workers the router keeps besides this server.
      type: int
    message:
      description: Why a router was skipped.
      type: str
  sample: [{router: "http://10.0.0.5:30000", action: removed, worker_ids: ["87119a9e-44ce-4fc4-ad67-5a2a055f94fe"], healthy_left: 1}]
drain:
  description: The wait for the server's requests (state=absent with O(drain_url) and a removal); null otherwise.
  returned: always
  type: dict
  contains:
    in_flight_before:
      description: Running + queued requests when the wait began; null without metrics.
      type: int
    in_flight:
      description: Running + queued requests when it ended; null without metrics.
      type: int
    waited_s:
      description: Seconds waited.
      type: float
    drained:
      description: Whether the server was idle at the end.
      type: bool
  sample: {in_flight_before: 3, in_flight: 0, waited_s: 12.4, drained: true}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils._http import TLS_ARGUMENT_SPEC, FetchError, OptionError, check_api_key, tls_from_params
from ansible_collections.llmops.sglang.plugins.module_utils._router_workers import (
    Router,
    RouterError,
    drain,
    join,
    leave,
    url_key,
)
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import ServerInfoError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            routers=dict(type="list", elements="str", required=True),
            worker_url=dict(type="str", required=True),
            state=dict(type="str", choices=["absent", "present"], default="absent"),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="float", default=60),
            drain_url=dict(type="str"),
            drain_timeout=dict(type="float", default=300),
            **TLS_ARGUMENT_SPEC,
        ),
        supports_check_mode=True,
    )
    p = module.params
    key = p["api_key"] or None
    result = {"worker_url": p["worker_url"], "routers": [], "drain": None, "changed": False}
    try:
        check_api_key(key)
        tls = tls_from_params(p)
    except OptionError as exc:
        module.fail_json(msg=str(exc), **result)
    try:
        url_key(p["worker_url"])
        routers = [Router(url, key, tls=tls) for url in p["routers"]]
        if p["drain_url"]:
            url_key(p["drain_url"])
    except ServerInfoError as exc:
        module.fail_json(msg="%s (routers, worker_url and drain_url are base URLs such as http://10.0.0.5:30000)" % exc,
                         **result)
    for what, limit in (("timeout", p["timeout"]), ("drain_timeout", p["drain_timeout"])):
        if not limit >= 0:
            module.fail_json(msg="%s must be a number of seconds >= 0, got %s" % (what, limit), **result)
    try:
        for router in routers:
            if p["state"] == "absent":
                res = leave(router, p["worker_url"], p["timeout"], module.check_mode)
            else:
                res = join(router, p["worker_url"], key, p["timeout"], module.check_mode)
            result["routers"].append(res)
            if res["action"] == "down" and p["state"] == "absent":
                module.warn("skipped router %s: %s" % (router.url, res["message"]))
            if res["action"] == "removed" and res["healthy_left"] == 0:
                module.warn("%s has no other healthy worker: it answers errors until %s is back" % (router.url, p["worker_url"]))
    except (FetchError, RouterError) as exc:
        module.fail_json(msg="router %s: %s" % (router.url, getattr(exc, "message", None) or exc), **result)
    result["changed"] = any(r["action"] in ("removed", "added") for r in result["routers"])
    if p["state"] == "absent" and result["changed"] and p["drain_url"] and not module.check_mode:
        result["drain"] = drain(p["drain_url"], key, p["drain_timeout"], tls=tls)
        if result["drain"]["in_flight"]:
            module.warn("%d request(s) still run on %s after %ss: the restart cuts them (raise the drain timeout to let "
                        "them finish)" % (result["drain"]["in_flight"], p["drain_url"], p["drain_timeout"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
