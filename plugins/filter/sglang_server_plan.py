# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sglang_server_plan
short_description: Internal to the sglang_server role - everything it derives from its settings, and its outcome
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(sglang_server) role, not an API - its phases and results may change in any release.
    The role hands over its settings by name (C(_sglang_server_setting_names) in its C(vars/main.yml)) and one phase's
    inputs; C(plugins/plugin_utils/_sglang_server_plan.py) decides.
  - Phase V(plan) (inputs this host's C(inventory_hostname), C(groups), C(hostvars) - node 0's and the routers'
    C(ansible_host), C(router_host), C(router_port), C(router_worker_group) - and C(ansible_play_batch), in which every
    node of a multi-node model must be) - the file names, the launch arguments, the unit's C(ExecStart) and
    C(Environment=) lines, the multi-node layout, the URLs and the verdict on every setting. The role computes it once
    per entry point and keeps it as the fact C(_sglang_server_plan); its tasks and templates only read it.
  - Secrets never appear in the plan; the API key becomes the literal word C(${SGLANG_API_KEY}), which the
    role's launcher replaces in memory.
  - Phase V(outcome) (inputs the role's results by name, every name of C(_sglang_server_result_names), an empty dict or
    null for one that did not run; and the plan) - what the role publishes and prints - C(sglang_server_info), the
    verdict for C(set_stats), the startup phases and the readiness progress line, the unit's systemd-analyze security
    exposure and its verdict, the verdict of a node other than node 0, what leaving and joining the routers did, and the
    closing words of a rollback.
positional: _input, phase
options:
  _input:
    description:
      - The settings by their full names, every name of the role's C(_sglang_server_setting_names) (the
        C(sglang_server_*) settings the plan reads and C(sglang_runtime_environment)).
    type: dict
    required: true
  phase:
    description: What to decide; the phase's inputs follow it.
    type: str
    required: true
    choices: [plan, outcome]
"""

EXAMPLES = r"""
- name: Refuse bad settings
  ansible.builtin.assert:
    that: _sglang_server.problems | length == 0
    fail_msg: "{{ _sglang_server.problems | join(' ') }}"
  vars:
    _sglang_server: >-
      {{ _sglang_server_settings | llmops.sglang.sglang_server_plan('plan', inventory_hostname, groups, hostvars, ansible_play_batch) }}

- name: Publish what was deployed
  ansible.builtin.set_fact:
    sglang_server_info: "{{ (_sglang_server_settings | llmops.sglang.sglang_server_plan('outcome', results, plan)).info }}"
"""

RETURN = r"""
_value:
  description: Phase V(plan) - the plan; phase V(outcome) - the outcome.
  type: dict
  contains:
    plan:
      description: The keys of phase V(plan)'s result (they sit at the top level of the result).
      type: dict
      contains:
        service: {description: The unit's name with C(.service)., type: str}
        unit_file: {description: Where the unit is installed., type: str}
        unit_prev: {description: The previous unit a rollback restores., type: str}
        env_file: {description: The root-only EnvironmentFile holding the secrets., type: str}
        argv_file: {description: The launch record (no secrets)., type: str}
        prev_files: {description: "The files a rollback restores, each C({current, previous, mode, secret}).", type: list, elements: dict}
        launcher: {description: Where the launcher is installed., type: str}
        exec: {description: ExecStart's program (interpreter, launcher, command)., type: list, elements: str}
        argv: {description: The launch arguments (the args check parses exactly these)., type: list, elements: str}
        env: {description: The unit's environment (runtime's, user's, then what the flags require)., type: dict}
        exec_start: {description: The value of C(ExecStart=), one line per flag, quoted for systemd., type: str}
        environment_lines: {description: The C(Environment=) lines., type: list, elements: str}
        record: {description: "The launch record: unit, command, args, environment, names of the secrets.", type: dict}
        nodes: {description: The hosts running the model, node 0 first., type: list, elements: str}
        nnodes: {description: How many., type: int}
        node_rank: {description: This host's rank (-1 when it is not in the group)., type: int}
        node0: {description: Node 0's inventory name., type: str}
        dist_init_addr: {description: Node 0's rendezvous address (IPv6 bracketed)., type: str}
        nodes_group: {description: The inventory group of a multi-node model (null for a single node)., type: str}
        extra_managed: {description: Flags of the extra args that a variable manages (or abbreviations of them)., type: list, elements: str}
        host_is_loopback: {description: Whether the bind address is loopback., type: bool}
        local_url: {description: The server's URL on its own host (a wildcard bind on loopback)., type: str}
        health_url: {description: The readiness URL on its own host., type: str}
        worker_url: {description: Where routers reach this server., type: str}
        router_urls: {description: The routers in front of this server., type: list, elements: str}
        verify_command: {description: The C(validate) command that checks the rendered unit with systemd-analyze., type: str}
        ready_path: {description: The readiness path (C(sglang_server_ready_path))., type: str}
        ready_timeout: {description: The readiness budget in seconds., type: int}
        security_max_exposure: {description: The highest systemd-analyze security exposure accepted (null - any)., type: float}
        problems: {description: Every refused setting, each a message naming the variable and the fix., type: list, elements: str}
    outcome:
      description: The keys of phase V(outcome)'s result (they sit at the top level of the result).
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

from ansible_collections.llmops.sglang.plugins.plugin_utils import _sglang_server_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

sglang_server_plan = role_filter("sglang_server_plan", _sglang_server_plan)


class FilterModule(object):
    def filters(self):
        return {"sglang_server_plan": sglang_server_plan}
