#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_info
short_description: Gather NVIDIA GPU, driver and topology facts, classifying nvidia-smi failures
version_added: 0.1.0
description:
  - Runs C(nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits) once, FIELDS being C(index), C(name), C(uuid),
    C(pci.bus_id), C(compute_cap), C(memory.total), C(memory.used), C(memory.free), C(persistence_mode),
    C(mig.mode.current), C(ecc.mode.current) and C(driver_version) joined by commas, and returns one entry per GPU,
    with the compute capability both as a string (V(12.0)) and as an integer (V(120)).
  - Reads the CUDA version the driver supports from the plain C(nvidia-smi) header (C(CUDA Version), or
    C(CUDA UMD Version) from driver 610 on, where C(Driver Version) also became C(KMD Version)).
  - Parses C(nvidia-smi topo -m) into GPU pairs (PIX, PXB, PHB, NODE, SYS, NV#) and CPU/NUMA affinity.
  - Tells the open kernel module from the proprietary one by the text of the driver version file.
  - Gathers topology-risk inputs where present, and tolerates their absence - IOMMU kernel parameters and
    IOMMU groups, each GPU's NUMA node from sysfs, ACS control bits of PCIe ports from C(lspci -vvv).
  - A failing C(nvidia-smi) is classified (RV(failure.class) is one of V(not_installed), V(driver_not_loaded),
    V(nvml_mismatch), V(no_devices), V(gpu_lost), V(timeout), V(query_failed)) with a message and a fix. The module
    does not fail on such a failure unless O(fail_on_error) is set, so that a preflight can report it with
    everything else.
author:
  - llmops maintainers (@llmops)
extends_documentation_fragment:
  - llmops.sglang.attributes
  - llmops.sglang.attributes.info_module
options:
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) executable. When not set it is searched on E(PATH).
    type: path
  timeout:
    description:
      - Seconds each C(nvidia-smi) (and C(lspci)) call may take. A hung call is killed and classified V(timeout).
    type: int
    default: 30
  fail_on_error:
    description:
      - Fail the task when C(nvidia-smi) fails. By default the failure is returned in RV(failure) and RV(ok) is false.
    type: bool
    default: false
  sysfs_root:
    description:
      - Directory under which C(sys/) is read (NUMA nodes, IOMMU groups). Tests point it at a fixture tree.
    type: path
    default: /
  procfs_root:
    description:
      - Directory under which C(proc/cmdline) is read.
    type: path
    default: /
  driver_version_file:
    description:
      - File with the loaded kernel module's version text, normally C(/proc/driver/nvidia/version).
        A lab host without a GPU points it at a file of its simulated profile.
    type: path
    default: /proc/driver/nvidia/version
  lspci:
    description:
      - Path of C(lspci). When not set it is searched on E(PATH) and in C(/usr/local/sbin), C(/usr/sbin), C(/sbin). Without it
        the ACS state is reported as unavailable.
    type: path
notes:
  - Reads only; never changes the host. C(lspci) shows ACS control bits only to root.
  - Every read is bounded - a program's output (C(nvidia-smi), C(lspci)) to 16 MiB, after which it is stopped and
    the query reported failed, and each kernel file (O(driver_version_file), C(proc/cmdline) under O(procfs_root),
    C(numa_node) under O(sysfs_root)) to 64 KiB; a larger file fails the task with a message naming the option,
    since it cannot be the kernel file the option names.
  - The NUMA node comes from C(/sys/bus/pci/devices/<bus id>/numa_node), where nvidia-smi's 8-digit PCI domain
    (V(00000000:06:00.0)) is written with 4 digits in lower case (V(0000:06:00.0)). A value of -1 means the
    platform does not say and is returned as null.
seealso:
  - module: llmops.sglang.cuda_toolkit_info
  - plugin: llmops.sglang.gpu_preflight
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Gather GPU facts
  llmops.sglang.gpu_info:
  register: gpu

- name: Show compute capabilities
  ansible.builtin.debug:
    msg: "{{ gpu.gpus | map(attribute='compute_capability') | unique }}"

- name: Stop when the GPUs cannot be queried, with the classified reason and its fix
  ansible.builtin.fail:
    msg: "{{ gpu.failure.class }}: {{ gpu.failure.message }} -> {{ gpu.failure.fix }}"
  when: not gpu.ok

