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
  - What it compares it reads with the arguments the role's writes get (one YAML anchor for both tasks); an account
    with those of M(ansible.builtin.group) and M(ansible.builtin.user) and its home with a
    M(llmops.sglang.host_files) directory entry, packages with those of M(ansible.builtin.apt), directories and files
    with those of M(llmops.sglang.host_files). It accepts only the arguments it compares, so an argument added to a
    write fails the read until it is compared here too, instead of never reaching a host where nothing else differs.
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
      - Service accounts, each as its writes get it; RV(accounts) says per user what they would change.
    type: list
    elements: dict
    default: []
    suboptions:
      group:
        description:
          - The arguments of the M(ansible.builtin.group) task that creates the account's group. Compared C(name)
            (the group exists); C(system) counts only when the group is created, as in that module.
        type: dict
        required: true
        suboptions:
          name:
            description: Group name.
            type: str
            required: true
          system:
            description: A system group (when it is created).
            type: bool
            default: false
          state:
            description: Only V(present).
            type: str
            choices: [present]
            default: present
      user:
        description:
          - The arguments of the M(ansible.builtin.user) task that creates the user, with that module's defaults.
            C(system) counts only when the user is created, as in that module.
        type: dict
        required: true
        suboptions:
          name:
            description: User name.
            type: str
            required: true
          group:
            description: Primary group.
            type: str
          groups:
            description: Supplementary groups.
            type: list
            elements: str
          append:
            description: Only add O(accounts[].user.groups), keep the others.
            type: bool
            default: false
          system:
            description: A system user (when it is created).
            type: bool
            default: false
          shell:
            description: Login shell.
            type: str
          home:
            description: Home directory.
            type: path
          create_home:
            description: Create the home directory when it is missing (also for an existing user).
            type: bool
            default: true
          comment:
            description: The account's comment (GECOS).
            type: str
          state:
            description: Only V(present).
            type: str
            choices: [present]
            default: present
      home:
        description:
          - The home directory's entry of the M(llmops.sglang.host_files) task that fixes its owner and mode (one
            element of its O(directories)); compared by that module's own code.
        type: dict
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
  apt:
    description:
      - The arguments of the M(ansible.builtin.apt) task that installs packages; RV(packages_missing) lists those
        C(dpkg-query) does not show as installed.
    type: dict
    suboptions:
      name:
        description: Debian package names.
        type: list
        elements: str
        required: true
      state:
        description: Only V(present).
        type: str
        choices: [present]
        default: present
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
seealso:
  - module: llmops.sglang.host_files
"""

EXAMPLES = r"""
- name: Read the account as its writes would change it (one module run)
  llmops.sglang.host_state:
    accounts:
      - group: &group
          name: sglang
          system: true
        user: &user
          name: sglang
          group: sglang
          system: true
          shell: /usr/sbin/nologin
          home: /var/lib/sglang
        home: &home
          path: /var/lib/sglang
          owner: sglang
          group: sglang
          mode: "0750"
    apt: &apt
      name: [python3-venv]
    paths: [/opt/sglang/wheelhouse]
    read: [/var/lib/llmops-sglang/runtime.json]
    commands:
      - name: pip_list
        argv: [/opt/sglang/venv/bin/python, -m, pip, list, --format=json]
  register: sglang_state

- name: Write only what differs, with the same arguments
  when: sglang_state.accounts.sglang.drift or sglang_state.packages_missing
  block:
    - name: Create the group
      ansible.builtin.group: *group
    - name: Create the user
      ansible.builtin.user: *user
    - name: Keep the home private
      llmops.sglang.host_files:
        directories: [*home]
    - name: Install the packages
      ansible.builtin.apt: *apt
"""

RETURN = r"""
accounts:
  description: Per user, what differs (V(group), V(user), V(primary_group), V(groups), V(shell), V(home), V(comment),
    V(home_dir)); empty when nothing.
  returned: always
  type: dict
  sample: {"sglang": {"drift": []}}
packages_missing:
  description: The packages of O(apt.name) not installed.
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

from ansible_collections.llmops.sglang.plugins.module_utils._host_files import HostFilesError, argument_spec, entry_spec, secret_safe
from ansible_collections.llmops.sglang.plugins.module_utils._host_state import (
    APT_ARGS, GROUP_ARGS, READ_LIMIT, USER_ARGS, HostStateError, gather)

LIST = {"type": "list", "default": []}


def main():
    module = secret_safe(AnsibleModule)(
        argument_spec=dict(
            argument_spec(),
            accounts=dict(LIST, elements="dict", options={
                "group": {"type": "dict", "required": True, "options": GROUP_ARGS},
                "user": {"type": "dict", "required": True, "options": USER_ARGS},
                "home": {"type": "dict", "options": entry_spec("directory")}}),
            apt={"type": "dict", "options": APT_ARGS},
            paths=dict(LIST, elements="path"),
            read=dict(LIST, elements="path"),
            read_limit={"type": "int", "default": READ_LIMIT},
            commands=dict(LIST, elements="dict", options={
                "name": {"type": "str", "required": True}, "argv": {"type": "list", "elements": "str", "required": True},
                "timeout": {"type": "int", "default": 60}}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = gather(p["accounts"], p["apt"], p["paths"], p["read"], p["commands"], p["directories"], p["files"],
                        p["read_limit"])
    except (HostStateError, HostFilesError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
