#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_binary_info
short_description: List the CUDA cubins and PTX embedded in a wheel, a directory or a shared library
version_added: 0.1.0
description:
  - Runs C(cuobjdump --list-elf) and C(cuobjdump --list-ptx) on every shared library (C(*.so), C(*.so.N)) found in O(path)
    and reports the GPU archs of the embedded cubins (SASS) and PTX, per library and as a union over all of them.
  - For a wheel the shared libraries are extracted one at a time into a temporary folder with Python's zipfile; the wheel is not installed.
  - C(cuobjdump --list-elf) names a family cubin (C(sm_120f)) like a plain one (C(sm_120)). When a plain C(sm_N) cubin with N >= 100
    is listed, the module also reads the fatbin headers from C(cuobjdump --dump-elf-symbols) to report the real arch.
  - PTX is reported under the name cuobjdump gives it, so PTX for the virtual arch C(compute_120a) appears as C(sm_120a) in RV(ptx_archs).
  - A shared library without device code is reported (with C(has_device_code=false)), not treated as an error.
  - With O(require_archs) the module fails unless the union of cubin archs meets every listed arch; the message names the missing arch,
    what was found and how to rebuild (sgl-kernel for SM120 with FP4 needs an C(sm_120a) cubin).
options:
  path:
    description:
      - A wheel (C(.whl)), a directory searched recursively for C(*.so) and C(*.so.N) files (symlinks skipped), or one shared library.
    type: path
    required: true
  require_archs:
    description:
      - Archs that must have a cubin in at least one of the shared libraries, for example C(sm_120a).
      - Written as C(sm_120a), C(120a) (CMAKE_CUDA_ARCHITECTURES style) or C(12.0a) (TORCH_CUDA_ARCH_LIST style).
      - Rule, cubins only. C(sm_N) is met by a cubin for C(sm_N), C(sm_Na) or C(sm_Nf). C(sm_Na) is met by an C(sm_Na) cubin, and also by
        an C(sm_Nf) cubin of the same number when O(accept_family=true). C(sm_Nf) is met only by an C(sm_Nf) cubin.
      - PTX never meets a requirement; it is JIT-compiled when the library loads, and arch-specific PTX only for its exact arch.
    type: list
    elements: str
    default: []
  accept_family:
    description:
      - Let a family cubin (C(sm_120f), CUDA 12.9 or later) meet a requirement for the arch-specific target of the same number (C(sm_120a)).
      - Family code carries the arch-specific features shared by the family, such as the FP4 block-scaled MMA instructions on SM120.
      - A family cubin of another number never counts (C(sm_100f) does not meet C(sm_103a)).
    type: bool
    default: false
  cuobjdump:
    description:
      - Path to the C(cuobjdump) binary, or to the folder holding it.
      - When not set it is searched on E(PATH), in C($CUDA_HOME/bin), in C(/usr/local/cuda/bin), and in the site-packages of the Python
        running the module, where the C(nvidia-cuda-cuobjdump) PyPI package puts it (C(nvidia/cu13/bin/cuobjdump)).
    type: path
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
notes:
  - Reading a large wheel extracts each shared library in turn, so it needs free space in the remote temporary folder for the largest one.
requirements:
  - cuobjdump (CUDA toolkit, or C(pip install nvidia-cuda-cuobjdump)).
author:
  - llmops maintainers (@llmops)
"""

EXAMPLES = r"""
- name: Prove the sgl-kernel wheel carries sm_120a code before installing it
  llmops.sglang.cuda_binary_info:
    path: /opt/build/sgl-kernel/dist/sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl
    require_archs: [sm_120a]

- name: Audit an installed package, accepting sm_120f family code
  llmops.sglang.cuda_binary_info:
    path: /opt/sglang/venv/lib/python3.12/site-packages/sgl_kernel
    require_archs: ['12.0a']
    accept_family: true
    cuobjdump: /opt/sglang/venv/lib/python3.12/site-packages/nvidia/cu13/bin/cuobjdump
  register: kernel_archs

- name: Show which libraries lack device code for SM120
  ansible.builtin.debug:
    msg: "{{ kernel_archs.libraries | rejectattr('elf_archs', 'contains', 'sm_120a') | map(attribute='path') | list }}"
