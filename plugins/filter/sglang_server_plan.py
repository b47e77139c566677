# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: sglang_server_plan
short_description: Everything the sglang_server role derives from its settings
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Takes the role's settings and the inventory and returns the file names, the launch arguments, the unit's
    C(ExecStart) and C(Environment=) lines, the multi-node layout, the URLs and the verdict on every setting.
    The role's tasks and templates only read the result.
  - Secrets never appear in the result; the API key becomes the literal word C(${SGLANG_API_KEY}), which the
    role's launcher replaces in memory.
positional: _input, host, groups, hostvars, play_batch
options:
  _input:
    description:
      - The settings by their full names, every name of the role's C(_sglang_server_setting_names) (the
        C(sglang_server_*) settings the plan reads and C(sglang_runtime_environment)).
    type: dict
    required: true
  host:
    description: This host's C(inventory_hostname).
    type: str
    required: true
  groups:
    description: The C(groups) magic variable.
    type: dict
    required: true
  hostvars:
    description: The C(hostvars) magic variable (node 0's and the routers' C(ansible_host), C(router_host), C(router_port), C(router_worker_group)).
    type: dict
    required: true
  play_batch:
    description: C(ansible_play_batch); every node of a multi-node model must be in it.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Refuse bad settings
  ansible.builtin.assert:
    that: _sglang_server.problems | length == 0
    fail_msg: "{{ _sglang_server.problems | join(' ') }}"
  vars:
    _sglang_server: >-
      {{ _sglang_server_settings | llmops.sglang.sglang_server_plan(inventory_hostname, groups, hostvars, ansible_play_batch) }}
"""

RETURN = r"""
_value:
  description: The plan.
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
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_server_plan import PlanError, plan


def sglang_server_plan(settings, host, groups, hostvars, play_batch=None):
    try:
        return plan(settings, host, groups, hostvars, play_batch)
    except PlanError as exc:
        raise AnsibleFilterError("llmops.sglang.sglang_server_plan: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"sglang_server_plan": sglang_server_plan}
