# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark of cuda_binary_info against cuobjdump on a real vendor CUDA library.

Downloads (pip download, into $LLMOPS_CACHE/wheels/bench) a pinned PyPI wheel holding a large CUDA library
(default: libcublasLt.so.13 of nvidia-cublas 13.8.2.12, 545 MB) and the real cuobjdump (nvidia-cuda-cuobjdump
13.5.37), unpacks both once into $LLMOPS_CACHE/bench/cuda_binary, then prints, each the median of --repeat runs
on a warm page cache:

- the wall time of ``cuobjdump --list-elf`` on the library;
- the wall time of the module (plugins/modules/cuda_binary_info.py run the way Ansible runs it: a child Python
  with the arguments as JSON on stdin), default reader, and the ratio of the two (goal: 1.5x or less);
- whether the module's per-arch summary has the same (kind, arch) entries and counts as cuobjdump's own
  ``--list-elf`` and ``--list-ptx`` listings (where ``--list-elf`` drops the ``f`` of family cubins);
- unless --no-full: the module with reader=cuobjdump once (list, PTX list and the --dump-elf-symbols header pass,
  the path that existed before the fatbin reader), its time, and whether both readers give the same summary,
  family (``sm_120f``) and arch-specific (``sm_120a``) counts included.

With --sgl-kernel it measures the kernel-level check instead, on the sglang-kernel wheels SGLang pins (0.4.5 for
0.5.16, 0.4.10 for 0.5.23; downloaded like the library, or taken from --wheel-dir): for each wheel and for its
``sgl_kernel/sm100/common_ops.abi3.so`` alone, the module with require_archs=[sm_120a] (the arch check) and with
require_kernels=[fp4|e2m1] added, their times, the cubins and kernels read, the FP4 matches and the failure message
(docs/evidence/sgl-kernel-fp4-kernels.md records a run).

Usage: python tests/bench/bench_cuda_binary.py [--repeat 3] [--package REQ --member PATH] [--library FILE] [--no-full]
       python tests/bench/bench_cuda_binary.py --sgl-kernel [--wheel-dir DIR] [--repeat 3]
Exit status 1 when an answer disagrees (with --sgl-kernel: sm_120a missing, or the kernel check failing for another
reason than the missing FP4 kernels), 2 when something could not be fetched.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb  # noqa: E402  pylint: disable=wrong-import-position

MODULE = ROOT / "plugins" / "modules" / "cuda_binary_info.py"
CACHE = pathlib.Path(os.environ.get("LLMOPS_CACHE") or ROOT / ".cache")
LIBRARY_PACKAGE = "nvidia-cublas==13.8.2.12"
LIBRARY_MEMBER = "nvidia/cu13/lib/libcublasLt.so.13"
CUOBJDUMP_PACKAGE = "nvidia-cuda-cuobjdump==13.5.37"
CUOBJDUMP_MEMBER = "nvidia/cu13/bin/cuobjdump"
MIN_MB = 300
SGL_KERNEL_WHEELS = ("sglang-kernel==0.4.5", "sglang-kernel==0.4.10")
SGL_KERNEL_LIBRARY = "sgl_kernel/sm100/common_ops.abi3.so"
FP4_PATTERN = "fp4|e2m1"


def fetch(requirement):
    """The wheel of a pinned requirement, downloaded into the cache once."""
    folder = CACHE / "wheels" / "bench"
    name, version = requirement.split("==")
    stem = "%s-%s-" % (name.replace("-", "_"), version)
    found = sorted(folder.glob(stem + "*.whl"))
    if found:
        return found[-1]
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(folder), requirement]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    found = sorted(folder.glob(stem + "*.whl"))
    if proc.returncode != 0 or not found:
        sys.stderr.write(proc.stdout[-3000:])
        sys.stderr.write("bench_cuda_binary: could not download %s with pip (offline, or no index reachable): put its wheel "
                         "into %s and run again\n" % (requirement, folder))
        raise SystemExit(2)
    return found[-1]


def unpack(wheel, member, executable=False):
    """One member of a wheel, unpacked once into the cache (kept while its size matches)."""
    target = CACHE / "bench" / "cuda_binary" / wheel.stem / pathlib.Path(member).name
    with zipfile.ZipFile(str(wheel)) as archive:
        info = archive.getinfo(member)
        if not target.exists() or target.stat().st_size != info.file_size:
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(str(target) + ".part", "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(str(target) + ".part", str(target))
    if executable:
        target.chmod(0o755)
    return target


def timed(argv, stdin=None):
    start = time.monotonic()
    proc = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False,
                          env=dict(os.environ, LC_ALL="C", PYTHONPATH=str(ROOT / "collections")))
    return time.monotonic() - start, proc


