# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: runtime_hf_download
short_description: The state, progress line and failure message of the sglang_runtime role's hub download
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Reads the registered M(ansible.builtin.async_status) results of the download job and returns whether it
    finished and succeeded, a progress line and the failure message (return code or timeout, the CLI's message
    and the last 15 lines of its stderr).
positional: _input, plan, sizes, started, final
options:
  _input:
    description: The registered async_status of the job (the last poll).
    type: dict
    required: true
  plan:
    description: The result of P(llmops.sglang.runtime_checkpoint#filter) for source C(hf).
    type: dict
    required: true
  final:
    description: The registered async_status of the final wait; skipped or null uses O(_input).
    type: dict
  sizes:
    description: The registered C(find -printf '%s\n') under the checkpoint path (bytes so far).
    type: dict
  started:
    description: When the download started (seconds since the epoch); the progress line counts from it to the
      controller's clock.
    type: int
"""

EXAMPLES = r"""
- name: Show the download progress
  ansible.builtin.debug:
    msg: "{{ (job_status | llmops.sglang.runtime_hf_download(plan, sizes, started)).progress }}"
"""

RETURN = r"""
_value:
  description: The download's state.
  type: dict
  contains:
    finished: {description: Whether the job ended., type: bool}
    ok: {description: Whether it ended with return code 0., type: bool}
    progress: {description: A progress line (bytes so far and seconds since the start)., type: str}
    message: {description: The failure message., type: str}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_runtime_plan import RuntimeSettingsError, hf_download


def runtime_hf_download(job, plan, sizes=None, started=None, final=None):
    try:
        return hf_download(job, plan, sizes, started, final)
    except RuntimeSettingsError as exc:
        raise AnsibleFilterError("llmops.sglang.runtime_hf_download: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"runtime_hf_download": runtime_hf_download}
