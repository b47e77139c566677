# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a configured (not yet compiled) CMake tree will build, read from the files CMake generated.

* ``parse_compile_commands``: every translation unit of ``compile_commands.json`` with its target, whether it is
  CUDA, the archs nvcc will build cubins (``sm_``) and PTX (``compute_``) for, and whether it defines
  ``ENABLE_NVFP4``;
* ``parse_link_outputs``: target -> library file, from ``build.ninja``;
* ``unused_defines``: CMake's own "Manually-specified variables were not used by the project" list;
* ``summarize``: per target and in total (CUDA units, units x archs);
* ``restrict_override``: the CMake file that keeps only given archs of a project's own ``-gencode`` flags;
* ``check`` and ``report``: the verdict (required archs, NVFP4, restriction) and the printed report.

Standard library only: runs on the build host (module ``cmake_cuda_plan``) and on the controller.
"""

from __future__ import annotations

import json
import re
import shlex

from ansible_collections.llmops.sglang.plugins.module_utils._cuda_binary import arch_satisfied

# nvcc's own default when a unit names no arch (CUDA 13: sm_75); the plan cannot know it, so it says so.
NVCC_DEFAULT = "nvcc default"
_GENCODE_VALUE = re.compile(r"^arch=compute_([0-9]+[af]?),code=\[?([^\]]*)\]?$")
_CODE = re.compile(r"^(sm|compute)_([0-9]+[af]?)$")
_TARGET = re.compile(r"(?:^|/)CMakeFiles/([^/]+)\.dir/")
_NVFP4 = re.compile(r"^-DENABLE_NVFP4(=(?!0$).*)?$")
_UNUSED_HEADER = "Manually-specified variables were not used by the project:"
_LINK_COMMENT = re.compile(r"^# Link build statements for \S+ target (\S+)")
_BUILD_LINE = re.compile(r"^build ([^:|]+?):")


class CMakePlanError(ValueError):
    """A generated file the plan cannot read; the message names it and what to do."""


def _arch_key(name):
    match = re.match(r"^(?:sm|compute)_([0-9]+)([af]?)$", name)
    return (int(match.group(1)), match.group(2)) if match else (10 ** 6, name)


def sort_archs(names):
    return sorted(set(names), key=_arch_key)


def _add_gencode(value, cubins, ptx):
    match = _GENCODE_VALUE.match(value)
    if not match:
        return False
    for code in match.group(2).split(","):
        found = _CODE.match(code.strip())
        if found:
            (cubins if found.group(1) == "sm" else ptx).add("%s_%s" % found.groups())
    return True


def unit_archs(argv):
    """(cubin archs, PTX archs, unresolved) of one nvcc command line, as nvcc reads its arch options.

    ``-gencode``/``--generate-code`` (``=`` or separate value, ``code=[a,b]`` lists), ``-arch``/
    ``--gpu-architecture`` (``sm_X`` alone means cubin + PTX for X) with an optional ``-code``. A value nvcc
    resolves itself (``native``, ``all``) and a unit with no arch option at all are named in ``unresolved``.
    """
    cubins, ptx, unresolved = set(), set(), []
    arch, code, seen = None, None, False
    tokens = list(argv)
    for i, token in enumerate(tokens):
        name, _sep, value = token.partition("=")
        if name in ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code") and not value:
            value = tokens[i + 1] if i + 1 < len(tokens) else ""
        if name in ("-gencode", "--generate-code"):
            seen = True
            if not _add_gencode(value, cubins, ptx):
                unresolved.append(token if "=" in token else "%s %s" % (token, value))
        elif name in ("-arch", "--gpu-architecture"):
            seen, arch = True, value
        elif name in ("-code", "--gpu-code"):
            code = value
    if arch:
        found = _CODE.match(arch)
        if not found:
            unresolved.append("-arch=%s" % arch)
        elif code is None:
            ptx.add("compute_" + found.group(2))
            if found.group(1) == "sm":
                cubins.add(arch)
        else:
            _add_gencode("arch=compute_%s,code=%s" % (found.group(2), code), cubins, ptx)
    if not seen:
        unresolved.append(NVCC_DEFAULT)
    return cubins, ptx, unresolved


def _argv(entry):
    if isinstance(entry.get("arguments"), list):
        return [str(a) for a in entry["arguments"]]
    try:
        return shlex.split(str(entry.get("command") or ""))
    except ValueError as exc:
        raise CMakePlanError("compile_commands.json: the command for %s cannot be split (%s)" % (entry.get("file"), exc))


def parse_compile_commands(text, source="compile_commands.json"):
    """Every translation unit: file, target, cuda, cubins, ptx, unresolved, nvfp4."""
    try:
        entries = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CMakePlanError("%s is not JSON (%s): configure again with CMAKE_EXPORT_COMPILE_COMMANDS=ON" % (source, exc))
    if not isinstance(entries, list):
        raise CMakePlanError("%s is not a list of compile commands" % source)
    units = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        argv = _argv(entry)
        target = _TARGET.search(str(entry.get("output") or ""))
        compiler = argv[0].rsplit("/", 1)[-1] if argv else ""
        # a launcher (ccache) may come first
        cuda = "nvcc" in compiler or any(a.rsplit("/", 1)[-1] == "nvcc" for a in argv[:2]) or str(entry.get("file", "")).endswith(".cu")
        cubins, ptx, unresolved = unit_archs(argv) if cuda else (set(), set(), [])
        units.append({"file": entry.get("file"), "target": target.group(1) if target else "(unknown target)",
                      "cuda": cuda, "cubins": sort_archs(cubins), "ptx": sort_archs(ptx), "unresolved": unresolved,
                      "nvfp4": cuda and any(_NVFP4.match(a) for a in argv)})
    return units


def parse_link_outputs(text):
    """target -> the file its link step writes, from the comments CMake's Ninja generator puts in build.ninja."""
    outputs, target = {}, None
    for line in text.splitlines():
        comment = _LINK_COMMENT.match(line)
        if comment:
            target = comment.group(1)
            continue
        build = _BUILD_LINE.match(line)
        if build and target:
            outputs[target] = build.group(1).strip()
            target = None
    return outputs


