# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: gpu_preflight_report
short_description: Everything the gpu_preflight role writes and shows
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Evaluates the preflight rules (as P(llmops.sglang.gpu_preflight#filter) does) with the expectations and waivers
    of the role's C(gpu_preflight_*) settings, and returns the host's stamp, the controller's report, the verdict
    and the messages of the role's last tasks.
positional: _input, toolkit, settings, smoke, host
options:
  _input:
    description: The registered result of M(llmops.sglang.gpu_info).
    type: dict
    required: true
  toolkit:
    description: The registered result of M(llmops.sglang.cuda_toolkit_info); null counts as no toolkit.
    type: dict
  settings:
    description: The role's settings by variable name (C(gpu_preflight_gpu_count), ...); absent ones take the defaults.
    type: dict
    required: true
  smoke:
    description: The registered result of the CUDA smoke run; null or a skipped result skips rule V(gpu_smoke).
    type: dict
  host:
    description: The inventory host name, for the report and the failure message.
    type: str
"""

EXAMPLES = r"""
- name: Evaluate every preflight rule
  ansible.builtin.set_fact:
    preflight: "{{ gpu | llmops.sglang.gpu_preflight_report(toolkit, {'gpu_preflight_gpu_count': 8}, none, inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: What the role writes and shows.
  type: dict
  contains:
    result:
      description: The evaluation, as P(llmops.sglang.gpu_preflight#filter) returns it.
      type: dict
    stamp:
      description: The host's machine-readable verdict (passed, failed_rules, waived_rules, gpus, driver_version, cuda_toolkit).
      type: dict
    stamp_dir:
      description: The directory of C(gpu_preflight_stamp_path).
      type: str
    report:
      description: The controller's JSON report (facts and verdicts, no run metadata).
      type: dict
    report_dir:
      description: The host's directory under C(gpu_preflight_report_dir).
      type: str
    stats:
      description: "C({host: verdict}) for C(set_stats), the verdict V(passed) or V(failed) with the failed rules."
      type: dict
    passed_message:
      description: One line with the counts of checks, warnings and waived rules.
      type: str
    failed_message:
      description: The host and the rule table.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._gpu_preflight_rules import PreflightError, role_report


def gpu_preflight_report(gpu_info, toolkit, settings, smoke=None, host=None):
    try:
        return role_report(gpu_info, toolkit, settings, smoke=smoke, host=host)
    except PreflightError as exc:
        raise AnsibleFilterError("llmops.sglang.gpu_preflight_report: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"gpu_preflight_report": gpu_preflight_report}
