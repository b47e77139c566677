# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Find nvcc, read its version and architectures, and test-compile a kernel for given SM targets.

Stdlib only: runs on managed hosts (Python 3.9+) inside the cuda_toolkit_info module.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile

from ansible_collections.llmops.sglang.plugins.module_utils._files import write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded

DEFAULT_NVCC_DIRS = ("/usr/local/cuda/bin",)
CACHE_FILE_PREFIX = "nvcc-arch-"
# A cache file holds a few lines per arch: a larger one is not ours and is ignored (then rewritten).
MAX_CACHE_BYTES = 1024 * 1024
KERNEL_SOURCE = "__global__ void llmops_probe(float *x) { x[threadIdx.x] *= 2.0f; }\n"

_ARCH = re.compile(r"^sm_(\d{2,3})([af]?)$")


def parse_nvcc_version(text):
    """`nvcc --version` -> {release: '13.0', version: '13.0.88', build}; None values when absent."""
    result = {"release": None, "version": None, "build": None}
    match = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", text or "")
    if match:
        result["release"], result["version"] = match.group(1), match.group(2)
    match = re.search(r"^Build (\S+)", text or "", re.M)
    if match:
        result["build"] = match.group(1)
    return result


def parse_arch_list(text, prefix="compute_"):
    """`nvcc --list-gpu-arch` (compute_XX) or `--list-gpu-code` (sm_XX) -> list, in nvcc's order."""
    return re.findall(r"^\s*(%s\d+[a-z]?)\s*$" % re.escape(prefix), text or "", re.M)


def version_tuple(text):
    """'12.8' -> (12, 8); None when not a version."""
    match = re.match(r"^\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*$", str(text)) if text is not None else None
    if not match:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def validate_arch(arch):
    """'sm_120a' -> 'arch=compute_120a,code=sm_120a'. Raises ValueError naming the expected form."""
    match = _ARCH.match(str(arch))
    if not match:
        raise ValueError("arch %r is not of the form sm_<digits>[a|f] (for example sm_120a, sm_90a, sm_100f)" % (arch,))
    suffix = match.group(1) + match.group(2)
    return "arch=compute_%s,code=sm_%s" % (suffix, suffix)


def find_nvcc(explicit=None, path=None, extra_dirs=DEFAULT_NVCC_DIRS):
    """The nvcc to use: the explicit path when given (None if missing), else PATH, else /usr/local/cuda/bin."""
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    found = shutil.which("nvcc", path=path)
    if found:
        return found
    for directory in extra_dirs:
        candidate = os.path.join(directory, "nvcc")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _run(argv, timeout, cwd=None, env=None):
    """(rc, stdout then stderr); rc None when it timed out or printed more than 16 MiB (the text says which)."""
    rc, out, err, timed_out, _not_found = run_bounded(argv, timeout, env=env, cwd=cwd)
    if timed_out:
        return None, "timed out after %s s" % timeout
    return rc, out + err


def classify_compile_error(output):
    """Why a test compile failed: 'unsupported_arch', 'host_compiler' or 'compile_error'."""
    if re.search(r"Unsupported gpu architecture|Value '[^']*' is not defined for option 'gpu-(architecture|name)'", output or ""):
        return "unsupported_arch"
    if re.search(r"host compiler|gcc: No such file|cl\.exe|failed to find|unsupported GNU version", output or "", re.I):
        return "host_compiler"
    return "compile_error"