"""

RETURN = r"""
source:
  description: The path inspected (O(path)).
  returned: success
  type: str
  sample: /opt/build/dist/sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl
kind:
  description: What O(path) is.
  returned: success
  type: str
  choices: [wheel, directory, file]
  sample: wheel
sha256:
  description: SHA-256 of the wheel or of the single file; null for a directory.
  returned: success
  type: str
  sample: 3f5d0f4c9f1f0f2a6d7c1f7b0d0f3e8e1f0d9c6b5a4f3e2d1c0b9a8f7e6d5c4b
libraries:
  description: One entry per shared library, in path order.
  returned: success
  type: list
  elements: dict
  contains:
    path:
      description: The member name inside the wheel, the path relative to the directory, or the file name.
      type: str
      sample: sgl_kernel/sm100/common_ops.abi3.so
    sha256:
      description: SHA-256 of the shared library.
      type: str
      sample: 9b2e6b3c0c1d9b7e4f7a1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f
    size:
      description: Size of the shared library in bytes.
      type: int
      sample: 708256
    has_device_code:
      description: Whether the library embeds any CUDA fatbin.
      type: bool
      sample: true
    family_resolved:
      description: Whether the cubin archs were taken from the fatbin headers to tell C(sm_Nf) family cubins from plain C(sm_N) ones.
      type: bool
      sample: false
    cubins:
      description: The cubins as C(cuobjdump --list-elf) names them, each with its arch.
      type: list
      elements: dict
      sample: [{name: libfixture_ops.1.sm_120a.cubin, arch: sm_120a}]
    ptx:
      description: The PTX files as C(cuobjdump --list-ptx) names them, each with its arch.
      type: list
      elements: dict
      sample: [{name: libfixture_ops.1.sm_120a.ptx, arch: sm_120a}]
    elf_archs:
      description: Distinct cubin archs of this library.
      type: list
      elements: str
      sample: [sm_90a, sm_120a]
    ptx_archs:
      description: Distinct PTX archs of this library.
      type: list
      elements: str
      sample: [sm_120a]
elf_archs:
  description: Union of the cubin archs of all libraries, sorted by arch number.
  returned: success
  type: list
  elements: str
  sample: [sm_90a, sm_100a, sm_120a]
ptx_archs:
  description: Union of the PTX archs of all libraries.
  returned: success
  type: list
  elements: str
  sample: [sm_120a]
required_archs:
  description: O(require_archs) normalised to the C(sm_) spelling.
  returned: success
  type: list
  elements: str
  sample: [sm_120a]
missing_archs:
  description: Required archs without a cubin; the module fails when this is not empty, and returns it with the failure.
  returned: always
  type: list
  elements: str
  sample: []
cuobjdump:
  description: The cuobjdump binary used.
  returned: success
  type: str
  sample: /opt/sglang/venv/lib/python3.12/site-packages/nvidia/cu13/bin/cuobjdump
cuobjdump_version:
  description: Its version, from C(cuobjdump --version).
  returned: success
  type: str
  sample: 13.5.37
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._cuda_binary import (
    CudaBinaryError,
    cuobjdump_version,
    default_runner,
    find_cuobjdump,
    inspect_path,
    missing_archs,
    missing_message,
    normalize_arch,
)


def run_module(params, runner, tmp_dir=None):
    """Return (result, failure message or None)."""
    required = []
    for arch in params["require_archs"] or []:
        arch = normalize_arch(arch)
        if arch not in required:
            required.append(arch)
    cuobjdump = find_cuobjdump(params.get("cuobjdump"))
    result = inspect_path(params["path"], cuobjdump, runner, tmp_dir)
    missing = missing_archs(required, result["elf_archs"], params["accept_family"])
    result.update(
        cuobjdump=cuobjdump,
        cuobjdump_version=cuobjdump_version(cuobjdump, runner),
        required_archs=required,
        missing_archs=missing,
    )
    return result, (missing_message(result, missing, params["accept_family"]) if missing else None)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            require_archs=dict(type="list", elements="str", default=[]),
            accept_family=dict(type="bool", default=False),
            cuobjdump=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    try:
        result, failure = run_module(module.params, default_runner, module.tmpdir)
    except CudaBinaryError as exc:
        module.fail_json(msg=str(exc), missing_archs=[])
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
