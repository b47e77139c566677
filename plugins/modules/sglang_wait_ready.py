#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_wait_ready
short_description: Wait until an SGLang systemd unit serves, or fail fast naming why it never will
version_added: 0.1.0
description:
  - Polls, once per O(interval), the unit's state (C(systemctl show)), the journal of its current invocation
    (parsed by the same SGLang log parser as M(llmops.sglang.log_audit)) and the health URL (C(/health_generate),
    which runs a one-token generation).
  - Each poll reads only the journal written since the last one (C(journalctl -o json --after-cursor) with the last
    entry's C(__CURSOR)), streamed into the parser in 1 MiB chunks, so memory stays bounded however large the journal
    grows. Request lines and prompts echoed into the journal never count as a phase or a fatal cause.
  - Only the entries the unit's processes wrote to stdout/stderr are parsed, judged by fields journald sets itself
    (C(_SYSTEMD_INVOCATION_ID), C(_SYSTEMD_UNIT), C(_TRANSPORT=stdout)); entries any local user can send (C(logger),
    C(systemd-cat)) and the rest of a line journald cut at C(LineMax) never count.
  - Succeeds with RV(status=ready) once the health URL answers 200.
  - Fails at once, without waiting out the budget, when the unit failed or exited, when systemd restarted it
    (a crash loop - C(NRestarts) grew, a new C(InvocationID) or C(SubState=auto-restart)), or when the log shows a
    fatal error (CUDA out of memory, no kernel image for the GPU, a Python exception, the port already in use, a
    command line SGLang rejected). The message names the cause as its class followed by its message.
  - Fails with cause class C(timeout) once O(budget) seconds passed since the unit's main process started.
  - A 200 only counts when a process of the unit owns the listening socket of the URL's port (when that can be
    read from C(/proc)), so another server on the same port cannot pass for this one.
  - Returns RV(status=waiting) after O(timeout) seconds of this call when nothing is decided yet, with the startup
    phase reached (loading weights, KV pool allocated, capturing CUDA graphs, warming up). A role calls it again
    (passing RV(invocation_id) and RV(n_restarts_baseline) back) and prints the phase in between, because Ansible shows a
    module's result only when it ends, so progress comes from these short calls.
  - Values of secret-looking assignments (API keys, tokens) are masked in every returned text.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.http_client.tls
attributes:
  check_mode:
    support: full
    details:
      - The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
options:
  unit:
    description: The systemd unit, for example C(sglang-qwen.service).
    type: str
    required: true
  url:
    description: Health URL; 200 means ready. C(/health_generate) is exempt from the API key.
    type: str
    default: http://127.0.0.1:30000/health_generate
  budget:
    description: Seconds the server may take to become ready, counted from the start of the unit's main process.
    type: int
    default: 2700
  timeout:
    description:
      - Seconds this call waits before it returns RV(status=waiting). Unset waits until ready, failed or the budget is spent.
    type: int
  interval:
    description: Seconds between polls.
    type: float
    default: 1.0
  invocation_id:
    description:
      - The invocation (C(InvocationID)) being waited for; a different one means systemd restarted the unit.
      - Unset takes the unit's current invocation (returned as RV(invocation_id)).
    type: str
  n_restarts:
    description:
      - C(NRestarts) at the start of the wait; a higher value means a crash loop. Unset takes the value of the first
        poll (returned as RV(n_restarts_baseline)). A manual start does not always reset the counter (not after a stop
        during C(auto-restart)), so V(0) is no safe guess.
    type: int
  probe_timeout:
    description: Seconds one health request may take.
    type: float
    default: 5.0
notes:
  - Reads the journal with C(journalctl _SYSTEMD_INVOCATION_ID=<id> _SYSTEMD_UNIT=UNIT _TRANSPORT=stdout -o json), so only
    the invocation being waited for counts.
seealso:
  - module: llmops.sglang.log_audit
  - module: llmops.sglang.sglang_service_stop
"""

EXAMPLES = r"""
- name: Wait up to 45 minutes, printing progress every 30 s (tasks file that includes itself while waiting)
  llmops.sglang.sglang_wait_ready:
    unit: sglang-qwen.service
    url: http://127.0.0.1:30000/health_generate
    budget: 2700
    timeout: 30
    invocation_id: "{{ previous.invocation_id | default(omit) }}"
    n_restarts: "{{ previous.n_restarts_baseline | default(omit) }}"
  register: previous

- name: One call, no progress
  llmops.sglang.sglang_wait_ready:
    unit: sglang-qwen.service
    budget: 600
