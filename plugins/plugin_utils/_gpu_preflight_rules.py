# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""GPU preflight rules: compare gpu_info / cuda_toolkit_info results with what the deployment needs (the role's
stamp, report and messages around them are _gpu_preflight_plan.py's).

Pure functions, stdlib only. Rule ids are stable; waivers and reports refer to them.
"""

from __future__ import annotations

import re
import textwrap

from ansible_collections.llmops.sglang.plugins.module_utils import _fp4_kernels
from ansible_collections.llmops.sglang.plugins.module_utils._coerce import boolean_or_none, is_empty
from ansible_collections.llmops.sglang.plugins.module_utils._cuda_toolkit import version_tuple
from ansible_collections.llmops.sglang.plugins.module_utils._nvidia_smi import normalize_compute_cap

# What a key left out expects. The arch and the toolkit are the role's settings (gpu_preflight_toolkit_archs,
# gpu_preflight_cuda_toolkit_min, which playbooks/vars/server_wiring.yml hands to the kernel build): none here. Set
# to null they are resolved (resolve_toolkit): the SM 12.0 target of _fp4_kernels for an expected 12.0 GPU, and the
# oldest nvcc that target and the planned unit's FP4 kernels need (sglang_release, launch_args, fp4_modules_prebuilt).
DEFAULT_EXPECTATIONS = {
    "gpu_count": 8,
    "compute_capability": "12.0",
    "driver_min_branch": 580,
    "cuda_toolkit_min": None,
    "kernel_module": "open",
    "mig_allowed": False,
    "persistence_mode": True,
    "min_free_mib": None,
    "min_free_fraction": None,
    "require_ecc": None,
    "toolkit_archs": [],
    "require_toolkit": True,
    "sglang_release": None,
    "launch_args": [],
    "fp4_modules_prebuilt": False,
}

FAIL_RULES = (
    "gpu_query",
    "gpu_count",
    "compute_capability",
    "driver_branch",
    "cuda_driver_version",
    "cuda_toolkit",
    "toolkit_arch",
    "fp4_kernels",
    "kernel_module",
    "mig",
    "persistence_mode",
    "gpu_memory_free",
    "ecc",
    "gpu_smoke",
)
WARN_RULES = ("pcie_acs", "iommu", "numa_split")
RULES = FAIL_RULES + WARN_RULES

# Rules that need a working nvidia-smi; they are skipped when gpu_query fails.
_NEEDS_GPUS = ("gpu_count", "compute_capability", "driver_branch", "cuda_driver_version", "kernel_module", "mig",
               "persistence_mode", "gpu_memory_free", "ecc", "gpu_smoke", "pcie_acs", "iommu", "numa_split")


# NVIDIA's driver role (Galaxy: nvidia.nvidia_driver) and the variables that install a branch with it; docs/gpu_preflight.md
# says where each was read. Its default Ubuntu package list installs the proprietary kernel module, so the open one is
# named package by package (Canonical's -server-open metapackage and the branch's utilities).
DRIVER_ROLE = "nvidia.nvidia_driver"


def driver_install_fix(exp):
    """The fix of a host without a usable driver: the branch and module flavour the rules want, with the driver role."""
    branch = exp["driver_min_branch"]
    is_open = exp["kernel_module"] == "open"
    ubuntu = ", on Ubuntu nvidia_driver_ubuntu_packages: [nvidia-headless-%d-server-open, nvidia-utils-%d-server]" % (branch, branch)
    return ("install NVIDIA driver branch %d%s and reboot, e.g. with NVIDIA's role %s: nvidia_driver_branch: \"%d\"%s "
            "(docs/gpu_preflight.md)" % (branch, " with the open kernel module" if is_open else "", DRIVER_ROLE, branch,
                                         ubuntu if is_open else ""))


class PreflightError(ValueError):
    """Bad expectations or waivers (the caller's input), with a message naming the fix."""


def _gpu_list(indices):
    """[0, 1, 2, 3, 5] -> 'GPUs 0-3, 5'; [4] -> 'GPU 4'."""
    idx = sorted(i for i in indices if i is not None)
    if not idx:
        return "GPUs ?"
    parts = []
    start = prev = idx[0]
    for i in idx[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else "%d-%d" % (start, prev))
        if i is not None:
            start = prev = i
    return ("GPU " if len(idx) == 1 else "GPUs ") + ", ".join(parts)


def _plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def _coerce(value):
    """Template results can arrive as strings ('8', 'true', 'None'): turn them back into data."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if re.match(r"^-?\d+$", text):
        return int(text)
    if is_empty(text):
        return None
    got = boolean_or_none(text)
    return value if got is None else got


def normalize_expectations(expectations):
    """Defaults merged with the caller's values; unknown keys and bad types raise PreflightError."""
    exp = dict(DEFAULT_EXPECTATIONS)
    exp["toolkit_archs"] = list(DEFAULT_EXPECTATIONS["toolkit_archs"])
    if expectations is None:
        return exp
    if not isinstance(expectations, dict):
        raise PreflightError("expectations must be a dict, got %s" % type(expectations).__name__)
    unknown = sorted(set(expectations) - set(DEFAULT_EXPECTATIONS))
    if unknown:
        raise PreflightError("unknown expectation key(s) %s; valid keys: %s" % (", ".join(unknown), ", ".join(sorted(DEFAULT_EXPECTATIONS))))
    for key, value in expectations.items():
        # compute_capability and cuda_toolkit_min are version strings: '13' must stay a string
        exp[key] = value if key in ("compute_capability", "cuda_toolkit_min", "kernel_module", "toolkit_archs", "sglang_release",
                                    "launch_args") else _coerce(value)
    for key in ("gpu_count", "driver_min_branch"):
        if not isinstance(exp[key], int) or isinstance(exp[key], bool) or exp[key] < 0:
            raise PreflightError("expectation %s must be a non-negative integer, got %r" % (key, exp[key]))
    if exp["min_free_mib"] is not None and (not isinstance(exp["min_free_mib"], int) or isinstance(exp["min_free_mib"], bool)):
        raise PreflightError("expectation min_free_mib must be an integer (MiB) or null, got %r" % (exp["min_free_mib"],))
    fraction = exp["min_free_fraction"]
    if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1):
        raise PreflightError("expectation min_free_fraction must be a number in (0, 1] (the server's --mem-fraction-static) or null, got %r" % (fraction,))
    cc = normalize_compute_cap(exp["compute_capability"])
    if exp["compute_capability"] is not None and cc is None:
        raise PreflightError("expectation compute_capability must look like '12.0', got %r" % (exp["compute_capability"],))
    exp["compute_capability"] = cc
    if exp["cuda_toolkit_min"] is not None and version_tuple(exp["cuda_toolkit_min"]) is None:
        raise PreflightError("expectation cuda_toolkit_min must look like '12.8', got %r" % (exp["cuda_toolkit_min"],))
    if exp["cuda_toolkit_min"] is not None:
        exp["cuda_toolkit_min"] = str(exp["cuda_toolkit_min"])
    if exp["kernel_module"] in ("any", "", "none", "null"):
        exp["kernel_module"] = None
    if exp["kernel_module"] not in (None, "open", "proprietary"):
        raise PreflightError("expectation kernel_module must be open, proprietary, any or null, got %r" % (exp["kernel_module"],))
    for key in ("mig_allowed", "persistence_mode", "require_toolkit", "fp4_modules_prebuilt"):
        if not isinstance(exp[key], bool):
            raise PreflightError("expectation %s must be true or false, got %r" % (key, exp[key]))
    if exp["require_ecc"] is not None and not isinstance(exp["require_ecc"], bool):
        raise PreflightError("expectation require_ecc must be true, false or null, got %r" % (exp["require_ecc"],))
    archs = exp["toolkit_archs"]
    if isinstance(archs, str):
        archs = [archs]
    if archs is not None and (not isinstance(archs, (list, tuple)) or not all(isinstance(a, str) for a in archs)):
        raise PreflightError("expectation toolkit_archs must be a list of arch names like sm_120a, got %r" % (archs,))
    exp["toolkit_archs"] = None if archs is None else list(archs)
    exp["sglang_release"] = None if is_empty(exp["sglang_release"]) else str(exp["sglang_release"])
    words = exp["launch_args"]
    if words is None:
        words = []
    if not isinstance(words, (list, tuple)):
        raise PreflightError("expectation launch_args must be a list of launch words (--flag value ...), got %r" % (words,))
    exp["launch_args"] = [None if w is None else str(w) for w in words]
    return resolve_toolkit(exp)


