#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: controller_files
short_description: Write report files into a directory on the controller, without a module run
version_added: 0.1.0
description:
  - Creates O(dir) on the controller when missing (mode C(0755)) and writes each entry of O(files) into it. A file
    whose content and mode are already those given is not touched, so a second run reports no change.
  - Each file is written to a temporary file in O(dir) and renamed over the old one, so a reader never sees half a
    report.
  - An action plugin. The controller process writes the files itself, as the user running C(ansible-playbook)
    (C(become) does not apply). No module runs, on the controller or on the host.
  - The result never holds the files' content.
author:
  - llmops maintainers (@llmops)
attributes:
  check_mode:
    support: full
    description: Reports which files would be written and writes nothing.
  diff_mode:
    support: none
    description: No diff is shown; the reports are rewritten whole.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only.
options:
  dir:
    description:
      - Directory on the controller. Created with its parents when missing.
    type: path
    required: true
  files:
    description:
      - File name (no directory part) to text content. Render data with C(to_nice_json) or a template first.
    type: dict
    required: true
  mode:
    description:
      - Mode of every file written, as an octal string.
    type: raw
    default: "0644"
notes:
  - Mask secrets in the content before it reaches this action. The files are written as given.
seealso:
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Save the preflight report on the controller
  llmops.sglang.controller_files:
    dir: "reports/{{ inventory_hostname }}"
    files:
      preflight.json: "{{ report | to_nice_json }}\n"
"""

RETURN = r"""
dir:
  description: The directory, absolute.
  returned: always
  type: str
  sample: /home/ops/reports/gpu01
written:
  description: Files written, or in check mode the files that would be written; empty when nothing changed.
  returned: always
  type: list
  elements: str
  sample: [/home/ops/reports/gpu01/preflight.json]
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"dir": {"type": "path", "required": True}, "files": {"type": "dict", "required": True},
                                          "mode": {"type": "raw", "default": "0644"}}, supports_check_mode=True)
    module.fail_json(msg="llmops.sglang.controller_files runs in its action plugin on the controller; call it as a task, "
                         "not with a module runner")


if __name__ == "__main__":
    main()
