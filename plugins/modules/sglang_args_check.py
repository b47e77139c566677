#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_args_check
short_description: Check SGLang launch arguments with the installed SGLang's own parser
version_added: 0.1.0
description:
  - Runs the interpreter of an SGLang install with a small script that builds SGLang's real argument parser
    (C(ServerArgs.add_cli_args(argparse.ArgumentParser()))) and parses O(args) with it, without launching
    anything. This catches flag drift between SGLang releases before a service restart does, for example
    SGLang 0.5.23 rejecting C(--mamba-scheduler-strategy extra_buffer) because the option is now
    C(--mamba-radix-cache-strategy).
  - Every bad flag is reported, not only the first one argparse would stop at. Each error names the flag, the
    value, the problem, the valid choices and, where one is known, the new spelling of a renamed flag or value.
  - Values of secret flags (a word of the flag name ends in key, token, secret, password or passwd, such as
    C(--api-key)) are masked in every returned field and never logged.
  - The arguments reach the interpreter on its standard input, not on a command line other users can see.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
attributes:
  check_mode:
    support: full
    details:
      - The check only reads; it runs the same in check mode.
  diff_mode:
    support: none
options:
  python:
    description:
      - The Python interpreter of the SGLang install, for example the C(bin/python) of its virtual environment.
      - A bare name such as C(python3) is looked up on E(PATH).
    type: path
    required: true
  args:
    description:
      - The launch arguments, one list element per shell word, exactly as they follow
        C(python -m sglang.launch_server).
    type: list
    elements: str
    required: true
  fail_on_invalid:
    description:
      - Fail the task when SGLang rejects any argument. When false the findings are only returned.
    type: bool
    default: true
  timeout:
    description:
      - Seconds to wait for the interpreter to import SGLang and parse the arguments.
    type: int
    default: 120
  gpu_capability:
    description:
      - Compute capability of the GPU the server runs on, for example C(12.0).
      - With it, an NVFP4 launch (O(quant_algo) C(NVFP4), or C(--quantization modelopt_fp4)) has its
        C(--fp4-gemm-backend) and C(--moe-runner-backend) checked against the collection's table of where each
        choice's kernels come from in the SGLang release the interpreter imports (SGLang 0.5.16 and 0.5.23 are
        tabled; see C(docs/fp4_sm120.md)). Only SM 12.0 is tabled, other GPUs are not checked.
      - A choice without SM 12.0 kernels, one SGLang refuses for NVFP4, or an untabled release is a problem with
        a fix (RV(fp4)); problems fail the task like a rejected flag when O(fail_on_invalid) is true.
    type: str
  quant_algo:
    description:
      - The checkpoint's quantization algorithm (C(quant_algo) of its C(hf_quant_config.json)), for example
        C(NVFP4). Used with O(gpu_capability).
    type: str
  nvcc:
    description:
      - The release of the nvcc the serving host has (C(release) of M(llmops.sglang.cuda_toolkit_info), for example
        C(12.9)), or V(none) when it has none. Used with O(gpu_capability).
      - With it, the nvcc release each JIT kernel of the launch's FP4 backends needs (the table's C(nvcc>=X)) is
        compared with it; an older or missing nvcc is a problem with a fix (install that toolkit, or build the
        FlashInfer FP4 modules ahead of time). Unset, nvcc is not checked.
    type: str
  fp4_modules_prebuilt:
    description:
      - The FlashInfer FP4 JIT modules the launch loads were built ahead of time into FlashInfer's cache on this
        host, so they need no nvcc here; SGLang's own JIT kernels (marlin) still do. Used with O(nvcc).
    type: bool
    default: false
  cache_dir:
    description:
      - Directory (created private to the user) where a passed check is kept under a digest of everything it
        depends on (the arguments with their secret values masked, the interpreter, the size and modification time
        of the installed SGLang's parser files, found without importing SGLang, and this checker).
      - An unchanged configuration is then not checked again (the check imports torch, seconds to minutes of
        CPU); a new argument, interpreter, SGLang release or checker runs it. A failed check is never kept.
      - Unset, every run checks.
    type: path
notes:
  - Importing SGLang's argument parser needs the runtime's Python dependencies (torch among them) but no GPU.
  - The interpreter must be Python 3.9 or newer.
"""

EXAMPLES = r"""
- name: Refuse to restart the service with flags the installed SGLang rejects
  llmops.sglang.sglang_args_check:
    python: /opt/sglang/venv/bin/python
    args:
      - --model-path
      - /models/Qwen3.5-397B-A17B-NVFP4
      - --tp-size
      - "8"
      - --kv-cache-dtype
      - bf16
      - --api-key
      - "{{ sglang_api_key }}"

- name: Also refuse FP4 backends without SM 12.0 kernels for an NVFP4 checkpoint on an RTX PRO 6000
  llmops.sglang.sglang_args_check:
    python: /opt/sglang/venv/bin/python
    args: "{{ sglang_launch_args }}"
    gpu_capability: "12.0"
    quant_algo: NVFP4
    nvcc: "12.9"

- name: Only report problems
  llmops.sglang.sglang_args_check:
    python: /opt/sglang/venv/bin/python
    args: "{{ sglang_launch_args }}"
    fail_on_invalid: false
  register: sglang_args

- name: Show what is wrong
  ansible.builtin.debug:
    msg: "{{ item.flag }}: {{ item.problem }} ({{ item.hint }})"
  loop: "{{ sglang_args.errors }}"
"""

RETURN = r"""
valid:
  description: Whether SGLang accepts every argument.
  returned: success or when the arguments were checked
  type: bool
  sample: false
errors:
  description: One entry per rejected flag (and one for a missing required option).
  returned: success or when the arguments were checked
  type: list
  elements: dict
  contains:
    flag:
      description: The flag as written (without an inline C(=value)).
      type: str
      sample: --mamba-scheduler-strategy
    value:
      description: The value(s) given to the flag, C(********) for a secret flag, null when none.
      type: str
      sample: extra_buffer
    problem:
      description: What SGLang's parser objects to.
      type: str
      sample: unrecognized argument
    choices:
      description: The values the option accepts, when it has a fixed list; otherwise null.
      type: list
      elements: str
      sample: [auto, fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16]
    hint:
      description: How to fix it (new spelling of a renamed flag, valid values, closest match), or null.
      type: str
      sample: "renamed --mamba-radix-cache-strategy in the server-args refactor after 0.5.10; ...; use: --mamba-radix-cache-strategy extra_buffer"
    kind:
      description: >-
        One of C(unrecognized), C(invalid_choice), C(invalid_value), C(unexpected_value), C(ambiguous),
        C(missing_required), C(exits).
      type: str
      sample: unrecognized
parsed:
  description:
    - The options given explicitly, by SGLang's own destination names, with the values SGLang's parser made of
      them (types converted). Secret values read C(********). Rejected flags are left out.
  returned: success or when the arguments were checked
  type: dict
  sample: {"model_path": "/models/Qwen3.5-397B-A17B-NVFP4", "tp_size": 8, "kv_cache_dtype": "bf16", "api_key": "********"}
deprecated:
  description: Accepted flags that SGLang marks deprecated, with their replacement (each also raises a warning).
  returned: success or when the arguments were checked
  type: list
  elements: dict
  sample: [{"flag": "--disable-cuda-graph", "option": "--disable-cuda-graph", "replacement": "--cuda-graph-backend-{decode,prefill}=disabled"}]
sglang_version:
  description: The version of the SGLang package the interpreter imports.
  returned: success or when the arguments were checked
  type: str
  sample: 0.5.23
python_version:
  description: The version of the interpreter.
  returned: success or when the arguments were checked
  type: str
  sample: 3.12.3
fp4:
  description:
    - The FP4 kernel check run for O(gpu_capability), saying whether the launch is NVFP4, the FlashInfer JIT modules its
      backends load, what the host needs for them, and the problems (the backend choices', and the host's nvcc against
      those needs when O(nvcc) is given), each with C(flag), C(value), C(problem) and C(fix).
  returned: when O(gpu_capability) is set and the arguments were checked
  type: dict
  sample: {"nvfp4": true, "modules": ["fp4_quantization_120f", "fp4_gemm_cutlass_sm120", "fused_moe_120"],
           "needs": ["nvcc>=12.9", "nvcc>=12.8"], "problems": []}
cached:
  description: Whether the result is that of an earlier passed check with the same digest (see O(cache_dir)).
  returned: success or when the arguments were checked
  type: bool
  sample: true
python:
  description: The interpreter that was run.
  returned: always
  type: str
  sample: /opt/sglang/venv/bin/python
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils._fp4_kernels import kernel_plan, nvcc_problems
from ansible_collections.llmops.sglang.plugins.module_utils._sglang_args import (
    SglangArgsError,
    cached_check,
    check_fingerprint,
    format_errors,
    interpret,
    remember_check,
    run_check,
    secret_positions,
    secret_values,
)


def run_module(module):
    python = module.params["python"]
    args = module.params["args"]
    if module.params["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %s" % module.params["timeout"], python=python)
    # secrets known from the flag names alone are masked even if the check cannot run
    module.no_log_values.update(secret_values(args, secret_positions(args)))
    cache_dir = module.params["cache_dir"]
    try:
        fingerprint = check_fingerprint(python, args) if cache_dir else None
        raw = cached_check(cache_dir, fingerprint)
        cached = raw is not None
        if not cached:
            raw = run_check(python, args, timeout=module.params["timeout"])
            if not module.check_mode:
                remember_check(cache_dir, fingerprint, raw)
    except SglangArgsError as exc:
        module.fail_json(msg=str(exc), python=python)
    result, secrets = interpret(raw, args)
    # values of abbreviated or misspelt secret flags, found by the parser
    module.no_log_values.update(secrets)
    for item in result["deprecated"]:
        module.warn("%s is deprecated in SGLang %s%s" % (item["flag"], result["sglang_version"],
                                                         "; use %s" % item["replacement"] if item.get("replacement") else ""))
    fp4_text = ""
    if module.params["gpu_capability"] is not None:
        plan = kernel_plan(result["sglang_version"], module.params["gpu_capability"], args, module.params["quant_algo"])
        nvcc = module.params["nvcc"]
        if plan["rows"] and nvcc is not None:
            plan["problems"] += nvcc_problems(plan, "" if nvcc.strip().lower() == "none" else nvcc.strip(), module.params["fp4_modules_prebuilt"])
        result["fp4"] = {key: plan[key] for key in ("nvfp4", "modules", "needs", "problems")}
        fp4_text = "".join("\n%s; fix: %s" % (p["problem"], p["fix"]) for p in plan["problems"])
    if (not result["valid"] or fp4_text) and module.params["fail_on_invalid"]:
        module.fail_json(msg=(format_errors(result, python) if not result["valid"] else "FP4 kernels:") + fp4_text, python=python,
                         cached=cached, **result)
    if result["valid"]:
        msg = "SGLang %s accepts all %d launch argument(s)" % (result["sglang_version"], len(args))
    else:
        msg = format_errors(result, python)
    module.exit_json(changed=False, msg=msg + fp4_text, python=python, cached=cached, **result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            args=dict(type="list", elements="str", required=True),
            fail_on_invalid=dict(type="bool", default=True),
            timeout=dict(type="int", default=120),
            cache_dir=dict(type="path"),
            gpu_capability=dict(type="str"),
            quant_algo=dict(type="str"),
            nvcc=dict(type="str"),
            fp4_modules_prebuilt=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
        # the invocation log line would carry the arguments, secrets included
        no_log=True,
    )
    run_module(module)


if __name__ == "__main__":
    main()