def fp4_plan(exp):
    """The FP4 kernel plan of the planned unit (_fp4_kernels.kernel_plan) on the expected GPU, or None without an
    SGLang release to look it up for."""
    if exp["sglang_release"] is None:
        return None
    return _fp4_kernels.kernel_plan(exp["sglang_release"], exp["compute_capability"], exp["launch_args"])


def resolve_toolkit(exp):
    """The arch and the oldest toolkit, where the caller left them null: the SM 12.0 target (_fp4_kernels.SM120_TARGET)
    for an expected 12.0 GPU; the oldest nvcc that the archs and the unit's FP4 JIT kernels need, from the FP4 table
    (a configured minimum is a floor the table may raise). ``cuda_toolkit_basis`` says why."""
    if exp["toolkit_archs"] is None:
        exp["toolkit_archs"] = [_fp4_kernels.sm120_arch()] if exp["compute_capability"] == _fp4_kernels.CAPABILITY else []
    plan = fp4_plan(exp)
    minimum, basis = _fp4_kernels.nvcc_minimum(plan or {"rows": []}, exp["toolkit_archs"], exp["fp4_modules_prebuilt"])
    configured = exp["cuda_toolkit_min"]
    if configured is not None and (minimum is None or version_tuple(configured) >= version_tuple(minimum)):
        minimum, basis = configured, ["cuda_toolkit_min"]
    exp["cuda_toolkit_min"], exp["cuda_toolkit_basis"] = minimum, basis
    # JIT kernels the unit compiles at first use need nvcc on this host, whatever require_toolkit says
    exp["fp4_needs_nvcc"] = bool(plan and _fp4_kernels.nvcc_users(plan, exp["fp4_modules_prebuilt"]))
    return exp


