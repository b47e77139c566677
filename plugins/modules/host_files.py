#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_files
short_description: Compare and install a role's directories and files on the host in one module run
version_added: 0.1.0
description:
  - Creates each missing directory of O(directories) (with its parents) and sets its owner, group and mode.
  - Writes each file of O(files) whose content differs through a temporary file in the same directory, with owner,
    group and mode set and O(files[].validate) run on it before it is renamed over the old file, so a reader never
    sees half a file and a file that fails its validation is never installed. A symlink in place of a file is replaced,
    not followed. A file whose content is right but whose owner, group or mode is not only gets those fixed.
  - One module run for all of them, where a C(file) task takes one per path and a C(copy) or C(template) task two.
    On an unchanged host nothing is written, and RV(paths) says per path what differs, so a role can decide from one
    check-mode run whether anything changes.
  - Comparing reads at most the new content's size of each file.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.host_files
attributes:
  check_mode:
    support: full
    details:
      - Reports per path what would change and writes nothing. An owner or group that does not exist yet counts as a
        change, not an error.
  diff_mode:
    support: full
    details:
      - Shows, for each directory and file that changes, its state, owner, group and mode before and after (a
        directory or file created, replaced or whose owner or mode is fixed), and the old and new text of each file
        whose content changes, except files given as O(files[].secret_content) (their state, owner and mode are
        shown, never their text).
notes:
  - Pass secrets only as O(files[].secret_content).
seealso:
  - module: ansible.builtin.copy
  - module: ansible.builtin.template
"""

EXAMPLES = r"""
- name: Install the unit and its secrets file
  llmops.sglang.host_files:
    directories:
      - path: /etc/sglang
    files:
      - path: /etc/systemd/system/sglang-qwen.service
        content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
        # systemd-analyze takes the unit's name from the file's: it checks a copy under the real name
        validate: >-
          /bin/sh -c 'd=$(mktemp -d) && cp "$1" "$d/sglang-qwen.service" && systemd-analyze verify "$d/sglang-qwen.service";
          rc=$?; rm -rf "$d"; exit $rc' verify %s
      - path: /etc/sglang/sglang-qwen.env
        secret_content: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
        mode: "0600"
  register: unit_files

- name: Compare only (check mode), then act on what differs
  llmops.sglang.host_files:
    files:
      - path: /var/lib/llmops-sglang/stamp.json
        content: "{{ stamp | to_nice_json }}\n"
  check_mode: true
  register: stamp_files
"""

RETURN = r"""
paths:
  description: Per directory and file, whether it changed (or would, in check mode), whether it existed before, and
    what differed (V(missing), V(type), V(content), V(owner), V(mode)).
  returned: always
  type: dict
  sample: {"/etc/sglang": {"changed": false, "existed": true, "differs": []},
           "/etc/systemd/system/sglang-qwen.service": {"changed": true, "existed": true, "differs": ["content"]}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._host_files import HostFilesError, argument_spec, install, secret_safe


def main():
    module = secret_safe(AnsibleModule)(
        argument_spec=argument_spec(),
        supports_check_mode=True,
    )
    try:
        result = install(module.params["directories"], module.params["files"], module.check_mode,
                         module.run_command)
    except HostFilesError as exc:
        module.fail_json(msg=str(exc))
    if not module._diff:
        del result["diff"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
