# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""List the CUDA device code (cubins, PTX) embedded in shared libraries and wheels.

Pure Python (stdlib only, Python 3.9+). Two readers give the same answer (tests prove it on real builds):
``fatbin`` (the default) reads the fatbin entry headers of ``.nv_fatbin`` itself (_fatbin; no cuobjdump, under
a second for a 545 MB library), ``cuobjdump`` runs cuobjdump. Everything that runs ``cuobjdump`` takes a
``runner`` callable ``runner(argv) -> (rc, stdout, stderr)``; ``default_runner`` bounds its time and output.

Arch naming follows cuobjdump: a cubin for ``sm_120a`` is listed as ``NAME.N.sm_120a.cubin`` and PTX
for the virtual arch ``compute_120a`` as ``NAME.N.sm_120a.ptx``; both are reported as ``sm_120a``.
``--list-elf`` drops the family suffix (an ``sm_120f`` cubin is listed as ``...sm_120.cubin``), so the
cuobjdump reader, when a plain ``sm_N`` (N >= 100, where families exist) cubin is listed, reads the fatbin
headers printed by ``--dump-elf-symbols`` (``arch = sm_120f``) to get the real arch; the fatbin reader
sees the family flag of each entry directly.

Requirement rule (``arch_satisfied``), cubins only:
- ``sm_N``  is met by any cubin for arch number N: ``sm_N``, ``sm_Na`` or ``sm_Nf`` (all load on a
  compute capability N/10 device).
- ``sm_Na`` is met by an ``sm_Na`` cubin; with ``accept_family`` also by an ``sm_Nf`` cubin of the
  same number (family code carries the family's arch-specific features, e.g. FP4 block-scaled MMA
  on SM120). A family cubin of another number (``sm_100f`` for ``sm_103a``) never counts.
- ``sm_Nf`` is met only by an ``sm_Nf`` cubin (an ``sm_Na`` cubin does not load on the other
  family members).
- PTX never meets a requirement: it is JIT-compiled at load time, and arch-specific PTX
  (``compute_120a``) only for that exact arch.

Kernel requirement (``scan_kernels``, ``kernel_report``): a pattern (a Python regex, searched) is met for a required
arch when some kernel of a cubin that meets that arch (the rule above) matches it, in its mangled name or in its
identifiers joined by ``::`` (_cubin). Only the cubins that meet a required arch are unpacked: plain ones are read
as they are, LZ4 ones in Python, zstd ones by the host's ``zstd`` program (bounded like cuobjdump); with the
cuobjdump reader the kernels come from ``--dump-elf-symbols`` (no code sizes).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import site
import sys
import sysconfig
import tempfile
import zipfile

from ansible_collections.llmops.sglang.plugins.module_utils._cubin import CubinError, kernels as cubin_kernels, readable
from ansible_collections.llmops.sglang.plugins.module_utils._fatbin import FatbinError, lz4_block, read_entries, read_payload
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded

NO_DEVICE_CODE = "does not contain device code"
# Bounds (docs/security.md): a library taken out of a wheel (sgl-kernel's largest is about 1.5 GB), cuobjdump's
# output for one library and the time it may take.
MAX_LIBRARY_BYTES = 4 * 1024 ** 3
MAX_CUOBJDUMP_OUTPUT = 256 * 1024 * 1024
CUOBJDUMP_TIMEOUT = 900
CUOBJDUMP_PYPI = "nvidia-cuda-cuobjdump"
# Bounds of the kernel check, per library: cubins unpacked and bytes unpacked (sgl-kernel 0.4.5's sm_120a cubins:
# 51 per library; libcublasLt.so.13's sm_120f ones: 1,133), the time of one zstd run and the output it may give
# (frames of several cubins go to one run), kernel names kept per pattern and arch, patterns.
MAX_KERNEL_CUBINS = 20000
MAX_KERNEL_BYTES = 16 * 1024 ** 3
ZSTD_TIMEOUT = 120
ZSTD_BATCH_BYTES = 64 * 1024 * 1024
KERNEL_EXAMPLES = 5
MAX_KERNEL_PATTERNS = 100
ZSTD_FIX = "install the zstd program (Debian/Ubuntu: apt install zstd; RHEL/Fedora: dnf install zstd), or set reader=cuobjdump"

