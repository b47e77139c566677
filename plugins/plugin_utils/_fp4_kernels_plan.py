# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""Every decision of the fp4_kernels role: which FlashInfer FP4 JIT modules the unit loads, how they are built ahead
of time, the cache key, the verification and what each server must do. Runs on the controller (filter
``llmops.sglang.fp4_kernels_plan``).

Where a prebuilt module must lie (flashinfer 0.6.14 and 0.7.2, docs/fp4_kernels.md has the lines): FlashInfer looks
first for ``<flashinfer package>/data/aot/<module>/<module>.so`` (``FLASHINFER_AOT_DIR``, jit/env.py) and loads it
with no build step (``JitSpecNvcc.try_load`` in jit/core.py). A module in the JIT cache
(``~/.cache/flashinfer/<version>/<arch>/cached_ops``) is never loaded as it is: ``build_and_load`` runs ninja over
it first, which needs ninja and nvcc on the server and recompiles when a command line (paths, nvcc) differs. So the
role builds into the JIT cache of the build host and ships the ``.so`` files into the server venv's ``data/aot``.

``plan(values)`` reads the settings (SETTINGS, as defaults/main.yml names them), the run (``_fp4_kernels_run``: host,
play_hosts, check_mode) and the results the tasks registered so far (RESULTS):

  _fp4_kernels_toolkit      cuda_toolkit_info on the build host
  _fp4_kernels_venv_probe   the build venv's versions (flashinfer-python, apache-tvm-ffi, torch), JSON
  _fp4_kernels_stamp        slurp of the build host's stamp (absent when none)
  _fp4_kernels_built        files/flashinfer_build.py's answer (stdout: JSON)
  _fp4_kernels_verify       cuda_binary_info on each built module (a loop)
  _fp4_kernels_archive      stat (sha256) of the packed modules
  _fp4_kernels_controller   stat (sha256) of the controller's copy
  fp4_kernels_build         the build host's result (facts for every host; false when the build host has none)
  _fp4_kernels_target       a server venv's flashinfer (package folder, version) and installed stamp, JSON
  _fp4_kernels_local        stat (sha256) of the archive copied to a server