def normalize_waivers(waivers):
    """{rule: reason}; unknown rules and missing reasons raise PreflightError."""
    out = {}
    if waivers is not None and not isinstance(waivers, (list, tuple)):
        raise PreflightError("waivers must be a list of {rule, reason}, got %s" % type(waivers).__name__)
    for waiver in waivers or []:
        if not isinstance(waiver, dict):
            raise PreflightError("each waiver must be a dict {rule, reason}, got %r" % (waiver,))
        rule = waiver.get("rule")
        reason = waiver.get("reason")
        if rule not in RULES:
            raise PreflightError("unknown waiver rule %r; valid rules: %s" % (rule, ", ".join(RULES)))
        if not isinstance(reason, str) or not reason.strip():
            raise PreflightError("waiver for rule %s needs a non-empty reason" % rule)
        extra = sorted(set(waiver) - set(("rule", "reason")))
        if extra:
            raise PreflightError("waiver for rule %s has unknown key(s) %s; only rule and reason are allowed" % (rule, ", ".join(extra)))
        out[rule] = reason.strip()
    return out


class _Checks(object):
    def __init__(self):
        self.items = []

    def add(self, rule, status, found=None, required=None, fix=None, message=None):
        self.items.append({"rule": rule, "status": status, "found": found, "required": required, "fix": fix,
                           "message": message})


def _gpus(gpu_info):
    return [g for g in (gpu_info.get("gpus") or []) if isinstance(g, dict)]


def _check_gpu_query(c, gi, exp):
    fail = gi.get("failure")
    if gi.get("ok") is False or fail:
        fail = fail or {}
        cls = fail.get("class", "unknown")
        fix = driver_install_fix(exp) if cls == "not_installed" else fail.get("fix") or "run nvidia-smi by hand"
        c.add("gpu_query", "fail", found="%s: %s" % (cls, fail.get("message", "")), required="nvidia-smi answers",
              fix=fix,
              message="nvidia-smi failed: %s: %s" % (cls, fail.get("message", "")))
        return False
    c.add("gpu_query", "pass", found="nvidia-smi answered", required="nvidia-smi answers")
    return True


def _check_gpu_count(c, gi, exp):
    found = len(_gpus(gi))
    required = exp["gpu_count"]
    msg = "%s found, %d required" % (_plural(found, "GPU"), required)
    if found >= required:
        c.add("gpu_count", "pass", found=found, required=required, message=msg)
    else:
        c.add("gpu_count", "fail", found=found, required=required, message=msg,
              fix="check that every GPU is seated and visible (lspci | grep -i nvidia, dmesg | grep NVRM)")