def module(args):
    """(seconds, result) of the module run as Ansible runs it; a failure is in the result."""
    seconds, proc = timed([sys.executable, str(MODULE)], json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    try:
        return seconds, json.loads(proc.stdout)
    except ValueError:
        raise SystemExit("cuda_binary_info printed no JSON on %s: %s" % (args["path"], proc.stderr[-2000:]))


def run_module(library, cuobjdump, reader):
    seconds, result = module({"path": str(library), "reader": reader, "cuobjdump": str(cuobjdump)})
    if result.get("failed"):
        raise SystemExit("cuda_binary_info failed on %s: %s" % (library, result.get("msg")))
    return seconds, result


def listing_counts(cuobjdump, library, list_elf_stdout):
    """{(kind, arch): count} of cuobjdump's own listings."""
    _ptx_seconds, ptx = timed([str(cuobjdump), "--list-ptx", str(library)])
    counts = {}
    for kind, (rc, out, err) in (("elf", (0, list_elf_stdout, "")), ("ptx", (ptx.returncode, ptx.stdout, ptx.stderr))):
        for entry in cb.parse_listing(kind, rc, out, err)[1]:
            counts[(kind, entry["arch"])] = counts.get((kind, entry["arch"]), 0) + 1
    return counts


def summary_counts(result, collapse_family):
    """{(kind, arch): count} of the module's summary; with collapse_family, sm_120f cubins count as sm_120 (as --list-elf says)."""
    counts = {}
    [library] = result["libraries"]
    for row in library["archs"]:
        arch = row["arch"][:-1] if collapse_family and row["kind"] == "elf" and row["family"] else row["arch"]
        counts[(row["kind"], arch)] = counts.get((row["kind"], arch), 0) + row["count"]
    return counts


def sgl_kernel_wheel(requirement, wheel_dir):
    if not wheel_dir:
        return fetch(requirement)
    name, version = requirement.split("==")
    found = sorted(pathlib.Path(wheel_dir).glob("%s-%s-*.whl" % (name.replace("-", "_"), version)))
    if not found:
        raise SystemExit("bench_cuda_binary: no %s wheel in %s" % (requirement, wheel_dir))
    return found[-1]


def kernel_check(path, repeat):
    """The arch check and the kernel check on one path, each the median of repeat runs: (arch s, kernel s, results)."""
    arch_times, kernel_times = [], []
    for _i in range(max(1, repeat)):
        seconds, arch = module({"path": str(path), "require_archs": ["sm_120a"]})
        arch_times.append(seconds)
        seconds, kernels = module({"path": str(path), "require_archs": ["sm_120a"], "require_kernels": [FP4_PATTERN]})
        kernel_times.append(seconds)
    return statistics.median(arch_times), statistics.median(kernel_times), arch, kernels, arch_times, kernel_times


def sgl_kernel_main(args):
    """The kernel-level check on the sglang-kernel wheels; 0 when each has sm_120a and fails only for FP4."""
    ok = True
    print("zstd: %s" % (shutil.which("zstd") or "not found"))
    for requirement in SGL_KERNEL_WHEELS:
        wheel = sgl_kernel_wheel(requirement, args.wheel_dir)
        library = unpack(wheel, SGL_KERNEL_LIBRARY)
        print("\n%s: %s (%d bytes, sha256 %s)" % (requirement, wheel.name, wheel.stat().st_size, cb.sha256_file(str(wheel))))
        for label, path in (("wheel", wheel), (SGL_KERNEL_LIBRARY, library)):
            with open(str(path), "rb") as handle:  # a warm page cache for both runs
                while handle.read(1 << 24):
                    pass
            arch_s, kernel_s, arch, kernels, arch_times, kernel_times = kernel_check(path, args.repeat)
            [row] = kernels.get("kernel_matches") or [{}]
            print("  %s: arch check %.2f s (runs %s), kernel check %.2f s (runs %s), %.1fx" % (
                label, arch_s, ", ".join("%.2f" % t for t in arch_times), kernel_s, ", ".join("%.2f" % t for t in kernel_times),
                kernel_s / arch_s))
            print("    elf_archs: %s; missing_archs: %s" % (", ".join(arch.get("elf_archs", [])), arch.get("missing_archs")))
            print("    %s for sm_120a: %d matching kernels in %d cubins (%d kernels) that meet sm_120a" % (
                FP4_PATTERN, row.get("count", -1), row.get("cubins_searched", -1), row.get("kernels_searched", -1)))
            for lib in kernels.get("libraries", []):
                if lib.get("kernels", {}).get("cubins"):
                    print("      %s: %d cubins, %d kernels" % (lib["path"], lib["kernels"]["cubins"], lib["kernels"]["kernels"]))
            print("    failure: %s" % kernels.get("msg"))
            expected = (not arch.get("failed") and "sm_120a" in arch.get("elf_archs", []) and kernels.get("missing_kernels") ==
                        [{"pattern": FP4_PATTERN, "arch": "sm_120a"}] and kernels.get("missing_archs") == [])
            ok = ok and expected
            if not expected:
                print("    UNEXPECTED: sm_120a missing, or the kernel check did not fail for FP4 alone")
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each (median printed); default 3")
    parser.add_argument("--package", default=LIBRARY_PACKAGE, help="pinned wheel holding the library (default %s)" % LIBRARY_PACKAGE)
    parser.add_argument("--member", default=LIBRARY_MEMBER, help="the library inside it (default %s)" % LIBRARY_MEMBER)
    parser.add_argument("--library", help="a library file to use instead of the wheel's")
    parser.add_argument("--no-full", action="store_true", help="skip the reader=cuobjdump run")
    parser.add_argument("--sgl-kernel", action="store_true", help="measure the kernel check on the sglang-kernel wheels instead")
    parser.add_argument("--wheel-dir", help="with --sgl-kernel: a folder that already holds the wheels (no download)")
    args = parser.parse_args()
    if args.sgl_kernel:
        return sgl_kernel_main(args)

    library = pathlib.Path(args.library) if args.library else unpack(fetch(args.package), args.member)
    cuobjdump = unpack(fetch(CUOBJDUMP_PACKAGE), CUOBJDUMP_MEMBER, executable=True)
    size = library.stat().st_size
    version = cb.parse_version(timed([str(cuobjdump), "--version"])[1].stdout)
    print("file: %s (%s)" % (library, args.library or "%s %s" % (args.package, args.member)))
    print("size: %d bytes (%.0f MB)%s" % (size, size / 1e6, "" if size >= MIN_MB * 1e6 else "  [below the %d MB the goal asks for]" % MIN_MB))
    print("cuobjdump: %s (%s)" % (cuobjdump, version))

    with open(str(library), "rb") as handle:  # warm the page cache for both
        while handle.read(1 << 24):
            pass
    list_times, module_times = [], []
    for _i in range(max(1, args.repeat)):
        seconds, listed = timed([str(cuobjdump), "--list-elf", str(library)])
        if listed.returncode != 0:
            raise SystemExit("cuobjdump --list-elf failed: %s" % listed.stderr.strip())
        list_times.append(seconds)
        seconds, result = run_module(library, cuobjdump, "fatbin")
        module_times.append(seconds)
    list_s, module_s = statistics.median(list_times), statistics.median(module_times)
    ratio = module_s / list_s
    print("cuobjdump --list-elf: %.2f s  (runs: %s)" % (list_s, ", ".join("%.2f" % t for t in list_times)))
    print("cuda_binary_info (reader=fatbin, child process as Ansible runs it): %.2f s  (runs: %s)"
          % (module_s, ", ".join("%.2f" % t for t in module_times)))
    print("ratio: %.2fx  (goal <= 1.5x: %s)" % (ratio, "met" if ratio <= 1.5 else "NOT met"))

    want = listing_counts(cuobjdump, library, listed.stdout)
    got = summary_counts(result, collapse_family=True)
    agrees = want == got
    print("summary agrees with cuobjdump --list-elf/--list-ptx: %s (%d kind/arch entries, %d cubins, %d PTX)" % (
        "yes" if agrees else "NO", len(want), sum(v for (k, _a), v in want.items() if k == "elf"),
        sum(v for (k, _a), v in want.items() if k == "ptx")))
    if not agrees:
        print("  cuobjdump only: %s" % sorted(set(want.items()) - set(got.items())))
        print("  module only:    %s" % sorted(set(got.items()) - set(want.items())))
    print("per arch: %s" % ", ".join("%s %s x%d" % (row["kind"], row["arch"], row["count"]) for row in result["libraries"][0]["archs"]))
    print("result JSON: %d bytes" % len(json.dumps(result)))
    if not args.no_full:
        seconds, full = run_module(library, cuobjdump, "cuobjdump")
        same = summary_counts(full, False) == summary_counts(result, False) and full["libraries"][0]["family_resolved"]
        print("cuda_binary_info (reader=cuobjdump: --list-elf, --list-ptx, --dump-elf-symbols): %.2f s" % seconds)
        print("both readers give the same summary, sm_Nf and sm_Na included: %s" % ("yes" if same else "NO"))
        agrees = agrees and same
    return 0 if agrees else 1


if __name__ == "__main__":
    sys.exit(main())
