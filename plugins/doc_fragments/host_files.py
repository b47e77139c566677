# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # The directory and file entries of host_files (which installs them) and host_state (which compares them); one
    # spec, _host_files.argument_spec(), so a role gives both modules the same entries.
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
  files:
    description: Files, each with exactly one of O(files[].content) and O(files[].secret_content).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path. Its directory must exist or be listed in O(directories).
        type: path
        required: true
      content:
        description: The file's text. Render a template with the C(ansible.builtin.template) lookup first.
        type: str
      secret_content:
        description:
          - The file's text when it holds a secret. Never shown in a diff, a result or the module's log.
        type: str
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
        default: "0644"
      validate:
        description:
          - Command run on the new content before it is installed, with C(%s) for the temporary file's path (split
            like a shell would, not run by one). A non-zero exit fails the task and installs nothing. Only
            M(llmops.sglang.host_files) runs it, when it writes the file.
        type: str
"""
