# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Gather a host's GPU facts: run nvidia-smi (and lspci), read /proc and sysfs, and hand the text to the parsers of
``_nvidia_smi``; every failure is a classified result, never an exception (but for an option that points at
something other than what it names: GpuInfoError).

Stdlib only: this file runs on managed hosts (Python 3.9+) inside the gpu_info module.
"""

from __future__ import annotations

import os
import re
import shutil
import time

from ansible_collections.llmops.sglang.plugins.module_utils._nvidia_smi import (
    QUERY_ARGS,
    classify_failure,
    failure,
    first_line,
    parse_cmdline_iommu,
    parse_lspci_acs,
    parse_proc_version,
    parse_query_csv,
    parse_smi_header,
    parse_topo,
)
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded

# Bound of a /proc or sysfs file read (docs/security.md, "Bounds"; a program's output: _process.MAX_OUTPUT_BYTES): the
# driver version file is about 200 bytes, /proc/cmdline at most 4 KB.
MAX_FILE_BYTES = 64 * 1024


class GpuInfoError(ValueError):
    """An option points at something other than what it names; the message says which option and what to fix."""


def read_text(path, what, limit=MAX_FILE_BYTES):
    """A small /proc or sysfs file as text; None when it cannot be read; GpuInfoError when it holds more than limit bytes.

    Opened non-blocking, so a FIFO or a terminal cannot hang the read; read in pieces, so /dev/zero costs limit bytes.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (IOError, OSError, ValueError):  # ValueError: a NUL byte in the path
        return None
    chunks, size = [], 0
    try:
        while size <= limit:
            data = os.read(fd, min(65536, limit + 1 - size))
            if not data:
                break
            chunks.append(data)
            size += len(data)
    except BlockingIOError:
        pass  # a FIFO or device with nothing to read now
    except (IOError, OSError):
        return None
    finally:
        os.close(fd)
    if size > limit:
        raise GpuInfoError("%s: %s holds more than %d bytes, so it is not the small kernel file gpu_info reads there; "
                           "point %s at the right place" % (what, path, limit, what))
    return b"".join(chunks).decode("utf-8", "replace")


def read_numa_node(sysfs_root, bus_id):
    """NUMA node of a PCI device from sysfs; None when unknown (-1 means the platform does not say)."""
    if not bus_id:
        return None
    text = read_text(os.path.join(sysfs_root, "sys/bus/pci/devices", bus_id, "numa_node"), "sysfs_root")
    if text is None:
        return None
    try:
        node = int(text.strip())
    except ValueError:
        return None
    return node if node >= 0 else None


def count_iommu_groups(sysfs_root):
    """Number of IOMMU groups (entries are numbered directories); None when sysfs does not have the directory."""
    try:
        return len([e for e in os.listdir(os.path.join(sysfs_root, "sys/kernel/iommu_groups")) if e.isdigit()])
    except (IOError, OSError, ValueError):  # ValueError: a NUL byte in the path
        return None


def find_program(name, explicit=None, path=None, extra_dirs=()):
    """An explicit path must exist; otherwise search PATH, then extra_dirs (sbin dirs are often off PATH)."""
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    search = path if path is not None else os.environ.get("PATH", os.defpath)
    search = os.pathsep.join([search] + list(extra_dirs))
    return shutil.which(name, path=search)