def unused_defines(log_text):
    """The names under CMake's "Manually-specified variables were not used by the project:" (first configure only)."""
    names, lines = set(), log_text.splitlines()
    for i, line in enumerate(lines):
        if _UNUSED_HEADER not in line:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        while j < len(lines) and lines[j].strip():
            names.add(lines[j].strip())
            j += 1
    return sorted(names)


def summarize(units, link_outputs=None):
    """Per target (CUDA and other units, archs, NVFP4, library) and totals; units x archs counts cubin and
    PTX archs of a unit once each (one device compile per arch)."""
    targets = {}
    for unit in units:
        t = targets.setdefault(unit["target"], {"cuda_units": 0, "other_units": 0, "cubins": set(), "ptx": set(),
                                                "nvfp4_units": 0, "unit_archs": 0, "unresolved": set()})
        if not unit["cuda"]:
            t["other_units"] += 1
            continue
        t["cuda_units"] += 1
        t["cubins"].update(unit["cubins"])
        t["ptx"].update(unit["ptx"])
        t["unresolved"].update(unit["unresolved"])
        t["nvfp4_units"] += 1 if unit["nvfp4"] else 0
        t["unit_archs"] += len({a.split("_", 1)[1] for a in unit["cubins"] + unit["ptx"]}) + len(unit["unresolved"])
    for name, t in targets.items():
        t.update(cubins=sort_archs(t["cubins"]), ptx=sort_archs(t["ptx"]), unresolved=sorted(t["unresolved"]),
                 library=(link_outputs or {}).get(name))
    cuda = [t for t in targets.values() if t["cuda_units"]]
    return {"targets": targets,
            "cuda_units": sum(t["cuda_units"] for t in cuda),
            "unit_archs": sum(t["unit_archs"] for t in cuda),
            "cubins": sort_archs(a for t in cuda for a in t["cubins"]),
            "ptx": sort_archs(a for t in cuda for a in t["ptx"]),
            "nvfp4": any(t["nvfp4_units"] for t in cuda)}


# ---------------------------------------------------------------------------------------------
# The arch restriction (a CMake file run after project(), through CMAKE_PROJECT_INCLUDE)

_OVERRIDE = """# Written by llmops.sglang (sgl_kernel_restrict_archs). Included after project() through
# CMAKE_PROJECT_INCLUDE; at the end of the top-level CMakeLists.txt it removes from every target's
# compile options each -gencode=arch=compute_X,code=... flag whose code is not one of: %(keep)s.
# CMAKE_CUDA_ARCHITECTURES still adds its archs. The tree itself is not changed.
if(NOT COMMAND llmops_restrict_gencode)
  set(LLMOPS_KEEP_ARCHS "%(keep)s")
  function(llmops_restrict_gencode dir)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(options ${target} COMPILE_OPTIONS)
      if(options)
        set(kept)
        foreach(option IN LISTS options)
          # an option may carry a generator expression's opening or closing bracket: keep those
          while(option MATCHES "-gencode=arch=compute_[0-9]+[af]?,code=(sm|compute)_([0-9]+[af]?)")
            if("${CMAKE_MATCH_2}" IN_LIST LLMOPS_KEEP_ARCHS)
              break()
            endif()
            string(REPLACE "${CMAKE_MATCH_0}" "" option "${option}")
          endwhile()
          list(APPEND kept "${option}")
        endforeach()
        set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS "${kept}")
      endif()
    endforeach()
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(subdir IN LISTS subdirs)
      llmops_restrict_gencode("${subdir}")
    endforeach()
  endfunction()
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL llmops_restrict_gencode "${CMAKE_SOURCE_DIR}")
endif()
"""


