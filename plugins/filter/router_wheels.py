# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: router_wheels
short_description: The wheelhouse files a router host lacks, from a find on the controller and one on the host
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Compares two registered C(ansible.builtin.find) results (recursive, files) by relative path and size and returns
    the files to copy (missing on the host, or of another size) and the directories they go into. An unchanged
    wheelhouse copies nothing, so a second run starts no copy at all.
positional: _input, controller_find, host_find
options:
  _input:
    description: The router plan's C(wheelhouse_copy) (C(src) on the controller, C(dest) on the host).
    type: dict
    required: true
  controller_find:
    description: The registered find of C(src) on the controller.
    type: dict
    required: true
  host_find:
    description: The registered find of C(dest) on the host (skipped or empty when the directory is missing).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Work out which wheels to copy
  ansible.builtin.set_fact:
    wheels: "{{ plan.wheelhouse_copy | llmops.sglang.router_wheels(found_controller, found_host) }}"
"""

RETURN = r"""
_value:
  description: C({files, dirs}).
  type: dict
  contains:
    files:
      description: C({src, dest}) per file to copy, in path order.
      type: list
      elements: dict
    dirs:
      description: C({path}) per directory the files go into (an input for P(llmops.sglang.host_files#module)); empty
        when nothing is copied.
      type: list
      elements: dict
"""

from ansible_collections.llmops.sglang.plugins.plugin_utils._router_plan import wheels


class FilterModule(object):
    def filters(self):
        return {"router_wheels": wheels}