def _check_compute_capability(c, gi, exp):
    required = exp["compute_capability"]
    if required is None:
        c.add("compute_capability", "skipped", message="no compute capability expected")
        return
    by_cc = {}
    for gpu in _gpus(gi):
        by_cc.setdefault(gpu.get("compute_capability") or "unknown", []).append(gpu.get("index"))
    wrong = sorted((cc, idx) for cc, idx in by_cc.items() if cc != required)
    if not by_cc:
        c.add("compute_capability", "fail", found="no GPUs", required=required, message="no GPU to check",
              fix="see gpu_count")
        return
    if not wrong:
        c.add("compute_capability", "pass", found=required, required=required,
              message="compute capability %s on %s" % (required, _gpu_list(by_cc[required])))
        return
    for cc, idx in wrong:
        c.add("compute_capability", "fail", found="%s (%s)" % (cc, _gpu_list(idx)), required=required,
              message="compute capability %s found, %s required (%s)" % (cc, required, _gpu_list(idx)),
              fix="these GPUs cannot run the sm_%s build: use GPUs of compute capability %s"
                  % (required.replace(".", "") + "a", required))


def _check_driver_branch(c, gi, exp):
    required = exp["driver_min_branch"]
    version = gi.get("driver_version")
    branch = gi.get("driver_branch")
    if branch is None and version:
        match = re.match(r"^(\d+)", version)
        branch = int(match.group(1)) if match else None
    if branch is None:
        c.add("driver_branch", "fail", found="unknown", required=">= %d" % required, message="driver version unknown",
              fix=driver_install_fix(exp))
    elif branch >= required:
        c.add("driver_branch", "pass", found=version, required=">= %d" % required)
    else:
        c.add("driver_branch", "fail", found="%s (branch %d)" % (version, branch), required=">= %d" % required,
              message="driver branch %d found, %d or newer required" % (branch, required),
              fix="CUDA 13 builds need branch 580 or newer: " + driver_install_fix(exp))


def _toolkit_requirement(tk, exp):
    """The CUDA version the driver must support: the installed nvcc's release, else cuda_toolkit_min."""
    if tk and tk.get("installed") and version_tuple(tk.get("release")):
        return tk["release"], "nvcc %s" % tk["release"]
    if exp["cuda_toolkit_min"]:
        return exp["cuda_toolkit_min"], "cuda_toolkit_min"
    return None, None


def _check_cuda_driver_version(c, gi, tk, exp):
    required, source = _toolkit_requirement(tk, exp)
    found = gi.get("cuda_driver_version")
    if required is None:
        c.add("cuda_driver_version", "skipped", found=found, message="no toolkit and no cuda_toolkit_min")
        return
    req = ">= %s (%s)" % (required, source)
    if version_tuple(found) is None:
        c.add("cuda_driver_version", "fail", found="unknown", required=req,
              message="the nvidia-smi header shows no CUDA version", fix="run nvidia-smi and check its header")
    elif version_tuple(found)[:2] >= version_tuple(required)[:2]:
        c.add("cuda_driver_version", "pass", found=found, required=req)
    else:
        c.add("cuda_driver_version", "fail", found="%s (driver %s)" % (found, gi.get("driver_version")), required=req,
              message="driver supports CUDA %s, the toolkit needs %s" % (found, required),
              fix="upgrade the driver to one supporting CUDA %s (branch >= %d), or use an older toolkit"
                  % (required, exp["driver_min_branch"]))


def _toolkit_why(exp):
    """Why the minimum is what it is, when the FP4 table raised it; and the other fix it allows."""
    basis = [b for b in exp.get("cuda_toolkit_basis") or [] if b != "cuda_toolkit_min"]
    why = " (%s)" % "; ".join(basis) if basis else ""
    jit = any(b.startswith("FlashInfer JIT") for b in basis)
    return why, (", or build the FP4 modules ahead of time and set sglang_fp4_modules_prebuilt: true" if jit else "")


