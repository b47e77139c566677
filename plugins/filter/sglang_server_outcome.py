# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sglang_server_outcome
short_description: What the sglang_server role deployed, from its plan and its results
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Builds the role's published C(sglang_server_info), the one-line verdict for C(set_stats) and the closing words
    of a rollback from the plan (P(llmops.sglang.sglang_server_plan#filter)) and the tasks' registered results.
positional: _input, plan
options:
  _input:
    description:
      - The role's results by name (C(_sglang_server_changing), C(_sglang_server_start), C(_sglang_server_node_start),
        C(_sglang_server_args), C(_sglang_server_wait), C(_sglang_server_phases), C(_sglang_server_after),
        C(_sglang_server_security)); null for one that did not run.
    type: dict
    required: true
  plan:
    description: The role's plan.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Publish what was deployed
  ansible.builtin.set_fact:
    sglang_server_info: "{{ (results | llmops.sglang.sglang_server_outcome(plan)).info }}"
"""

RETURN = r"""
_value:
  description: The outcome.
  type: dict
  contains:
    info:
      description:
        - "C(sglang_server_info): unit, unit_file, command, args, health_url, changed, restarted, node_rank, nnodes,
          args_check (sglang_version, valid), ready, ready_after, phases, invocation_id, exec_main_start and security
          (exposure, rating; null when not measured)."
      type: dict
    verdict:
      description: For example V(ready, exposure 3.9) or V(not checked).
      type: str
    rollback:
      description: What the rollback did and when the server was ready again.
      type: str
"""

from ansible_collections.llmops.sglang.plugins.module_utils._sglang_server import outcome


class FilterModule(object):
    def filters(self):
        return {"sglang_server_outcome": outcome}
