# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sgl_kernel_plan
short_description: Internal to the sgl_kernel role - every value it uses, from its settings and its results
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(sgl_kernel) role, not an API - its phases and results may change in any release.
  - Phase V(plan) works out what the role does, so that its tasks only wire values. Inputs are the role's settings by
    name (C(_sgl_kernel_setting_names) in its C(vars/main.yml)), the results the tasks registered so far by name
    (C(_sgl_kernel_result_names); null for one not registered yet) and the run (C(_sgl_kernel_run) with C(host),
    C(play_hosts), C(check_mode), C(tags) and C(probe_source)); C(plugins/plugin_utils/_sgl_kernel_plan.py) decides.
  - "Decisions: bad settings (RV(_value.input_error)); the archs to build (C(120a) becomes the family target C(120f)
    when C(sgl_kernel_prefer_family) asks for it and nvcc is 12.9 or newer); nvcc's verdict; the pip source (a wheelhouse wins over an
    index); the cuobjdump that verifies the wheel (the explicit one, the toolkit's, else the build venv's
    C(nvidia-cuda-cuobjdump), which is then added to the requirements); the requirements the build venv does not meet
    (the collection's pin rule, R(llmops.sglang.unmet_requirements,ansible_collections.llmops.sglang.unmet_requirements_filter));
    the cache key and whether to build; jobs and nvcc threads bounded by memory; CMake defines and the build
    environment; the stamp; the controller's copies; and on each installing host whether the wheel is copied and
    installed, and what is wrong."
  - Values whose inputs are not registered yet are absent.
positional: _input, phase, results, run
options:
  _input:
    description: The role's settings by variable name, every name of C(_sgl_kernel_setting_names).
    type: dict
    required: true
  phase:
    description: What to decide.
    type: str
    required: true
    choices: [plan]
  results:
    description: The role's results by name, every name of C(_sgl_kernel_result_names).
    type: dict
    required: true
  run:
    description: The run - C(host), C(play_hosts), C(check_mode), C(tags), C(probe_source).
    type: dict
    required: true
"""

EXAMPLES = r"""
# roles/sgl_kernel/vars/main.yml: templated each time it is used, so it follows the results registered since
_sgl_kernel: "{{ _sgl_kernel_settings | llmops.sglang.sgl_kernel_plan('plan', _sgl_kernel_results, _sgl_kernel_run) }}"
"""

RETURN = r"""
_value:
  description: The plan. Keys appear once their inputs are registered.
  type: dict
  contains:
    input_error:
      description: Null, or one message naming every bad setting and the form to write.
      type: str
    archs:
      description: The archs built, CMake spelling (V(120f)); also in RV(_value.key_inputs).
      type: list
      elements: str
    toolkit_error:
      description: Null when nvcc is installed, new enough and compiles C(sgl_kernel_require_archs); else the message.
      type: str
    requirements_missing:
      description: Build requirements the build venv does not meet (pip's rules).
      type: list
      elements: str
    cuobjdump:
      description: The cuobjdump that verifies the wheel (null = the module's own search).
      type: str
    key:
      description: sha256 of RV(_value.key_inputs) (source commit, subdir, archs, CUDA release, torch, build options).
      type: str
    key_inputs:
      description: The inputs of the cache key, as the stamp records them.
      type: dict
    build_needed:
      description: Whether the key or the wheel differs from the stamp (or a rebuild is forced).
      type: bool
    jobs:
      description: Parallel compile jobs, min(cores, available RAM / C(sgl_kernel_build_job_mem_gib)) unless set.
      type: int
    threads:
      description: nvcc threads per job.
      type: int
    cmake_defines:
      description: Every CMake define of the build.
      type: dict
    build_environment:
      description: The build's environment.
      type: dict
    new_stamp:
      description: The stamp of a wheel just built and verified.
      type: dict
    record:
      description: The build result that becomes the fact C(sgl_kernel_build).
      type: dict
    install:
      description: Whether this host's runtime venv needs the wheel.
      type: bool
    install_error:
      description: Null, or why this host cannot take the wheel (no venv, altered wheel, other torch).
      type: str
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils import _sgl_kernel_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

sgl_kernel_plan = role_filter("sgl_kernel_plan", _sgl_kernel_plan)


class FilterModule(object):
    def filters(self):
        return {"sgl_kernel_plan": sgl_kernel_plan}
