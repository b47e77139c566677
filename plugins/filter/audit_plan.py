# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: audit_plan
short_description: Internal to the audit role - its checks, verdict and report from what the info modules returned
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(audit) role, not an API - its phases and results may change in any release.
    The role hands over its settings by name (C(_audit_setting_names) in its C(vars/main.yml)), the phase and its
    results by name (C(_audit_result_names)); C(plugins/plugin_utils/_audit_checks.py) decides.
  - Phase V(checks) (inputs the role's results by name and the host's name) turns the registered results of
    M(llmops.sglang.kv_cache_guard), M(llmops.sglang.log_audit), M(llmops.sglang.server_info) and
    M(llmops.sglang.checkpoint_info), and the unit's C(systemctl show) output, into
    the seven checks of the C(llmops.sglang.audit) role, the KV capacity table, the host verdict and the report.
  - "Checks (ids are stable): V(kv_cache_dtype) (the guard's verdict; the only one that fails), V(weight_quantization),
    V(log_findings), V(speculative_decoding), V(context_capacity), V(mamba_ssm_dtype),
    V(kv_capacity). Each is C({id, short, title, status, summary, evidence, fix}); status is V(fail), V(warning),
    V(note) (a precision note), V(unknown) (an input is missing), V(ok), V(n/a) or V(info)."
  - "Host verdict: V(FAIL) when the guard fails, else V(WARN) when a check is V(warning) or V(unknown), else V(NOTE)
    when a check is V(note), else V(OK)."
  - KV bytes per token and the Mamba state per slot come from the checkpoint's architecture at the server's TP size
    (the same math as M(llmops.sglang.kv_cache_budget)); the Mamba pool's bytes per element tell a float32 SSM state
    from a 16-bit one.
  - Inputs that are missing, skipped or failed count as unknown; they never raise.
positional: _input, phase, results, host
options:
  _input:
    description: The role's settings by variable name, every name of C(_audit_setting_names).
    type: dict
    required: true
  phase:
    description: What to decide; the phase's inputs follow it.
    type: str
    required: true
    choices: [checks]
  results:
    description:
      - "The role's results by name, every name of C(_audit_result_names) (null for one that did not run) -
        C(_audit_guard_run) (the kv_cache_guard result), C(_audit_log) (the log_audit result, with the role's rules
        V(audit_weights_loaded) and V(audit_mamba_state_dtype)), C(_audit_server) (the server_info result, endpoints
        server_info and models), C(_audit_ckpt) (the checkpoint_info result), C(_audit_unit_show) (the
        C(systemctl show -p ActiveState -p Environment) result or its stdout), C(_audit_model_dir) (the checkpoint
        directory audited)."
    type: dict
    required: true
  host:
    description: The inventory host name (reported).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Decide the checks, the verdict and the report
  ansible.builtin.set_fact:
    _audit_result: "{{ _audit_settings | llmops.sglang.audit_plan('checks', _audit_results, inventory_hostname) }}"

- name: Print the verdict
  ansible.builtin.debug:
    msg: "{{ _audit_result.summary.line }}"
"""

RETURN = r"""
_value:
  description: The audit.
  type: dict
  contains:
    guard:
      description:
        - The guard's result as the role's C(audit_guard) fact, C({passed, verdict, expected, waived, waiver_reason,
          available_signals, min_signals, signals, table, fix, notes, message, log_error}); verdict V(error) when the
          guard could not run.
      type: dict
    checks:
      description: The seven checks, in report order.
      type: list
      elements: dict
    capacity:
      description:
        - One row per context length, C({context_length, label, kv_dtype, kv_tokens, kv_gib_per_request,
          kv_limited_requests, mamba_limited_requests, max_running_requests, concurrent_requests,
          bf16_kv_limited_requests, text}).
      type: list
      elements: dict
    verdict:
      description: V(FAIL), V(WARN), V(NOTE) or V(OK).
      type: str
    report:
      description: The JSON report (C(host, question, verdict, kv_cache_guard, checks, capacity, deployment, log)).
      type: dict
    summary:
      description: The role's C(audit_summary) fact, C({verdict, kv, passed, issues, report, line}).
      type: dict
    stats:
      description: The set_stats text, C(VERDICT kv=... issues=...).
      type: str
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils import _audit_checks
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

audit_plan = role_filter("audit_plan", _audit_checks)


class FilterModule(object):
    def filters(self):
        return {"audit_plan": audit_plan}
