# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parse nvidia-smi, /proc/driver/nvidia/version, /proc/cmdline and lspci output, and classify nvidia-smi's failures:
pure functions of the text (``_gpu_probe`` runs the commands and reads the files).

Stdlib only: this file runs on managed hosts (Python 3.9+) inside the gpu_info module, and on the controller (the
preflight's rules, ``_kv_auto``'s compute capabilities).
"""

from __future__ import annotations

import csv
import io
import re

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import boolean_or_none

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "compute_cap",
    "memory.total",
    "memory.used",
    "memory.free",
    "persistence_mode",
    "mig.mode.current",
    "ecc.mode.current",
    "driver_version",
)
QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")

# Bound of one line of the csv query and the tables (docs/security.md, "Bounds").
MAX_QUERY_LINE = 4096

# Values nvidia-smi prints instead of data. "[N/A]" means "not supported here", the others mean a sick GPU.
_NA_VALUES = ("[n/a]", "n/a", "[not supported]", "not supported", "")
_ERROR_VALUES = ("err!", "[err!]", "[unknown error]", "unknown error", "[gpu is lost]", "gpu is lost")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LINK = re.compile(r"^(X|PIX|PXB|PHB|NODE|SYS|SOC|NV\d+)$")

FAILURE_CLASSES = ("not_installed", "driver_not_loaded", "nvml_mismatch", "no_devices", "gpu_lost", "timeout", "query_failed")

_FIXES = {
    "not_installed": "install the NVIDIA driver packages (for Blackwell: the -open driver, e.g. nvidia-driver-580-open), "
                     "or set the nvidia_smi option to its path",
    "driver_not_loaded": "load the kernel module (modprobe nvidia) or install the driver for the running kernel "
                         "(dkms status); check dmesg for NVRM errors",
    "nvml_mismatch": "reboot: driver/library mismatch (the loaded kernel module and the user-space NVML library differ, "
                     "usually after a driver upgrade)",
    "no_devices": "check lspci for the GPUs and dmesg for NVRM errors; Blackwell GPUs need the open kernel module "
                  "(install the -open driver packages)",
    "gpu_lost": "a GPU stopped answering: check dmesg for Xid errors (79 = fallen off the bus), then reset it "
                "(nvidia-smi -r -i ID) or power-cycle the host; reseat or replace the card if it recurs",
    "timeout": "nvidia-smi hung: the driver or a GPU is stuck (check dmesg for Xid errors); reboot the host",
    "query_failed": "run the nvidia-smi command shown by hand and fix the error it prints",
}

# (class, pattern) in priority order; the first match wins.
_CLASS_PATTERNS = (
    ("nvml_mismatch", re.compile(r"Driver/library version mismatch", re.I)),
    ("driver_not_loaded", re.compile(r"couldn't communicate with the NVIDIA driver|Driver Not Loaded", re.I)),
    ("gpu_lost", re.compile(r"fallen off the bus|Unable to determine the device handle|GPU is lost|ERR!", re.I)),
    ("no_devices", re.compile(r"No devices were found", re.I)),
)
# nvidia-smi exit codes (they follow NVML's return codes) used when the text is not conclusive.
_RC_CLASSES = {9: "driver_not_loaded", 18: "nvml_mismatch", 6: "no_devices", 15: "gpu_lost"}


def failure(cls, message, fix=None):
    return {"class": cls, "message": message, "fix": fix or _FIXES[cls]}


def classify_failure(rc, stdout="", stderr="", timed_out=False, not_found=False, timeout=None, command=None):
    """Classify an nvidia-smi run. Returns None when it worked, else {class, message, fix}."""
    text = "\n".join(t for t in (stdout, stderr) if t).strip()
    if not_found:
        return failure("not_installed", "nvidia-smi not found" + (": %s" % command if command else " on PATH"))
    if timed_out:
        return failure("timeout", "nvidia-smi did not answer within %s s and was killed" % timeout)
    if rc is None:
        # stopped by _process.run_bounded for printing too much: its first stderr line says so
        return failure("query_failed", first_line(stderr) or "nvidia-smi was stopped before it finished")
    if rc == 127 and re.search(r"not found|No such file", text):
        return failure("not_installed", first_line(text))
    for cls, pattern in _CLASS_PATTERNS:
        match = pattern.search(text)
        if match:
            return failure(cls, _line_with(text, match.start()))
    if rc == 0:
        return None
    cls = _RC_CLASSES.get(rc, "query_failed")
    msg = first_line(text) or "nvidia-smi exited with %s and printed nothing" % rc
    if cls == "query_failed":
        msg = "nvidia-smi exited with %s: %s" % (rc, msg)
    return failure(cls, msg)


def first_line(text):
    """The first line of text that is not blank, stripped, or ''."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _line_with(text, pos):
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start:end if end >= 0 else len(text)].strip()


