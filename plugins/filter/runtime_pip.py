# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: runtime_pip
short_description: The sglang_runtime role's pins, pip command lines and unmet pins
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Checks every pin of C(sglang_runtime_packages) (name, quoted exact version, extras as a list, C(sha256:<hex>)
    hashes, required with C(sglang_runtime_pip_require_hashes)) the package source and the
    wheelhouse directory; fails naming the entry or setting and the fix.
  - Returns the venv's paths, pip's options (a wheelhouse means C(--no-index)), the requirements file and the
    C(pip list)/C(pip install) command lines.
  - Given the role's M(llmops.sglang.host_state) result, checks the wheelhouse, returns what the venv holds, the pins
    it does not meet by the one pin rule of the collection (P(llmops.sglang.unmet_requirements#filter)) and
    RV(_value.changes), what the role must install or write.
positional: _input, state, listed_after
options:
  _input:
    description: The sglang_runtime role's settings, keyed by their variable names (C(sglang_runtime_venv), ...).
    type: dict
    required: true
  state:
    description:
      - The registered M(llmops.sglang.host_state) result of the role. Its C(stat) of C(sglang_runtime_pip_wheelhouse)
        must show a directory for the wheelhouse source; its C(pip_list) command is what the venv holds (a python not
        found means no venv yet); its C(files) compare the venv's parent directory and the requirements file.
      - Null gives the plan only.
    type: dict
  listed_after:
    description: The registered C(pip list) after C(pip install); when it ran it wins over the listing in O(state).
    type: dict
"""

EXAMPLES = r"""
- name: Check the pins and work out the pip commands
  ansible.builtin.set_fact:
    _sglang_runtime_pip: "{{ _sglang_runtime_settings | llmops.sglang.runtime_pip }}"

- name: Compare the pins with what the venv holds (the role's host_state result)
  ansible.builtin.set_fact:
    _sglang_runtime_pip: "{{ _sglang_runtime_settings | llmops.sglang.runtime_pip(_sglang_runtime_state) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    venv: {description: The venv path., type: str}
    venv_parent: {description: Its parent directory., type: str}
    venv_argv: {description: The command that creates the venv., type: list, elements: str}
    python: {description: The venv's interpreter., type: str}
    requirements_path: {description: The requirements file pip installs from., type: str}
    requirements: {description: The requirements file below its managed-by line., type: str}
    options: {description: pip install options for the configured source., type: list, elements: str}
    pins: {description: The pins as pip names (C(name==version), PEP 503 names)., type: list, elements: str}
    list_argv: {description: The C(pip list --format=json) command., type: list, elements: str}
    install_argv: {description: The C(pip install) command., type: list, elements: str}
    installed: {description: What the venv holds (C(pip list) entries)., type: list, elements: dict}
    installed_now: {description: Whether O(listed_after) ran (pip installed something)., type: bool}
    pending: {description: The pins the venv does not meet., type: list, elements: str}
    changes:
      description: With O(state), what differs, one line each (system packages, the venv's parent directory, the
        requirements file, no venv, pins not met); empty when the role writes nothing.
      type: list
      elements: str
    unmet_message: {description: The failure message when pins remain unmet after pip ran., type: str}
    met_message: {description: The success message., type: str}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_runtime_plan import RuntimeSettingsError, pip_plan, pip_state


def runtime_pip(settings, state=None, listed_after=None):
    try:
        return pip_plan(settings) if state is None else pip_state(settings, state, listed_after)
    except RuntimeSettingsError as exc:
        raise AnsibleFilterError("llmops.sglang.runtime_pip: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"runtime_pip": runtime_pip}
