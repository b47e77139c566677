# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: host_report
short_description: What an SGLang host runs once its turn in site.yml is over
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - From the server role's launch record and the unit's state, both read in one M(llmops.sglang.host_state) run, says
    what the host runs now, for the run's report and AWX (C(set_stats)).
  - "The outcome: V(rolled back), V(failed) (the server role failed or the KV guard did not pass), V(deployed) (the
    server changed) or V(unchanged)."
positional: _input, state
options:
  _input:
    description:
      - The registered result of M(llmops.sglang.host_state) that read the launch record (C(sglang_server_argv_file),
        its only O(llmops.sglang.host_state#module:read) entry) and ran C(systemctl show --property=ActiveState --value)
        for the server's unit as the command named C(unit).
    type: dict
    required: true
  state:
    description: What the roles concluded.
    type: dict
    default: {}
    suboptions:
      rolled_back:
        description: The service was rolled back to its previous unit.
        type: bool
        default: false
      failed:
        description: The server role failed.
        type: bool
        default: false
      guard_passed:
        description: The KV guard passed (true when it did not run).
        type: bool
        default: true
      changed:
        description: The server role changed the service.
        type: bool
        default: false
"""

EXAMPLES = r"""
- name: Note what this host runs
  ansible.builtin.set_fact:
    report: "{{ report_read | llmops.sglang.host_report({'guard_passed': audit_guard.passed | default(true)}) }}"
"""

RETURN = r"""
_value:
  description: The host's report.
  type: dict
  contains:
    outcome:
      description: V(rolled back), V(failed), V(deployed) or V(unchanged).
      type: str
    state:
      description: The unit's ActiveState (V(unknown) when it could not be read).
      type: str
    config:
      description: The first 10 hex digits of the SHA-1 of the launch arguments (as JSON); V(none) without a record.
        Hosts on one configuration show one value.
      type: str
    kv_cache_dtype:
      description: The C(--kv-cache-dtype) of the launch arguments, V(n/a) without one.
      type: str
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils._site_report import host_report


class FilterModule(object):
    def filters(self):
        return {"host_report": host_report}
