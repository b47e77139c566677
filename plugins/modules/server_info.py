#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: server_info
short_description: Read a running SGLang server's info, model, model list and metrics endpoints
version_added: 0.1.0
description:
  - Queries a running SGLang server over HTTP from the managed host, using the Python standard library only.
  - C(GET /server_info) (falling back to C(/get_server_info) on older servers), C(/get_model_info) (falling back
    to C(/model_info)), C(/v1/models) and C(/metrics) (Prometheus text, parsed; only SGLang's metrics are kept, named
    C(sglang:) or C(sglang_), both spellings SGLang has served).
  - Summarises the KV cache dtype by the rules of the SGLang release that answered (its C(version)).
    In every release the top-level C(kv_cache_dtype) holds the server args after SGLang's argument processing.
    That is the flag, or what a backend or architecture rule set. It never holds what C(auto) resolved to from
    the checkpoint.
  - SGLang 0.5.16 and older record that resolution in each scheduler's C(internal_states[*].kv_cache_dtype)
    (C(fp8_e4m3) for an FP8 checkpoint). From 0.5.17 nothing in C(/server_info) shows it, and C(auto) stays
    C(auto) everywhere. From 0.5.20 C(launch_command) holds the command line as typed, so the flag is read there.
  - Every failure is classified, with a message that says what to do. C(refused) means nothing listens on the
    port. C(unreachable) is a DNS, routing or firewall problem. C(tls) is a certificate or scheme problem.
    C(timeout) means no complete answer within O(timeout). C(unauthorized) is HTTP 401/403 (API key).
    C(loading) is HTTP 503 while the server starts. C(not_found) is HTTP 404 (for C(/metrics) this means
    C(--enable-metrics) is off). C(http_error) is any other HTTP error. C(not_json) is a body that is not a
    JSON object. C(too_large) is an answer over 16 MiB.
  - The API key is sent as a bearer token (C(Authorization) header) and is redacted from everything returned,
    including credential fields of the server's own answer.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
  - llmops.sglang.http_client.tls
