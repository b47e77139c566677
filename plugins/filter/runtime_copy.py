# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: runtime_copy
short_description: Which checkpoint files the sglang_runtime role copies from the controller, and how
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Compares the files on the controller with those on the host by relative path and size and returns those to copy
    (missing, truncated, replaced) in path order, each with a progress label, and the subdirectories to create.
  - Chooses the copy method, C(synchronize) when forced or, with C(auto), when rsync answered on both sides, and the
    copy module otherwise; fails when the controller holds no files or synchronize is forced without rsync.
positional: _input, source_files, host_files, rsync
options:
  _input:
    description: The sglang_runtime role's settings, keyed by their variable names (C(sglang_runtime_venv), ...).
    type: dict
    required: true
  source_files:
    description: The registered M(ansible.builtin.find) of the checkpoint on the controller.
    type: dict
    required: true
  host_files:
    description:
      - The registered M(ansible.builtin.find) of the checkpoint on the host; null lists nothing.
      - Directories it lists (C(file_type=any), C(isdir)) are left out of RV(_value.dirs), so an existing directory keeps
        its owner and mode.
      - Skipped means the directory does not exist yet in check mode, so the lists of files to copy are empty.
    type: dict
  rsync:
    description: The registered C(rsync --version) runs on the controller and on the host, in that order (C(rc) 0 means
      found).
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Work out which files to copy and how
  ansible.builtin.set_fact:
    _sglang_runtime_copy: "{{ _sglang_runtime_settings | llmops.sglang.runtime_copy(src_find, host_find, [rsync_ctl, rsync_host]) }}"
"""

RETURN = r"""
_value:
  description: The copy plan.
  type: dict
  contains:
    method: {description: C(synchronize) or C(copy)., type: str}
    dirs: {description: Subdirectories to create (full paths under the checkpoint path) that O(host_files) did not list., type: list, elements: str}
    synchronize_files: {description: "Files to copy with synchronize, each C({path, size, src, dest, label})", type: list, elements: dict}
    copy_files: {description: Files to copy with the copy module (same form)., type: list, elements: dict}
    staged: {description: "C({method, files, bytes}): what was copied.", type: dict}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_runtime_plan import RuntimeSettingsError, copy_plan


def runtime_copy(settings, source_files, host_files=None, rsync=None):
    try:
        return copy_plan(settings, source_files, host_files, rsync)
    except RuntimeSettingsError as exc:
        raise AnsibleFilterError("llmops.sglang.runtime_copy: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"runtime_copy": runtime_copy}