def _check_cuda_toolkit(c, tk, exp):
    minimum = exp["cuda_toolkit_min"]
    req = ">= %s" % minimum if minimum else "installed"
    why, other_fix = _toolkit_why(exp)
    if not tk or not tk.get("installed"):
        if not exp["require_toolkit"] and not exp.get("fp4_needs_nvcc"):
            c.add("cuda_toolkit", "skipped", found="not installed", required=req, message="toolkit not required")
            return False
        c.add("cuda_toolkit", "fail", found="nvcc not found", required=req, message="CUDA toolkit missing" + why,
              fix="install the CUDA toolkit %s (e.g. cuda-toolkit-13-0) or point the nvcc option at it%s" % (req, other_fix))
        return False
    release = tk.get("release")
    if minimum and (version_tuple(release) is None or version_tuple(release) < version_tuple(minimum)):
        c.add("cuda_toolkit", "fail", found="%s (%s)" % (release, tk.get("nvcc")), required=req,
              message="CUDA toolkit %s found, %s required%s" % (release, req, why),
              fix="install CUDA toolkit %s and put its nvcc first%s" % (req, other_fix))
        return True
    c.add("cuda_toolkit", "pass", found="%s (%s)" % (release, tk.get("nvcc")), required=req)
    return True


def _check_toolkit_arch(c, tk, exp, toolkit_ok):
    archs = exp["toolkit_archs"]
    if not archs:
        c.add("toolkit_arch", "skipped", message="no toolkit_archs expected")
        return
    if not toolkit_ok:
        c.add("toolkit_arch", "skipped", required=", ".join(archs), message="no nvcc to test with")
        return
    tests = tk.get("arch_tests") or {}
    bad = []
    for arch in archs:
        entry = tests.get(arch)
        if not isinstance(entry, dict):
            bad.append((arch, "not tested", "run cuda_toolkit_info with archs including %s" % arch))
        elif not entry.get("compiles"):
            cls = entry.get("error_class")
            if cls == "host_compiler":
                fix = "install a host compiler nvcc supports (gcc/g++) and rerun"
            else:
                fix = "install a CUDA toolkit that supports %s%s" % (
                    arch, " (%s or newer)" % exp["cuda_toolkit_min"] if exp["cuda_toolkit_min"] else "")
            bad.append((arch, "does not compile (%s)" % (cls or "error"), fix))
    if not bad:
        c.add("toolkit_arch", "pass", found="compiles: " + ", ".join(archs), required=", ".join(archs))
        return
    for arch, why, fix in bad:
        c.add("toolkit_arch", "fail", found="%s %s" % (arch, why), required="%s compiles" % arch,
              message="nvcc %s: %s %s" % (tk.get("release"), arch, why), fix=fix)


def _check_fp4_kernels(c, exp):
    """The planned unit's FP4 backends against the table (_fp4_kernels): each choice must have SM 12.0 kernels. The
    nvcc they need is the cuda_toolkit rule's minimum."""
    plan = fp4_plan(exp)
    if plan is None:
        c.add("fp4_kernels", "skipped", message="no SGLang release given (gpu_preflight_sglang_release)")
    elif not plan["nvfp4"]:
        c.add("fp4_kernels", "skipped", message="not an NVFP4 launch on an SM 12.0 GPU")
    elif not plan["problems"]:
        c.add("fp4_kernels", "pass", found="%s" % ", ".join("%s %s" % (r["flag"], r["choice"]) for r in plan["rows"]),
              required="SM 12.0 kernels in SGLang %s" % exp["sglang_release"])
    for problem in (plan or {}).get("problems") or []:
        c.add("fp4_kernels", "fail", found="%s %s" % (problem["flag"] or "SGLang", problem["value"]),
              required="SM 12.0 kernels in SGLang %s" % exp["sglang_release"], message=problem["problem"], fix=problem["fix"])


def _check_kernel_module(c, gi, exp):
    required = exp["kernel_module"]
    found = gi.get("kernel_module")
    if required is None:
        c.add("kernel_module", "skipped", found=found, message="no kernel module type expected")
    elif found == required:
        c.add("kernel_module", "pass", found=found, required=required)
    elif found is None:
        c.add("kernel_module", "fail", found="unknown", required=required,
              message="could not read the driver version file",
              fix="check that the nvidia module is loaded (cat /proc/driver/nvidia/version)")
    else:
        fix = driver_install_fix(exp) if required == "open" else "install the proprietary driver packages and reboot"
        c.add("kernel_module", "fail", found=found, required=required,
              message="%s kernel module loaded, %s required" % (found, required), fix=fix)


