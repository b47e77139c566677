# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: gpu_preflight
short_description: Evaluate GPU preflight rules on gpu_info and cuda_toolkit_info results
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Compares the result of M(llmops.sglang.gpu_info) and M(llmops.sglang.cuda_toolkit_info) with what a deployment
    needs and returns every rule's status, the failed and waived rules, topology warnings and a fixed-width
    table for the failure message.
  - "Rules that fail (ids are stable): V(gpu_query) (nvidia-smi failed; its class and fix), V(gpu_count),
    V(compute_capability) (one entry per distinct wrong capability, with the GPU indices; the capability decides,
    never the GPU name), V(driver_branch), V(cuda_driver_version) (the CUDA version the driver supports must be at
    least the installed nvcc's release, or O(expectations.cuda_toolkit_min) without nvcc), V(cuda_toolkit),
    V(toolkit_arch), V(kernel_module), V(mig), V(persistence_mode), V(gpu_memory_free), V(ecc), V(gpu_smoke)."
  - "Rules that warn: V(pcie_acs) (ACS on PCIe ports while the GPUs talk over PCIe only), V(iommu) (an IOMMU
    translating DMA, not C(iommu=pt)), V(numa_split) (GPUs on more than one NUMA node)."
  - When C(nvidia-smi) failed, only V(gpu_query) fails; the rules that need GPU facts are skipped.
positional: _input, toolkit, expectations, waivers
options:
  _input:
    description: The registered result of M(llmops.sglang.gpu_info).
    type: dict
    required: true
  toolkit:
    description: The registered result of M(llmops.sglang.cuda_toolkit_info); null counts as no toolkit.
    type: dict
  expectations:
    description:
      - What the host must offer. Keys left out take their defaults; unknown keys are an error.
      - Values may be strings from templating (V("8"), V("true")); they are converted.
    type: dict
    default: {}
    suboptions:
      gpu_count:
        description: Minimum number of GPUs.
        type: int
        default: 8
      compute_capability:
        description: Compute capability every GPU must have.
        type: str
        default: "12.0"
      driver_min_branch:
        description: Oldest driver branch (major version); CUDA 13 builds need 580.
        type: int
        default: 580
      cuda_toolkit_min:
        description: Oldest nvcc release.
        type: str
        default: "12.8"
      kernel_module:
        description: Kernel module flavour, V(open) or V(proprietary); V(any) or null skips the rule.
        type: str
        default: open
      mig_allowed:
        description: Whether GPUs may run in MIG mode.
        type: bool
        default: false
      persistence_mode:
        description: Require persistence mode on every GPU.
        type: bool
        default: true
      min_free_mib:
        description: Free memory every GPU must have, in MiB; null skips the rule.
        type: int
      require_ecc:
        description: Require ECC on (true) or off (false); null skips the rule.
        type: bool
      toolkit_archs:
        description: Architectures nvcc must compile (looked up in the toolkit result's C(arch_tests)).
        type: list
        elements: str
        default: [sm_120a]
      require_toolkit:
        description: Whether a missing nvcc fails V(cuda_toolkit); when false it is skipped.
        type: bool
        default: true
  waivers:
    description:
      - Failing or warning rules an operator accepts, as a list of C({rule, reason}). The reason is required.
        A waived rule is reported under RV(_value.waived) and does not fail the preflight.
      - An unknown rule name is an error that lists the valid rules.
    type: list
    elements: dict
    default: []
  smoke:
    description:
      - Optional registered result of a CUDA smoke run (a command with C(rc) and C(stdout)); decides rule V(gpu_smoke).
        Null or a skipped result skips the rule.
    type: dict
"""

EXAMPLES = r"""
- name: Gather facts
  llmops.sglang.gpu_info:
  register: gpu

- name: Gather toolkit facts
  llmops.sglang.cuda_toolkit_info:
  register: toolkit

- name: Evaluate the rules for 8x RTX PRO 6000 (SM120)
  ansible.builtin.set_fact:
    preflight: "{{ gpu | llmops.sglang.gpu_preflight(toolkit, {'gpu_count': 8, 'compute_capability': '12.0'}, waivers) }}"
  vars:
    waivers:
      - rule: persistence_mode
        reason: nvidia-persistenced is started by the provisioning image after this check

- name: Fail with the table when a rule fails
  ansible.builtin.fail:
    msg: "{{ preflight.table.splitlines() }}"
  when: not preflight.passed
"""

RETURN = r"""
_value:
  description: The evaluation.
  type: dict
  contains:
    passed:
      description: True when no rule failed (waived rules and warnings do not count).
      type: bool
    failed:
      description: Failed rules, each C({rule, found, required, fix, message}).
      type: list
      elements: dict
    warnings:
      description: Topology warnings, each C({rule, found, required, fix, message}).
      type: list
      elements: dict
    waived:
      description: Waived rules, each C({rule, reason, found, required}).
      type: list
      elements: dict
    checks:
      description: Every rule with its status (V(pass), V(fail), V(warn), V(waived), V(skipped)), found, required, fix, message.
      type: list
      elements: dict
    unused_waivers:
      description: Waived rules that did not fail.
      type: list
      elements: str
    expectations:
      description: The expectations used, defaults filled in.
      type: dict
    table:
      description: A fixed-width table (RULE, STATUS, RESULT, FIX / NOTE) for a failure message.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._gpu_preflight_rules import PreflightError, evaluate


def gpu_preflight(gpu_info, toolkit=None, expectations=None, waivers=None, smoke=None):
    try:
        return evaluate(gpu_info, toolkit, expectations, waivers, smoke=smoke)
    except PreflightError as exc:
        raise AnsibleFilterError("llmops.sglang.gpu_preflight: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"gpu_preflight": gpu_preflight}