options:
  url:
    description:
      - Base URL of the SGLang server, as seen from the managed host (C(http://HOST:PORT), optionally with a
        path prefix when behind a reverse proxy).
      - Loopback addresses never go through a proxy.
    type: str
    default: http://127.0.0.1:30000
  api_key:
    description:
      - The server's C(--api-key). Needed when the server was started with one; sent as a bearer token.
    type: str
  timeout:
    description:
      - Seconds allowed for each request, including reading the whole answer.
    type: float
    default: 10
  endpoints:
    description:
      - Which endpoints to fetch.
    type: list
    elements: str
    choices: [server_info, model_info, models, metrics]
    default: [server_info, model_info, models, metrics]
  use_proxy:
    description:
      - Use the proxy from the C(http_proxy)/C(https_proxy) environment variables (loopback URLs never do).
    type: bool
    default: true
  fail_on_error:
    description:
      - Fail when any requested endpoint could not be read. The failure message lists each failed endpoint
        with its class and the fix, and the result still carries RV(endpoints).
      - When false, the module succeeds and the failures are only reported in RV(endpoints) and RV(errors),
        which suits polling with C(until).
    type: bool
    default: true
notes:
  - Only reads; never changes the server or the host.
  - While the weights load the HTTP port is closed (C(refused)); during warm-up some endpoints answer 503
    (C(loading)).
seealso:
  - module: llmops.sglang.kv_cache_guard
"""

EXAMPLES = r"""
- name: Read the local SGLang server
  llmops.sglang.server_info:
    api_key: "{{ sglang_api_key }}"
  register: sglang

- name: Show what the server says about its KV cache
  ansible.builtin.debug:
    msg: "flag {{ sglang.kv_cache_dtype.flag }}, running {{ sglang.kv_cache_dtype.running | default('unknown', true) }}"

- name: Wait until the server answers, without failing on each try
  llmops.sglang.server_info:
    url: http://127.0.0.1:30000
    endpoints: [server_info]
    fail_on_error: false
  register: probe
  until: probe.endpoints.server_info.ok
  retries: 60
  delay: 10
"""

RETURN = r"""
url:
  description: The base URL queried.
  returned: always
  type: str
  sample: http://127.0.0.1:30000
endpoints:
  description: Per requested endpoint, how the request went.
  returned: always
  type: dict
  contains:
    ok:
      description: Whether the endpoint answered and its answer was parsed.
      type: bool
    path:
      description: The path that answered, or the last one tried.
      type: str
      sample: /server_info
    http_status:
      description: HTTP status of the last answer, or null when there was none.
      type: int
    error:
      description: Null on success, else the classified failure.
      type: dict
      contains:
        class:
          description: >-
            One of bad_url, refused, unreachable, tls, timeout, unauthorized, loading, not_found, http_error,
            not_json, too_large.
          type: str
        message:
          description: What went wrong and what to do.
          type: str
    elapsed_s:
      description: Seconds the endpoint took, fallbacks included.
      type: float
  sample:
    server_info: {ok: true, path: /server_info, http_status: 200, error: null, elapsed_s: 0.004}
    metrics:
      ok: false
      path: /metrics
      http_status: 404
      elapsed_s: 0.002
      error: {class: not_found, message: "HTTP 404 from http://127.0.0.1:30000/metrics: metrics are disabled: ..."}
ok:
  description: Whether every requested endpoint was read.
  returned: always
  type: bool
errors:
  description: One line per failed endpoint, the endpoint name, a colon and the message.
  returned: always
  type: list
  elements: str
server_info:
  description:
    - The C(/server_info) answer (every ServerArgs field, C(launch_command), C(internal_states), C(version)).
    - Credentials are redacted, the values of C(--api-key)-like flags in C(launch_command) included.
  returned: when the server_info endpoint was read
  type: dict
model_info:
  description: The C(/get_model_info) answer (C(model_path), C(is_generation), ...).
  returned: when the model_info endpoint was read
  type: dict
models:
  description: The C(data) list of C(/v1/models).
  returned: when the models endpoint was read
  type: list
  elements: dict
served_model_names:
  description: The C(id) of each entry of RV(models).
  returned: always
  type: list
  elements: str
  sample: [Qwen3.5-397B-A17B-NVFP4]
metrics:
  description:
    - SGLang's samples of C(/metrics) (C(sglang:) or C(sglang_) names, as served) by sample name (histograms give C(_bucket), C(_sum) and C(_count) names),
      each a list of C({labels, value}). Non-finite values are the strings C(NaN), C(+Inf) and C(-Inf).
  returned: when the metrics endpoint was read
  type: dict
  sample:
    "sglang:token_usage": [{labels: {model_name: Qwen3.5-397B-A17B-NVFP4}, value: 0.12}]
metrics_stats:
  description: Counts of the metrics parse.
  returned: when the metrics endpoint was read
  type: dict
  contains:
    samples:
      description: Sample lines parsed (all names).
      type: int
    kept:
      description: Samples kept (C(sglang:) and C(sglang_) names).
      type: int
    malformed_lines:
      description: Lines that are neither comments nor valid samples (skipped).
      type: int
    malformed_examples:
      description: Up to five of those lines.
      type: list
      elements: str
    truncated:
      description: Whether samples were dropped beyond 20000.
      type: bool
kv_cache_dtype:
  description: The KV cache dtype as the server reports it, read by its release's rules.
  returned: always
  type: dict
  contains:
    flag:
      description:
        - The C(--kv-cache-dtype) the server was started with (C(auto) when absent), or null when the answer does not
          tell.
        - SGLang 0.5.17 and newer read it from C(launch_command), 0.5.16 and older from the top-level C(kv_cache_dtype).
      type: str
      sample: auto
    flag_source:
      description: Where RV(kv_cache_dtype.flag) was read, or null.
      type: str
      sample: "/server_info launch_command: no --kv-cache-dtype"
    server_args:
      description: Top-level C(kv_cache_dtype), the server args after SGLang's argument processing.
      type: str
      sample: auto
    schedulers:
      description: C(internal_states[*].kv_cache_dtype), one per scheduler.
      type: list
      elements: str
      sample: [auto]
    running:
      description:
        - The KV cache dtype this answer shows the server runs. It is null when the answer cannot tell, that is
          when it says C(auto) where its release would show the resolved dtype.
        - SGLang 0.5.16 and older show it in C(schedulers), newer releases in C(server_args).
      type: str
      sample: bf16
    running_source:
      description: Where RV(kv_cache_dtype.running) was read, or null.
      type: str
    release:
      description: Whose reporting rules were applied, C(0.5.16) (0.5.16 and older) or C(0.5.23) (0.5.17 and newer).
      type: str
      sample: "0.5.23"
    release_source:
      description: What decided RV(kv_cache_dtype.release) (the server's C(version), else C(0.5.23) is assumed).
      type: str
      sample: /server_info version 0.5.23
max_total_num_tokens:
  description: KV pool capacity in tokens from C(/server_info), or null.
  returned: always
  type: int
  sample: 1850000
version:
  description: SGLang version from C(/server_info), or null.
  returned: always
  type: str
  sample: 0.5.23
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._http import TLS_ARGUMENT_SPEC, OptionError, tls_from_params
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import (
    DEFAULT_URL,
    ENDPOINT_NAMES,
    ServerInfoError,
    gather,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default=DEFAULT_URL),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="float", default=10),
            endpoints=dict(type="list", elements="str", choices=list(ENDPOINT_NAMES), default=list(ENDPOINT_NAMES)),
            **TLS_ARGUMENT_SPEC,
            use_proxy=dict(type="bool", default=True),
            fail_on_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["endpoints"]:
        module.fail_json(msg="endpoints is empty: list at least one of %s" % ", ".join(ENDPOINT_NAMES))
    try:
        result = gather(p["url"], p["api_key"] or None, p["endpoints"], p["timeout"], tls_from_params(p), p["use_proxy"])
    except (ServerInfoError, OptionError) as exc:
        module.fail_json(msg=str(exc))
    if p["fail_on_error"] and not result["ok"]:
        module.fail_json(msg="SGLang server at %s: %s" % (result["url"], "; ".join(result["errors"])), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