def collect(nvidia_smi=None, timeout=10, sysfs_root="/", procfs_root="/",
            driver_version_file="/proc/driver/nvidia/version", lspci=None, env=None, runner=run_bounded):
    """Everything gpu_info returns. Classified failures come back in result['failure'], never as exceptions.

    Raises GpuInfoError only when an option points at a file far larger than the kernel file it names.
    """
    path = env.get("PATH") if env else None
    result = {
        "ok": False, "failure": None, "nvidia_smi": None, "gpu_count": 0, "gpus": [],
        "driver_version": None, "driver_branch": None, "cuda_driver_version": None, "header_style": None,
        "kernel_module": None, "kernel_module_version": None,
        "topology": parse_topo(""), "iommu": {}, "acs": {"available": False}, "numa_nodes": [],
        "errors": [], "elapsed_s": None,
    }
    started = time.time()
    smi = find_program("nvidia-smi", nvidia_smi, path)
    result["nvidia_smi"] = smi
    _host_facts(result, sysfs_root, procfs_root, driver_version_file, lspci, path, timeout, env, runner)
    if not smi:
        result["failure"] = classify_failure(127, not_found=True, command=nvidia_smi)
        result["elapsed_s"] = round(time.time() - started, 3)
        return result

    rc, out, err, timed_out, not_found = runner([smi] + list(QUERY_ARGS), timeout, env)
    fail = classify_failure(rc, out, err, timed_out, not_found, timeout, smi)
    parsed = parse_query_csv(out) if not timed_out else {"gpus": [], "messages": [], "error_fields": []}
    if fail is None and parsed["error_fields"]:
        idx, field = parsed["error_fields"][0]
        fail = failure("gpu_lost", "GPU %s reports an error for %s" % (idx, field))
    if fail is None and not parsed["gpus"]:
        fail = failure("no_devices", first_line(out + "\n" + err) or "nvidia-smi listed no GPUs")
    gpus = parsed["gpus"]
    for gpu in gpus:
        gpu["numa_node"] = read_numa_node(sysfs_root, gpu.get("sysfs_bus_id"))
    result["gpus"] = gpus
    result["gpu_count"] = len(gpus)
    versions = set(g.get("driver_version") for g in gpus if g.get("driver_version"))
    if versions:
        result["driver_version"] = sorted(versions)[0]

    if fail is None:
        rc, out, err, timed_out, dummy = runner([smi], timeout, env)
        if timed_out:
            fail = classify_failure(rc, out, err, True, timeout=timeout)
        else:
            # the table can show what the csv hides, e.g. ERR! in a sick GPU's row; its exit code alone decides nothing
            fail = classify_failure(0, out, err)
            header = parse_smi_header(out)
            result["cuda_driver_version"] = header["cuda_version"]
            result["header_style"] = header["header_style"]
            result["driver_version"] = result["driver_version"] or header["driver_version"]
            if header["cuda_version"] is None:
                result["errors"].append("no CUDA version in the nvidia-smi header (rc %s): %s" % (rc, first_line(out + err)))
    if fail is None:
        rc, out, err, timed_out, dummy = runner([smi, "topo", "-m"], timeout, env)
        if timed_out:
            fail = classify_failure(rc, out, err, True, timeout=timeout)
        else:
            topo = parse_topo(out)
            result["topology"] = topo
            if not topo["available"]:
                result["errors"].append("nvidia-smi topo -m gave no matrix (rc %s): %s" % (rc, first_line(out + err)))
            for info in topo["gpus"]:
                for gpu in gpus:
                    if gpu.get("index") == info["index"]:
                        gpu["cpu_affinity"] = info["cpu_affinity"]
                        gpu["numa_affinity"] = info["numa_affinity"]

    if result["driver_version"]:
        match = re.match(r"^(\d+)", result["driver_version"])
        result["driver_branch"] = int(match.group(1)) if match else None
    nodes = set(g["numa_node"] for g in gpus if g.get("numa_node") is not None)
    if not nodes and result["topology"]["numa_nodes"]:
        nodes = set(result["topology"]["numa_nodes"])
    result["numa_nodes"] = sorted(nodes)
    result["failure"] = fail
    result["ok"] = fail is None
    result["elapsed_s"] = round(time.time() - started, 3)
    return result


def _host_facts(result, sysfs_root, procfs_root, driver_version_file, lspci, path, timeout, env, runner):
    """Kernel module, IOMMU and ACS facts; each is optional and absence is not an error."""
    proc = parse_proc_version(read_text(driver_version_file, "driver_version_file") or "")
    result["kernel_module"] = proc["kernel_module"]
    result["kernel_module_version"] = proc["version"]
    iommu = parse_cmdline_iommu(read_text(os.path.join(procfs_root, "proc/cmdline"), "procfs_root") or "")
    groups = count_iommu_groups(sysfs_root)
    iommu["groups"] = groups
    if groups is not None:
        enabled = groups > 0
    else:
        enabled = True if iommu["cmdline_mode"] in ("on", "passthrough") else (False if iommu["cmdline_mode"] == "off" else None)
    iommu["enabled"] = enabled
    iommu["passthrough"] = iommu["cmdline_mode"] == "passthrough"
    result["iommu"] = iommu
    lspci_path = find_program("lspci", lspci, path, ("/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin"))
    if lspci_path:
        rc, out, err, timed_out, dummy = runner([lspci_path, "-vvv"], timeout, env)
        if rc == 0 and not timed_out:
            result["acs"] = parse_lspci_acs(out)
            if "ACSCtl" not in out and "Capabilities: <access denied>" in out:
                # lspci hides extended capabilities from non-root users
                result["acs"] = {"available": False, "reason": "lspci -vvv needs root to show ACSCtl"}
        else:
            why = "timed out after %s s" % timeout if timed_out else "rc %s" % rc
            result["acs"] = {"available": False, "reason": "lspci -vvv failed (%s): %s" % (why, first_line(err))}
    else:
        result["acs"] = {"available": False, "reason": "lspci not installed"}
