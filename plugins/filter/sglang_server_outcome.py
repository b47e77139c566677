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
  - Builds what the role's tasks publish and print from the plan (P(llmops.sglang.sglang_server_plan#filter)) and
    the tasks' registered results - C(sglang_server_info), the verdict for C(set_stats), the startup phases and the
    readiness progress line, the unit's systemd-analyze security exposure and its verdict, the verdict of a node
    other than node 0, what leaving and joining the routers did, and the closing words of a rollback.
positional: _input, plan
options:
  _input:
    description:
      - The role's results by name, every name of the role's C(_sglang_server_result_names); an empty dict or null
        for one that did not run.
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
    phases:
      description: The startup phases so far (the latest wait's appended, a phase repeated back to back kept once).
      type: list
      elements: dict
    waiting:
      description: The readiness progress line (unit, phase, elapsed seconds, health answer, budget).
      type: str
    exposure:
      description: "C({exposure, rating, message, failure}) from C(systemd-analyze security); failure is null when the
        exposure is accepted. Null when it was not measured."
      type: dict
    node_verdict:
      description: Null when node 0 is ready and this node still runs the invocation it started, else why not.
      type: str
    drained:
      description: Which routers the server left and what the drain of its requests found; null when it left none.
      type: str
    stays_out:
      description: Why the server stays out of its routers (its readiness URL did not answer 200).
      type: str
    rollback:
      description: What the rollback did and when the server was ready again.
      type: str
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_server_plan import outcome


class FilterModule(object):
    def filters(self):
        return {"sglang_server_outcome": outcome}