"""

from __future__ import annotations

import base64
import json
import posixpath

from ansible_collections.llmops.sglang.plugins.module_utils import _fp4_kernels
from ansible_collections.llmops.sglang.plugins.module_utils._cuda_toolkit import version_tuple
from ansible_collections.llmops.sglang.plugins.module_utils._fp4_kernels import GENERATORS
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import cache_key, ran, registered

SETTINGS = tuple("fp4_kernels_" + name for name in (
    "sglang_release", "launch_args", "modules",
    "add_family", "cuda_home", "python", "build_venv", "build_requirements", "pip_wheelhouse", "pip_index_url",
    "build_host", "build_dir", "build_jobs", "force_rebuild", "build_timeout", "controller_dir",
    "require_kernels", "install", "venv", "archive_dir",
))
RESULTS = (
    "_fp4_kernels_toolkit", "_fp4_kernels_venv_probe", "_fp4_kernels_stamp", "_fp4_kernels_built",
    "_fp4_kernels_verify", "_fp4_kernels_archive", "_fp4_kernels_controller", "fp4_kernels_build",
    "_fp4_kernels_target", "_fp4_kernels_local",
)
# <flashinfer package>/AOT_SUBDIR/<module>/<module>.so is what FlashInfer loads without compiling
AOT_SUBDIR = ("data", "aot")
CAPABILITY = "12.0"
FAMILY_RELEASE = (12, 9)
# FlashInfer releases whose data/aot is not read when the flashinfer-jit-cache package is installed (0.7 reads both)
JIT_CACHE_HIDES_AOT = ("0.6.14",)
STAMP_NAME = "fp4-kernels-build.json"
INSTALLED_STAMP_NAME = ".llmops-fp4-kernels.json"


class Fp4PlanError(ValueError):
    """An input the plan cannot use; the message names it and the fix."""


def flashinfer_version(release):
    """The flashinfer-python an SGLang release pins (_fp4_kernels.RELEASES, read from SGLang's METADATA)."""
    pins = _fp4_kernels.RELEASES.get(str(release))
    if pins is None:
        raise Fp4PlanError("fp4_kernels_sglang_release %s is not in the FP4 kernel table (releases: %s): pin one of them"
                           % (release, ", ".join(_fp4_kernels.RELEASES)))
    return pins["flashinfer-python"]


def modules(s):
    """(modules, why): the FlashInfer JIT modules to build, the explicit list or what the unit's backends load on
    SM 12.0 (_fp4_kernels.kernel_plan), and one line saying where they came from."""
    version = flashinfer_version(s["sglang_release"])
    known = _fp4_kernels.FLASHINFER[version]["modules"]
    if s["modules"] is not None:
        names = [str(m) for m in s["modules"]]
        why = "fp4_kernels_modules lists them"
    else:
        words = s["launch_args"] or []
        shown = " ".join(str(w) for w in words if w is not None) or "none"
        plan = _fp4_kernels.kernel_plan(str(s["sglang_release"]), CAPABILITY, words)
        if plan["problems"]:
            raise Fp4PlanError("fp4_kernels: the unit's FP4 backends have no SM 12.0 kernels to build: %s"
                               % "; ".join("%s (fix: %s)" % (p["problem"], p["fix"]) for p in plan["problems"]))
        names = list(plan["modules"])
        why = ("the unit's FP4 backends (%s) on SM 12.0 with SGLang %s load these FlashInfer JIT modules"
               % (shown, s["sglang_release"]) if names else
               "the unit's FP4 backends (%s) load no FlashInfer JIT module on SM 12.0" % shown)
    unknown = [m for m in names if m not in known or m not in GENERATORS]
    if unknown:
        raise Fp4PlanError("fp4_kernels_modules has %s, not a FlashInfer %s SM 12.0 FP4 module this role builds (known: %s)"
                           % (", ".join(unknown), version, ", ".join(sorted(known))))
    return names, why


def input_error(s, play_hosts):
    problems = []
    if s["build_host"] not in (play_hosts or []):
        problems.append("the build host (%s) must be one of the play's hosts (%s)" % (s["build_host"], ", ".join(play_hosts or [])))
    if s["build_jobs"] is not None and not (str(s["build_jobs"]).isdigit() and int(s["build_jobs"]) >= 1):
        problems.append("fp4_kernels_build_jobs must be null or an integer >= 1 (got %r)" % (s["build_jobs"],))
    if not s["require_kernels"]:
        problems.append("fp4_kernels_require_kernels is empty: the modules are verified kernel by kernel (e.g. ['fp4|e2m1'])")
    try:
        modules(s)
    except Fp4PlanError as exc:
        problems.append(str(exc))
    return "fp4_kernels: bad input: %s." % "; ".join(problems) if problems else None


def arch_list(nvcc_release, add_family):
    """FLASHINFER_CUDA_ARCH_LIST: 12.0a, plus 12.0f when asked and nvcc has family targets (12.9 or newer)."""
    release = version_tuple(nvcc_release)
    if add_family and release is not None and release >= FAMILY_RELEASE:
        return "12.0a 12.0f"
    return "12.0a"


def required_archs(version, module, archs):
    """The archs whose cubins must hold the module's FP4 kernels: the arch list for a module that follows it, else the
    module's fixed target (fp4_quantization_120f is sm_120f whatever the list says)."""
    fixed = _fp4_kernels.FLASHINFER[version]["modules"][module]["arch"]
    if fixed != "context":
        return [fixed]
    return ["sm_" + a.replace(".", "") for a in archs.split()]


def toolkit_error(toolkit, version, names):
    """None when nvcc is installed and new enough for every module (_fp4_kernels.FLASHINFER's nvcc per module)."""
    release = toolkit.get("release") if toolkit.get("installed") else None
    need = max((_fp4_kernels.FLASHINFER[version]["modules"][m]["nvcc"] for m in names), key=version_tuple)
    if release and version_tuple(release) and version_tuple(release) >= version_tuple(need):
        return None
    found = "nvcc %s" % release if release else "no nvcc was found"
    return ("fp4_kernels: %s; the FlashInfer %s modules %s need nvcc %s or newer. Install CUDA %s or newer on the build host "
            "(13.0 for torch cu130) and set fp4_kernels_cuda_home." % (found, version, ", ".join(names), need, need))


def _json(result, what):
    try:
        data = json.loads((result or {}).get("stdout") or "")
    except ValueError:
        raise Fp4PlanError("fp4_kernels: the %s printed no JSON (stdout %r, stderr %r)"
                           % (what, ((result or {}).get("stdout") or "")[:300], ((result or {}).get("stderr") or "")[-600:]))
    if not isinstance(data, dict):
        raise Fp4PlanError("fp4_kernels: the %s's answer is not an object: %r" % (what, str(data)[:300]))
    return data


def key_inputs(version, toolkit, probe, archs, names):
    """What decides the bytes of the modules: FlashInfer's version (its sources and generators), tvm-ffi (the ABI the
    modules are linked against), the CUDA release and nvcc build, the arch list and each module with its generator."""
    return {
        "flashinfer": version,
        "apache_tvm_ffi": probe.get("apache-tvm-ffi"),
        "cuda_release": toolkit.get("release"),
        "nvcc": toolkit.get("version"),
        "arch_list": archs,
        "modules": dict((m, GENERATORS[m]) for m in names),
    }


def read_stamp(slurped):
    """The stamp the last build wrote (slurp: base64 content), or None."""
    if not ran(slurped) or slurped.get("failed") or not slurped.get("content"):
        return None
    try:
        stamp = json.loads(base64.b64decode(slurped["content"]).decode("utf-8"))
    except ValueError:
        return None
    return stamp if isinstance(stamp, dict) else None


def build_env(s, archs, jobs):
    return {
        "CUDA_HOME": s["cuda_home"],
        "FLASHINFER_CUDA_ARCH_LIST": archs,
        "FLASHINFER_WORKSPACE_BASE": posixpath.join(s["build_dir"], "workspace"),
        "MAX_JOBS": str(jobs),
        "PATH": "%s/bin:%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" % (s["build_venv"], s["cuda_home"]),
    }


def verify_errors(verify, names):
    """One message per module whose check failed or did not run (cuda_binary_info's own message)."""
    errors = []
    results = dict((r.get("item"), r) for r in (verify or {}).get("results", []) if isinstance(r, dict))
    for name in names:
        result = results.get(name)
        if not ran(result):
            errors.append("%s was not checked" % name)
        elif result.get("failed"):
            errors.append("%s: %s" % (name, result.get("msg")))
    return errors


def kernel_counts(verify):
    """Per module: the kernels matching each required pattern and arch, as cuda_binary_info counted them."""
    out = {}
    for result in (verify or {}).get("results", []):
        if ran(result) and not result.get("failed"):
            out[result["item"]] = dict(("%s@%s" % (m["pattern"], m["arch"]), m["count"]) for m in result.get("kernel_matches", []))
    return out


def plan(s, results, run):
    """The role's every value; sections appear once their inputs are registered."""
    run = run or {}
    host = run.get("host")
    p = {"input_error": input_error(s, run.get("play_hosts")), "check_mode": bool(run.get("check_mode"))}
    if p["input_error"]:
        return p
    version = flashinfer_version(s["sglang_release"])
    names, why = modules(s)
    # keys a task tests are always there (None: nothing to do)
    p.update(cache_message=None, build=False, archive=None, archive_error=None, stamp_json=None, record=None, controller_error=None,
             verify_errors=[])
    build_dir = s["build_dir"]
    p.update(flashinfer=version, modules=names, why=why, is_build_host=host == s["build_host"], build_host=s["build_host"],
             requirements=["flashinfer-python==%s" % version] + list(s["build_requirements"] or []),
             pip_args=(["--no-index", "--find-links", s["pip_wheelhouse"]] if s["pip_wheelhouse"] else
                       (["--index-url", s["pip_index_url"]] if s["pip_index_url"] else [])),
             venv_python=posixpath.join(s["build_venv"], "bin", "python"),
             stamp_path=posixpath.join(build_dir, "dist", STAMP_NAME), staging=posixpath.join(build_dir, "staging"))
    toolkit = registered(results, "_fp4_kernels_toolkit")
    if ran(toolkit):
        p["toolkit_error"] = toolkit_error(toolkit, version, names)
        p["arch_list"] = arch_list(toolkit.get("release"), s["add_family"])
        p["required_archs"] = dict((m, required_archs(version, m, p["arch_list"])) for m in names)
    probe_result = registered(results, "_fp4_kernels_venv_probe")
    if ran(probe_result) and ran(toolkit) and p["toolkit_error"] is None and not (p["check_mode"] and probe_result.get("rc")):
        probe = _json(probe_result, "build venv probe")
        if probe.get("flashinfer-python") != version and not p["check_mode"]:
            raise Fp4PlanError("fp4_kernels: the build venv %s has flashinfer-python %s, not %s (what SGLang %s pins); remove the "
                               "venv or fix fp4_kernels_build_requirements"
                               % (s["build_venv"], probe.get("flashinfer-python"), version, s["sglang_release"]))
        inputs = key_inputs(version, toolkit, probe, p["arch_list"], names)
        key = cache_key(inputs)
        stamp = read_stamp(registered(results, "_fp4_kernels_stamp"))
        same = bool(stamp) and stamp.get("key") == key
        p.update(key=key, key_inputs=inputs, archive=posixpath.join(build_dir, "dist", "fp4-kernels-%s.tar" % key[:16]),
                 jobs=int(s["build_jobs"]) if s["build_jobs"] is not None else int(probe.get("cores") or 1))
        p["build_needed"] = bool(s["force_rebuild"]) or not same
        p["build"] = p["build_needed"] and not p["check_mode"]
        why = ("forced rebuild" if s["force_rebuild"] else "the stamp matches: no build" if same
               else "no stamp yet: build" if not stamp else "the key changed: build")
        p["cache_message"] = ("fp4_kernels: %s (key %s, modules %s, arch list %s, FlashInfer %s, nvcc %s)"
                              % (why, key[:16], ", ".join(names), p["arch_list"], version, toolkit.get("release")))
        p["env"] = build_env(s, p["arch_list"], p["jobs"])
        p["request"] = json.dumps({"out": p["staging"], "modules": [{"name": m, "generator": GENERATORS[m]} for m in names]})
        p["paths"] = dict((m, posixpath.join(p["staging"], m, m + ".so")) for m in names)
        # the same modules give the same bytes: sorted, no owner, no time
        p["pack_argv"] = ["tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0", "-C", p["staging"],
                          "-cf", p["archive"]] + names
        p["old_stamp"] = stamp
    built = registered(results, "_fp4_kernels_built")
    if ran(built):
        answer = _json(built, "FlashInfer build")
        if answer.get("error"):
            raise Fp4PlanError("fp4_kernels: FlashInfer's build failed on %s: %s. Fix the toolkit (fp4_kernels_cuda_home) or "
                               "the build venv; the build tree is %s/workspace" % (host, answer["error"], build_dir))
        p["built"] = answer
    verify = registered(results, "_fp4_kernels_verify")
    if ran(verify):
        p["verify_errors"] = verify_errors(verify, names)
        p["kernels"] = kernel_counts(verify)
    archive = registered(results, "_fp4_kernels_archive")
    if ran(archive) and "key" in p:
        sha = (archive.get("stat") or {}).get("checksum")
        if p["build"]:
            stamp = {"key": p["key"], "key_inputs": p["key_inputs"], "sha256": sha, "archive": posixpath.basename(p["archive"]),
                     "modules": dict((m["name"], {"sha256": m["sha256"], "bytes": m["bytes"], "seconds": m["seconds"]})
                                     for m in p["built"]["modules"]), "kernels": p.get("kernels")}
        else:
            stamp = p["old_stamp"]
        p["stamp"] = stamp
        p["stamp_json"] = json.dumps(stamp, indent=2, sort_keys=True) + "\n" if stamp else None
        p["archive_error"] = None if p["check_mode"] or (stamp and stamp.get("sha256") == sha) else (
            "fp4_kernels: %s has sha256 %s, the stamp says %s: remove the stamp %s and run again to rebuild"
            % (p["archive"], sha, (stamp or {}).get("sha256"), p["stamp_path"]))
        controller_path = posixpath.join(s["controller_dir"], p["key"][:16], posixpath.basename(p["archive"]))
        p["record"] = None if p["check_mode"] else {"key": p["key"], "sha256": sha, "archive": p["archive"], "modules": names,
                                                    "flashinfer": version, "arch_list": p["arch_list"], "controller_path": controller_path}
    controller = registered(results, "_fp4_kernels_controller")
    record = registered(results, "fp4_kernels_build")
    if ran(controller) and isinstance(record, dict):
        sha = (controller.get("stat") or {}).get("checksum")
        p["controller_error"] = None if sha == record["sha256"] else (
            "fp4_kernels: the controller's %s has sha256 %s, the build host verified %s: remove it and run again"
            % (record["controller_path"], sha, record["sha256"]))
    if host is not None:
        p["build_result_error"] = None if isinstance(record, dict) and record.get("sha256") else (
            "fp4_kernels: the build host %s has no verified build (did it fail, or is it not in this batch?): run the play with "
            "the build host first" % s["build_host"])
    target = registered(results, "_fp4_kernels_target")
    if ran(target) and isinstance(record, dict):
        p.update(_install(s, record, _json(target, "server venv probe"), registered(results, "_fp4_kernels_local")))
    return p


def aot_path(flashinfer_dir, module):
    """Where FlashInfer loads a prebuilt module from without compiling: <flashinfer package>/data/aot/<m>/<m>.so."""
    return posixpath.join(flashinfer_dir, *(AOT_SUBDIR + (module, module + ".so")))


def _install(s, record, target, local):
    """What one server does: where the modules go, whether the archive is copied and unpacked, what is wrong."""
    out = {"local_archive": posixpath.join(s["archive_dir"], posixpath.basename(record["archive"]))}
    if not target.get("flashinfer_dir"):
        out.update(install=False, install_error="fp4_kernels: %s has no flashinfer package (%s): install the runtime (sglang_runtime) "
                   "before this role" % (s["venv"], target.get("error") or "not found"))
        return out
    if target.get("version") != record["flashinfer"]:
        out.update(install=False, install_error="fp4_kernels: %s has flashinfer-python %s, the modules were built from %s: they load only "
                   "into the FlashInfer they were built from; pin flashinfer-python %s or rebuild" % (
                       s["venv"], target.get("version"), record["flashinfer"], record["flashinfer"]))
        return out
    if target.get("jit_cache_package") and record["flashinfer"] in JIT_CACHE_HIDES_AOT:
        out.update(install=False, install_error="fp4_kernels: %s has the flashinfer-jit-cache package, and FlashInfer %s then looks for "
                   "prebuilt modules only there (flashinfer/jit/env.py _get_aot_dir), never in data/aot: uninstall flashinfer-jit-cache"
                   % (s["venv"], record["flashinfer"]))
        return out
    aot = posixpath.dirname(posixpath.dirname(aot_path(target["flashinfer_dir"], "m")))
    installed = target.get("stamp") or {}
    present = all(m in (target.get("present") or []) for m in record["modules"])
    out.update(aot_dir=aot, install=installed.get("sha256") != record["sha256"] or not present,
               installed_stamp_path=posixpath.join(aot, INSTALLED_STAMP_NAME),
               installed_stamp_json=json.dumps({"sha256": record["sha256"], "key": record["key"], "modules": record["modules"],
                                                "arch_list": record["arch_list"]}, indent=2, sort_keys=True) + "\n",
               install_error=None)
    if ran(local):
        sha = (local.get("stat") or {}).get("checksum")
        if sha != record["sha256"]:
            out["install_error"] = ("fp4_kernels: %s has sha256 %s, the build host verified %s: remove it and run again"
                                    % (out["local_archive"], sha, record["sha256"]))
    return out


def target_probe_argv(s):
    """The server venv's flashinfer package folder (found without importing it), version, installed stamp and modules."""
    code = ("import importlib.util, importlib.metadata as m, json, os, sys\n"
            "out = {}\n"
            "try:\n"
            "    spec = importlib.util.find_spec('flashinfer')\n"
            "    out['flashinfer_dir'] = list(spec.submodule_search_locations)[0] if spec else None\n"
            "    out['version'] = m.version('flashinfer-python')\n"
            "    out['jit_cache_package'] = importlib.util.find_spec('flashinfer_jit_cache') is not None\n"
            "except Exception as exc:\n"
            "    out['error'] = '%s: %s' % (type(exc).__name__, exc)\n"
            "aot = os.path.join(out.get('flashinfer_dir') or '/nonexistent', *sys.argv[1].split('/'))\n"
            "try:\n"
            "    out['stamp'] = json.load(open(os.path.join(aot, sys.argv[2])))\n"
            "except (OSError, ValueError):\n"
            "    out['stamp'] = None\n"
            "out['present'] = sorted(n for n in (os.listdir(aot) if os.path.isdir(aot) else [])\n"
            "                        if os.path.isfile(os.path.join(aot, n, n + '.so')))\n"
            "print(json.dumps(out))\n")
    return [posixpath.join(s["venv"], "bin", "python"), "-c", code, "/".join(AOT_SUBDIR), INSTALLED_STAMP_NAME]


def venv_probe_argv(s):
    """The build venv's versions and the build host's cores, without importing anything heavy."""
    code = ("import importlib.metadata as m, json, os\n"
            "def v(n):\n"
            "    try:\n"
            "        return m.version(n)\n"
            "    except m.PackageNotFoundError:\n"
            "        return None\n"
            "print(json.dumps(dict([(n, v(n)) for n in ('flashinfer-python', 'apache-tvm-ffi', 'torch', 'ninja')],"
            " cores=len(os.sched_getaffinity(0)))))\n")
    return [posixpath.join(s["build_venv"], "bin", "python"), "-c", code]


def settings(values):
    """The settings by short name (build_host for fp4_kernels_build_host); a missing one is named."""
    missing = [name for name in SETTINGS if name not in (values or {})]
    if missing:
        raise Fp4PlanError("fp4_kernels: settings missing: %s (roles/fp4_kernels/vars/main.yml hands them over)" % ", ".join(missing))
    return dict((name[len("fp4_kernels_"):], values[name]) for name in SETTINGS)


def plan_phase(values, results, run):
    s = settings(values)
    p = plan(s, results, run)
    if p.get("input_error") is None:
        p["venv_probe_argv"] = venv_probe_argv(s)
        p["target_probe_argv"] = target_probe_argv(s)
    return p


PHASES = {"plan": plan_phase}
ERRORS = (Fp4PlanError,)
