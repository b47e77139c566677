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
  - Reads the CUDA fatbins of every shared library (C(*.so), C(*.so.N)) found in O(path) and reports the GPU archs of the embedded
    cubins (SASS) and PTX, per library as a count per arch and kind, and as the union over all libraries.
  - By default (O(reader=fatbin)) the fatbin entry headers of the ELF section C(.nv_fatbin) are read in Python through a read-only memory map,
    headers only, so a 500 MB library takes about as long as hashing it and cuobjdump is not needed. With O(reader=cuobjdump) the module runs
    C(cuobjdump --list-elf) and C(--list-ptx) instead; both readers give the same answer.
  - For a wheel the shared libraries are extracted one at a time into a temporary folder with Python's zipfile; the wheel is not installed.
  - Arch-specific (C(sm_120a)) and family (C(sm_120f)) code is told from plain C(sm_120) code by the flags of each fatbin entry.
    C(cuobjdump --list-elf) names a family cubin like a plain one, so with O(reader=cuobjdump), when a plain C(sm_N) cubin with
    N >= 100 is listed, the module also reads the fatbin headers from C(cuobjdump --dump-elf-symbols) to report the real arch.
  - PTX is reported under the name cuobjdump gives it, so PTX for the virtual arch C(compute_120a) appears as C(sm_120a) in RV(ptx_archs).
  - A shared library without device code is reported (with C(has_device_code=false)), not treated as an error.
  - With O(require_archs) the module fails unless the union of cubin archs meets every listed arch; the message names the missing arch,
    what was found and how to rebuild (sgl-kernel for SM120 with FP4 needs an C(sm_120a) cubin).
  - With O(require_kernels) it also fails unless, for every required arch, some kernel whose name matches each pattern has a cubin that
    meets that arch; an C(sm_120a) cubin proves nothing about FP4 when no FP4 kernel is in it. Only the cubins that meet a required arch
    are read for their symbols (the kernel entry symbols of each cubin's ELF symbol table, with their code sizes); the summary path
    stays header-only.
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
  require_kernels:
    description:
      - Patterns (Python regular expressions, searched, case-sensitive) that kernels must match, each for every arch of O(require_archs),
        which must then be set. A pattern is met for an arch when a kernel of a cubin that meets that arch (the O(require_archs) rule,
        O(accept_family) included) matches it.
      - A kernel's name is matched as mangled (V(_ZN7fixture4gemm15fp4_gemm_kernelIN7cutlass12float_e2m1_tEEEvPKT_PKfPfi)) and as its
        identifiers (the Itanium C(<length><identifier>) source names) joined by C(::)
        (V(fixture::gemm::fp4_gemm_kernel::cutlass::float_e2m1_t)), so V(fp4|e2m1), V(cutlass::gemm) or V(^silu_and_mul$) work. This is
        not a full demangling; a name that the mangling repeats through a substitution appears only where it first occurs.
      - Compressed cubins are unpacked to read their symbols, LZ4 ones in Python and zstd ones (nvcc's default) by the C(zstd) program,
        which must then be installed on the host (C(apt install zstd)); with O(reader=cuobjdump) the symbols come from
        C(cuobjdump --dump-elf-symbols) instead, without code sizes.
    type: list
    elements: str
    default: []
  reader:
    description:
      - How the device code is read. C(fatbin) reads the fatbin entry headers in Python (fast, no cuobjdump needed);
        C(cuobjdump) runs cuobjdump (slow on large libraries, for a second opinion or a fatbin layout the Python reader refuses).
    type: str
    choices: [fatbin, cuobjdump]
    default: fatbin
  list_cubins:
    description:
      - Also return every cubin and PTX file of each library (RV(libraries[].cubins), RV(libraries[].ptx)); a large library has thousands.
    type: bool
    default: false
  cuobjdump:
    description:
      - Path to the C(cuobjdump) binary, or to the folder holding it; used with O(reader=cuobjdump) only.
      - When not set it is searched on E(PATH), in C($CUDA_HOME/bin), in C(/usr/local/cuda/bin), and in the site-packages of the Python
        running the module, where the C(nvidia-cuda-cuobjdump) PyPI package puts it (C(nvidia/cu13/bin/cuobjdump)).
    type: path
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
notes:
  - Reading a large wheel extracts each shared library in turn, so it needs free space in the remote temporary folder for the largest one.
requirements:
  - cuobjdump (CUDA toolkit, or C(pip install nvidia-cuda-cuobjdump)) for O(reader=cuobjdump) only.
  - The C(zstd) program for O(require_kernels) with O(reader=fatbin) when a cubin to read is zstd-compressed.
author:
  - llmops maintainers (@llmops)
"""

EXAMPLES = r"""
- name: Prove the sgl-kernel wheel carries sm_120a code before installing it
  llmops.sglang.cuda_binary_info:
    path: /opt/build/sgl-kernel/dist/sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl
    require_archs: [sm_120a]

- name: Prove the FP4 kernels themselves have sm_120a code, not only that some cubin does
  llmops.sglang.cuda_binary_info:
    path: /opt/build/sgl-kernel/dist/sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl
    require_archs: [sm_120a]
    require_kernels: ['fp4|e2m1']

- name: Audit an installed package, accepting sm_120f family code
  llmops.sglang.cuda_binary_info:
    path: /opt/sglang/venv/lib/python3.12/site-packages/sgl_kernel
    require_archs: ['12.0a']
    accept_family: true
  register: kernel_archs

- name: List every cubin of one library, read by cuobjdump
  llmops.sglang.cuda_binary_info:
    path: /opt/sglang/venv/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so
    reader: cuobjdump
    list_cubins: true
    cuobjdump: /opt/sglang/venv/lib/python3.12/site-packages/nvidia/cu13/bin/cuobjdump

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
    kernels:
      description:
        - With O(require_kernels), what was read in this library, C(cubins) and C(kernels) (counts of the cubins that meet a required
          arch and of their kernels), and C(matches), the rows of RV(kernel_matches) for this library alone.
      returned: when O(require_kernels) is set
      type: dict
      sample: {cubins: 2, kernels: 2, matches: []}
    family_resolved:
      description:
        - Whether the cubin archs tell C(sm_Nf) family cubins from plain C(sm_N) ones. Always true with O(reader=fatbin) for a library with
          device code; with O(reader=cuobjdump) true when the C(--dump-elf-symbols) headers were read.
      type: bool
      sample: true
    archs:
      description: How many cubins (C(kind=elf)) and PTX files (C(kind=ptx)) the library holds per arch, cubins first, then by arch number.
      type: list
      elements: dict
      contains:
        kind:
          description: C(elf) for a cubin, C(ptx) for PTX; a fatbin entry of another kind is counted as C(kind_N).
          type: str
          sample: elf
        arch:
          description: The arch, with its C(a) (arch-specific) or C(f) (family) suffix.
          type: str
          sample: sm_120f
        count:
          description: How many entries of that kind and arch.
          type: int
          sample: 1133
        arch_specific:
          description: Whether the code is arch-specific (C(sm_120a)); it loads only on that exact compute capability.
          type: bool
          sample: false
        family:
          description: Whether the code is family code (C(sm_120f)); it loads on every member of the family.
          type: bool
          sample: true
      sample: [{kind: elf, arch: sm_90a, count: 2, arch_specific: true, family: false},
               {kind: elf, arch: sm_120f, count: 2, arch_specific: false, family: true},
               {kind: ptx, arch: sm_120a, count: 2, arch_specific: true, family: false}]
    cubins:
      description:
        - The cubins, each with the C(name) cuobjdump's C(--list-elf) gives it (which drops the C(f) of a family arch) and its real C(arch).
        - With O(reader=fatbin) also C(index) (cuobjdump's number), C(offset) (of its fatbin entry header in the file), C(size) (of the code)
          and C(compressed).
      returned: when O(list_cubins=true)
      type: list
      elements: dict
      sample: [{name: libfixture_ops.2.sm_120.cubin, arch: sm_120f, index: 2, offset: 588280, size: 5792, compressed: false}]
    ptx:
      description: The PTX files, with the same fields as RV(libraries[].cubins) and the names of C(cuobjdump --list-ptx).
      returned: when O(list_cubins=true)
      type: list
      elements: dict
      sample: [{name: libfixture_ops.1.sm_120a.ptx, arch: sm_120a, index: 1, offset: 594184, size: 384, compressed: true}]
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
required_kernels:
  description: O(require_kernels) as given.
  returned: success
  type: list
  elements: str
  sample: ['fp4|e2m1']
kernel_matches:
  description:
    - One entry per pattern of O(require_kernels) and arch of O(require_archs), over all libraries; empty without O(require_kernels).
  returned: always
  type: list
  elements: dict
  contains:
    pattern:
      description: The pattern.
      type: str
      sample: fp4|e2m1
    arch:
      description: The required arch.
      type: str
      sample: sm_120a
    count:
      description: How many kernels of cubins that meet the arch match the pattern (a kernel in two such cubins counts twice).
      type: int
      sample: 1
    code_bytes:
      description: The code size (C(st_size)) of those kernels added up; 0 with O(reader=cuobjdump).
      type: int
      sample: 9216
    smallest:
      description: The smallest of those code sizes, so that a trap-only stub (a few hundred bytes) shows; null when none matched or with
        O(reader=cuobjdump).
      type: int
      sample: 9216
    cubins_searched:
      description: How many cubins that meet the arch were read.
      type: int
      sample: 35
    kernels_searched:
      description: How many kernels they hold.
      type: int
      sample: 1012
    kernels:
      description: The first five matching kernels, each with C(name) (mangled), C(readable) (its identifiers joined by C(::)),
        C(size) (code bytes; null with O(reader=cuobjdump)), C(arch) and C(cubin) (the cubin's name as cuobjdump lists it), C(library).
      type: list
      elements: dict
      sample: [{name: _ZN7fixture4gemm15fp4_gemm_kernelIN7cutlass12float_e2m1_tEEEvPKT_PKfPfi,
                readable: "fixture::gemm::fp4_gemm_kernel::cutlass::float_e2m1_t", size: 9216, arch: sm_120a,
                cubin: libkernel_names.2.sm_120a.cubin, library: libkernel_names.so}]
missing_kernels:
  description: The (pattern, arch) pairs of RV(kernel_matches) without a match; the module fails when this is not empty.
  returned: always
  type: list
  elements: dict
  sample: [{pattern: fp4|e2m1, arch: sm_120a}]
reader:
  description: The reader used (O(reader)).
  returned: success
  type: str
  sample: fatbin
cuobjdump:
  description: The cuobjdump binary used; null with O(reader=fatbin).
  returned: success
  type: str
  sample: /opt/sglang/venv/lib/python3.12/site-packages/nvidia/cu13/bin/cuobjdump
cuobjdump_version:
  description: Its version, from C(cuobjdump --version); null with O(reader=fatbin).
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
    kernel_patterns,
    kernel_reader,
    kernel_report,
    library_reader,
    missing_archs,
    missing_kernels_message,
    missing_message,
    normalize_arch,
    scan_kernels,
)


def run_module(params, runner, tmp_dir=None):
    """Return (result, failure message or None)."""
    required = []
    for arch in params["require_archs"] or []:
        arch = normalize_arch(arch)
        if arch not in required:
            required.append(arch)
    patterns = kernel_patterns(params.get("require_kernels") or [])
    if patterns and not required:
        raise CudaBinaryError("require_kernels needs require_archs: the archs whose cubins must hold the kernels, for example [sm_120a]")
    reader = params.get("reader") or "fatbin"
    cuobjdump = find_cuobjdump(params.get("cuobjdump")) if reader == "cuobjdump" else None
    kernels = None
    if patterns:
        read_kernels = kernel_reader(reader, cuobjdump, runner)

        def kernels(path, cubins):
            return scan_kernels(path, cubins, read_kernels, patterns, required, params["accept_family"])
    result = inspect_path(params["path"], library_reader(reader, cuobjdump, runner), tmp_dir, params.get("list_cubins"), kernels)
    missing = missing_archs(required, result["elf_archs"], params["accept_family"])
    matches, missing_kernels = kernel_report(result["libraries"], patterns, required)
    result.update(
        reader=reader,
        cuobjdump=cuobjdump,
        cuobjdump_version=cuobjdump_version(cuobjdump, runner) if cuobjdump else None,
        required_archs=required,
        missing_archs=missing,
        required_kernels=[text for text, _regex in patterns],
        kernel_matches=matches,
        missing_kernels=missing_kernels,
    )
    failures = []
    if missing:
        failures.append(missing_message(result, missing, params["accept_family"]))
    if missing_kernels:
        failures.append(missing_kernels_message(result, matches, params["accept_family"]))
    return result, (" ".join(failures) or None)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            require_archs=dict(type="list", elements="str", default=[]),
            require_kernels=dict(type="list", elements="str", default=[]),
            accept_family=dict(type="bool", default=False),
            reader=dict(type="str", choices=["fatbin", "cuobjdump"], default="fatbin"),
            list_cubins=dict(type="bool", default=False),
            cuobjdump=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    try:
        result, failure = run_module(module.params, default_runner, module.tmpdir)
    except CudaBinaryError as exc:
        module.fail_json(msg=str(exc), missing_archs=[], kernel_matches=[], missing_kernels=[])
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
