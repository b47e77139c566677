# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: gpu_smoke_binary
short_description: Where the gpu_preflight role builds its CUDA smoke test, or null when it does not run
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Null when C(gpu_preflight_smoke_test) is off, nvidia-smi failed or the host has no nvcc.
  - The name carries a hash of the source and the GPUs' compute capabilities, so new GPUs or a new source build a new
    binary (nvcc C(-arch=native) builds for the GPUs present).
positional: _input, toolkit, settings, source
options:
  _input:
    description: The registered result of M(llmops.sglang.gpu_info).
    type: dict
    required: true
  toolkit:
    description: The registered result of M(llmops.sglang.cuda_toolkit_info).
    type: dict
  settings:
    description: The role's settings by variable name (C(gpu_preflight_smoke_test) is read).
    type: dict
    required: true
  source:
    description: The smoke test's CUDA source text.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Decide where the smoke test is built
  ansible.builtin.set_fact:
    smoke_bin: "{{ gpu | llmops.sglang.gpu_smoke_binary(toolkit, {'gpu_preflight_smoke_test': true}, lookup('file', 'gpu_smoke.cu')) }}"
"""

RETURN = r"""
_value:
  description: The binary's path, or null.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._gpu_preflight_rules import PreflightError, smoke_binary


def gpu_smoke_binary(gpu_info, toolkit, settings, source):
    try:
        return smoke_binary(gpu_info, toolkit, settings, source)
    except PreflightError as exc:
        raise AnsibleFilterError("llmops.sglang.gpu_smoke_binary: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"gpu_smoke_binary": gpu_smoke_binary}
