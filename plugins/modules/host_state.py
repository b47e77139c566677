#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_state
short_description: Read in one module run what a role would change on the host
version_added: 0.1.0
description:
  - Reads service accounts, Debian packages, paths, small files and the output of read-only commands, and compares
    directories and files as M(llmops.sglang.host_files) does in check mode. Changes nothing.
  - One module run where a C(getent), C(stat), C(slurp), C(command) and check-mode task take one each, so a role
    can read its whole state first and skip its writes, as one include, when nothing differs.
  - Every read is bounded, files by O(read_limit) bytes, commands in time and output (16 MiB).
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.host_files
attributes:
  check_mode:
    support: full
    details:
      - Reads the same in check mode; it never writes. O(commands) run in check mode too, so give only commands
        that change nothing.
  diff_mode:
    support: none
options:
  accounts:
    description:
      - Service accounts; RV(accounts) says per user what M(ansible.builtin.group), M(ansible.builtin.user) (with
        C(append) and C(create_home)) and the home directory's owner and mode would change.
    type: list
    elements: dict
    default: []
    suboptions:
      user:
        description: User name.
        type: str
        required: true
      group:
        description: Primary group.
        type: str
        required: true
      groups:
        description: Supplementary groups the user must be in (others are kept).
        type: list
        elements: str
        default: []
      home:
        description: Home directory.
        type: path
      shell:
        description: Login shell.
        type: str
      comment:
        description: The account's comment (GECOS).
        type: str
      home_mode:
        description: Mode of the home directory, owned by O(accounts[].user) and O(accounts[].group).
        type: raw
        default: "0750"
  packages:
    description: Debian package names; RV(packages_missing) lists those C(dpkg-query) does not show as installed.
    type: list
    elements: str
    default: []
  paths:
    description: Paths to stat (symlinks followed).
    type: list
    elements: path
    default: []
  read:
    description: Files to read whole, each at most O(read_limit) bytes.
    type: list
    elements: path
    default: []
  read_limit:
    description: Bytes read at most from each file of O(read); a larger file is not read and RV(read) says so.
    type: int
    default: 1048576
  commands:
    description: Commands that change nothing, run without a shell; RV(commands) holds each one's output by name.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Key of its result in RV(commands).
        type: str
        required: true
      argv:
        description: Program and arguments. A program that does not exist gives C(rc) 127 and C(not_found), no failure.
        type: list
        elements: str
        required: true
      timeout:
        description: Seconds it may take; past that it is killed and RV(commands) says C(timed_out).
        type: int
        default: 60
  files:
    description: Files to compare, as M(llmops.sglang.host_files) would write them.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      content:
        description: The text the file should hold.
        type: str
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
        default: "0644"
seealso:
  - module: llmops.sglang.host_files
"""

EXAMPLES = r"""
- name: Read the runtime's state (one module run)
  llmops.sglang.host_state:
    accounts:
      - user: sglang
        group: sglang
        home: /var/lib/sglang
        shell: /usr/sbin/nologin
    packages: [python3-venv]
    paths: [/opt/sglang/wheelhouse]
    read: [/var/lib/llmops-sglang/runtime.json]
    commands:
      - name: pip_list
        argv: [/opt/sglang/venv/bin/python, -m, pip, list, --format=json]
    files:
      - path: /opt/sglang/venv/requirements.txt
        content: "{{ lookup('ansible.builtin.template', 'requirements.txt.j2') }}"
  register: runtime_state

- name: Apply only what differs
  ansible.builtin.include_tasks: apply.yml
  when: runtime_state.packages_missing or runtime_state.files | dict2items | selectattr('value.changed') | list
"""

RETURN = r"""
accounts:
  description: Per user, what differs (V(group), V(user), V(primary_group), V(groups), V(shell), V(home), V(comment),
    V(home_dir)); empty when nothing.
  returned: always
  type: dict
  sample: {"sglang": {"drift": []}}
packages_missing:
  description: The packages of O(packages) not installed.
  returned: always
  type: list
  elements: str
  sample: ["python3-venv"]
stat:
  description: Per path of O(paths), whether it exists and, when it does, C(isdir), C(isreg), C(owner), C(group) and
    C(mode).
  returned: always
  type: dict
  sample: {"/opt/sglang/wheelhouse": {"exists": true, "isdir": true, "isreg": false, "owner": "root", "group": "root",
           "mode": "0755"}}
read:
  description: Per file of O(read), whether it exists, its C(content) (base64, as M(ansible.builtin.slurp) returns
    it; null when missing, unreadable or too large) and C(error) (why it was not read).
  returned: always
  type: dict
  sample: {"/var/lib/llmops-sglang/runtime.json": {"exists": true, "content": "e30K", "error": null}}
commands:
  description: Per command name, C(rc), C(stdout), C(stderr) (its last 4000 characters), C(timed_out) and C(not_found).
  returned: always
  type: dict
  sample: {"pip_list": {"rc": 0, "stdout": "[]", "stderr": "", "timed_out": false, "not_found": false}}
files:
  description: Per directory and file, as M(llmops.sglang.host_files) returns RV(llmops.sglang.host_files#module:paths) in check mode.
  returned: always
  type: dict
  sample: {"/opt/sglang/venv/requirements.txt": {"changed": false, "existed": true, "differs": []}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._host_files import HostFilesError, entry_spec
from ansible_collections.llmops.sglang.plugins.module_utils._host_state import READ_LIMIT, HostStateError, gather

LIST = {"type": "list", "default": []}


def main():
    module = AnsibleModule(
        argument_spec={
            "accounts": dict(LIST, elements="dict", options={
                "user": {"type": "str", "required": True}, "group": {"type": "str", "required": True},
                "groups": {"type": "list", "elements": "str", "default": []}, "home": {"type": "path"},
                "shell": {"type": "str"}, "comment": {"type": "str"}, "home_mode": {"type": "raw", "default": "0750"}}),
            "packages": dict(LIST, elements="str"),
            "paths": dict(LIST, elements="path"),
            "read": dict(LIST, elements="path"),
            "read_limit": {"type": "int", "default": READ_LIMIT},
            "commands": dict(LIST, elements="dict", options={
                "name": {"type": "str", "required": True}, "argv": {"type": "list", "elements": "str", "required": True},
                "timeout": {"type": "int", "default": 60}}),
            "directories": dict(LIST, elements="dict", options=entry_spec("directory")),
            "files": dict(LIST, elements="dict", options=entry_spec("file", content={"type": "str", "required": True})),
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = gather(p["accounts"], p["packages"], p["paths"], p["read"], p["commands"], p["directories"], p["files"],
                        p["read_limit"])
    except (HostStateError, HostFilesError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
