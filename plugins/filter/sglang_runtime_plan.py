# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sglang_runtime_plan
short_description: Internal to the sglang_runtime role - its pip plan, checkpoint staging, copy, download and record
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(sglang_runtime) role, not an API - its phases and results may change in any release.
    The role hands over its settings by name (C(_sglang_runtime_setting_names) in its C(vars/main.yml); the hub token is
    not among them) and one phase's inputs; C(plugins/plugin_utils/_sglang_runtime_plan.py) decides.
  - Phase V(pip) (inputs the role's M(llmops.sglang.host_state) result or nothing, the C(pip list) after the install) -
    pip's options and commands, the requirements text, the pins (the collection's pin rule, PEP 440/503) and, with the
    host's state, what differs (C(changes)) and the pins not met (C(pending)).
  - Phase V(checkpoint) (inputs the M(llmops.sglang.checkpoint_info) results before staging and of the gate, the
    checkpoint path's stat as C(dest)) - the chosen source's settings checked (system directories refused), whether to
    stage, whether the role creates the directory, the download command, the quant-config gate, the server's environment.
  - Phase V(copy) (inputs the finds of the checkpoint on the controller and on the host, the two C(rsync --version) runs) -
    which files and directories to copy and how.
  - Phase V(hf_download) (inputs the download job's async_status, the V(checkpoint) phase's result, the sizes found so
    far, the start time and the final wait as C(final)) - the progress line and the failure.
  - Phase V(record) (inputs the V(pip) phase's result, the earlier stamp's slurp, the gate's verification) - the stamp
    and the published C(sglang_runtime_info).
positional: _input, phase
options:
  _input:
    description: The role's settings by variable name, every name of C(_sglang_runtime_setting_names).
    type: dict
    required: true
  phase:
    description: What to decide; the phase's inputs follow it.
    type: str
    required: true
    choices: [pip, checkpoint, copy, hf_download, record]
"""

EXAMPLES = r"""
- name: Check the pins and work out pip's commands
  ansible.builtin.set_fact:
    _sglang_runtime_pip: "{{ _sglang_runtime_settings | llmops.sglang.sglang_runtime_plan('pip') }}"
"""

RETURN = r"""
_value:
  description:
    - Phase V(pip) - C(venv), C(venv_parent), C(venv_argv), C(python), C(requirements_path), C(requirements), C(options),
      C(pins), C(list_argv), C(install_argv), C(installed), C(installed_now), C(pending), C(changes), C(unmet_message),
      C(met_message).
    - Phase V(checkpoint) - C(source), C(path), C(stage), C(create_dir), C(verify_before), C(verified), C(gate),
      C(hf) (the download's command, timeout, interval, retries), C(nfs), C(environment) (the server's).
    - Phase V(copy) - C(method), C(dirs), C(copy_files), C(synchronize_files).
    - Phase V(hf_download) - C(finished), C(ok), C(bytes), C(progress), C(message).
    - Phase V(record) - the record the role publishes as C(sglang_runtime_info) and writes as its stamp.
  type: dict
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils import _sglang_runtime_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

sglang_runtime_plan = role_filter("sglang_runtime_plan", _sglang_runtime_plan)


class FilterModule(object):
    def filters(self):
        return {"sglang_runtime_plan": sglang_runtime_plan}
