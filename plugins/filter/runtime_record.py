# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: runtime_record
short_description: The record the sglang_runtime role publishes and writes to its host stamp
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Builds the fact C(sglang_runtime_info) (user, venv, pip source and options, pins, installed packages, when pip
    last changed the venv, the verified checkpoint and the server environment).
  - C(installed_at) is O(now) when pip installed something, else the earlier stamp's value.
positional: _input, settings, old_stamp, verified, now
options:
  _input:
    description: The result of P(llmops.sglang.runtime_pip#filter) with the C(pip list) after the install (when it ran, pip
      changed the venv).
    type: dict
    required: true
  settings:
    description: The sglang_runtime role's settings, keyed by their variable names.
    type: dict
    required: true
  old_stamp:
    description: The registered M(ansible.builtin.slurp) of the earlier stamp; skipped, failed or unreadable means none.
    type: dict
  verified:
    description: The registered M(llmops.sglang.checkpoint_info) result of the gate.
    type: dict
  now:
    description: The time to record as C(installed_at) when pip ran (C(%Y-%m-%dT%H:%M:%SZ)); the controller's UTC time
      when left out.
    type: str
"""

EXAMPLES = r"""
- name: Publish the runtime facts
  ansible.builtin.set_fact:
    sglang_runtime_info: "{{ pip | llmops.sglang.runtime_record(settings, old_stamp, verified) }}"
"""

RETURN = r"""
_value:
  description: The record (see the role's documentation for the keys).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_runtime_plan import RuntimeSettingsError
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_runtime_plan import runtime_record as record


def runtime_record(pip, settings, old_stamp=None, verified=None, now=None):
    try:
        return record(pip, settings, old_stamp, verified, now)
    except RuntimeSettingsError as exc:
        raise AnsibleFilterError("llmops.sglang.runtime_record: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"runtime_record": runtime_record}
