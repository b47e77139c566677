# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""What the gpu_preflight role writes and shows around the rules of _gpu_preflight_rules.py: where the smoke test is
built, the host's stamp, the controller's report, the verdict for set_stats and the messages.

The role hands over its settings by name (SETTINGS, held equal to the role's _gpu_preflight_setting_names by a test)
through the filter llmops.sglang.gpu_preflight_plan, one phase of PHASES at a time.
"""

from __future__ import annotations

import hashlib
import posixpath
import re

from ansible_collections.llmops.sglang.plugins.plugin_utils._gpu_preflight_rules import PreflightError, _coerce, evaluate, normalize_expectations

PREFIX = "gpu_preflight_"
# Role setting (gpu_preflight_<name>) -> expectation of evaluate().
EXPECTATIONS = (
    ("gpu_count", "gpu_count"),
    ("compute_capability", "compute_capability"),
    ("driver_min_branch", "driver_min_branch"),
    ("cuda_toolkit_min", "cuda_toolkit_min"),
    ("require_toolkit", "require_toolkit"),
    ("toolkit_archs", "toolkit_archs"),
    ("kernel_module", "kernel_module"),
    ("mig_allowed", "mig_allowed"),
    ("persistence_mode", "persistence_mode"),
    ("mem_fraction_static", "min_free_fraction"),
    ("require_ecc", "require_ecc"),
    ("sglang_release", "sglang_release"),
    ("launch_args", "launch_args"),
    ("fp4_modules_prebuilt", "fp4_modules_prebuilt"),
)
# Every setting the phases read.
SETTINGS = tuple(PREFIX + name for name, _key in EXPECTATIONS) + tuple(
    PREFIX + name for name in ("waivers", "smoke_test", "stamp_path", "report_dir", "hold_driver"))
SMOKE_DIR = "/var/cache/llmops-sglang/gpu-smoke"


def _settings(settings):
    if not isinstance(settings, dict):
        raise PreflightError("settings must map gpu_preflight_* variables to their values, got %s" % type(settings).__name__)
    missing = [name for name in SETTINGS if name not in settings]
    if missing:
        raise PreflightError("settings missing: %s (the role's _gpu_preflight_setting_names lists them)" % ", ".join(missing))
    return settings


def expectations(settings):
    """evaluate()'s expectations from the role's settings ({gpu_preflight_NAME: value})."""
    settings = _settings(settings)
    return dict((key, settings[PREFIX + name]) for name, key in EXPECTATIONS)


def toolkit_archs(settings):
    """The archs cuda_toolkit_info test-compiles: gpu_preflight_toolkit_archs, null resolved to the SM 12.0 target for
    an expected 12.0 GPU (_gpu_preflight_rules.resolve_toolkit)."""
    return normalize_expectations(expectations(settings))["toolkit_archs"]


def smoke_binary(settings, gpu_info, toolkit, source):
    """Where the role builds the CUDA smoke test, or None when it does not run (off, nvidia-smi failed, no nvcc).

    The name carries a hash of the source and the GPUs' compute capabilities: nvcc -arch=native builds for the GPUs
    present, so new GPUs or a new source build a new binary.
    """
    settings = _settings(settings)
    if not (_coerce(settings[PREFIX + "smoke_test"]) is True and (gpu_info or {}).get("ok") and (toolkit or {}).get("installed")):
        return None
    caps = ",".join(str(g.get("compute_capability")) for g in gpu_info.get("gpus") or [] if isinstance(g, dict))
    return "%s/gpu_smoke-%s" % (SMOKE_DIR, hashlib.sha1((str(source) + caps).encode("utf-8")).hexdigest())


def report(settings, gpu_info, toolkit, smoke=None, host=None):
    """Everything the gpu_preflight role writes and shows, from its facts and settings.

    Returns {result (evaluate's), stamp (the host's machine-readable verdict), report (the controller's JSON report:
    facts and verdicts, no run metadata, so a rerun changes nothing), stats ({host: verdict} for the end-of-play table),
    passed_message, failed_message}.
    """
    result = evaluate(gpu_info, toolkit, expectations(settings), settings[PREFIX + "waivers"], smoke=smoke)
    gi = gpu_info
    tk = toolkit or {}
    gpus = gi.get("gpus") or []
    failed = [item["rule"] for item in result["failed"]]
    return {
        "result": result,
        "stamp_dir": posixpath.dirname(str(settings[PREFIX + "stamp_path"])),
        "report_dir": "%s/%s" % (settings[PREFIX + "report_dir"], host),
        "stamp": {"passed": result["passed"], "failed_rules": failed, "waived_rules": [w["rule"] for w in result["waived"]],
                  "gpus": [g.get("uuid") for g in gpus if isinstance(g, dict)], "driver_version": gi.get("driver_version"),
                  "cuda_toolkit": tk.get("release")},
        "report": {"host": host, "result": result, "gpus": gpus, "failure": gi.get("failure"),
                   "driver_version": gi.get("driver_version"), "cuda_driver_version": gi.get("cuda_driver_version"),
                   "kernel_module": gi.get("kernel_module"), "topology": gi.get("topology"), "cuda_toolkit": tk.get("release"),
                   "nvcc": tk.get("nvcc")},
        "stats": {host: "passed" if result["passed"] else "failed: " + ",".join(failed)},
        "passed_message": "GPU preflight passed (%d checks, %d warnings, %d waived)"
                          % (len(result["checks"]), len(result["warnings"]), len(result["waived"])),
        "failed_message": "GPU preflight failed on %s:\n%s" % (host, result["table"]),
    }


# The filter's phases: each takes the settings first, then the phase's inputs.
# The packages of an installed NVIDIA driver (Debian/Ubuntu from Canonical or the CUDA repository, EL from the CUDA
# repository): its kernel module in any packaging, libraries, utilities, the fabric manager and the persistence daemon,
# which must all stay on one version. Not the container toolkit, which follows its own releases.
DRIVER_PACKAGES = re.compile(r"^(nvidia-(driver|dkms|kernel|headless|utils|compute-utils|firmware|open|fabricmanager|persistenced|modprobe"
                             r"|kmod|settings|xconfig)|libnvidia-|cuda-drivers|kmod-nvidia|linux-(modules|objects|signatures)-nvidia-)")
# How each package manager (the pkg_mgr fact) holds a package: dpkg selections, or dnf's versionlock.
HOLD_TOOLS = {"apt": "dpkg", "dnf": "versionlock", "dnf5": "versionlock", "yum": "versionlock"}


def hold(settings, result, facts):
    """{tool, packages}: the driver packages to hold against unattended upgrades and the tool that holds them (dpkg,
    versionlock); no tool and no packages when gpu_preflight_hold_driver is off or the driver's rules did not pass (a
    driver the preflight refuses is not kept).

    result is the report phase's result, facts the host's ansible_facts with pkg_mgr and package_facts' packages."""
    settings = _settings(settings)
    status = dict((item.get("rule"), item.get("status")) for item in (result or {}).get("checks", []))
    if _coerce(settings[PREFIX + "hold_driver"]) is not True or status.get("driver_branch") not in ("pass", "waived") \
            or status.get("kernel_module") not in ("pass", "waived", "skipped"):
        return {"tool": None, "packages": []}
    pkg_mgr, packages = (facts or {}).get("pkg_mgr"), (facts or {}).get("packages")
    tool = HOLD_TOOLS.get(pkg_mgr)
    if tool is None:
        raise PreflightError("gpu_preflight_hold_driver: the package manager %r has no hold here (apt: dpkg hold; dnf, yum: "
                             "versionlock); set gpu_preflight_hold_driver: false and hold the driver packages another way" % (pkg_mgr,))
    names = sorted(name for name in (packages or {}) if DRIVER_PACKAGES.match(name))
    if not names:
        raise PreflightError("gpu_preflight_hold_driver: no NVIDIA driver package is installed from the package manager (a "
                             ".run install cannot be held this way); install the driver from packages (docs/gpu_preflight.md) "
                             "or set gpu_preflight_hold_driver: false")
    return {"tool": tool, "packages": names}


PHASES = {"archs": toolkit_archs, "smoke": smoke_binary, "report": report, "hold": hold}
ERRORS = (PreflightError,)
