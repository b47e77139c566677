#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_toolkit_info
short_description: Find nvcc, report its release and architectures, and check that it compiles given SM targets
version_added: 0.1.0
description:
  - Finds C(nvcc) (O(nvcc), else E(PATH), else C(/usr/local/cuda/bin)) and reports its release (V(13.0)) and
    full version (V(13.0.88)) from C(nvcc --version).
  - Lists the virtual architectures of C(nvcc --list-gpu-arch) (C(compute_XX)) and the real ones of
    C(nvcc --list-gpu-code) (C(sm_XX)). Arch-specific targets such as C(sm_120a) are not listed by nvcc, so each
    arch in O(archs) is checked by compiling a one-line kernel with C(-gencode arch=compute_120a,code=sm_120a)
    in a temporary directory.
  - Compile results are cached in O(cache_dir), keyed by the path, version and modification time of the
    compiler. A result caused by a missing host compiler or a timeout is not cached.
  - A missing toolkit is reported as RV(installed=false), not as a failure.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
options:
  nvcc:
    description:
      - Path of C(nvcc). When not set, E(PATH) is searched, then C(/usr/local/cuda/bin).
    type: path
  archs:
    description:
      - Real architectures to test-compile, of the form C(sm_<digits>[a|f]), for example V(sm_120a) or V(sm_90a).
    type: list
    elements: str
    default: [sm_120a]
  cache_dir:
    description:
      - Directory of the compile-result cache. It is created when missing. Not written in check mode.
    type: path
    default: /var/cache/llmops-sglang
  timeout:
    description:
      - Seconds each nvcc call may take.
    type: int
    default: 120
notes:
  - In check mode the test compile still runs (in a temporary directory that is removed; nothing on the host
    changes), but the cache file is not written.
  - nvcc needs a host compiler (gcc) even to build device code; without one an arch's entry in RV(arch_tests)
    has C(error_class) V(host_compiler).
seealso:
  - module: llmops.sglang.gpu_info
  - plugin: llmops.sglang.gpu_preflight
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Gather CUDA toolkit facts
  llmops.sglang.cuda_toolkit_info:
  register: toolkit

- name: Require an nvcc that builds sm_120a
  ansible.builtin.assert:
    that:
      - toolkit.installed
      - toolkit.arch_tests.sm_120a.compiles
    fail_msg: "nvcc {{ toolkit.release | default('missing') }} cannot build sm_120a"

- name: Check a specific toolkit for Hopper and Blackwell targets
  llmops.sglang.cuda_toolkit_info:
    nvcc: /usr/local/cuda-13.0/bin/nvcc
    archs: [sm_90a, sm_100a, sm_120a]
"""

RETURN = r"""
installed:
  description: Whether a working nvcc was found.
  returned: always
  type: bool
  sample: true
nvcc:
  description: The nvcc used; null when none was found.
  returned: always
  type: str
  sample: /usr/local/cuda/bin/nvcc
nvcc_realpath:
  description: RV(nvcc) with symbolic links resolved.
  returned: always
  type: str
  sample: /usr/local/cuda-13.0/bin/nvcc
release:
  description: CUDA release, C(major.minor).
  returned: always
  type: str
  sample: "13.0"
version:
  description: Full nvcc version.
  returned: always
  type: str
  sample: 13.0.88
build:
  description: nvcc build tag.
  returned: always
  type: str
  sample: cuda_13.0.r13.0/compiler.36424714_0
gpu_archs:
  description: Virtual architectures from C(nvcc --list-gpu-arch).
  returned: always
  type: list
  elements: str
  sample: [compute_75, compute_80, compute_90, compute_100, compute_120]
gpu_codes:
  description: Real architectures from C(nvcc --list-gpu-code).
  returned: always
  type: list
  elements: str
  sample: [sm_75, sm_80, sm_90, sm_100, sm_120]
arch_tests:
  description: Per arch of O(archs), the test-compile result.
  returned: always
  type: dict
  sample:
    sm_120a:
      compiles: true
      error_class: null
      error: null
      command: nvcc -cubin -gencode arch=compute_120a,code=sm_120a probe.cu
      from_cache: false
  contains:
    compiles:
      description: Whether the kernel compiled.
      type: bool
    error_class:
      description: V(unsupported_arch), V(host_compiler), V(compile_error) or V(timeout); null on success.
      type: str
    error:
      description: The last lines of nvcc's output on failure.
      type: str
    command:
      description: The compile command (temporary paths left out).
      type: str
    from_cache:
      description: Whether the result came from the cache.
      type: bool
archs_ok:
  description: Whether every arch in O(archs) compiled; null when O(archs) is empty.
  returned: always
  type: bool
  sample: true
cache_file:
  description: The cache file for this compiler.
  returned: always
  type: str
  sample: /var/cache/llmops-sglang/nvcc-arch-3f0c9a1b2c3d4e5f.json
cache_written:
  description: Whether this run wrote the cache file.
  returned: always
  type: bool
problems:
  description: Problems that did not stop the module (nvcc missing, nvcc --version failing, cache not writable).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._cuda_toolkit import collect, validate_arch


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvcc=dict(type="path"),
            archs=dict(type="list", elements="str", default=["sm_120a"]),
            cache_dir=dict(type="path", default="/var/cache/llmops-sglang"),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for arch in params["archs"]:
        try:
            validate_arch(arch)
        except ValueError as exc:
            module.fail_json(msg="archs: %s" % exc)
    if params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % params["timeout"])
    result = collect(
        nvcc=params["nvcc"],
        archs=params["archs"],
        cache_dir=params["cache_dir"],
        check_mode=module.check_mode,
        timeout=params["timeout"],
    )
    if result["installed"]:
        # a missing toolkit is a normal answer; problems with a present one deserve a warning
        for problem in result["problems"]:
            module.warn(problem)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
