# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: unmet_requirements
short_description: The requirements a Python environment does not meet yet, by pip's rules
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Compares requirements with the installed packages the way pip does (PEP 440, PEP 503) and returns those not
    met, in their given form. Names compare case-insensitively with runs of C(-_.) as one C(-). A pin without a
    local label (V(torch==2.11.0)) is met by V(2.11.0+cu130); a pin with one only by exactly that version.
    Ranges (V(cmake>=3.31)) and bare names are checked too.
  - The one pin rule of the collection. The runtime and kernel roles install only what this returns.
positional: _input, installed
options:
  _input:
    description: Requirement strings (V(torch==2.11.0)) or C({name, version}) pins (no version means any).
    type: list
    elements: raw
    required: true
  installed:
    description: "C(pip list --format=json) (a list of C({name, version})) or a mapping of name to version where
      V(null) means not installed."
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Pins the venv does not meet
  ansible.builtin.debug:
    msg: "{{ sglang_runtime_packages | llmops.sglang.unmet_requirements(_sglang_runtime_pip_list) }}"
"""

RETURN = r"""
_value:
  description: The requirements not met, in their given form.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._pins import PinError, unmet


def unmet_requirements(requirements, installed):
    try:
        return unmet(requirements, installed)
    except PinError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"unmet_requirements": unmet_requirements}
