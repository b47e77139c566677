# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: runtime_checkpoint
short_description: Whether and how the sglang_runtime role stages its checkpoint
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Checks the checkpoint settings of the chosen source (controller directory, NFS export inside the mount point,
    hub repository and a 40-character revision) and fails naming the setting.
  - Refuses a system directory (C(/), C(/tmp), C(/dev/shm), C(/root), C(/home), C(/etc), C(/usr), C(/var), anything
    under C(/proc) or C(/sys)...) as the checkpoint path of a staged source or as the NFS mount point.
  - Given the registered verification before staging, decides whether to stage, only for the C(controller) and
    C(hf) sources, and only when shards are missing or truncated or a required C(hf_quant_config.json) is absent.
  - When that verification found the checkpoint complete it counts as the gate's (the role asks SGLang in both), so
    the gate does not verify the same files again.
  - Returns the server environment (C(HF_HUB_OFFLINE=1) always wins) and, for C(hf), the download command (the token
    reaches it on stdin, never in argv) and the number of polls up to the timeout.
positional: _input, before, gate, dest
options:
  _input:
    description: The sglang_runtime role's settings, keyed by their variable names (C(sglang_runtime_venv), ...).
    type: dict
    required: true
  before:
    description: The registered M(llmops.sglang.checkpoint_info) result before staging; null leaves RV(_value.stage) null.
    type: dict
  gate:
    description:
      - The registered M(llmops.sglang.checkpoint_info) result of the gate. When the verification that counts
        (RV(_value.verified)) shows no C(hf_quant_config.json) and C(sglang_runtime_checkpoint_require_quant_config) is
        true, the filter fails naming the fix.
    type: dict
  dest:
    description:
      - The registered M(ansible.builtin.stat) of the checkpoint path; sets RV(_value.create_dir). A path that exists and
        is not a directory fails naming it.
    type: dict
"""

EXAMPLES = r"""
- name: Decide whether the checkpoint must be staged
  ansible.builtin.set_fact:
    _sglang_runtime_checkpoint: "{{ _sglang_runtime_settings | llmops.sglang.runtime_checkpoint(_sglang_runtime_before) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    source: {description: The checkpoint source., type: str}
    path: {description: The checkpoint directory., type: str}
    verify_before: {description: Whether to verify before staging (controller and hf sources)., type: bool}
    stage: {description: Whether to copy or download; null without O(before)., type: bool}
    gate: {description: Whether the gate verifies the checkpoint (not when O(before) found it complete)., type: bool}
    create_dir:
      description:
        - Whether staging creates the checkpoint directory (root-owned, 0755), only when O(dest) found nothing there; an
          existing directory keeps its owner and mode. Null without O(dest).
      type: bool
    verified:
      description: The verification that counts, O(gate) when it ran, else a complete O(before), else C({skipped true}).
      type: dict
    environment: {description: "The server environment (C(sglang_runtime_server_environment) and C(HF_HUB_OFFLINE=1)).", type: dict}
    nfs:
      description: The export to mount, C({src, path, fstype, opts}), for source C(nfs); empty otherwise.
      type: list
      elements: dict
    hf:
      description: For source C(hf) only.
      type: dict
      contains:
        argv: {description: The download command (a C(sh) wrapper that reads the token from stdin)., type: list, elements: str}
        what: {description: The download in words (CLI, repository and revision)., type: str}
        label: {description: Repository and short revision for progress lines., type: str}
        check_mode: {description: What check mode reports instead of downloading., type: str}
        timeout: {description: Upper bound in seconds., type: int}
        interval: {description: Seconds between progress lines., type: int}
        retries: {description: Polls up to the timeout., type: int}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_runtime_plan import RuntimeSettingsError, checkpoint_plan


def runtime_checkpoint(settings, before=None, gate=None, dest=None):
    try:
        return checkpoint_plan(settings, before, gate, dest)
    except RuntimeSettingsError as exc:
        raise AnsibleFilterError("llmops.sglang.runtime_checkpoint: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"runtime_checkpoint": runtime_checkpoint}