def _value(raw):
    """Normalise one csv cell: None for N/A, the stripped string otherwise."""
    value = raw.strip()
    if value.lower() in _NA_VALUES:
        return None
    return value


def _is_error(raw):
    return raw.strip().lower() in _ERROR_VALUES


def _int_mib(value):
    if value is None:
        return None
    match = re.match(r"^(\d+)(?:\s*MiB)?$", value)
    return int(match.group(1)) if match else None


def _enabled(value):
    if value is None:
        return None
    # nvidia-smi's own words, else a boolean word (On/Off, Yes/No)
    return {"enabled": True, "disabled": False}.get(value.strip().lower(), boolean_or_none(value))


def compute_cap_int(value):
    """'12.0' -> 120, '9.0' -> 90, '10.3' -> 103; None when not a compute capability."""
    if value is None:
        return None
    match = re.match(r"^\s*(\d+)\.(\d)\s*$", str(value))
    if not match:
        return None
    return int(match.group(1)) * 10 + int(match.group(2))


def normalize_compute_cap(value):
    """Accept '12.0', 12.0, 12, 120 and return the 'M.m' string, or None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "%d.%d" % divmod(value, 10) if value >= 10 else "%d.0" % value
    if isinstance(value, float):
        return "%.1f" % value
    text = str(value).strip()
    if re.match(r"^\d+$", text):
        return normalize_compute_cap(int(text))
    return text if compute_cap_int(text) is not None else None


def sysfs_bus_id(pci_bus_id):
    """nvidia-smi '00000000:06:00.0' -> sysfs '0000:06:00.0' (domain as %04x, lower case)."""
    if not pci_bus_id:
        return None
    text = pci_bus_id.strip().lower()
    match = re.match(r"^(?:([0-9a-f]+):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", text)
    if not match:
        return None
    domain = int(match.group(1) or "0", 16)
    return "%04x:%s:%s.%s" % (domain, match.group(2), match.group(3), match.group(4))


def parse_query_csv(text, fields=QUERY_FIELDS):
    """Parse `--query-gpu=FIELDS --format=csv[,noheader][,nounits]` output.

    Returns {gpus: [...], messages: [lines that are not rows], error_fields: [(index, field)]}.
    Lines nvidia-smi prints between rows (e.g. "Unable to determine the device handle ...") land in messages.
    """
    gpus = []
    messages = []
    error_fields = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if len(line) > MAX_QUERY_LINE:
            # a GPU's row is a few hundred characters; csv would refuse a field over 131072 with an exception
            messages.append("a line of %d characters (not a GPU row): %s..." % (len(line), line[:120].strip()))
            continue
        try:
            cells = next(csv.reader(io.StringIO(line), skipinitialspace=True))
        except csv.Error:
            messages.append(line.strip())
            continue
        if len(cells) != len(fields):
            messages.append(line.strip())
            continue
        if cells[0].strip().split(" ")[0] == fields[0]:
            continue  # header line
        raw = dict(zip(fields, cells))
        gpu = _gpu_from_raw(raw)
        for field, cell in raw.items():
            if _is_error(cell):
                error_fields.append((gpu.get("index"), field))
        gpus.append(gpu)
    return {"gpus": gpus, "messages": messages, "error_fields": error_fields}


def _gpu_from_raw(raw):
    vals = dict((k, _value(v)) for k, v in raw.items())
    gpu = {}
    if "index" in vals:
        gpu["index"] = int(vals["index"]) if vals["index"] and vals["index"].isdigit() else None
    if "name" in vals:
        gpu["name"] = vals["name"]
    if "uuid" in vals:
        gpu["uuid"] = vals["uuid"]
    if "pci.bus_id" in vals:
        gpu["pci_bus_id"] = vals["pci.bus_id"]
        gpu["sysfs_bus_id"] = sysfs_bus_id(vals["pci.bus_id"])
    if "compute_cap" in vals:
        cc = vals["compute_cap"] if compute_cap_int(vals["compute_cap"]) is not None else None
        gpu["compute_capability"] = cc
        gpu["compute_capability_int"] = compute_cap_int(cc)
    for field, key in (("memory.total", "memory_total_mib"), ("memory.used", "memory_used_mib"), ("memory.free", "memory_free_mib")):
        if field in vals:
            gpu[key] = _int_mib(vals[field])
    if "persistence_mode" in vals:
        gpu["persistence_mode"] = _enabled(vals["persistence_mode"])
    if "mig.mode.current" in vals:
        gpu["mig_mode"] = vals["mig.mode.current"]
        gpu["mig_enabled"] = _enabled(vals["mig.mode.current"])
    if "ecc.mode.current" in vals:
        gpu["ecc_mode"] = vals["ecc.mode.current"]
        gpu["ecc_enabled"] = _enabled(vals["ecc.mode.current"])
    if "driver_version" in vals:
        gpu["driver_version"] = vals["driver_version"]
    return gpu


def parse_smi_header(text):
    """Driver and CUDA versions from a plain `nvidia-smi` table or `nvidia-smi -q`.

    Driver 610 renamed the plain header fields: 'KMD Version' and 'CUDA UMD Version'.
    """
    result = {"nvidia_smi_version": None, "driver_version": None, "cuda_version": None, "header_style": None}
    match = re.search(r"NVIDIA-SMI\s+(?:version\s*:\s*)?(\d[\w.]*)", text)
    if match:
        result["nvidia_smi_version"] = match.group(1)
    match = re.search(r"\b(Driver|KMD) Version\s*:\s*(\d[\w.]*)", text)
    if match:
        result["driver_version"] = match.group(2)
        result["header_style"] = "kmd" if match.group(1) == "KMD" else "driver"
    match = re.search(r"\bCUDA (?:UMD )?Version\s*:\s*(\d+\.\d+)", text)
    if match:
        result["cuda_version"] = match.group(1)
    return result


_BUS_ID = re.compile(r"^[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_TABLE_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")


def _table_row(line):
    """A GPU row of the plain table ('|   0  NVIDIA H200   On  |   00000000:18:00.0 Off |   0 |') as a dict, else None.

    Split on the cell bars and on whitespace, not matched with one regular expression: a hostile line of spaces made
    that expression backtrack for minutes.
    """
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")) or len(line) > MAX_QUERY_LINE:
        return None
    cells = line[1:-1].split("|")
    if len(cells) != 3:
        return None
    first, second, ecc = cells[0].split(), cells[1].split(), cells[2].split()
    if len(first) < 3 or not first[0].isdigit() or first[-1] not in ("On", "Off", "WDDM", "TCC", "N/A"):
        return None
    if len(second) != 2 or not _BUS_ID.match(second[0]) or second[1] not in ("On", "Off", "N/A") or len(ecc) != 1:
        return None
    return {"index": int(first[0]), "name": " ".join(first[1:-1]), "persist": first[-1], "bus": second[0], "ecc": ecc[0]}


def parse_smi_table(text):
    """GPU rows of a plain `nvidia-smi` table (names are truncated by nvidia-smi; use the csv query for facts)."""
    gpus = []
    lines = text.splitlines()
    for pos, line in enumerate(lines):
        row = _table_row(line)
        if row is None:
            continue
        gpu = {
            "index": row["index"],
            "name": row["name"],
            "persistence_mode": {"On": True, "Off": False}.get(row["persist"]),
            "pci_bus_id": row["bus"],
            "ecc_errors": row["ecc"],
            "memory_used_mib": None,
            "memory_total_mib": None,
            "mig_mode": None,
        }
        if pos + 1 < len(lines) and len(lines[pos + 1]) <= MAX_QUERY_LINE:
            mem = _TABLE_MEM.search(lines[pos + 1])
            if mem:
                gpu["memory_used_mib"], gpu["memory_total_mib"] = int(mem.group(1)), int(mem.group(2))
        if pos + 2 < len(lines):
            cells = [c.strip() for c in lines[pos + 2].strip().strip("|").split("|")]
            if len(cells) == 3 and cells[2] in ("Enabled", "Disabled", "N/A"):
                gpu["mig_mode"] = cells[2]
        gpus.append(gpu)
    return gpus


def parse_smi_list(text):
    """`nvidia-smi -L`: [{index, name, uuid, mig_devices: [...]}]."""
    gpus = []
    for line in text.splitlines():
        match = re.match(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)", line.strip())
        if match:
            gpus.append({"index": int(match.group(1)), "name": match.group(2), "uuid": match.group(3), "mig_devices": []})
            continue
        match = re.match(r"^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9a-fA-F-]+)\)", line)
        if match and gpus:
            gpus[-1]["mig_devices"].append({"profile": match.group(1), "index": int(match.group(2)), "uuid": match.group(3)})
    return gpus


def parse_topo(text):
    """Parse `nvidia-smi topo -m` (tab or space separated, ANSI escapes tolerated).

    Returns {available, devices, gpus: [{index, cpu_affinity, numa_affinity, gpu_numa_id}], matrix,
    pairs: [{a, b, link}], link_types, nvlink, pcie_only, numa_nodes}.
    """
    result = {"available": False, "devices": [], "gpus": [], "matrix": {}, "pairs": [], "link_types": [],
              "nvlink": False, "pcie_only": False, "numa_nodes": []}
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_pos = None
    for pos, line in enumerate(lines):
        if re.match(r"^\s+GPU0\b", line) or re.match(r"^\s*GPU0\s+GPU1\b", line):
            header_pos = pos
            break
    if header_pos is None:
        return result
    header = lines[header_pos]
    devices = re.findall(r"\b((?:GPU|NIC)\d+)\b", header.split("CPU Affinity")[0])
    trailing = [name for name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if name in header]
    matrix = {}
    info = []
    for line in lines[header_pos + 1:]:
        tokens = line.split()
        if not tokens or not re.match(r"^(GPU|NIC)\d+$", tokens[0]):
            if matrix:
                break
            continue
        row = tokens[0]
        cells = tokens[1:1 + len(devices)]
        if len(cells) < len(devices) or not all(_LINK.match(c) for c in cells):
            continue
        matrix[row] = dict(zip(devices, cells))
        if row.startswith("GPU"):
            rest = tokens[1 + len(devices):]
            extra = dict((name, None) for name in trailing)
            for name, value in zip(trailing, rest):
                extra[name] = None if value == "N/A" else value
            info.append({
                "index": int(row[3:]),
                "cpu_affinity": extra.get("CPU Affinity"),
                "numa_affinity": extra.get("NUMA Affinity"),
                "gpu_numa_id": extra.get("GPU NUMA ID"),
            })
    gpu_names = [d for d in devices if d.startswith("GPU") and d in matrix]
    pairs = []
    for i, a in enumerate(gpu_names):
        for b in gpu_names[i + 1:]:
            pairs.append({"a": int(a[3:]), "b": int(b[3:]), "link": matrix[a].get(b)})
    links = sorted(set(p["link"] for p in pairs if p["link"]))
    numa = set()
    for gpu in info:
        numa.update(_expand_range(gpu["numa_affinity"]))
    result.update({
        "available": bool(matrix),
        "devices": devices,
        "gpus": info,
        "matrix": matrix,
        "pairs": pairs,
        "link_types": links,
        "nvlink": any(link.startswith("NV") for link in links),
        "pcie_only": bool(links) and not any(link.startswith("NV") for link in links),
        "numa_nodes": sorted(numa),
    })
    return result


def _expand_range(text):
    """'0-1,4' -> [0, 1, 4]; None or junk -> []."""
    out = []
    if not text:
        return out
    for part in text.split(","):
        match = re.match(r"^(\d+)(?:-(\d+))?$", part.strip())
        if match:
            lo = int(match.group(1))
            hi = int(match.group(2) or lo)
            out.extend(range(lo, hi + 1))
    return out


def parse_proc_version(text):
    """/proc/driver/nvidia/version -> {kernel_module: open|proprietary|None, version}."""
    result = {"kernel_module": None, "version": None}
    if not text:
        return result
    match = re.search(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    if not match:
        return result
    result["version"] = match.group(1)
    result["kernel_module"] = "open" if "Open Kernel Module" in match.group(0) else "proprietary"
    return result


_CMDLINE_IOMMU = re.compile(r"^(intel_iommu|amd_iommu|iommu)=(\S+)$")


def parse_cmdline_iommu(text):
    """IOMMU-related kernel parameters from /proc/cmdline.

    mode: 'passthrough' (iommu=pt), 'off' (iommu=off or <vendor>_iommu=off), 'on' (<vendor>_iommu=on,
    iommu=on/force) or None when the command line does not say (the kernel default applies).
    """
    flags = []
    for token in (text or "").split():
        if token == "--":
            break  # what follows belongs to init
        if _CMDLINE_IOMMU.match(token):
            flags.append(token)
    values = dict(_CMDLINE_IOMMU.match(f).groups() for f in flags)
    mode = None
    if values.get("iommu") == "pt":
        mode = "passthrough"
    elif values.get("iommu") == "off" or "off" in (values.get("intel_iommu"), values.get("amd_iommu")):
        mode = "off"
    elif values.get("iommu") in ("on", "force") or "on" in (values.get("intel_iommu"), values.get("amd_iommu")):
        mode = "on"
    return {"cmdline_flags": flags, "cmdline_mode": mode}


_LSPCI_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")


def parse_lspci_acs(text):
    """ACSCtl lines of `lspci -vvv`, with the device each belongs to when the header is there.

    ACS counts as enabled on a port when SrcValid+ (or a redirect bit) is set; ReqRedir+/CmpltRedir+ are
    the bits that send peer-to-peer traffic up to the root complex.
    """
    devices = []
    current = None
    for line in text.splitlines():
        if len(line) > MAX_QUERY_LINE:
            continue  # lspci's lines are short; a long one is noise (and slow to search)
        match = _LSPCI_DEVICE.match(line)
        if match:
            current = {"device": match.group(1).lower(), "description": match.group(2).strip()}
            continue
        acs = re.search(r"ACSCtl:\s*(.*)$", line)
        if not acs:
            continue
        # "SrcValid+ TransBlk- ...": word by word (a regular expression over a long word backtracks)
        flags = dict((word[:-1], word[-1] == "+") for word in acs.group(1).split()
                     if len(word) > 1 and word[-1] in "+-" and word[:-1].isalnum())
        entry = {
            "device": current["device"] if current else None,
            "description": current["description"] if current else None,
            "bridge": bool(current and "bridge" in current["description"].lower()) if current else None,
            "flags": flags,
            "enabled": bool(flags.get("SrcValid") or flags.get("ReqRedir") or flags.get("CmpltRedir")),
            "redirect": bool(flags.get("ReqRedir") or flags.get("CmpltRedir")),
        }
        devices.append(entry)
    # a port without a header line is counted as a bridge: ACS lives on downstream/root ports
    relevant = [d for d in devices if d["bridge"] is not False]
    enabled = [d for d in relevant if d["enabled"]]
    return {
        "available": True,
        "ports": devices,
        "ports_checked": len(relevant),
        "enabled_ports": [d["device"] for d in enabled],
        "enabled_count": len(enabled),
        "redirect_count": len([d for d in relevant if d["redirect"]]),
        "acs_enabled": bool(enabled),
    }
