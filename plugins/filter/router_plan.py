# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: router_plan
short_description: What the router role derives from its settings
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Takes the router role's settings (every C(router_*) variable) and returns the values the role acts on, so its
    tasks and templates only wire them. The one place that decides the router's worker list, command line, pip
    command and the settings the role refuses.
  - Worker URLs are built by the collection's URL rule (M(llmops.sglang.worker_url) filter), IPv6 bracketed; the
    checks on the router host reach it by the M(llmops.sglang.local_url) rule; loopback is
    M(llmops.sglang.is_loopback)'s.
positional: _input, hostvars, hosts, host
options:
  _input:
    description:
      - The role's settings, name to value (the role passes every variable named C(router_*)).
      - Used are the options of the router role's C(meta/argument_specs.yml); other names are ignored.
    type: dict
    required: true
  hostvars:
    description: C(hostvars); for each worker host its C(sglang_server_host), C(sglang_server_port) and C(ansible_host) are read.
    type: raw
    required: true
  hosts:
    description: The hosts of C(router_worker_group).
    type: list
    elements: str
    required: true
  host:
    description: The router host (C(inventory_hostname)); its own server may listen on loopback.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The router's command line
  ansible.builtin.debug:
    msg: "{{ settings | llmops.sglang.router_plan(hostvars, groups[router_worker_group], inventory_hostname) }}"
  vars:
    settings: "{{ dict(q('ansible.builtin.varnames', '^router_') | zip(q('ansible.builtin.vars', *q('ansible.builtin.varnames', '^router_')))) }}"
"""

RETURN = r"""
_value:
  description: The derived values.
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

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._router_plan import PlanError, plan


def router_plan(settings, hostvars, hosts, host):
    try:
        return plan(settings, hostvars, hosts, host)
    except PlanError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"router_plan": router_plan}
