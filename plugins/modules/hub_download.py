#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hub_download
short_description: Download a Hugging Face Hub repository with the hub CLI, stopped when it stalls
version_added: 0.1.0
description:
  - Runs C(CLI download REPO --revision REVISION --local-dir LOCAL_DIR --max-workers N) (the C(hf) CLI of
    C(huggingface_hub)) in a session of its own, the token only in its environment (C(HF_TOKEN)), never in an argv.
  - Every few seconds it measures the bytes of the regular files under O(local_dir), the hub's partial files
    (C(.cache/huggingface/download/*.incomplete)) included. When they have not changed for O(stall_timeout) seconds
    the download is stalled (a hung connection, a proxy that stopped forwarding), so the CLI's whole process group
    is stopped (SIGTERM, SIGKILL after 10 s) and the task fails, naming the cause and the fixes. The CLI resumes from
    the partial files on the next run.
  - Meant to run as an async job (the C(sglang_runtime) role runs it with C(async) and C(poll=0) and reports progress
    while it runs); C(async) bounds the whole download, O(stall_timeout) a download that stopped moving.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
options:
  cli:
    description: The hub CLI (C(hf) in the runtime venv), an absolute path. It may print at most 16 MiB.
    type: path
    required: true
  repo:
    description: The repository, C(owner/name).
    type: str
    required: true
  revision:
    description: The revision to download (a commit hash pins it).
    type: str
    required: true
  local_dir:
    description: The directory the files go to.
    type: path
    required: true
  max_workers:
    description: Files downloaded at once.
    type: int
    default: 8
  token:
    description: The hub token, given to the CLI as C(HF_TOKEN) (unset, the CLI's environment has none).
    type: str
  stall_timeout:
    description:
      - Seconds without any change of the bytes under O(local_dir) after which the download is stopped and the task
        fails. V(0) never stops it.
    type: int
    default: 600
  sample_interval:
    description: Seconds between two measurements of the bytes (shorter when O(stall_timeout) is short).
    type: float
    default: 5
notes:
  - The files are measured with C(os.walk), at most 100000 entries per measurement.
seealso:
  - name: huggingface_hub CLI
    description: The C(hf download) command.
    link: https://huggingface.co/docs/huggingface_hub/guides/cli
"""

EXAMPLES = r"""
- name: Download the checkpoint, stopped after 10 minutes without progress
  llmops.sglang.hub_download:
    cli: /opt/sglang/venv/bin/hf
    repo: nvidia/Qwen3.5-397B-A17B-NVFP4
    revision: 0123456789abcdef0123456789abcdef01234567
    local_dir: /models/Qwen3.5-397B-A17B-NVFP4
    token: "{{ hf_token }}"
    stall_timeout: 600
  async: 86400
  poll: 0
  register: download
  no_log: true
"""

RETURN = r"""
rc:
  description: The CLI's exit status; null when it was stopped for a stall or could not start.
  returned: always
  type: int
  sample: 0
stalled:
  description: Whether the download was stopped because its bytes stopped changing.
  returned: always
  type: bool
  sample: false
idle_s:
  description: Seconds without a change of the bytes when the download was stopped; null otherwise.
  returned: always
  type: int
  sample: null
bytes:
  description: Bytes of the regular files under O(local_dir) at the end.
  returned: always
  type: int
  sample: 246789012345
stdout_lines:
  description: The last 64 KiB of what the CLI printed, as lines.
  returned: always
  type: list
  elements: str
stderr_lines:
  description: The last 64 KiB of what the CLI printed on standard error, as lines.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._hub_download import run_download


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cli=dict(type="path", required=True),
            repo=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            local_dir=dict(type="path", required=True),
            max_workers=dict(type="int", default=8),
            token=dict(type="str", no_log=True),
            stall_timeout=dict(type="int", default=600),
            sample_interval=dict(type="float", default=5),
        ),
        supports_check_mode=False,
    )
    p = module.params
    if not os.path.isabs(p["cli"]):
        module.fail_json(msg="cli must be an absolute path (the hf CLI in the runtime venv), got %r" % p["cli"])
    for name, low in (("max_workers", 1), ("stall_timeout", 0)):
        if p[name] < low:
            module.fail_json(msg="%s must be at least %d, got %d" % (name, low, p[name]))
    if not 0 < p["sample_interval"] <= 3600:
        module.fail_json(msg="sample_interval must be seconds in (0, 3600], got %s" % p["sample_interval"])
    env = dict(os.environ)
    env.pop("HF_TOKEN", None)
    if p["token"]:
        env["HF_TOKEN"] = p["token"]
    argv = [p["cli"], "download", p["repo"], "--revision", p["revision"], "--local-dir", p["local_dir"],
            "--max-workers", str(p["max_workers"])]
    result = run_download(argv, p["local_dir"], env, p["stall_timeout"], p["sample_interval"])
    msg = result.pop("msg")
    if result["rc"] != 0:
        # msg is popped above; pylint reads run_download's literal, which still has it
        module.fail_json(msg=msg, changed=True, cmd=argv, **result)  # pylint: disable=repeated-keyword
    module.exit_json(changed=True, cmd=argv, **result)


if __name__ == "__main__":
    main()
