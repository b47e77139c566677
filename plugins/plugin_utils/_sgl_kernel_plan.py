# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""Every decision of the sgl_kernel role: arch resolution, cache key, build options, verification inputs, the
stamp and what each installing host must do. Runs on the controller (filter ``llmops.sglang.sgl_kernel_plan``).

``plan(values)`` reads the role's settings (SETTINGS, as defaults/main.yml names them), the run
(``_sgl_kernel_run``: host, play_hosts, check_mode, tags, probe_source - the probe's source) and the results the
tasks registered so far (RESULTS):

  _sgl_kernel_toolkit          cuda_toolkit_info on the build host
  _sgl_kernel_git              the checkout (``after`` = source commit)
  _sgl_kernel_build_probe      files/sgl_kernel_probe.py on the build host (stdout: JSON)
  _sgl_kernel_build_venv_made  creating the build venv
  _sgl_kernel_build_reqs       pip installing the missing build requirements
  _sgl_kernel_build_reprobe    the probe again after that install
  _sgl_kernel_configure        build.sh --configure-only (the dry run's CMake configure)
  _sgl_kernel_cmake_plan       cmake_cuda_plan on the dry run's build tree
  _sgl_kernel_build_result     the finished build job (async_status: rc, delta)
  _sgl_kernel_build_tail       the end of the build log, read when the build failed
  _sgl_kernel_staged           find: the wheel the build wrote to staging/
  _sgl_kernel_old_wheels       find: the wheels already in dist/
  _sgl_kernel_verify           cuda_binary_info on that wheel
  _sgl_kernel_fetched          fetch of the wheel to the controller
  _sgl_kernel_controller_wheel stat (sha256) of the controller's copy
  sgl_kernel_build             the build host's result (facts for every host; false when the build host has none)
  _sgl_kernel_runtime_probe    the probe of an installing host's runtime venv
  _sgl_kernel_venv_made        creating the runtime venv
  _sgl_kernel_wheel_copied     copying the wheel to an installing host
  _sgl_kernel_pinned_fetch     pip download of the wheel the pinned SGLang release pins (build host)
  _sgl_kernel_pinned_verify    cuda_binary_info on that wheel (failed_when false: its verdict is evidence)

Each section of the plan appears once its inputs exist; the tasks only wire its values.
Requirements are compared by the collection's one pin rule (``_pins.unmet``).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re

from ansible_collections.llmops.sglang.plugins.module_utils import _cmake_plan, _fp4_kernels
from ansible_collections.llmops.sglang.plugins.module_utils._cuda_binary import torch_arch
from ansible_collections.llmops.sglang.plugins.module_utils._coerce import is_empty, truthy as to_bool
from ansible_collections.llmops.sglang.plugins.module_utils._cuda_toolkit import version_tuple
from ansible_collections.llmops.sglang.plugins.plugin_utils._pins import PinError, canonical_name, index_options, unmet
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import cache_key, ran, registered

GIB = 1024 ** 3
# The settings the plan reads; the role's vars/main.yml hands exactly these over (_sgl_kernel_setting_names; a unit
# test keeps the two equal).
SETTINGS = tuple("sgl_kernel_" + name for name in (
    "git_repo", "git_ref", "source_subdir", "dist_name", "cuda_archs", "prefer_family", "arch_cmake_variable",
    "enable_fp4", "enable_below_sm90", "variant_defines", "extra_cmake_defines", "build_env", "dry_run",
    "restrict_archs", "dry_run_cost_factor", "cuda_home", "cuda_min_release", "python", "build_venv",
    "build_requirements", "cuobjdump_requirement", "pip_wheelhouse", "pip_index_url", "ccache",
    "github_artifactory", "fetchcontent_source_dirs", "fetchcontent_disconnected", "build_job_mem_gib",
    "build_jobs", "compile_threads", "build_host", "build_dir", "force_rebuild", "build_timeout",
    "build_poll_interval", "controller_dir", "require_archs", "cuobjdump", "venv", "venv_create", "wheel_dir",
    "check_torch", "smoke_test", "smoke_test_code", "source", "fp4_launch_args",
))
# The results it reads, as the module docstring lists them (_sgl_kernel_result_names); None until registered.
RESULTS = (
    "_sgl_kernel_toolkit", "_sgl_kernel_git", "_sgl_kernel_build_probe", "_sgl_kernel_build_venv_made",
    "_sgl_kernel_build_reqs", "_sgl_kernel_build_reprobe", "_sgl_kernel_configure", "_sgl_kernel_cmake_plan",
    "_sgl_kernel_build_result", "_sgl_kernel_build_tail", "_sgl_kernel_staged", "_sgl_kernel_old_wheels",
    "_sgl_kernel_verify", "_sgl_kernel_fetched", "_sgl_kernel_controller_wheel", "sgl_kernel_build",
    "_sgl_kernel_runtime_probe", "_sgl_kernel_venv_made", "_sgl_kernel_wheel_copied", "_sgl_kernel_pinned_fetch",
    "_sgl_kernel_pinned_verify",
)
# nvcc 12.9 added the family targets (sm_100f, sm_103f, sm_110f, sm_120f, sm_121f: the Blackwell numbers).
FAMILY_RELEASE = (12, 9)
_ARCH_INPUT = re.compile(r"^(sm_)?[0-9]+[af]?$")
_ARCH_SPECIFIC_BLACKWELL = re.compile(r"^(1[0-9][0-9])a$")
_PIP_CHANGED = re.compile(r"^(Successfully installed|Would install) ", re.M)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STAMP_NAME = "sgl-kernel-build.json"
DRY_RUN_TAG = "sgl_kernel_dry_run"
INSTALLED_STAMP_NAME = ".llmops-sgl-kernel.json"


# The verdicts that stop the role: tasks/plan.yml fails with the first (``error``) each time it works out the plan.
# Each is due once the result it waits for is there (an install's, once the wheel copy ran or was skipped: a copy
# mends a local wheel with other bytes).
STOP_AT_ONCE = ("input_error", "pinned_error", "toolkit_error", "configure_error", "dry_run_error", "build_failure",
                "staged_error", "controller_error", "build_result_error", "install_error")
SOURCES = ("auto", "build", "wheel")
# What an sgl-kernel FP4 op's kernels are called (the pattern cuda_binary_info's require_kernels takes)
FP4_KERNELS = "fp4|e2m1"
_PIP_SAVED = re.compile(r"^(?:Saved|File was already downloaded) (\S+\.whl)\s*$", re.M)


class KernelPlanError(ValueError):
    """An input the plan cannot use; the message names it and the fix."""


def nice_json(value):
    """Ansible's ``to_nice_json`` (sorted, indent 4), plus the final newline the files get."""
    return json.dumps(value, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def probe_argv(s, values, request):
    """The probe (files/sgl_kernel_probe.py, run by sgl_kernel_python) with its JSON request."""
    return [s["python"], "-c", (values.get("_sgl_kernel_run") or {}).get("probe_source") or "", json.dumps(request)]


def parse_probe(result, what):
    """The probe's JSON from a registered command result; an error naming the host-side cause otherwise."""
    try:
        data = json.loads(result.get("stdout") or "")
    except ValueError:
        raise KernelPlanError("sgl_kernel: the %s probe printed no JSON (stdout %r, stderr %r); run "
                              "roles/sgl_kernel/files/sgl_kernel_probe.py on the host to see why"
                              % (what, (result.get("stdout") or "")[:200], (result.get("stderr") or "")[:200]))
    if not isinstance(data, dict) or not isinstance(data.get("venv"), dict):
        raise KernelPlanError("sgl_kernel: the %s probe's answer has no venv section: %r" % (what, str(data)[:200]))
    return data


# ---------------------------------------------------------------------------------------------
# Inputs and archs

def input_error(s, play_hosts):
    """None, or one message naming every bad setting and the form to write."""
    problems = []
    if s["build_host"] not in (play_hosts or []):
        problems.append("the build host (%s) must be one of the play's hosts (%s)"
                        % (s["build_host"], ", ".join(play_hosts or [])))
    if not s["cuda_archs"]:
        problems.append("sgl_kernel_cuda_archs is empty")
    for name in ("cuda_archs", "require_archs"):
        bad = [a for a in s[name] or [] if not _ARCH_INPUT.match(str(a))]
        if bad:
            problems.append("sgl_kernel_%s has %s: write archs as 120a or sm_120a" % (name, ", ".join(map(str, bad))))
    if not str(s["git_ref"] or ""):
        problems.append("sgl_kernel_git_ref is empty")
    if str(s["source"]) not in SOURCES:
        problems.append("sgl_kernel_source must be one of %s (got %r)" % (", ".join(SOURCES), s["source"]))
    for name, minimum, convert in (("build_job_mem_gib", 0, float), ("build_jobs", 1, int),
                                   ("compile_threads", 1, int), ("build_poll_interval", 1, int),
                                   ("dry_run_cost_factor", 0, float)):
        value = s[name]
        if value is None and name in ("build_jobs", "compile_threads"):
            continue
        try:
            ok = convert(value) > 0 if minimum == 0 else convert(value) >= minimum
        except (TypeError, ValueError):
            ok = False
        if not ok:
            problems.append("sgl_kernel_%s must be %s (got %r)" % (name, "positive" if minimum == 0 else ">= 1", value))
    return "sgl_kernel: bad input: %s." % "; ".join(problems) if problems else None


def toolkit_archs(require_archs):
    """The archs nvcc must test-compile, sm_ spelled: 120a -> sm_120a."""
    return [a if str(a).startswith("sm_") else "sm_" + str(a) for a in require_archs]


def family_ok(prefer_family, nvcc_release):
    """Whether family targets are built: asked for, and nvcc has them (12.9 or newer)."""
    release = version_tuple(nvcc_release)
    return to_bool(prefer_family) and release is not None and release[:2] >= FAMILY_RELEASE


def resolve_archs(cuda_archs, prefer_family, nvcc_release):
    """CMake spelling of the archs to build: sm_120a -> 120a, or 120f when family targets are built."""
    suffix = "f" if family_ok(prefer_family, nvcc_release) else "a"
    archs = [re.sub(r"^sm_", "", str(a)) for a in cuda_archs]
    return [_ARCH_SPECIFIC_BLACKWELL.sub(r"\g<1>" + suffix, a) for a in archs]


def torch_arch_list(archs):
    """TORCH_CUDA_ARCH_LIST: 120f;90 -> 12.0f;9.0."""
    return ";".join(torch_arch("sm_" + a) for a in archs)


def resolve_target(s):
    """The SM 12.0 target (_fp4_kernels.SM120_TARGET) where the arch settings are null (the role's defaults): build
    120a, require sm_120a; and, where sgl_kernel_cuda_min_release is null, the first nvcc that compiles every required
    arch the FP4 table knows (12.8 for sm_120a; None for others: any nvcc that compiles them)."""
    if is_empty(s["cuda_archs"]):
        s["cuda_archs"] = [_fp4_kernels.sm120_arch("cmake")]
    if is_empty(s["require_archs"]):
        s["require_archs"] = [_fp4_kernels.sm120_arch()]
    if is_empty(s["cuda_min_release"]):
        s["cuda_min_release"] = _fp4_kernels.nvcc_minimum({"rows": []}, toolkit_archs(s["require_archs"]))[0]
    return s


def toolkit_error(toolkit, s):
    """None when nvcc is installed, new enough and compiles the required archs; else the message."""
    release = toolkit.get("release")
    minimum = None if s["cuda_min_release"] is None else str(s["cuda_min_release"])
    new_enough = version_tuple(release) and (minimum is None or version_tuple(minimum) and version_tuple(release) >= version_tuple(minimum))
    if toolkit.get("installed") and new_enough and toolkit.get("archs_ok"):
        return None
    failed = [a for a, r in sorted((toolkit.get("arch_tests") or {}).items()) if not (r or {}).get("compiles")]
    minimum = minimum or "any release"
    return ("sgl_kernel: %s/bin/nvcc %s; the build needs CUDA >= %s that compiles %s (%s failed). "
            "Install CUDA %s or newer (13.0 for torch cu130) and set sgl_kernel_cuda_home."
            % (s["cuda_home"], "release %s" % release if toolkit.get("installed") else "is missing", minimum,
               ", ".join(map(str, s["require_archs"])), ", ".join(failed) or "no compile result", minimum))


# ---------------------------------------------------------------------------------------------
# Build venv: pip source, cuobjdump, requirements

def toolkit_cuobjdump(cuda_home):
    return "%s/bin/cuobjdump" % cuda_home


def cuobjdump_path(explicit, cuda_home, toolkit_has_it, venv_cuobjdump):
    """The cuobjdump that verifies the wheel: the explicit one, the toolkit's, or the build venv's pip package."""
    if explicit:
        return explicit
    return toolkit_cuobjdump(cuda_home) if toolkit_has_it else venv_cuobjdump


def build_requirements(requirements, cuobjdump_requirement, explicit_cuobjdump, toolkit_has_it):
    """What the build venv must hold: the requirements, plus pip's cuobjdump when nothing else provides one."""
    extra = [cuobjdump_requirement] if cuobjdump_requirement and not explicit_cuobjdump and not toolkit_has_it else []
    return list(requirements or []) + extra


def probe_packages(requirements, cuobjdump_requirement):
    """Distribution names whose installed versions the build probe reports: torch and every requirement's."""
    names = ["torch"]
    for item in list(requirements or []) + ([cuobjdump_requirement] if cuobjdump_requirement else []):
        try:
            name = canonical_name(re.split(r"[ ;<>=!~\[@]", str(item).strip(), maxsplit=1)[0])
        except (TypeError, ValueError):
            continue
        if name and name not in names:
            names.append(name)
    return names


def pip_changed(result):
    """Whether pip installed (or, with --dry-run, would install) anything."""
    return ran(result) and bool(_PIP_CHANGED.search(result.get("stdout") or ""))


# ---------------------------------------------------------------------------------------------
# Cache key, parallelism, CMake defines, environment

def key_defines(s, archs):
    """CMake defines that change the binary: part of the cache key."""
    defines = {"SGL_KERNEL_ENABLE_FP4": "ON" if to_bool(s["enable_fp4"]) else "OFF",
               "ENABLE_BELOW_SM90": "ON" if to_bool(s["enable_below_sm90"]) else "OFF"}
    if s["arch_cmake_variable"]:
        defines[s["arch_cmake_variable"]] = ";".join(archs)
    defines.update(s["variant_defines"] or {})
    defines.update(s["extra_cmake_defines"] or {})
    return defines


def parallelism(cores, mem_available_bytes, job_mem_gib, jobs, compile_threads):
    """(jobs, threads): slots = min(cores, available RAM / per-job budget), at least 1; jobs default to the
    slots, nvcc threads to what the slots leave per job. Unknown memory counts as room for one job."""
    mem_slots = max(1, int(int(mem_available_bytes or 0) / (float(job_mem_gib) * GIB)))
    slots = min(int(cores), mem_slots)
    jobs = int(jobs) if jobs else slots
    threads = int(compile_threads) if compile_threads else max(1, slots // jobs)
    return jobs, threads


def cmake_defines(s, defines, threads):
    """Every define passed to CMake: the key's, plus ones that do not change the binary."""
    result = dict(defines, SGL_KERNEL_COMPILE_THREADS=str(threads))
    if s["github_artifactory"]:
        result["GITHUB_ARTIFACTORY"] = s["github_artifactory"]
    if to_bool(s["fetchcontent_disconnected"]):
        result["FETCHCONTENT_FULLY_DISCONNECTED"] = "ON"
    # pre-fetched sources: FetchContent name repo-cutlass -> FETCHCONTENT_SOURCE_DIR_REPO-CUTLASS
    for name, path in (s["fetchcontent_source_dirs"] or {}).items():
        result["FETCHCONTENT_SOURCE_DIR_" + str(name).upper()] = path
    return result


def build_environment(s, archs, jobs, threads, use_ccache):
    """The build's environment (written into build.sh)."""
    env = {"PATH": "%s/bin:%s/bin:%s" % (s["build_venv"], s["cuda_home"], SYSTEM_PATH),
           "CUDA_HOME": s["cuda_home"],
           "CUDACXX": "%s/bin/nvcc" % s["cuda_home"],
           "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs),
           "MAX_JOBS": str(jobs),
           "SGL_KERNEL_COMPILE_THREADS": str(threads),
           "TORCH_CUDA_ARCH_LIST": torch_arch_list(archs),
           "CMAKE_POLICY_VERSION_MINIMUM": "3.5"}
    if use_ccache:
        env["CCACHE_DIR"] = s["build_dir"] + "/ccache"
    if s["github_artifactory"]:
        env["GITHUB_ARTIFACTORY"] = s["github_artifactory"]
    env.update(s["build_env"] or {})
    return env


def build_decision(force, old_stamp, key, stamp_wheel_sha256):
    """(build needed, why): forced, no stamp, another key, or the stamp's wheel missing or altered."""
    if to_bool(force):
        return True, "forced"
    if old_stamp is None:
        return True, "no stamp"
    if old_stamp.get("key", "") != key:
        return True, "key changed"
    if stamp_wheel_sha256 is None or stamp_wheel_sha256 != (old_stamp.get("wheel") or {}).get("sha256", ""):
        return True, "wheel missing or altered"
    return False, None


def duration_seconds(value):
    """Seconds from a number or async_status' delta (``0:12:01.5``); None when it is neither."""
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    parts = str(value or "").split(":")
    try:
        return sum(float(x) * 60 ** i for i, x in enumerate(reversed(parts))) if len(parts) == 3 else None
    except ValueError:
        return None


def dry_run_fixes(s, archs):
    """What to change when the configured tree would miss the required archs or NVFP4."""
    where = ("sgl_kernel_arch_cmake_variable is %s, so CMake adds %s to every CUDA target unless the tree overrides it"
             % (s["arch_cmake_variable"], ";".join(archs)) if s["arch_cmake_variable"] else
             "sgl_kernel_arch_cmake_variable is empty, so only the tree's own -gencode list counts")
    required = ", ".join(toolkit_archs(s["require_archs"]))
    return {"arch": "set sgl_kernel_arch_cmake_variable: CMAKE_CUDA_ARCHITECTURES with sgl_kernel_cuda_archs: [%s], or the "
                    "tree's option that adds %s (SGL_KERNEL_ENABLE_SM100A in v0.5-era trees for sm_120a) in "
                    "sgl_kernel_variant_defines (%s)" % (", ".join(map(str, s["cuda_archs"])), required, where),
            "nvfp4": "set sgl_kernel_enable_fp4: true (SGL_KERNEL_ENABLE_FP4=ON); if CMake did not use that define, put the "
                     "tree's own FP4 option (see its CMakeLists.txt) in sgl_kernel_extra_cmake_defines"}


def _dry_run_plan(s, v, p, old_stamp):
    """The configure's failure, the dry run's report and its verdict (the real build runs it first too)."""
    configure = v.get("_sgl_kernel_configure")
    if ran(configure):
        p["configure_error"] = None if configure.get("rc") == 0 else (
            "sgl_kernel: CMake's configure of %s/src/%s failed (rc %s); last lines of %s:\n%s"
            % (s["build_dir"], s["source_subdir"], configure.get("rc"), p["dry_run_log"], configure.get("stdout") or ""))
    cmake = v.get("_sgl_kernel_cmake_plan")
    if not ran(cmake):
        return
    unused = cmake.get("unused_defines") or []
    problems = _cmake_plan.check(cmake, p["toolkit_archs"], to_bool(s["enable_fp4"]), unused,
                                 p["archs"] if to_bool(s["restrict_archs"]) else None, dry_run_fixes(s, p["archs"]))
    if cmake.get("probe_error"):
        problems.append("the timing probe did not compile: %s" % cmake["probe_error"])
    last = (old_stamp or {}).get("build") or {}
    last = dict(last, seconds=duration_seconds(last.get("seconds")))
    p["dry_run_report"] = ["sgl-kernel %s, configured only (nothing compiled) in %s:" % (s["git_ref"], p["dry_run_dir"])] + \
        _cmake_plan.report(cmake, unused, problems, cmake.get("unit_seconds"), p["toolkit_archs"][0], s["dry_run_cost_factor"],
                           p["jobs"], last, to_bool(s["restrict_archs"]))
    # the report first: the role stops at this verdict as soon as it holds one
    p["dry_run_error"] = "\n".join(p["dry_run_report"] + ["sgl_kernel: the build would not give what is required: %s" % "; ".join(problems)]) \
        if problems else None
    p["build_plan"] = {"unit_archs": cmake.get("unit_archs"), "cuda_units": cmake.get("cuda_units"),
                       "cubins": cmake.get("cubins"), "nvfp4": cmake.get("nvfp4"), "unused_defines": unused}


# ---------------------------------------------------------------------------------------------
# The plan

class _Settings(dict):
    """The role's settings without their prefix; a missing one is named, not a KeyError."""

    def __missing__(self, name):
        raise KernelPlanError("sgl_kernel_%s is not set: the role's defaults/main.yml defines it; run the role, "
                              "not its task files alone" % name)


def _settings(values):
    prefix = "sgl_kernel_"
    return _Settings((k[len(prefix):], v) for k, v in values.items() if k.startswith(prefix))


# ---------------------------------------------------------------------------------------------
# Build or install: the FP4 table and the pinned wheel's kernels decide

def source_decision(s, verify=None):
    """Whether the build host builds sgl-kernel from source or takes the wheel the pinned SGLang release pins, and why.

    The FP4 table (_fp4_kernels) says, per release and chosen backend (sgl_kernel_fp4_launch_args; none: what auto
    becomes), who provides the SM 12.0 kernels. A release whose chosen backends call no sgl-kernel FP4 op needs of the
    wheel only cubins for the required archs; one that calls some also needs its FP4 kernels (FP4_KERNELS). The pinned
    wheel is fetched and checked for exactly that (``verify``: cuda_binary_info's result, None before it ran) and
    installed when it has it; otherwise, or for a release the table does not know, the source is built.
    Returns {check_pinned, use_pinned, pinned (name==version), kernels (patterns required), why, error}."""
    release = re.sub(r"^v(?=[0-9])", "", str(s["git_ref"]))
    out = {"check_pinned": False, "use_pinned": False, "pinned": None, "kernels": [], "why": None, "error": None}
    if s["source"] == "build":
        out["why"] = "sgl_kernel_source is build"
        return out
    if release not in _fp4_kernels.RELEASES:
        out["why"] = ("SGLang %s (sgl_kernel_git_ref) is not in the FP4 kernel table (%s): which sgl-kernel ops it calls is not "
                      "known, so the source is built" % (s["git_ref"], ", ".join(_fp4_kernels.RELEASES)))
        out["error"] = "sgl_kernel: sgl_kernel_source is wheel, but " + out["why"][:-len(", so the source is built")] if s["source"] == "wheel" else None
        return out
    rows = _fp4_kernels.kernel_plan(release, _fp4_kernels.CAPABILITY, s["fp4_launch_args"] or [], "NVFP4")["rows"]
    ops = [row for row in rows if row["provider"] == "sgl-kernel"]
    out.update(check_pinned=True, pinned="%s==%s" % (s["dist_name"], _fp4_kernels.RELEASES[release]["sglang-kernel"]),
               kernels=[FP4_KERNELS] if ops else [])
    uses = "; ".join("%s %s from %s" % (row["flag"], row["choice"], row["provider"]) for row in rows)
    calls = ("calls sgl-kernel FP4 ops (%s), so the wheel must carry %s kernels" % (", ".join(r["entry"] for r in ops), FP4_KERNELS)
             if ops else "calls no sgl-kernel FP4 op (%s)" % uses)
    if not ran(verify):
        out["why"] = "SGLang %s %s: checking %s" % (release, calls, out["pinned"])
        return out
    missing = (verify.get("missing_archs") or []) + (verify.get("missing_kernels") or [])
    if verify.get("sha256") and not missing:
        out.update(use_pinned=True, why="SGLang %s %s, and %s carries %s%s (cuda_binary_info): installing it instead of building" % (
            release, calls, out["pinned"], ", ".join(verify.get("required_archs") or []),
            " kernels for " + ", ".join(out["kernels"]) if out["kernels"] else " cubins"))
        return out
    lacks = str(verify.get("msg") or "missing %s" % ", ".join(map(str, missing)))
    out["why"] = "SGLang %s %s, but %s does not serve: %s; building from source" % (release, calls, out["pinned"], lacks)
    if s["source"] == "wheel":
        out["error"] = "sgl_kernel: sgl_kernel_source is wheel, but %s does not serve: %s" % (out["pinned"], lacks)
    return out


def _pinned_plan(s, v, run, p):
    """The pinned wheel: fetched into build_dir/pinned with the runtime venv's pip, checked, and (when it serves)
    recorded as the build host's result, so every host installs it as it would a built one."""
    decision = source_decision(s, v.get("_sgl_kernel_pinned_verify"))
    check = decision["check_pinned"] and not p["dry_run"]
    p["toolkit_archs"] = toolkit_archs(s["require_archs"])
    fetched = v.get("_sgl_kernel_pinned_fetch")
    found = _PIP_SAVED.findall((fetched or {}).get("stdout") or "") if ran(fetched) else []
    if ran(fetched) and not found:
        # an index or wheelhouse without it (offline hosts): the source is built, unless only the wheel will do
        failure = "pip download of %s named no wheel (rc %s; %s)" % (
            decision["pinned"], fetched.get("rc"), ((fetched.get("stderr") or fetched.get("msg") or "").strip().splitlines() or [""])[-1][:300])
        decision.update(use_pinned=False, why="%s: building from source" % failure,
                        error="sgl_kernel: sgl_kernel_source is wheel, but " + failure if s["source"] == "wheel" else None)
    p.update(check_pinned=check, use_pinned=check and decision["use_pinned"], pinned_kernels=decision["kernels"],
             pinned_error=decision["error"], why=decision["why"],
             pinned_wheel=found[-1] if found else None,
             pinned_argv=["%s/bin/python" % s["venv"], "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                          "--only-binary", ":all:", "--dest", s["build_dir"] + "/pinned"]
             + index_options(s["pip_wheelhouse"], s["pip_index_url"]) + [decision["pinned"] or ""])
    if not p["use_pinned"]:
        return
    verify = v["_sgl_kernel_pinned_verify"]
    wheel = posixpath.basename(p["pinned_wheel"])
    key = cache_key({"pinned": decision["pinned"], "sha256": verify["sha256"]})
    stamp = {"key": key, "source": {"pinned": decision["pinned"], "why": decision["why"]},
             "wheel": {"file": wheel, "sha256": verify["sha256"]},
             "verified": {"required_archs": verify.get("required_archs"), "accept_family": True, "required_kernels": decision["kernels"],
                          "elf_archs": verify.get("elf_archs"), "ptx_archs": verify.get("ptx_archs")}}
    p["record"] = {"key": key, "built": False, "stamp": stamp, "wheel_file": wheel, "wheel_path": p["pinned_wheel"],
                   "sha256": verify["sha256"], "torch_version": None, "source": "pinned", "why": decision["why"],
                   "controller_path": "%s/%s/%s" % (s["controller_dir"], key[:16], wheel)}
    _controller_plan(v, run, p, p["record"])


def _build_host_plan(s, v, run, p):
    """Build host: toolchain, build venv, cache key, build options, stamp, controller copies."""
    p["nvcc"] = "%s/bin/nvcc" % s["cuda_home"]
    p["toolkit_archs"] = toolkit_archs(s["require_archs"])
    p["probe_arch"] = p["toolkit_archs"][0]
    toolkit, git, first = v.get("_sgl_kernel_toolkit"), v.get("_sgl_kernel_git"), v.get("_sgl_kernel_build_probe")
    p["toolkit_error"] = toolkit_error(toolkit, s) if ran(toolkit) else None
    p["build_probe_argv"] = probe_argv(s, v, {
        "venv": s["build_venv"], "packages": probe_packages(s["build_requirements"], s["cuobjdump_requirement"]),
        "stamp": p["stamp_path"], "stamp_dir": p["dist_dir"], "exists": [toolkit_cuobjdump(s["cuda_home"])]})
    if not (ran(toolkit) and ran(git) and ran(first)):
        return p
    first = parse_probe(first, "build host")
    reprobe = v.get("_sgl_kernel_build_reprobe")
    probe = parse_probe(reprobe, "build host") if ran(reprobe) else first
    has_cuobjdump = bool(first.get("exists", {}).get(toolkit_cuobjdump(s["cuda_home"])))
    requirements = build_requirements(s["build_requirements"], s["cuobjdump_requirement"], s["cuobjdump"], has_cuobjdump)
    try:
        missing = unmet(requirements, first["venv"].get("packages") or {})
    except PinError as exc:
        raise KernelPlanError("sgl_kernel_build_requirements: %s" % exc)
    reqs = v.get("_sgl_kernel_build_reqs")
    p.update(
        requirements_missing=missing,
        # in check mode a venv that does not exist yet cannot answer
        install_requirements=bool(missing) and not (run["check_mode"] and (v.get("_sgl_kernel_build_venv_made") or {}).get("changed")),
        requirements_install_argv=["%s/bin/python" % s["build_venv"], "-m", "pip", "install", "--disable-pip-version-check"]
        + (["--dry-run"] if run["check_mode"] else []) + index_options(s["pip_wheelhouse"], s["pip_index_url"]) + missing,
        requirements_changed=pip_changed(reqs),
        reprobe=pip_changed(reqs) and not run["check_mode"],
        cuobjdump=cuobjdump_path(s["cuobjdump"], s["cuda_home"], has_cuobjdump, probe["venv"].get("cuobjdump")))

    archs = resolve_archs(s["cuda_archs"], s["prefer_family"], toolkit.get("release"))
    defines = key_defines(s, archs)
    torch = (probe["venv"].get("packages") or {}).get("torch")
    inputs = {"source_commit": git.get("after"), "source_subdir": s["source_subdir"], "archs": archs,
              "cuda_release": toolkit.get("release"), "torch_version": torch,
              "build_options": {"cmake_defines": defines, "env": s["build_env"]}}
    restrict = _cmake_plan.restrict_override(archs) if to_bool(s["restrict_archs"]) else None
    if restrict is not None:
        # only when on: the keys of earlier builds stay valid
        inputs["restrict_archs"] = {"keep": archs, "override_sha256": hashlib.sha256(restrict.encode("utf-8")).hexdigest()}
    key = cache_key(inputs)
    old_stamp = probe.get("stamp")
    needed, why = build_decision(s["force_rebuild"], old_stamp, key, probe.get("stamp_wheel_sha256"))
    jobs, threads = parallelism(probe["cores"], probe.get("mem_available_bytes"), s["build_job_mem_gib"],
                                s["build_jobs"], s["compile_threads"])
    use_ccache = to_bool(s["ccache"]) and probe.get("ccache") is not None
    mem = probe.get("mem_available_bytes")
    defines_all = cmake_defines(s, defines, threads)
    defines_all["CMAKE_EXPORT_COMPILE_COMMANDS"] = "ON"
    if restrict is not None:
        defines_all["CMAKE_PROJECT_INCLUDE"] = p["restrict_override_path"]
    p.update(
        archs=archs, key_inputs=inputs, key=key, build_needed=needed,
        build=needed and not run["check_mode"] and not p["dry_run"],
        # the real build configures first and stops when it would miss sm_120 or NVFP4
        configure_first=(p["dry_run"] or needed) and not run["check_mode"],
        restrict_override=restrict, restrict_archs=restrict is not None, configure_error=None, dry_run_report=None, dry_run_error=None, build_plan=None,
        cache_message="sgl-kernel %s (%s) for %s, CUDA %s, torch %s: key %s %s%s" % (
            s["git_ref"], str(git.get("after"))[:12], ";".join(archs), toolkit.get("release"), torch or "none", key[:16],
            "-> build (%s)" % why if needed else "= stamp, build skipped",
            " (check mode: not built)" if needed and run["check_mode"] else " (dry run: not built)" if needed and p["dry_run"] else ""),
        jobs=jobs, threads=threads, use_ccache=use_ccache,
        cmake_defines=defines_all,
        build_environment=build_environment(s, archs, jobs, threads, use_ccache),
        parallelism_message="Building on %s cores with %s GiB available: %d jobs x %d nvcc threads (budget %s GiB per job)%s; log %s"
        % (probe["cores"], "unknown" if mem is None else round(mem / GIB, 1), jobs, threads, s["build_job_mem_gib"],
           ", ccache" if use_ccache else "", p["build_log"]),
        poll_steps=list(range(int(s["build_timeout"]) // int(s["build_poll_interval"]) + 1)),
        async_seconds=int(s["build_timeout"]) + 60)
    _dry_run_plan(s, v, p, old_stamp)
    _build_run_plan(s, v, p, probe)
    stamp = p.get("new_stamp") if p["build"] else (None if needed else old_stamp)
    wheel = (stamp or {}).get("wheel") or {}
    p["record"] = {
        "key": key, "built": p["build"], "stamp": stamp,
        "wheel_file": wheel.get("file") if stamp else None,
        "wheel_path": "%s/%s" % (p["dist_dir"], wheel.get("file")) if stamp else None,
        "sha256": wheel.get("sha256") if stamp else None,
        "torch_version": torch,
        "controller_path": "%s/%s/%s" % (s["controller_dir"], key[:16], wheel.get("file")) if stamp else None}
    _controller_plan(v, run, p, p["record"])
    return p


def _build_run_plan(s, v, p, probe):
    """The build's result, the staged wheel and the stamp that describes it."""
    result = v.get("_sgl_kernel_build_result")
    if not ran(result):
        return
    p["build_failed"] = result.get("rc", -1) != 0
    tail = v.get("_sgl_kernel_build_tail")
    # a verdict once the log's tail was read, so the failure shows it
    p["build_failure"] = ["sgl_kernel: the build %s; last lines of %s:" % (
        "failed (rc %s)" % result.get("rc") if result.get("finished") else "did not finish in %s s" % s["build_timeout"],
        p["build_log"])] + ((tail or {}).get("stdout_lines") or []) if p["build_failed"] and tail is not None else None
    if not ran(v.get("_sgl_kernel_staged")):
        return
    staged = v["_sgl_kernel_staged"].get("files") or []
    p["staged_error"] = None if len(staged) == 1 else "sgl_kernel: expected one wheel in %s, found %s" % (
        p["staging_dir"], [f.get("path") for f in staged])
    if len(staged) != 1:
        return
    wheel = posixpath.basename(staged[0]["path"])
    p["staged_wheel"] = staged[0]["path"]
    p["dist_wheel"] = "%s/%s" % (p["dist_dir"], wheel)
    p["old_wheels"] = [f["path"] for f in (v.get("_sgl_kernel_old_wheels") or {}).get("files") or []
                       if f.get("path") != p["dist_wheel"]]
    verify = v.get("_sgl_kernel_verify")
    if not ran(verify):
        return
    git = v["_sgl_kernel_git"]
    p["new_stamp"] = {
        "key": p["key"], "key_inputs": p["key_inputs"],
        "source": {"repo": s["git_repo"], "ref": s["git_ref"], "commit": git.get("after")},
        "wheel": {"file": wheel, "sha256": verify.get("sha256"), "size": staged[0].get("size")},
        "verified": {"required_archs": verify.get("required_archs"), "accept_family": True,
                     "elf_archs": verify.get("elf_archs"), "ptx_archs": verify.get("ptx_archs"),
                     "cuobjdump_version": verify.get("cuobjdump_version")},
        "build": {"seconds": result.get("delta", ""), "cores": probe["cores"],
                  "mem_available_bytes": probe.get("mem_available_bytes"), "job_mem_gib": s["build_job_mem_gib"],
                  "jobs": p["jobs"], "compile_threads": p["threads"], "ccache": p["use_ccache"],
                  "cmake_defines": p["cmake_defines"], "unit_archs": (p["build_plan"] or {}).get("unit_archs")},
        "plan": p["build_plan"]}
    p["new_stamp_json"] = nice_json(p["new_stamp"])


def _controller_plan(v, run, p, record, exists=os.path.isfile):
    """The controller's copy: checked when fetch changed it; its checksum file and stamp beside it."""
    fetched = v.get("_sgl_kernel_fetched")
    p["controller_check"] = ran(fetched) and bool(fetched.get("changed")) and not run["check_mode"]
    stat = v.get("_sgl_kernel_controller_wheel")
    found = ((stat or {}).get("stat") or {}).get("checksum") if ran(stat) else record["sha256"]
    p["controller_error"] = None if found == record["sha256"] else (
        "sgl_kernel: %s has sha256 %s, the build stamp says %s; delete the file and run again."
        % (record["controller_path"], found or "none", record["sha256"]))
    folder = posixpath.dirname(record["controller_path"] or "")
    files = [] if record["sha256"] is None else [
        {"dest": "%s/%s.sha256" % (folder, record["wheel_file"]), "content": "%s  %s\n" % (record["sha256"], record["wheel_file"]),
         "name": record["wheel_file"] + ".sha256"},
        {"dest": "%s/%s" % (folder, STAMP_NAME), "content": nice_json(record["stamp"]), "name": STAMP_NAME}]
    # written again only for a new wheel, or when missing (this runs on the controller, where they live)
    renew = record["built"] or (ran(fetched) and bool(fetched.get("changed")))
    p["controller_files"] = [f for f in files if renew or not exists(f["dest"])]


def _install_plan(s, v, run, p):
    """An installing host: where the wheel goes, whether it is copied and installed, and what is wrong."""
    build = v.get("sgl_kernel_build")
    if build is False:  # taken from the build host, which has none
        p["build_result_error"] = ("sgl_kernel: no build result from %s: its build failed or it was left out of this "
                                   "run (--limit); run the play with the build host included." % s["build_host"])
        return p
    p["build_result_error"] = None
    if not isinstance(build, dict):
        return p
    sha = build.get("sha256")
    local = None if build.get("wheel_file") is None else (
        build.get("wheel_path") if run["host"] == s["build_host"] else "%s/%s" % (s["wheel_dir"], build["wheel_file"]))
    p.update(local_wheel=local, runtime_probe_argv=probe_argv(s, v, {
        "venv": s["venv"], "packages": [s["dist_name"], "torch"], "stamp": p["installed_stamp_path"],
        "hash": [local] if local else []}))
    raw = v.get("_sgl_kernel_runtime_probe")
    if not ran(raw):
        return p
    probe = parse_probe(raw, "runtime venv")
    venv, hashes = probe["venv"], probe.get("sha256") or {}
    packages = venv.get("packages") or {}
    installed = probe.get("stamp")
    install = sha is not None and (installed is None or installed.get("sha256", "") != sha or packages.get(s["dist_name"]) is None)
    venv_ok = venv.get("exists") or (v.get("_sgl_kernel_venv_made") or {}).get("changed")
    copied = (v.get("_sgl_kernel_wheel_copied") or {}).get("changed")
    wheel_ok = copied or hashes.get(local) == sha
    torch_ok = (not to_bool(s["check_torch"]) or build.get("torch_version") is None or packages.get("torch") is None
                or packages.get("torch") == build.get("torch_version"))
    error = None
    # a check run before the first build has neither a venv nor a wheel to look at
    if sha is not None and not run["check_mode"]:
        if not venv_ok:
            error = "no runtime venv at %s (install SGLang first or set sgl_kernel_venv_create: true)" % s["venv"]
        elif not wheel_ok:
            error = "the wheel %s has sha256 %s, the build host verified %s; delete it and run again" % (
                local, hashes.get(local), sha)
        elif not torch_ok:
            error = ("the wheel was built against torch %s but %s has torch %s: it would fail to import (undefined "
                     "symbols); pin the same torch in sgl_kernel_build_requirements, or set sgl_kernel_check_torch: false"
                     % (build.get("torch_version"), s["venv"], packages.get("torch")))
    p.update(
        create_venv=to_bool(s["venv_create"]) and not venv.get("exists"),
        # hosts other than the build host get a copy unless they already hold the verified bytes
        copy_wheel=run["host"] != s["build_host"] and sha is not None and hashes.get(local) != sha,
        install_error=None if error is None else "sgl_kernel on %s: %s" % (run["host"], error),
        install=install,
        record_install=install and not run["check_mode"],
        wheel_install_argv=["%s/bin/python" % s["venv"], "-m", "pip", "install", "--disable-pip-version-check",
                            "--no-index", "--no-deps", "--force-reinstall", local],
        installed_stamp_json=nice_json({"sha256": sha, "wheel": build.get("wheel_file"), "key": build.get("key"),
                                        "built_on": s["build_host"]}),
        smoke_test_argv=["%s/bin/python" % s["venv"], "-c", s["smoke_test_code"]],
        smoke_test=to_bool(s["smoke_test"]) and bool(probe.get("gpu_present")) and not run["check_mode"])
    return p


def plan(values):
    """Everything the role's tasks use, from the role's settings, the run and the results registered so far."""
    s = resolve_target(_settings(values))
    run = values.get("_sgl_kernel_run") or {}
    missing = [k for k in ("host", "play_hosts", "check_mode") if k not in run]
    if missing:
        raise KernelPlanError("_sgl_kernel_run lacks %s (roles/sgl_kernel/vars/main.yml sets it)" % ", ".join(missing))
    run = dict(run, check_mode=to_bool(run["check_mode"]))
    error = input_error(s, run["play_hosts"])
    if error:
        return {"input_error": error, "error": error}
    build_dir = s["build_dir"]
    p = {"input_error": None,
         "dry_run": to_bool(s["dry_run"]) or DRY_RUN_TAG in (run.get("tags") or []),
         "dry_run_dir": build_dir + "/dry-run",
         "dry_run_log": build_dir + "/dry-run.log",
         "restrict_override_path": build_dir + "/restrict-archs.cmake",
         "src_dir": build_dir + "/src",
         "staging_dir": build_dir + "/staging",
         "build_log": build_dir + "/build.log",
         "dist_dir": build_dir + "/dist",
         "stamp_path": build_dir + "/dist/" + STAMP_NAME,
         "installed_stamp_path": "%s/%s" % (s["venv"], INSTALLED_STAMP_NAME),
         "is_build_host": run["host"] == s["build_host"]}
    if p["is_build_host"]:
        _pinned_plan(s, values, run, p)
        if not p["use_pinned"]:
            _build_host_plan(s, values, run, p)
            if "record" in p:
                p["record"].update(source="built", why=p["why"])
    _install_plan(s, values, run, p)
    due = [name for name in STOP_AT_ONCE if name != "install_error" or values.get("_sgl_kernel_wheel_copied") is not None]
    p["error"] = next((p[name] for name in due if p.get(name)), None)
    return p


def plan_phase(settings, results, run):
    """The role's phase: its settings (SETTINGS) and results (RESULTS) by name, and the run (_sgl_kernel_run)."""
    if not isinstance(settings, dict) or not isinstance(results, dict) or not isinstance(run, dict):
        raise KernelPlanError("the role hands over its settings, results and run as mappings "
                              "(_sgl_kernel_settings, _sgl_kernel_results, _sgl_kernel_run)")
    values = dict((name, settings[name]) for name in SETTINGS if name in settings)
    values.update((name, registered(results, name)) for name in RESULTS)
    values["_sgl_kernel_run"] = run
    return plan(values)


# The phases of the role's one filter, llmops.sglang.sgl_kernel_plan: each takes the settings first.
PHASES = {"plan": plan_phase}
ERRORS = (KernelPlanError,)