- name: Lab host without a GPU - read the simulated driver version file
  llmops.sglang.gpu_info:
    driver_version_file: /etc/llmops-gpu-profile/proc-driver-nvidia-version
    sysfs_root: /etc/llmops-gpu-profile/root
    procfs_root: /etc/llmops-gpu-profile/root
"""

RETURN = r"""
ok:
  description: Whether C(nvidia-smi) answered the GPU query without an error.
  returned: always
  type: bool
  sample: true
failure:
  description: The classified failure; null when RV(ok) is true.
  returned: always
  type: dict
  sample:
    class: nvml_mismatch
    message: "Failed to initialize NVML: Driver/library version mismatch"
    fix: "reboot: driver/library mismatch (the loaded kernel module and the user-space NVML library differ, usually after a driver upgrade)"
  contains:
    class:
      description: One of V(not_installed), V(driver_not_loaded), V(nvml_mismatch), V(no_devices), V(gpu_lost), V(timeout), V(query_failed).
      type: str
    message:
      description: The line of C(nvidia-smi) output that decided the class.
      type: str
    fix:
      description: What an operator does about it.
      type: str
nvidia_smi:
  description: The C(nvidia-smi) used; null when none was found.
  returned: always
  type: str
  sample: /usr/bin/nvidia-smi
gpu_count:
  description: Number of GPUs the query listed.
  returned: always
  type: int
  sample: 8
gpus:
  description: One entry per GPU.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: nvidia-smi's GPU index.
      type: int
      sample: 0
    name:
      description: Full product name.
      type: str
      sample: NVIDIA RTX PRO 6000 Blackwell Server Edition
    uuid:
      description: GPU UUID.
      type: str
      sample: GPU-8b89b58e-b427-108d-ac50-06138d78fe78
    pci_bus_id:
      description: PCI bus id as nvidia-smi prints it.
      type: str
      sample: "00000000:06:00.0"
    sysfs_bus_id:
      description: The same bus id as named in C(/sys/bus/pci/devices).
      type: str
      sample: "0000:06:00.0"
    compute_capability:
      description: Compute capability as C(major.minor); null when nvidia-smi did not report one.
      type: str
      sample: "12.0"
    compute_capability_int:
      description: Compute capability as an integer (major * 10 + minor), as in C(sm_120).
      type: int
      sample: 120
    memory_total_mib:
      description: Frame buffer size in MiB.
      type: int
      sample: 97887
    memory_used_mib:
      description: Used memory in MiB.
      type: int
      sample: 0
    memory_free_mib:
      description: Free memory in MiB.
      type: int
      sample: 97252
    persistence_mode:
      description: Whether persistence mode is on; null when not reported.
      type: bool
      sample: true
    mig_mode:
      description: C(mig.mode.current) as reported (V(Enabled), V(Disabled)); null where MIG is not supported.
      type: str
      sample: Disabled
    mig_enabled:
      description: Whether MIG is on; null where MIG is not supported.
      type: bool
      sample: false
    ecc_mode:
      description: C(ecc.mode.current) as reported; null where ECC is not supported.
      type: str
      sample: Enabled
    ecc_enabled:
      description: Whether ECC is on; null where not supported.
      type: bool
      sample: true
    driver_version:
      description: Driver version this GPU reports.
      type: str
      sample: 580.126.20
    numa_node:
      description: NUMA node from sysfs; null when unknown.
      type: int
      sample: 0
    cpu_affinity:
      description: CPU list from C(nvidia-smi topo -m).
      type: str
      sample: 0-63,128-191
    numa_affinity:
      description: NUMA affinity from C(nvidia-smi topo -m).
      type: str
      sample: "0"
driver_version:
  description: The driver version.
  returned: always
  type: str
  sample: 580.126.20
driver_branch:
  description: The driver's major version (its branch).
  returned: always
  type: int
  sample: 580
cuda_driver_version:
  description: The newest CUDA version the driver supports, from the C(nvidia-smi) header.
  returned: always
  type: str
  sample: "13.0"