_LISTING_RE = re.compile(r"^(ELF|PTX) file\s+\d+:\s+(.+?)\s*$")
_NAME_ARCH_RE = re.compile(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)$")
_HEADER_RE = re.compile(r"^Fatbin (elf|ptx) code:\s*$")
_HEADER_ARCH_RE = re.compile(r"^arch = (sm_\d+[a-z]?)\s*$")
_ARCH_RE = re.compile(r"^(?:sm_)?(\d+)([af]?)$")
_DOTTED_ARCH_RE = re.compile(r"^(\d+)\.(\d)([af]?)$")
_VERSION_RE = re.compile(r"\bV(\d+\.\d+\.\d+)\b")
_SHARED_LIB_RE = re.compile(r"\.so(?:\.\d+)*$")


class CudaBinaryError(Exception):
    """A failure with a message that names the cause and the fix."""


# ---------------------------------------------------------------------------------------------
# Arch names

def split_arch(arch):
    """``'sm_120a'`` -> ``(120, 'a')``; ``None`` for anything that is not ``sm_<number>[a|f]``."""
    match = _ARCH_RE.match(arch)
    if not match or not arch.startswith("sm_"):
        return None
    return int(match.group(1)), match.group(2)


def normalize_arch(text):
    """Accept ``sm_120a``, ``120a`` (CMake) or ``12.0a`` (TORCH_CUDA_ARCH_LIST); return ``sm_120a``."""
    value = str(text).strip().lower()
    dotted = _DOTTED_ARCH_RE.match(value)
    if dotted:
        return "sm_%d%s%s" % (int(dotted.group(1)), dotted.group(2), dotted.group(3))
    match = _ARCH_RE.match(value)
    if match:
        return "sm_%d%s" % (int(match.group(1)), match.group(2))
    raise CudaBinaryError(
        "%r is not a GPU arch: write it as sm_120a, 120a or 12.0a (an optional a = arch-specific or "
        "f = family suffix after the compute capability digits)" % (text,))


