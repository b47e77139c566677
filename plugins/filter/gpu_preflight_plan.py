# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: gpu_preflight_plan
short_description: Internal to the gpu_preflight role - where its smoke test is built, its rules, stamp and report
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(gpu_preflight) role, not an API - its phases and results may change in any release.
    The role hands over its settings by name (C(_gpu_preflight_setting_names) in its C(vars/main.yml)) and one phase's
    inputs; C(plugins/plugin_utils/_gpu_preflight_plan.py) decides.
  - Phase V(smoke) (inputs the M(llmops.sglang.gpu_info) and M(llmops.sglang.cuda_toolkit_info) results and the
    smoke test's CUDA source) - where the CUDA smoke test is built, or null when it does not run (off, nvidia-smi failed,
    no nvcc); the name carries a hash of the source and the GPUs' compute capabilities.
  - Phase V(report) (inputs the same two results, the smoke run's result or null, the host's name) - every preflight
    rule (C(plugins/plugin_utils/_gpu_preflight_rules.py); rule ids are stable and waivers name them) with the role's
    expectations and waivers, the host's stamp, the controller's report, the verdict for C(set_stats) and the messages.
  - Phase V(hold) (inputs the V(report) phase's C(result) and the host's C(ansible_facts) with C(pkg_mgr) and the
    C(packages) of M(ansible.builtin.package_facts)) - the installed driver packages to hold against upgrades and the
    tool (V(dpkg) or V(versionlock)); none when C(gpu_preflight_hold_driver) is off or the driver's rules did not pass.
positional: _input, phase
options:
  _input:
    description: The role's settings by variable name, every name of C(_gpu_preflight_setting_names).
    type: dict
    required: true
  phase:
    description: What to decide; the phase's inputs follow it.
    type: str
    required: true
    choices: [smoke, report, hold]
"""

EXAMPLES = r"""
- name: Evaluate every preflight rule
  ansible.builtin.set_fact:
    _gpu_preflight_run: "{{ _gpu_preflight_settings | llmops.sglang.gpu_preflight_plan('report', gpu, toolkit, None, inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description:
    - Phase V(smoke) - the binary's path, or null.
    - Phase V(hold) - C({tool, packages}); C(tool) null and C(packages) empty when nothing is held.
    - Phase V(report) - C({result, stamp, stamp_dir, report, report_dir, stats, passed_message, failed_message});
      C(result) holds C(passed), C(failed), C(warnings), C(waived), C(checks), C(unused_waivers), C(expectations) and
      C(table).
  type: raw
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils import _gpu_preflight_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

gpu_preflight_plan = role_filter("gpu_preflight_plan", _gpu_preflight_plan)


class FilterModule(object):
    def filters(self):
        return {"gpu_preflight_plan": gpu_preflight_plan}
