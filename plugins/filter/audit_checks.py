# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: audit_checks
short_description: Decide the accuracy audit's checks, verdict and report from what the info modules returned
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Turns the registered results of M(llmops.sglang.kv_cache_guard), M(llmops.sglang.log_audit),
    M(llmops.sglang.server_info) and M(llmops.sglang.checkpoint_info), and the unit's C(systemctl show) output, into
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
positional: _input, settings
options:
  _input:
    description:
      - "What the role gathered, as a dict. Keys: C(host) (inventory name), C(guard) (the kv_cache_guard result),
        C(log) (the log_audit result, with the role's rules V(audit_weights_loaded) and V(audit_mamba_state_dtype)),
        C(server) (the server_info result, endpoints server_info and models), C(checkpoint) (the checkpoint_info
        result), C(unit_show) (the C(systemctl show -p ActiveState -p Environment) result or its stdout),
        C(model_dir) (the checkpoint directory audited)."
    type: dict
    required: true
  settings:
    description:
      - The role's settings without the C(audit_) prefix. Keys left out take their defaults; unknown keys are an error.
    type: dict
    default: {}
    suboptions:
      unit:
        description: The systemd unit (reported).
        type: str
      url:
        description: The server URL (reported).
        type: str
      report_dir:
        description: Controller directory of the reports; the summary names C(REPORT_DIR/HOST/audit.json).
        type: str
      expected_kv_dtype:
        description: The KV dtype the guard required.
        type: str
        default: bf16
      min_signals:
        description: Independent signals the guard required (reported when the guard did not run).
        type: int
        default: 3
      expected_quantization:
        description: SGLang's quantization method the deployment is validated with.
        type: str
        default: modelopt_fp4
      expected_quant_algo:
        description: The checkpoint's quantization algorithm the deployment is validated with.
        type: str
        default: NVFP4
      expected_mamba_ssm_dtype:
        description: The expected SSM state dtype.
        type: str
        default: float32
      spec_min_accept_length:
        description: Lowest acceptable average accept length with speculative decoding.
        type: float
        default: 2.0
      context_lengths:
        description: Context lengths of the capacity table.
        type: list
        elements: int
        default: [32768, 131072]
      mamba_slots_per_request:
        description: Mamba slots one running request holds.
        type: int
        default: 3
"""

EXAMPLES = r"""
- name: Decide the checks from what the info modules returned
  ansible.builtin.set_fact:
    audit: "{{ facts | llmops.sglang.audit_checks({'unit': 'sglang-qwen', 'report_dir': '/srv/reports'}) }}"
  vars:
    facts:
      host: "{{ inventory_hostname }}"
      guard: "{{ guard_result }}"
      log: "{{ log_result }}"
      server: "{{ server_result }}"
      checkpoint: "{{ checkpoint_result }}"
      unit_show: "{{ unit_show_result }}"
      model_dir: /models/Qwen3.5-397B-A17B-NVFP4

- name: Print the verdict
  ansible.builtin.debug:
    msg: "{{ audit.summary.line }}"
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

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._audit_checks import AuditError, audit


def audit_checks(facts, settings=None):
    try:
        return audit(facts, settings or {})
    except AuditError as exc:
        raise AnsibleFilterError("llmops.sglang.audit_checks: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"audit_checks": audit_checks}
