#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cmake_cuda_plan
short_description: Report what a configured CMake tree will compile for CUDA, before anything is compiled
version_added: 0.1.0
description:
  - Reads C(compile_commands.json) (configure with C(CMAKE_EXPORT_COMPILE_COMMANDS=ON)) and C(build.ninja) of a CMake
    build directory and reports, per target, the CUDA translation units, the archs nvcc will build cubins and PTX for
    (read from each unit's C(-gencode), C(--generate-code), C(-arch) and C(-code) options), whether
    C(-DENABLE_NVFP4) is defined and which library the target links.
  - Reads CMake's own list of defines the project did not use from the configure log O(log) (CMake prints it on a
    first configure only, so configure in a fresh build directory).
  - Times one compile of a one-line kernel for O(probe_arch) with O(nvcc), the per-unit cost a build time estimate
    scales.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
options:
  build_dir:
    description:
      - The CMake build directory (holds C(compile_commands.json)).
    type: path
    required: true
  log:
    description:
      - The configure log to read CMake's unused-define warning from; when not set, none are reported.
    type: path
  nvcc:
    description:
      - nvcc for the timing probe; when not set, no unit is timed and RV(unit_seconds) is null.
    type: path
  probe_arch:
    description:
      - The arch the probe kernel is compiled for, C(sm_<digits>[a|f]).
    type: str
    default: sm_120a
  timeout:
    description:
      - Seconds the probe compile may take.
    type: int
    default: 300
notes:
  - Files are read with bounds (64 MiB for C(compile_commands.json) and C(build.ninja), the last 16 MiB of the log).
seealso:
  - module: llmops.sglang.cuda_binary_info
"""

EXAMPLES = r"""
- name: What will the configured tree compile?
  llmops.sglang.cmake_cuda_plan:
    build_dir: /var/cache/llmops-sglang/sgl-kernel/dry-run
    log: /var/cache/llmops-sglang/sgl-kernel/dry-run.log
    nvcc: /usr/local/cuda/bin/nvcc
  register: plan
"""

RETURN = r"""
targets:
  description: Per target, its units and archs.
  returned: always
  type: dict
  sample:
    common_ops_sm100_build: {cuda_units: 2, other_units: 0, cubins: [sm_90a, sm_100a, sm_120a, sm_120f],
                             ptx: [compute_120f], nvfp4_units: 2, unit_archs: 8, unresolved: [], library: sm100/common_ops.so}
cuda_units:
  description: CUDA translation units in all targets.
  returned: always
  type: int
  sample: 4
unit_archs:
  description: CUDA translation units x archs (each arch of a unit is one device compile).
  returned: always
  type: int
  sample: 16
cubins:
  description: Every arch some unit gets a cubin for.
  returned: always
  type: list
  elements: str
  sample: [sm_90a, sm_100a, sm_120a, sm_120f]
ptx:
  description: Every arch some unit gets PTX for.
  returned: always
  type: list
  elements: str
  sample: [compute_120f]
nvfp4:
  description: Whether some CUDA unit is compiled with C(-DENABLE_NVFP4).
  returned: always
  type: bool
unused_defines:
  description: CMake's "Manually-specified variables were not used by the project" names.
  returned: always
  type: list
  elements: str
  sample: [SGL_KERNEL_BUILD_SM100_VARIANT]
unit_seconds:
  description: Seconds one compile of the probe kernel for O(probe_arch) took; null when not timed.
  returned: always
  type: float
  sample: 5.3
probe_error:
  description: Why the probe compile failed; null when it ran.
  returned: always
  type: str
"""

import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._cmake_plan import (
    CMakePlanError, parse_compile_commands, parse_link_outputs, summarize, unused_defines)
from ansible_collections.llmops.sglang.plugins.module_utils._cuda_toolkit import validate_arch
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded

FILE_BYTES = 64 * 1024 * 1024
LOG_BYTES = 16 * 1024 * 1024
PROBE = "__global__ void llmops_probe(float* x) { x[threadIdx.x] *= 2.0f; }\n"


def read_bounded(path, limit, tail=False):
    """The file's text (its last ``limit`` bytes with tail), or a CMakePlanError naming it."""
    if not os.path.isfile(path):  # a FIFO or a device would block or never end
        raise CMakePlanError("%s is not a regular file: configure the tree first (CMAKE_EXPORT_COMPILE_COMMANDS=ON, Ninja)"
                             % path)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit and not tail:
                raise CMakePlanError("%s is larger than %d bytes" % (path, limit))
            handle.seek(max(0, size - limit))
            return handle.read(limit).decode("utf-8", "replace")
    except (IOError, OSError) as exc:
        raise CMakePlanError("cannot read %s (%s): configure the tree first (CMAKE_EXPORT_COMPILE_COMMANDS=ON, Ninja)"
                             % (path, exc.strerror or exc))


def time_probe(nvcc, arch, timeout):
    """(seconds, error) of compiling the probe kernel (host and device) for one arch."""
    workdir = tempfile.mkdtemp(prefix="llmops-cmake-plan-")
    try:
        source = os.path.join(workdir, "probe.cu")
        with open(source, "w") as handle:
            handle.write(PROBE)
        start = time.monotonic()
        rc, out, err, timed_out, _missing = run_bounded(
            [nvcc, "-c", "-gencode", validate_arch(arch), "-o", os.path.join(workdir, "probe.o"), source], timeout)
        if rc != 0:
            return None, "timed out after %d s" % timeout if timed_out else (err or out).strip()[-500:]
        return round(time.monotonic() - start, 2), None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_module(params):
    build_dir = params["build_dir"]
    units = parse_compile_commands(read_bounded(os.path.join(build_dir, "compile_commands.json"), FILE_BYTES),
                                   os.path.join(build_dir, "compile_commands.json"))
    ninja = os.path.join(build_dir, "build.ninja")
    links = parse_link_outputs(read_bounded(ninja, FILE_BYTES)) if os.path.isfile(ninja) else {}
    result = summarize(units, links)
    result["unused_defines"] = unused_defines(read_bounded(params["log"], LOG_BYTES, tail=True)) if params["log"] else []
    seconds, error = time_probe(params["nvcc"], params["probe_arch"], params["timeout"]) if params["nvcc"] else (None, None)
    result.update(unit_seconds=seconds, probe_error=error)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            build_dir=dict(type="path", required=True),
            log=dict(type="path"),
            nvcc=dict(type="path"),
            probe_arch=dict(type="str", default="sm_120a"),
            timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    try:
        validate_arch(module.params["probe_arch"])
    except ValueError as exc:
        module.fail_json(msg="probe_arch: %s" % exc)
    if module.params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % module.params["timeout"])
    try:
        result = run_module(module.params)
    except CMakePlanError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