def _check_mig(c, gi, exp):
    if exp["mig_allowed"]:
        c.add("mig", "skipped", message="MIG allowed")
        return
    enabled = [g.get("index") for g in _gpus(gi) if g.get("mig_enabled")]
    if enabled:
        c.add("mig", "fail", found="MIG enabled on %s" % _gpu_list(enabled), required="MIG disabled",
              message="MIG enabled on %s" % _gpu_list(enabled),
              fix="nvidia-smi -i %s -mig 0, then reset the GPUs or reboot" % ",".join(str(i) for i in enabled))
    else:
        c.add("mig", "pass", found="MIG disabled", required="MIG disabled")


def _check_persistence(c, gi, exp):
    if not exp["persistence_mode"]:
        c.add("persistence_mode", "skipped", message="persistence mode not required")
        return
    off = [g.get("index") for g in _gpus(gi) if g.get("persistence_mode") is not True]
    if off:
        c.add("persistence_mode", "fail", found="off on %s" % _gpu_list(off), required="on",
              message="persistence mode off on %s" % _gpu_list(off),
              fix="systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1)")
    else:
        c.add("persistence_mode", "pass", found="on", required="on")


def _check_memory_free(c, gi, exp):
    """Free memory per GPU: an absolute floor (min_free_mib) and/or a fraction of each GPU's total
    (min_free_fraction, the share the server claims with --mem-fraction-static)."""
    floor, fraction = exp["min_free_mib"], exp["min_free_fraction"]
    if floor is None and fraction is None:
        c.add("gpu_memory_free", "skipped", message="no free-memory expectation")
        return

    def needed(g):
        by_fraction = int((g.get("memory_total_mib") or 0) * fraction) if fraction is not None else 0
        return max(floor or 0, by_fraction)

    parts = []
    if floor is not None:
        parts.append(">= %d MiB" % floor)
    if fraction is not None:
        parts.append(">= %g of total" % fraction)
    required = " and ".join(parts)
    low = [g for g in _gpus(gi) if (g.get("memory_free_mib") or 0) < needed(g)]
    if not low:
        c.add("gpu_memory_free", "pass", found="enough free on every GPU", required=required)
        return
    worst = min(low, key=lambda g: (g.get("memory_free_mib") or 0) - needed(g))
    c.add("gpu_memory_free", "fail", required=required,
          found="%s MiB free on GPU %s, %d MiB needed (%s short)" % (worst.get("memory_free_mib"), worst.get("index"), needed(worst),
                                                                     _gpu_list([g.get("index") for g in low])),
          message="not enough free memory on %s" % _gpu_list([g.get("index") for g in low]),
          fix="stop what holds GPU memory (nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv)")


def _check_ecc(c, gi, exp):
    want = exp["require_ecc"]
    if want is None:
        c.add("ecc", "skipped", message="no ECC expectation")
        return
    bad = [g.get("index") for g in _gpus(gi) if bool(g.get("ecc_enabled")) != want]
    state = "on" if want else "off"
    if bad:
        c.add("ecc", "fail", found="ECC %s on %s" % ("off or unsupported" if want else "on", _gpu_list(bad)),
              required="ECC %s" % state, message="ECC not %s on %s" % (state, _gpu_list(bad)),
              fix="nvidia-smi -i %s -e %d, then reboot" % (",".join(str(i) for i in bad), 1 if want else 0))
    else:
        c.add("ecc", "pass", found="ECC %s" % state, required="ECC %s" % state)


