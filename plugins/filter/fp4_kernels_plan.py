# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: fp4_kernels_plan
short_description: Internal to the fp4_kernels role - every value it uses, from its settings and its results
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(fp4_kernels) role, not an API - its phases and results may change in any release.
  - Phase V(plan) works out what the role does, so that its tasks only wire values. Inputs are the role's settings by
    name (C(_fp4_kernels_setting_names) in its C(vars/main.yml)), the results the tasks registered so far by name
    (C(_fp4_kernels_result_names); an empty mapping for one not registered yet) and the run (C(_fp4_kernels_run) with
    C(host), C(play_hosts), C(check_mode)); C(plugins/plugin_utils/_fp4_kernels_plan.py) decides.
  - "Decisions: bad settings; the FlashInfer JIT modules the unit's FP4 backends load on SM 12.0; nvcc's verdict; the
    arch list (C(12.0a), plus C(12.0f) from nvcc 12.9); the cache key and whether to build; the build's environment;
    the kernel check's verdict; the stamp; the record; and on each server where the modules go (its flashinfer
    package's C(data/aot)), whether they are copied and what is wrong."
  - Values whose inputs are not registered yet are absent.
positional: _input, phase, results, run
options:
  _input:
    description: The role's settings by variable name, every name of C(_fp4_kernels_setting_names).
    type: dict
    required: true
  phase:
    description: What to decide.
    type: str
    required: true
    choices: [plan]
  results:
    description: The role's results by name, every name of C(_fp4_kernels_result_names).
    type: dict
    required: true
  run:
    description: The run - C(host), C(play_hosts), C(check_mode).
    type: dict
    required: true
"""

EXAMPLES = r"""
# roles/fp4_kernels/vars/main.yml: templated each time it is used, so it follows the results registered since
_fp4_kernels: "{{ _fp4_kernels_settings | llmops.sglang.fp4_kernels_plan('plan', _fp4_kernels_results, _fp4_kernels_run) }}"
"""

RETURN = r"""
_value:
  description: The plan. Keys appear once their inputs are registered.
  type: dict
  contains:
    input_error:
      description: Null, or one message naming every bad setting and the fix.
      type: str
    modules:
      description: The FlashInfer JIT modules built and shipped.
      type: list
      elements: str
    arch_list:
      description: FLASHINFER_CUDA_ARCH_LIST of the build (V(12.0a) or V(12.0a 12.0f)).
      type: str
    key:
      description: sha256 of the cache key inputs (FlashInfer and tvm-ffi versions, CUDA release and nvcc, arch list, modules).
      type: str
    build_needed:
      description: Whether the key differs from the stamp (or a rebuild is forced).
      type: bool
    record:
      description: The build result that becomes the fact C(fp4_kernels_build).
      type: dict
    aot_dir:
      description: On a server, its flashinfer package's C(data/aot), where the modules go.
      type: str
    install:
      description: Whether this server needs the archive unpacked.
      type: bool
    install_error:
      description: Null, or why this server cannot take the modules (no flashinfer, another version, altered archive).
      type: str
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils import _fp4_kernels_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

fp4_kernels_plan = role_filter("fp4_kernels_plan", _fp4_kernels_plan)


class FilterModule(object):
    def filters(self):
        return {"fp4_kernels_plan": fp4_kernels_plan}