"""

RETURN = r"""
status:
  description: V(ready), V(waiting) (this call's O(timeout) passed) or V(failed).
  returned: always
  type: str
  sample: ready
ready:
  description: The health URL answered 200.
  returned: always
  type: bool
phase:
  description: Startup phase reached, from the log (V(starting), V(loading_weights), V(kv_pool_allocated),
    V(capturing_cuda_graphs), V(warming_up), V(ready), V(failed)).
  returned: always
  type: str
  sample: capturing_cuda_graphs
phases:
  description: The phases seen by this call, each with C(at), seconds since the main process started.
  returned: always
  type: list
  elements: dict
  sample: [{"phase": "loading_weights", "at": 0.4}, {"phase": "ready", "at": 3.1}]
elapsed:
  description: Seconds since the unit's main process started.
  returned: always
  type: float
waited:
  description: Seconds this call waited.
  returned: always
  type: float
polls:
  description: Polls made by this call.
  returned: always
  type: int
cause:
  description: Why the server is not ready, when RV(status=failed) - C(class) (for example C(cuda_oom),
    C(no_kernel_image), C(python_exception), C(not_enough_memory), C(port_in_use), C(cli_argument_error),
    C(crash_loop), C(exited), C(host_oom), C(timeout)), C(message), C(source) (C(journal), C(systemd) or C(budget)),
    C(crash_loop), C(restarts), C(phase), C(elapsed) and C(unit).
  returned: always
  type: dict
  sample: {"class": "cuda_oom", "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
           "source": "journal", "crash_loop": false, "restarts": 0, "phase": "failed", "elapsed": 1.2}
unit:
  description: The unit's C(active_state), C(sub_state), C(result), C(n_restarts), C(invocation_id), C(main_pid),
    C(exec_main_status) at the last poll.
  returned: always
  type: dict
health:
  description: C(url), C(status) (HTTP status or null) and C(error) of the last health request.
  returned: always
  type: dict
log:
  description: What the journal showed - C(fatal), C(ready_line), C(kv_dtype_effective), C(kv_cache_dtype_configured),
    C(max_total_num_tokens), C(bytes_read) (of journalctl's JSON), C(error), and C(journal) (entries read, kept, and left
    out by reason, as M(llmops.sglang.log_audit)'s C(stats.journal)); null when the unit had no invocation.
  returned: always
  type: dict
invocation_id:
  description: The invocation waited for; pass it to the next call.
  returned: always
  type: str
n_restarts_baseline:
  description: The C(NRestarts) baseline used; pass it to the next call.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils._http import TLS_ARGUMENT_SPEC, OptionError, parse_base_url, tls_from_params
from ansible_collections.llmops.sglang.plugins.module_utils._readiness import UnitError, describe_cause, wait_ready


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            url=dict(type="str", default="http://127.0.0.1:30000/health_generate"),
            budget=dict(type="int", default=2700),
            timeout=dict(type="int"),
            interval=dict(type="float", default=1.0),
            invocation_id=dict(type="str"),
            n_restarts=dict(type="int"),
            probe_timeout=dict(type="float", default=5.0),
            **TLS_ARGUMENT_SPEC,
        ),
        supports_check_mode=True,
    )
    p = module.params
    unit = p["unit"]
    if p["budget"] <= 0 or p["interval"] <= 0 or p["probe_timeout"] <= 0:
        module.fail_json(msg="budget, interval and probe_timeout must be positive (got %s, %s, %s)" % (p["budget"], p["interval"], p["probe_timeout"]))
    try:
        parse_base_url(p["url"], "url")
        tls = tls_from_params(p)
    except OptionError as exc:  # UrlError is one
        module.fail_json(msg=str(exc))
    timeout = p["timeout"] if p["timeout"] and p["timeout"] > 0 else p["budget"] + 60
    try:
        result = wait_ready(unit, p["url"], p["budget"], timeout, interval=p["interval"], invocation_id=p["invocation_id"] or None,
                            n_restarts=p["n_restarts"], probe_timeout=p["probe_timeout"],
                            tls=tls,
                            systemctl=module.get_bin_path("systemctl", required=True),
                            journalctl=module.get_bin_path("journalctl", required=True))
    except UnitError as exc:
        module.fail_json(msg=str(exc))
    if result["status"] == "failed":
        module.fail_json(msg=describe_cause(unit, result["cause"]), changed=False, **result)
    if result["ready"]:
        msg = "%s is ready after %.1f s" % (unit, result["elapsed"])
    else:
        msg = "%s is not ready yet: phase %s after %.1f s" % (unit, result["phase"], result["elapsed"])
    module.exit_json(changed=False, msg=msg, **result)


if __name__ == "__main__":
    main()