def _check_topology(c, gi):
    gpus = _gpus(gi)
    topo = gi.get("topology") or {}
    multi = len(gpus) > 1
    acs = gi.get("acs") or {}
    if not multi:
        c.add("pcie_acs", "skipped", message="single GPU")
    elif not acs.get("available"):
        c.add("pcie_acs", "skipped", message="ACS unknown: %s" % acs.get("reason", "lspci output not available"))
    elif topo.get("nvlink"):
        c.add("pcie_acs", "pass", found="GPUs linked by NVLink", required="no ACS redirect on GPU P2P paths")
    elif acs.get("acs_enabled"):
        c.add("pcie_acs", "warn", found="ACS enabled on %d of %d PCIe ports (%d redirect P2P); GPUs on PCIe only"
                                        % (acs.get("enabled_count", 0), acs.get("ports_checked", 0), acs.get("redirect_count", 0)),
              required="ACS off on the PCIe bridges between GPUs",
              message="ACS enabled on %d of %d PCIe ports (%d with P2P redirect) while the GPUs talk over PCIe only: "
                      "peer-to-peer traffic may go through the root complex"
                      % (acs.get("enabled_count", 0), acs.get("ports_checked", 0), acs.get("redirect_count", 0)),
              fix="disable ACS in the BIOS (or clear ACSCtl with setpci at boot) and confirm P2P bandwidth "
                  "with p2pBandwidthLatencyTest / all_reduce_perf")
    else:
        c.add("pcie_acs", "pass", found="ACS off on %d ports" % acs.get("ports_checked", 0), required="ACS off")
    iommu = gi.get("iommu") or {}
    if not multi:
        c.add("iommu", "skipped", message="single GPU")
    elif iommu.get("enabled") is None:
        c.add("iommu", "skipped", message="IOMMU state unknown")
    elif iommu.get("enabled") and not iommu.get("passthrough"):
        flags = " ".join(iommu.get("cmdline_flags") or []) or "kernel default"
        c.add("iommu", "warn", found="IOMMU on (%s, %s IOMMU groups)" % (flags, iommu.get("groups")),
              required="IOMMU off or iommu=pt",
              message="IOMMU on (%s, %s groups): DMA translation can slow or break GPU peer-to-peer" % (flags, iommu.get("groups")),
              fix="boot with iommu=pt (or disable the IOMMU: amd_iommu=off / intel_iommu=off) unless VFIO needs it")
    else:
        c.add("iommu", "pass", found="passthrough" if iommu.get("passthrough") else "IOMMU off", required="IOMMU off or iommu=pt")
    nodes = {}
    for gpu in gpus:
        if gpu.get("numa_node") is not None:
            nodes.setdefault(gpu["numa_node"], []).append(gpu.get("index"))
    if not nodes:
        for info in topo.get("gpus") or []:
            aff = info.get("numa_affinity")
            if aff is not None and re.match(r"^\d+$", str(aff)):
                nodes.setdefault(int(aff), []).append(info.get("index"))
    if not multi:
        c.add("numa_split", "skipped", message="single GPU")
    elif not nodes:
        c.add("numa_split", "skipped", message="NUMA placement unknown")
    elif len(nodes) > 1:
        where = "; ".join("NUMA %d: %s" % (n, _gpu_list(idx)) for n, idx in sorted(nodes.items()))
        c.add("numa_split", "warn", found=where, required="all GPUs on one NUMA node",
              message="GPUs split across %d NUMA nodes (%s): cross-node pairs go over the CPU interconnect (SYS)" % (len(nodes), where),
              fix="expect lower all-reduce bandwidth across sockets; pin the server's CPU threads near its GPUs "
                  "(numactl / CPUAffinity) and keep tensor-parallel groups within a node where the size allows")
    else:
        c.add("numa_split", "pass", found="NUMA %d" % list(nodes)[0], required="one NUMA node")


def _check_smoke(c, smoke):
    """The role's optional CUDA smoke run: a registered command result ({rc, stdout, ...}) or None."""
    if not isinstance(smoke, dict) or smoke.get("skipped") or "rc" not in smoke:
        c.add("gpu_smoke", "skipped", message="smoke test not run")
        return
    rc = smoke.get("rc")
    lines = [line.strip() for line in (smoke.get("stdout") or "").splitlines() if line.strip()]
    bad = [line for line in lines if "FAILED" in line or "failed" in line or line.startswith("no CUDA")]
    if rc == 0:
        c.add("gpu_smoke", "pass", found="%d GPU(s) computed correctly" % len([x for x in lines if ": ok" in x]),
              required="every GPU computes")
        return
    if rc == 124:
        found = "smoke test timed out"
    else:
        found = "; ".join(bad) or "rc %s: %s" % (rc, (smoke.get("stderr") or smoke.get("msg") or "").strip()[:200])
    c.add("gpu_smoke", "fail", found=found, required="every GPU computes", message="CUDA smoke test failed: %s" % found,
          fix="a GPU does not compute: check dmesg for Xid errors, reset the GPU (nvidia-smi -r -i ID) or reboot")