header_style:
  description: V(driver) for the C(Driver Version)/C(CUDA Version) header, V(kmd) for driver 610's C(KMD Version)/C(CUDA UMD Version).
  returned: always
  type: str
  sample: driver
kernel_module:
  description: V(open) or V(proprietary), from the driver version file; null when it cannot be read.
  returned: always
  type: str
  sample: open
kernel_module_version:
  description: Version of the loaded kernel module (can differ from RV(driver_version) after an upgrade).
  returned: always
  type: str
  sample: 580.126.20
topology:
  description: C(nvidia-smi topo -m) parsed.
  returned: always
  type: dict
  contains:
    available:
      description: Whether a matrix was parsed.
      type: bool
    pairs:
      description: Every GPU pair with its link, e.g. C({a 0, b 1, link PIX}).
      type: list
      elements: dict
    link_types:
      description: Distinct links between GPUs.
      type: list
      elements: str
      sample: [NODE, PIX, SYS]
    nvlink:
      description: Whether any GPU pair is linked by NVLink.
      type: bool
    pcie_only:
      description: Whether every GPU pair is linked over PCIe only.
      type: bool
    gpus:
      description: Per GPU, C(index), C(cpu_affinity), C(numa_affinity), C(gpu_numa_id).
      type: list
      elements: dict
    matrix:
      description: The raw matrix, row device to column device to link.
      type: dict
    numa_nodes:
      description: NUMA nodes named in the affinity column.
      type: list
      elements: int
iommu:
  description: IOMMU state.
  returned: always
  type: dict
  contains:
    cmdline_flags:
      description: IOMMU parameters on the kernel command line.
      type: list
      elements: str
      sample: [amd_iommu=off, iommu=off]
    cmdline_mode:
      description: V(on), V(off), V(passthrough) or null (the command line does not say).
      type: str
    groups:
      description: Number of IOMMU groups in sysfs; null when the directory is missing.
      type: int
    enabled:
      description: Whether an IOMMU is active (groups exist, or the command line turns it on); null when unknown.
      type: bool
    passthrough:
      description: Whether C(iommu=pt) is set.
      type: bool
acs:
  description: ACS control bits of PCIe ports from C(lspci -vvv).
  returned: always
  type: dict
  contains:
    available:
      description: Whether ACS could be read; RV(acs.reason) says why not.
      type: bool
    reason:
      description: Why ACS could not be read (no C(lspci), not root, C(lspci) failed); only when RV(acs.available) is false.
      type: str
    acs_enabled:
      description: Whether any bridge port has ACS on (C(SrcValid+), C(ReqRedir+) or C(CmpltRedir+)).
      type: bool
    enabled_count:
      description: Number of ports with ACS on.
      type: int
    redirect_count:
      description: Ports with C(ReqRedir+) or C(CmpltRedir+), which send peer-to-peer traffic through the root complex.
      type: int
    enabled_ports:
      description: Addresses of the ports with ACS on.
      type: list
      elements: str
numa_nodes:
  description: Distinct NUMA nodes of the GPUs (sysfs, else the topology affinity).
  returned: always
  type: list
  elements: int
  sample: [0, 1]
errors:
  description: Problems that did not stop the query (no topology matrix, no CUDA version in the header).
  returned: always
  type: list
  elements: str
elapsed_s:
  description: Seconds spent gathering.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._gpu_probe import GpuInfoError, collect


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            timeout=dict(type="int", default=30),
            fail_on_error=dict(type="bool", default=False),
            sysfs_root=dict(type="path", default="/"),
            procfs_root=dict(type="path", default="/"),
            driver_version_file=dict(type="path", default="/proc/driver/nvidia/version"),
            lspci=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % params["timeout"])
    try:
        result = collect(
            nvidia_smi=params["nvidia_smi"],
            timeout=params["timeout"],
            sysfs_root=params["sysfs_root"],
            procfs_root=params["procfs_root"],
            driver_version_file=params["driver_version_file"],
            lspci=params["lspci"],
        )
    except GpuInfoError as exc:
        module.fail_json(msg=str(exc))
    if params["fail_on_error"] and result["failure"]:
        failure = result["failure"]
        module.fail_json(msg="nvidia-smi failed (%s): %s. Fix: %s" % (failure["class"], failure["message"], failure["fix"]), **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