def restrict_override(keep_archs):
    """The override's text for CMake-spelled archs (``['120f']``)."""
    return _OVERRIDE % {"keep": ";".join(keep_archs)}


# ---------------------------------------------------------------------------------------------
# Verdict and report

def check(summary, required_archs, require_nvfp4, unused, restrict_to=None, fixes=None):
    """Problems that make the build pointless, each with its fix (empty list: build)."""
    fixes = fixes or {}
    problems = []
    if not summary["cuda_units"]:
        problems.append("no CUDA translation unit was configured: is sgl_kernel_source_subdir the kernel project?")
        return problems
    for arch in required_archs:
        if not arch_satisfied(arch, summary["cubins"], accept_family=True):   # the rule the built wheel is verified by
            problems.append("no CUDA unit will be compiled for %s (cubins: %s). Fix: %s" % (
                arch, ", ".join(summary["cubins"]) or "none", fixes.get("arch", "add it to the arch list")))
    if require_nvfp4 and not summary["nvfp4"]:
        why = " (CMake did not use %s)" % ", ".join(d for d in unused if "FP4" in d) if any("FP4" in d for d in unused) else ""
        problems.append("no CUDA unit is compiled with -DENABLE_NVFP4%s. Fix: %s" % (why, fixes.get("nvfp4", "turn FP4 on")))
    if restrict_to is not None:
        allowed = set(restrict_to)
        for name, t in sorted(summary["targets"].items()):
            extra = [a for a in t["cubins"] + t["ptx"] if a.split("_", 1)[1] not in allowed] + t["unresolved"]
            if t["cuda_units"] and extra:
                problems.append("the arch restriction left %s in target %s: its flags spell them in a way the override "
                                "does not remove; read that target's commands in compile_commands.json" % (", ".join(extra), name))
    return problems


def estimate(unit_archs, unit_seconds, factor, jobs):
    """Seconds: units x archs x the measured seconds of one unit for one arch x factor / parallel jobs."""
    if unit_seconds is None:
        return None
    return unit_archs * float(unit_seconds) * float(factor) / max(1, int(jobs))


def _duration(seconds):
    seconds = int(round(seconds))
    return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60) if seconds >= 3600 else "%dm%02ds" % (seconds // 60, seconds % 60)


def report(summary, unused, problems, unit_seconds, probe_arch, factor, jobs, last_build=None, restricted=False):
    """The dry run's lines, in the order a reader needs them."""
    lines = ["CUDA targets (each unit is compiled once per arch):"]
    for name, t in sorted(summary["targets"].items()):
        if not t["cuda_units"]:
            continue
        lines.append("  %s%s: %d CUDA units x archs %s%s; NVFP4 in %d of %d units%s" % (
            name, " -> %s" % t["library"] if t["library"] else "", t["cuda_units"],
            " ".join(t["cubins"]) or "(no cubin)", " + PTX " + " ".join(t["ptx"]) if t["ptx"] else "",
            t["nvfp4_units"], t["cuda_units"], "; unresolved: " + ", ".join(t["unresolved"]) if t["unresolved"] else ""))
    lines.append("NVFP4 (-DENABLE_NVFP4): %s" % ("on" if summary["nvfp4"] else "OFF"))
    lines.append("Defines CMake did not use: %s" % (", ".join(unused) if unused else "none"))
    lines.append("CUDA translation units x archs: %d (%d units)%s" % (
        summary["unit_archs"], summary["cuda_units"], ", restricted to the requested archs" if restricted else ""))
    seconds = estimate(summary["unit_archs"], unit_seconds, factor, jobs)
    if seconds is None:
        lines.append("Estimated build time: unknown (the probe compile did not run)")
    else:
        lines.append("Estimated build time: %s, an estimate: %d units x archs x %.1f s (one tiny kernel compiled for %s "
                     "on this host) x cost factor %s / %d jobs; real kernels cost more per unit than the probe"
                     % (_duration(seconds), summary["unit_archs"], unit_seconds, probe_arch, factor, jobs))
    if last_build and last_build.get("unit_archs") and last_build.get("seconds"):
        rate = float(last_build["seconds"]) * int(last_build.get("jobs") or 1) / int(last_build["unit_archs"])
        lines.append("At the last build's rate on this host (%.0f s for %s units x archs, %s jobs): %s" % (
            float(last_build["seconds"]), last_build["unit_archs"], last_build.get("jobs") or 1,
            _duration(rate * summary["unit_archs"] / max(1, int(jobs)))))
    lines.extend("PROBLEM: " + p for p in problems)
    return lines