def evaluate(gpu_info, toolkit=None, expectations=None, waivers=None, smoke=None):
    """Run every rule. Returns {passed, failed, warnings, waived, checks, table, unused_waivers}."""
    exp = normalize_expectations(expectations)
    waived_rules = normalize_waivers(waivers)
    if not isinstance(gpu_info, dict):
        raise PreflightError("gpu_info must be the result of llmops.sglang.gpu_info (a dict), got %s" % type(gpu_info).__name__)
    if toolkit is not None and not isinstance(toolkit, dict):
        raise PreflightError("toolkit must be the result of llmops.sglang.cuda_toolkit_info (a dict) or null")
    tk = toolkit or {}
    c = _Checks()
    gpus_ok = _check_gpu_query(c, gpu_info, exp)
    if gpus_ok:
        _check_gpu_count(c, gpu_info, exp)
        _check_compute_capability(c, gpu_info, exp)
        _check_driver_branch(c, gpu_info, exp)
        _check_cuda_driver_version(c, gpu_info, tk, exp)
    toolkit_ok = _check_cuda_toolkit(c, tk, exp)
    _check_toolkit_arch(c, tk, exp, toolkit_ok)
    _check_fp4_kernels(c, exp)
    if gpus_ok:
        _check_kernel_module(c, gpu_info, exp)
        _check_mig(c, gpu_info, exp)
        _check_persistence(c, gpu_info, exp)
        _check_memory_free(c, gpu_info, exp)
        _check_ecc(c, gpu_info, exp)
        _check_smoke(c, smoke)
        _check_topology(c, gpu_info)
    else:
        for rule in _NEEDS_GPUS:
            c.add(rule, "skipped", message="nvidia-smi failed")
    order = dict((rule, pos) for pos, rule in enumerate(RULES))
    checks = sorted(c.items, key=lambda item: order[item["rule"]])

    failed, warnings, waived = [], [], []
    used = set()
    for item in checks:
        if item["status"] in ("fail", "warn") and item["rule"] in waived_rules:
            item["status"] = "waived"
            item["waiver_reason"] = waived_rules[item["rule"]]
            used.add(item["rule"])
            waived.append({"rule": item["rule"], "reason": waived_rules[item["rule"]], "found": item["found"],
                           "required": item["required"]})
        elif item["status"] == "fail":
            failed.append(dict((k, item[k]) for k in ("rule", "found", "required", "fix", "message")))
        elif item["status"] == "warn":
            warnings.append(dict((k, item[k]) for k in ("rule", "found", "required", "fix", "message")))
    return {
        "passed": not failed,
        "failed": failed,
        "warnings": warnings,
        "waived": waived,
        "checks": checks,
        "unused_waivers": sorted(set(waived_rules) - used),
        "expectations": exp,
        "table": render_table(checks),
    }


_COLUMNS = (("RULE", 19), ("STATUS", 7), ("RESULT", 64), ("FIX / NOTE", 60))


def _result_text(item):
    if item.get("message") and item["status"] in ("fail", "warn", "waived", "skipped"):
        return item["message"]
    found, required = item.get("found"), item.get("required")
    if found is None and required is None:
        return item.get("message") or ""
    text = "found %s" % ("-" if found is None else found)
    if required is not None:
        text += "; required %s" % required
    return text


def _note_text(item):
    if item["status"] == "waived":
        return "waived: %s" % item.get("waiver_reason", "")
    if item["status"] in ("fail", "warn"):
        return item.get("fix") or ""
    return ""


def render_table(checks):
    """A fixed-width table an operator can read in a failure message; long cells wrap in their column."""
    widths = [width for title, width in _COLUMNS]
    lines = [" | ".join(title.ljust(width) for title, width in _COLUMNS).rstrip(),
             "-+-".join("-" * w for w in widths)]
    for item in checks:
        cells = (item["rule"], item["status"].upper(), _result_text(item), _note_text(item))
        wrapped = [textwrap.wrap(str(text), w) or [""] for text, w in zip(cells, widths)]
        for row in range(max(len(col) for col in wrapped)):
            parts = [(col[row] if row < len(col) else "").ljust(w) for col, w in zip(wrapped, widths)]
            lines.append(" | ".join(parts).rstrip())
    return "\n".join(lines)
