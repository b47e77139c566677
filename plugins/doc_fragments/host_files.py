# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # The directory entries of host_files (which creates them) and host_state (which compares them); one spec,
    # _host_files.entry_spec("directory").
    DOCUMENTATION = r"""
options:
  directories:
    description: Directories (with their parents), before any file.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      owner:
        description: Owner.
        type: str
        default: root
      group:
        description: Group.
        type: str
        default: root
      mode:
        description: Mode, as an octal string.
        type: raw
        default: "0755"
"""