def try_compile(nvcc, arch, timeout=120, env=None):
    """Compile a one-line kernel for `arch` into a throw-away directory.

    Returns {compiles, error_class, error, command}. Only device code is built (-cubin), which is what
    the arch check is about; nvcc still needs a host compiler to preprocess.
    """
    gencode = validate_arch(arch)
    workdir = tempfile.mkdtemp(prefix="llmops-nvcc-")
    try:
        source = os.path.join(workdir, "probe.cu")
        with open(source, "w") as handle:
            handle.write(KERNEL_SOURCE)
        argv = [nvcc, "-cubin", "-gencode", gencode, "-o", os.path.join(workdir, "probe.cubin"), source]
        rc, out = _run(argv, timeout, cwd=workdir, env=env)
        ok = rc == 0 and os.path.isfile(os.path.join(workdir, "probe.cubin"))
        return {
            "compiles": ok,
            "error_class": None if ok else ("timeout" if rc is None else classify_compile_error(out)),
            "error": None if ok else _tail(out),
            "command": " ".join([os.path.basename(nvcc), "-cubin", "-gencode", gencode, "probe.cu"]),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _tail(text, lines=6):
    kept = [line for line in (text or "").splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def cache_key(nvcc_realpath, version, mtime):
    raw = "%s|%s|%s" % (nvcc_realpath, version, mtime)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def cache_path(cache_dir, key):
    return os.path.join(cache_dir, CACHE_FILE_PREFIX + key + ".json")


def load_cache(path):
    """The cache file's content; None when it is missing, unreadable, over 1 MiB or not what write_cache writes."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_CACHE_BYTES + 1)
        if len(raw) > MAX_CACHE_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("archs"), dict) else None
    except (IOError, OSError, ValueError, RecursionError):
        return None


def write_cache(path, data):
    """Atomic write; returns None or the error text (a read-only cache dir is not fatal)."""
    try:
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"), 0o644)
        return None
    except (IOError, OSError) as exc:
        return "could not write the cache file %s: %s" % (path, exc)


def collect(nvcc=None, archs=("sm_120a",), cache_dir="/var/cache/llmops-sglang", check_mode=False,
            timeout=120, env=None):
    """Everything cuda_toolkit_info returns. A missing toolkit is `installed: false`, not an error.

    Raises ValueError only for a malformed arch name (the caller's mistake).
    """
    for arch in archs:
        validate_arch(arch)
    path = env.get("PATH") if env else None
    result = {
        "installed": False, "nvcc": None, "nvcc_realpath": None, "release": None, "version": None,
        "build": None, "gpu_archs": [], "gpu_codes": [], "arch_tests": {}, "archs_ok": None,
        "cache_file": None, "cache_written": False, "problems": [],
    }
    found = find_nvcc(nvcc, path)
    if not found:
        result["problems"].append("nvcc not found" + (" at %s" % nvcc if nvcc else " on PATH or in /usr/local/cuda/bin"))
        return result
    result["nvcc"] = found
    real = os.path.realpath(found)
    rc, out = _run([found, "--version"], timeout, env=env)
    version = parse_nvcc_version(out)
    if rc != 0 or not version["release"]:
        result["problems"].append("%s --version failed (rc %s): %s" % (found, rc, _tail(out, 2)))
        return result
    result.update(version)
    result["installed"] = True
    # the PATH entry is often a wrapper script; the compiler it runs is the one that matters
    result["nvcc_realpath"] = real
    rc, out = _run([found, "--list-gpu-arch"], timeout, env=env)
    result["gpu_archs"] = parse_arch_list(out, "compute_") if rc == 0 else []
    rc, out = _run([found, "--list-gpu-code"], timeout, env=env)
    result["gpu_codes"] = parse_arch_list(out, "sm_") if rc == 0 else []

    try:
        mtime = int(os.stat(real).st_mtime)
    except OSError:
        mtime = 0
    cache = None
    cfile = None
    if cache_dir:
        cfile = cache_path(cache_dir, cache_key(real, version["version"], mtime))
        result["cache_file"] = cfile
        cache = load_cache(cfile)
    cached = dict(cache["archs"]) if cache else {}
    fresh = {}
    for arch in archs:
        if arch in cached and isinstance(cached[arch], dict) and "compiles" in cached[arch]:
            entry = dict(cached[arch])
            entry["from_cache"] = True
        else:
            entry = try_compile(found, arch, timeout, env)
            entry["from_cache"] = False
            # a missing host compiler or a timeout says nothing lasting about the toolkit: do not cache it
            if entry["compiles"] or entry["error_class"] == "unsupported_arch":
                fresh[arch] = dict((k, v) for k, v in entry.items() if k != "from_cache")
        result["arch_tests"][arch] = entry
    result["archs_ok"] = all(t["compiles"] for t in result["arch_tests"].values()) if archs else None
    if cfile and fresh and not check_mode:
        cached.update(fresh)
        data = {"nvcc": real, "version": version["version"], "mtime": mtime, "archs": cached}
        err = write_cache(cfile, data)
        if err:
            result["problems"].append(err)
        else:
            result["cache_written"] = True
    return result