def torch_arch(arch):
    """``sm_120a`` -> ``12.0a`` (the TORCH_CUDA_ARCH_LIST spelling)."""
    number, suffix = split_arch(arch)
    return "%d.%d%s" % (number // 10, number % 10, suffix)


def cmake_arch(arch):
    """``sm_120a`` -> ``120a`` (the CMAKE_CUDA_ARCHITECTURES spelling)."""
    number, suffix = split_arch(arch)
    return "%d%s" % (number, suffix)


def arch_satisfied(required, cubin_archs, accept_family=False):
    """Whether the cubin archs meet one required arch (rule in the module docstring)."""
    number, suffix = split_arch(required)
    for arch in cubin_archs:
        parsed = split_arch(arch)
        if parsed is None or parsed[0] != number:
            continue
        if suffix == "" or parsed[1] == suffix:
            return True
        if suffix == "a" and parsed[1] == "f" and accept_family:
            return True
    return False


def missing_archs(required, cubin_archs, accept_family=False):
    return [arch for arch in required if not arch_satisfied(arch, cubin_archs, accept_family)]


def _sort_key(arch):
    parsed = split_arch(arch)
    return (parsed[0], parsed[1]) if parsed else (sys.maxsize, arch)


def sorted_archs(archs):
    return sorted(set(archs), key=_sort_key)


# ---------------------------------------------------------------------------------------------
# cuobjdump output

def parse_listing(kind, rc, stdout, stderr):
    """Parse ``cuobjdump --list-elf`` (kind ``'elf'``) or ``--list-ptx`` (``'ptx'``) output.

    Returns ``(has_device_code, [{'name': ..., 'arch': ...}, ...])``. A library without device code
    (exit 255, "does not contain device code") is ``(False, [])``; "No ELF/PTX file found" is
    ``(True, [])``. Any other failure raises CudaBinaryError.
    """
    if NO_DEVICE_CODE in stderr:
        return False, []
    if rc != 0:
        detail = (stderr or stdout).strip() or "no output"
        raise CudaBinaryError("cuobjdump exited with %d: %s" % (rc, detail))
    wanted = kind.upper()
    entries = []
    for line in stdout.splitlines():
        match = _LISTING_RE.match(line.strip())
        if not match or match.group(1) != wanted:
            continue
        name = match.group(2)
        arch = _NAME_ARCH_RE.search(name)
        entries.append({"name": name, "arch": arch.group(1) if arch else None})
    return True, entries


def parse_elf_dump(stdout):
    """``[(kind, arch, [kernel name, ...]), ...]``, one per fatbin entry in file order, from ``--dump-elf-symbols``
    output: its ``Fatbin elf|ptx code`` headers with their ``arch =`` line, and for an ELF entry the defined ``FUNC``
    symbols marked ``ENTRY`` (its kernels)."""
    entries = []
    pending = None
    for line in stdout.splitlines():
        line = line.strip()
        header = _HEADER_RE.match(line)
        if header:
            pending = header.group(1)
            continue
        arch = _HEADER_ARCH_RE.match(line)
        if arch and pending:
            entries.append((pending, arch.group(1), []))
            pending = None
            continue
        fields = line.split()
        if entries and entries[-1][0] == "elf" and len(fields) == 5 and fields[0] == "FUNC" and fields[3] == "ENTRY":
            entries[-1][2].append(fields[4])
    return entries


def parse_fatbin_headers(stdout):
    """``[('elf'|'ptx', arch), ...]`` in file order from the headers of ``--dump-elf-symbols`` output."""
    return [(kind, arch) for kind, arch, _names in parse_elf_dump(stdout)]


def needs_header_pass(cubins):
    """A plain ``sm_N`` cubin with N >= 100 may really be a family (``sm_Nf``) cubin."""
    for cubin in cubins:
        parsed = split_arch(cubin["arch"] or "")
        if parsed and parsed[1] == "" and parsed[0] >= 100:
            return True
    return False


def refine_cubin_archs(cubins, headers):
    """Take each cubin's arch from the matching fatbin header when both lists line up.

    Returns ``(cubins, refined)``; the list is unchanged (refined False) when the counts or the
    arch numbers disagree, so a surprise in the output never invents an arch.
    """
    elf_headers = [arch for kind, arch in headers if kind == "elf"]
    if len(elf_headers) != len(cubins):
        return cubins, False
    refined = []
    for cubin, header_arch in zip(cubins, elf_headers):
        listed = split_arch(cubin["arch"] or "")
        actual = split_arch(header_arch)
        if listed is None or actual is None or listed[0] != actual[0]:
            return cubins, False
        refined.append(dict(cubin, arch=header_arch))
    return refined, True


def parse_version(stdout):
    """``'13.5.37'`` from ``cuobjdump --version``; None if absent."""
    match = _VERSION_RE.search(stdout)
    return match.group(1) if match else None


# ---------------------------------------------------------------------------------------------
# Finding and running cuobjdump

def default_runner(argv):
    """(rc, stdout, stderr) of cuobjdump in the C locale, bounded in time and output; rc -1 when it was stopped."""
    rc, out, err, timed_out, _not_found = run_bounded(argv, CUOBJDUMP_TIMEOUT, dict(os.environ, LC_ALL="C"),
                                                      MAX_CUOBJDUMP_OUTPUT)
    if timed_out:
        err = "did not finish within %d s and was stopped\n%s" % (CUOBJDUMP_TIMEOUT, err)
    return (-1 if rc is None else rc), out, err


def site_dirs():
    """site-packages folders of the running interpreter (where pip puts nvidia-cuda-cuobjdump)."""
    dirs = []
    paths = sysconfig.get_paths()
    dirs.extend([paths.get("purelib"), paths.get("platlib")])
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # some virtualenv builds of site.py lack it
        pass
    dirs.append(getattr(site, "USER_SITE", None))
    dirs.extend(p for p in sys.path if p.endswith("site-packages"))
    seen = []
    for entry in dirs:
        if entry and entry not in seen:
            seen.append(entry)
    return seen


def cuobjdump_candidates(environ=None, sites=None, cuda_roots=("/usr/local/cuda",)):
    """Where cuobjdump is looked for, in order: PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, then the
    PyPI package's folder (``nvidia/cu13/bin`` in current wheels, ``nvidia/cuda_cuobjdump/bin`` in
    the CUDA 12 layout)."""
    environ = os.environ if environ is None else environ
    found = []
    on_path = shutil.which("cuobjdump", path=environ.get("PATH", os.defpath))
    if on_path:
        found.append(on_path)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            found.append(os.path.join(environ[var], "bin", "cuobjdump"))
    found.extend(os.path.join(root, "bin", "cuobjdump") for root in cuda_roots)
    for sitedir in (site_dirs() if sites is None else sites):
        found.extend(sorted(glob.glob(os.path.join(sitedir, "nvidia", "cu[0-9]*", "bin", "cuobjdump")), reverse=True))
        found.append(os.path.join(sitedir, "nvidia", "cuda_cuobjdump", "bin", "cuobjdump"))
    return found


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_cuobjdump(explicit=None, environ=None, sites=None, cuda_roots=("/usr/local/cuda",)):
    if explicit:
        path = os.path.join(explicit, "cuobjdump") if os.path.isdir(explicit) else explicit
        if not _executable(path):
            raise CudaBinaryError(
                "cuobjdump=%s is not an executable file: point it at the cuobjdump binary (pip install %s "
                "puts it in site-packages/nvidia/cu13/bin/)" % (explicit, CUOBJDUMP_PYPI))
        return path
    candidates = cuobjdump_candidates(environ, sites, cuda_roots)
    for path in candidates:
        if _executable(path):
            return path
    raise CudaBinaryError(
        "cuobjdump not found on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin or this Python's site-packages "
        "(nvidia/cu*/bin): install it with `%s -m pip install %s`, or set the cuobjdump option to its path"
        % (sys.executable or "python3", CUOBJDUMP_PYPI))


def cuobjdump_version(cuobjdump, runner=default_runner):
    rc, out, _err = runner([cuobjdump, "--version"])
    return parse_version(out) if rc == 0 else None


# ---------------------------------------------------------------------------------------------
# Inspecting files

def sha256_file(path, chunk=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def is_shared_library(name):
    return bool(_SHARED_LIB_RE.search(os.path.basename(name)))


READERS = ("fatbin", "cuobjdump")


def fatbin_entries(path):
    """``(has_device_code, entries, family_resolved)`` from the fatbin headers, read in Python (_fatbin)."""
    try:
        has_code, entries = read_entries(path)
    except FatbinError as exc:
        raise CudaBinaryError("%s; if cuobjdump can read it, set reader=cuobjdump, otherwise rebuild or re-download "
                              "the library" % exc)
    return has_code, entries, True


def cuobjdump_entries(path, cuobjdump, runner=default_runner):
    """The same from ``cuobjdump --list-elf`` and ``--list-ptx``, plus the ``--dump-elf-symbols`` header pass
    when a plain ``sm_N`` cubin with N >= 100 may be a family one."""
    has_code, cubins = parse_listing("elf", *runner([cuobjdump, "--list-elf", path]))
    if not has_code:
        return False, [], False
    _has, ptx = parse_listing("ptx", *runner([cuobjdump, "--list-ptx", path]))
    resolved = False
    if needs_header_pass(cubins):
        rc, out, _err = runner([cuobjdump, "--dump-elf-symbols", path])
        if rc == 0:
            cubins, resolved = refine_cubin_archs(cubins, parse_fatbin_headers(out))
    return True, [dict(c, kind="elf") for c in cubins] + [dict(p, kind="ptx") for p in ptx], resolved


def parse_elf_symbols(stdout):
    """``[(arch, [kernel name, ...]), ...]``, one per cubin in file order, from ``--dump-elf-symbols`` output."""
    return [(arch, names) for kind, arch, names in parse_elf_dump(stdout) if kind == "elf"]


# ---------------------------------------------------------------------------------------------
# Kernels

def kernel_patterns(patterns):
    """``[(text, compiled regex), ...]`` of require_kernels; a pattern that is not a regex names itself and why."""
    compiled = []
    for text in patterns:
        text = str(text)
        if not text.strip():
            raise CudaBinaryError("require_kernels holds an empty pattern: write a regex such as 'fp4|e2m1'")
        try:
            compiled.append((text, re.compile(text)))
        except re.error as exc:
            raise CudaBinaryError("require_kernels: %r is not a Python regular expression (%s); escape what is meant "
                                  "literally, for example 'operator\\(\\)'" % (text, exc))
    if len(compiled) > MAX_KERNEL_PATTERNS:
        raise CudaBinaryError("require_kernels holds %d patterns, more than %d: join them with |" % (len(compiled), MAX_KERNEL_PATTERNS))
    return compiled


def find_zstd(environ=None):
    environ = os.environ if environ is None else environ
    path = shutil.which("zstd", path=environ.get("PATH", os.defpath))
    if not path:
        raise CudaBinaryError("a cubin to read for its kernels is zstd-compressed and the zstd program is not on PATH: %s" % ZSTD_FIX)
    return path


def unzstd(zstd, data, size, what="a cubin"):
    """zstd frames unpacked by the zstd program to exactly ``size`` bytes (what their fatbin entries declare)."""
    rc, out, err, timed_out, not_found = run_bounded([zstd, "-d", "-c", "-q"], ZSTD_TIMEOUT, dict(os.environ, LC_ALL="C"),
                                                     size + 65536, text=False, input=data)
    detail = err.decode("utf-8", "replace").strip()[:500]
    if not_found:
        raise CudaBinaryError("cannot run %s: %s; %s" % (zstd, detail, ZSTD_FIX))
    if timed_out:
        why = "did not finish within %d s" % ZSTD_TIMEOUT
    elif rc is None:
        why = "printed more than the %d bytes declared and was stopped" % size
    elif rc != 0:
        why = "exited with %d (%s)" % (rc, detail or "no message")
    elif len(out) != size:
        why = "gave %d bytes where the fatbin entries declare %d" % (len(out), size)
    else:
        return out
    raise CudaBinaryError("zstd could not unpack %s: it %s; the fatbin is corrupt, or set reader=cuobjdump" % (what, why))


def _cubin_kernels(cubin, data):
    try:
        return cubin_kernels(data)
    except CubinError as exc:
        raise CudaBinaryError("%s (%s): %s; set reader=cuobjdump for a second opinion" % (cubin["name"], cubin["arch"], exc))


def fatbin_kernels(path, cubins, wanted, zstd=None):
    """``[(cubin, [(kernel name, code size), ...]), ...]`` for the cubins of a library that ``wanted(cubin)`` picks,
    in file order, their payloads read from the file and unpacked when compressed. zstd frames go to one zstd run per
    ZSTD_BATCH_BYTES of output (zstd unpacks concatenated frames back to back; each entry declares its size). Bounded
    by MAX_KERNEL_CUBINS and MAX_KERNEL_BYTES."""
    found, pending, total = [], [], [0, 0]

    def unpack_pending():
        if not pending:
            return
        what = "%s%s" % (pending[0][1]["name"], " and the %d zstd cubins after it" % (len(pending) - 1) if len(pending) > 1 else "")
        out = unzstd(zstd or find_zstd(), b"".join(data for _at, _c, data, _size in pending), sum(size for _at, _c, _data, size in pending),
                     what)
        at = 0
        for position, cubin, _data, size in pending:
            found.append((position, cubin, _cubin_kernels(cubin, out[at:at + size])))
            at += size
        del pending[:]

    try:
        with open(path, "rb") as handle:
            for position, cubin in enumerate(cubins):
                if not wanted(cubin):
                    continue
                method, data, size = read_payload(handle, cubin["offset"])
                total[0] += 1
                total[1] += size
                if total[0] > MAX_KERNEL_CUBINS or total[1] > MAX_KERNEL_BYTES:
                    raise CudaBinaryError("the cubins to read for their kernels are more than %d, or unpack to more than %d bytes: "
                                          "narrow require_archs" % (MAX_KERNEL_CUBINS, MAX_KERNEL_BYTES))
                if method == "zstd":
                    if pending and sum(p[3] for p in pending) + size > ZSTD_BATCH_BYTES:
                        unpack_pending()
                    pending.append((position, cubin, data, size))
                    continue
                found.append((position, cubin, _cubin_kernels(cubin, lz4_block(data, size) if method == "lz4" else data)))
            unpack_pending()
    except FatbinError as exc:
        raise CudaBinaryError("%s; if cuobjdump can read it, set reader=cuobjdump" % exc)
    except (IOError, OSError) as exc:
        raise CudaBinaryError("cannot be read: %s" % (exc.strerror or exc))
    return [(cubin, kernels) for _position, cubin, kernels in sorted(found, key=lambda item: item[0])]


def cuobjdump_kernels(path, cubins, wanted, cuobjdump, runner=default_runner):
    """The same from ``cuobjdump --dump-elf-symbols`` (code sizes unknown: None)."""
    rc, out, err = runner([cuobjdump, "--dump-elf-symbols", path])
    if rc != 0:
        raise CudaBinaryError("cuobjdump --dump-elf-symbols exited with %d: %s" % (rc, (err or out).strip()[:500] or "no output"))
    dumped = parse_elf_symbols(out)
    if len(dumped) != len(cubins) or any((split_arch(a) or (None,))[0] != (split_arch(c["arch"] or "") or (None,))[0]
                                         for (a, _names), c in zip(dumped, cubins)):
        raise CudaBinaryError("cuobjdump --dump-elf-symbols lists %d cubins where --list-elf lists %d: set reader=fatbin"
                              % (len(dumped), len(cubins)))
    return [(c, [(name, None) for name in names]) for (_a, names), c in zip(dumped, cubins) if wanted(c)]


def kernel_reader(reader="fatbin", cuobjdump=None, runner=default_runner):
    """A callable (path, cubins, wanted) -> [(cubin, [(name, size)])] for the chosen reader."""
    if reader == "cuobjdump":
        return lambda path, cubins, wanted: cuobjdump_kernels(path, cubins, wanted, cuobjdump, runner)
    return fatbin_kernels


def scan_kernels(path, cubins, read, patterns, required, accept_family=False):
    """The kernels of the cubins of one library that meet a required arch, matched against the patterns.

    Returns ``{'cubins': n, 'kernels': n, 'matches': [row, ...]}``, one row per (pattern, required arch): ``pattern``,
    ``arch``, ``count`` and ``code_bytes`` of the matching kernels, ``smallest`` (the smallest one's code size),
    ``kernels`` (the first KERNEL_EXAMPLES: name, readable, size, cubin arch and name), ``cubins_searched`` and
    ``kernels_searched`` (for that arch)."""
    def meets(cubin):
        return [arch for arch in required if arch_satisfied(arch, [cubin["arch"] or ""], accept_family)]

    rows = [{"pattern": text, "arch": arch, "count": 0, "code_bytes": 0, "smallest": None, "kernels": [],
             "cubins_searched": 0, "kernels_searched": 0} for text, _regex in patterns for arch in required]
    by_key = dict(((row["pattern"], row["arch"]), row) for row in rows)
    total = {"cubins": 0, "kernels": 0}
    for cubin, kernels in read(path, cubins, lambda c: bool(meets(c))):
        archs = meets(cubin)
        total["cubins"] += 1
        total["kernels"] += len(kernels)
        for text, _regex in patterns:
            for arch in archs:
                by_key[(text, arch)]["cubins_searched"] += 1
                by_key[(text, arch)]["kernels_searched"] += len(kernels)
        for name, size in kernels:
            joined = readable(name)
            for text, regex in patterns:
                if not (regex.search(name) or regex.search(joined)):
                    continue
                for arch in archs:
                    row = by_key[(text, arch)]
                    row["count"] += 1
                    if size is not None:
                        row["code_bytes"] += size
                        row["smallest"] = size if row["smallest"] is None else min(size, row["smallest"])
                    if len(row["kernels"]) < KERNEL_EXAMPLES:
                        row["kernels"].append({"name": name, "readable": joined, "size": size, "arch": cubin["arch"],
                                               "cubin": cubin["name"]})
    return dict(total, matches=rows)


def kernel_report(libraries, patterns, required):
    """``(rows, missing)`` over every library's ``kernels``: one row per (pattern, required arch), the rows of
    scan_kernels added up (each kernel named with its library), and ``[{'pattern': ..., 'arch': ...}]`` for the rows
    without a match."""
    merged = {}
    for text, _regex in patterns:
        for arch in required:
            merged[(text, arch)] = {"pattern": text, "arch": arch, "count": 0, "code_bytes": 0, "smallest": None, "kernels": [],
                                    "cubins_searched": 0, "kernels_searched": 0}
    for lib in libraries:
        for row in (lib.get("kernels") or {}).get("matches", []):
            into = merged[(row["pattern"], row["arch"])]
            for field in ("count", "code_bytes", "cubins_searched", "kernels_searched"):
                into[field] += row[field]
            if row["smallest"] is not None:
                into["smallest"] = row["smallest"] if into["smallest"] is None else min(row["smallest"], into["smallest"])
            into["kernels"].extend(dict(k, library=lib["path"]) for k in row["kernels"][:KERNEL_EXAMPLES - len(into["kernels"])])
    rows = list(merged.values())
    return rows, [{"pattern": row["pattern"], "arch": row["arch"]} for row in rows if row["count"] == 0]


def missing_kernels_message(result, rows, accept_family=False):
    """Why the kernel requirement failed: per missing (pattern, arch), what was searched, and what to do."""
    parts = []
    for row in rows:
        if row["count"]:
            continue
        number, suffix = split_arch(row["arch"])
        if row["cubins_searched"]:
            searched = "searched %d kernels in %d cubins that meet %s" % (row["kernels_searched"], row["cubins_searched"], row["arch"])
        else:
            searched = "no cubin meets %s" % row["arch"]
        if suffix == "a" and not accept_family and "sm_%df" % number in result["elf_archs"]:
            searched += "; sm_%df family cubins are not counted without accept_family=true" % number
        parts.append("no kernel matching %r has a cubin for %s (%s)" % (row["pattern"], row["arch"], searched))
    return ("%s: %s. Patterns are Python regexes searched in each kernel's mangled name and in its identifiers joined by "
            "'::' (kernel_matches shows what matched). Fix: install a build whose kernels for those archs include them "
            "(sgl-kernel FP4 ops need SGL_KERNEL_ENABLE_FP4=ON and TORCH_CUDA_ARCH_LIST including the arch, for example "
            "12.0a; a FlashInfer JIT module needs FLASHINFER_CUDA_ARCH_LIST including it, as the fp4_kernels role sets), "
            "or take them from the package that provides them." % (result["source"], "; ".join(parts)))


def summarize(entries):
    """Count per (kind, arch): ``[{'kind': 'elf', 'arch': 'sm_120f', 'count': 3, 'arch_specific': False,
    'family': True}, ...]``, cubins first, then by arch number."""
    counts = {}
    for entry in entries:
        key = (entry["kind"], entry["arch"])
        counts[key] = counts.get(key, 0) + 1
    order = {"elf": 0, "ptx": 1}
    keys = sorted(counts, key=lambda k: (order.get(k[0], 2), k[0], _sort_key(k[1] or "")))
    return [{"kind": kind, "arch": arch, "count": counts[(kind, arch)],
             "arch_specific": bool(arch and arch.endswith("a")), "family": bool(arch and arch.endswith("f"))}
            for kind, arch in keys]


def library_reader(reader="fatbin", cuobjdump=None, runner=default_runner):
    """A callable path -> (has_device_code, entries, family_resolved) for the chosen reader."""
    if reader == "fatbin":
        return fatbin_entries
    if reader == "cuobjdump":
        return lambda path: cuobjdump_entries(path, cuobjdump, runner)
    raise CudaBinaryError("reader=%s is not one of %s" % (reader, ", ".join(READERS)))


def _without_kind(entry):
    return dict((key, value) for key, value in entry.items() if key != "kind")


def inspect_library(path, read=fatbin_entries, display=None, list_cubins=False, kernels=None):
    """The device code of one shared library: counts per arch, with list_cubins every cubin and PTX file, and with
    kernels (a callable (path, cubins) -> scan_kernels' answer) the kernel matches under ``kernels``."""
    result = {
        "path": display or path,
        "sha256": sha256_file(path),
        "size": os.path.getsize(path),
        "has_device_code": False,
        "family_resolved": False,
        "archs": [],
        "elf_archs": [],
        "ptx_archs": [],
    }
    try:
        has_code, entries, resolved = read(path)
    except CudaBinaryError as exc:
        raise CudaBinaryError("%s: %s" % (result["path"], exc))
    cubins = [e for e in entries if e["kind"] == "elf"]
    ptx = [e for e in entries if e["kind"] == "ptx"]
    result.update(
        has_device_code=has_code,
        family_resolved=resolved and has_code,
        archs=summarize(entries),
        elf_archs=sorted_archs(c["arch"] for c in cubins if c["arch"]),
        ptx_archs=sorted_archs(p["arch"] for p in ptx if p["arch"]),
    )
    if list_cubins:
        result.update(cubins=[_without_kind(c) for c in cubins], ptx=[_without_kind(p) for p in ptx])
    if kernels is not None:
        try:
            result["kernels"] = kernels(path, cubins)
        except CudaBinaryError as exc:
            raise CudaBinaryError("%s: %s" % (result["path"], exc))
    return result


def _inspect_wheel(path, inspect, tmp_dir):
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise CudaBinaryError("%s is not a valid wheel (zip): %s; rebuild or re-download it" % (path, exc))
    libraries = []
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir() and is_shared_library(m.filename)]
        for member in members:
            # zipfile stops reading a member at its declared size, so checking that bounds what is written
            if member.file_size > MAX_LIBRARY_BYTES:
                raise CudaBinaryError("%s: %s unpacks to %d bytes, more than the %d a shared library of a wheel may have; "
                                      "this is not a wheel to install" % (path, member.filename, member.file_size,
                                                                          MAX_LIBRARY_BYTES))
        work = tempfile.mkdtemp(prefix="cuda_binary_", dir=tmp_dir)
        try:
            for index, member in enumerate(members):
                # One folder per member keeps cuobjdump's names (it names cubins after the file) and
                # never writes outside work/ whatever the member path says.
                folder = os.path.join(work, str(index))
                os.mkdir(folder)
                target = os.path.join(folder, os.path.basename(member.filename))
                with archive.open(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                libraries.append(inspect(target, member.filename))
                shutil.rmtree(folder)  # big libraries: keep one on disk at a time
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return libraries


def _inspect_directory(path, inspect):
    libraries = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            # Symlinks (libfoo.so -> libfoo.so.1) would list the same library twice.
            if is_shared_library(name) and not os.path.islink(full) and os.path.isfile(full):
                libraries.append(inspect(full, os.path.relpath(full, path)))
    return libraries


def inspect_path(path, read=fatbin_entries, tmp_dir=None, list_cubins=False, kernels=None):
    """Inspect a wheel, a directory (recursively, every ``*.so``/``*.so.N``) or one library; ``read`` is a
    library_reader(), ``kernels`` as for inspect_library."""
    def inspect(library, display):
        return inspect_library(library, read, display, list_cubins, kernels)

    if not os.path.exists(path):
        raise CudaBinaryError("%s does not exist: give a wheel (.whl), a directory or a shared library (.so)" % path)
    if os.path.isdir(path):
        kind, digest = "directory", None
        libraries = _inspect_directory(path, inspect)
    elif not os.path.isfile(path):
        # a device (/dev/zero) or a FIFO would be hashed for ever
        raise CudaBinaryError("%s is not a regular file: give a wheel (.whl), a directory or a shared library (.so)" % path)
    elif path.endswith(".whl"):
        kind, digest = "wheel", sha256_file(path)
        libraries = _inspect_wheel(path, inspect, tmp_dir)
    else:
        libraries = [inspect(path, os.path.basename(path))]
        kind, digest = "file", libraries[0]["sha256"]  # hashed once: a library can be gigabytes
    libraries.sort(key=lambda lib: lib["path"])
    return {
        "source": path,
        "kind": kind,
        "sha256": digest,
        "libraries": libraries,
        "elf_archs": sorted_archs(a for lib in libraries for a in lib["elf_archs"]),
        "ptx_archs": sorted_archs(a for lib in libraries for a in lib["ptx_archs"]),
    }


def missing_message(result, missing, accept_family=False):
    """Why the requirement failed, what was found, and how to rebuild."""
    libs = result["libraries"]
    with_code = [lib["path"] for lib in libs if lib["has_device_code"]]
    if not libs:
        found = "it holds no shared library (.so)"
    else:
        found = "found cubins: %s; PTX: %s (%d shared librar%s, %d with device code%s)" % (
            ", ".join(result["elf_archs"]) or "none", ", ".join(result["ptx_archs"]) or "none",
            len(libs), "y" if len(libs) == 1 else "ies", len(with_code),
            (": " + ", ".join(with_code[:5]) + (", ..." if len(with_code) > 5 else "")) if with_code else "")
    notes = []
    for arch in missing:
        number, suffix = split_arch(arch)
        family = "sm_%df" % number
        if suffix == "a" and not accept_family and family in result["elf_archs"]:
            notes.append("An %s family cubin is present: set accept_family=true to accept it for %s" % (family, arch))
        if arch in result["ptx_archs"]:
            notes.append("PTX for %s is present, but only cubins count (PTX is JIT-compiled at load time)" % arch)
    big = [a for a in missing if split_arch(a)[0] >= 100]
    fix = "Fix: rebuild with TORCH_CUDA_ARCH_LIST including %s and CMAKE_CUDA_ARCHITECTURES including %s, and SGL_KERNEL_ENABLE_FP4=ON%s." % (
        " ".join(torch_arch(a) for a in missing), ";".join(cmake_arch(a) for a in missing),
        " (sgl-kernel: CMAKE_ARGS='-DSGL_KERNEL_ENABLE_SM100A=ON -DSGL_KERNEL_ENABLE_FP4=ON')" if big else "")
    return "%s: no cubin for %s; %s. %s%s" % (
        result["source"], ", ".join(missing), found, "".join(note + ". " for note in notes), fix)
