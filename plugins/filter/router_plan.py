# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: router_plan
short_description: Internal to the router role - what it derives from its settings, and the wheels a host lacks
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Internal to the collection's C(router) role, not an API - its phases and results may change in any release.
    The role hands over its settings by name (C(_router_setting_names) in its C(vars/main.yml)) and one phase's
    inputs; C(plugins/plugin_utils/_router_plan.py) decides.
  - Phase V(plan) (inputs C(hostvars) - each worker host's C(sglang_server_host), C(sglang_server_port) and
    C(ansible_host) are read -, the hosts of C(router_worker_group) and the router host, whose own server may listen on
    loopback) - the values the role acts on, so its tasks and templates only wire them. The one place that decides the
    router's worker list, command line, pip command and the settings the role refuses. The role keeps it as the fact
    C(_router_plan).
  - Worker URLs are built by the collection's URL rule (P(llmops.sglang.worker_url#filter)), IPv6 bracketed; the
    checks on the router host reach it by the P(llmops.sglang.local_url#filter) rule; loopback is
    P(llmops.sglang.is_loopback#filter)'s.
  - Phase V(wheels) (inputs the registered finds of the controller's wheelhouse and of the host's) - the wheels the host
    lacks (missing, or of another size) and the directories they go into.
positional: _input, phase
options:
  _input:
    description: The role's settings by variable name, every name of C(_router_setting_names).
    type: dict
    required: true
  phase:
    description: What to decide; the phase's inputs follow it.
    type: str
    required: true
    choices: [plan, wheels]
"""

EXAMPLES = r"""
- name: The router's command line
  ansible.builtin.debug:
    msg: "{{ _router_settings | llmops.sglang.router_plan('plan', hostvars, groups[router_worker_group], inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: Phase V(plan) - the derived values (below); phase V(wheels) - C({files, dirs}), C(files) each C({src, dest}), C(dirs) each C({path}).
  type: dict
  contains:
    dir:
      description: The parent directory of C(router_venv); the launcher lives there.
      type: str
    launcher:
      description: Path of C(launch_router.py), which hands the API key from the environment to the router.
      type: str
    env_file:
      description: The root-only EnvironmentFile with the API key.
      type: str
    unit_path:
      description: The systemd unit file.
      type: str
    verify_command:
      description: The C(validate) command that checks the new unit with C(systemd-analyze verify) under its real name.
      type: str
    worker_urls:
      description: One URL per host of the worker group (its bind address, else C(ansible_host), else its name), then
        C(router_worker_urls_extra), each once.
      type: list
      elements: str
    loopback_workers:
      description: Worker hosts other than this one whose server listens on loopback only.
      type: list
      elements: str
    cli_args:
      description: The router's arguments, without the API key.
      type: list
      elements: str
    check_argv:
      description: The command that checks the arguments with the installed router's parser.
      type: list
      elements: str
    exec_start:
      description: The unit's ExecStart value (shell-quoted words, C(%) and C($) doubled for systemd).
      type: str
    pip_install:
      description: The pip command that installs C(sglang-router==router_version) from the configured source.
      type: list
      elements: str
    wheelhouse_copy:
      description: C({src, dest}) of the wheelhouse copy from the controller; null without C(router_pip_wheelhouse_src).
      type: dict
    local_url:
      description: The router's URL on its own host (a wildcard bind reached on loopback of its family).
      type: str
    metrics_url:
      description: The router's Prometheus URL on its own host.
      type: str
    problems:
      description: Why the role must not go on (bad settings, an unauthenticated network bind, no worker, workers on
        loopback, a key systemd would mangle), each with its fix; empty when it may. Never quotes the key.
      type: list
      elements: str
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils import _router_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import role_filter

router_plan = role_filter("router_plan", _router_plan)


class FilterModule(object):
    def filters(self):
        return {"router_plan": router_plan}
