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

Usage: python tests/bench/bench_cuda_binary.py [--repeat 3] [--package REQ --member PATH] [--library FILE] [--no-full]
Exit status 1 when an answer disagrees, 2 when something could not be fetched.
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


def run_module(library, cuobjdump, reader):
    args = {"path": str(library), "reader": reader, "cuobjdump": str(cuobjdump)}
    seconds, proc = timed([sys.executable, str(MODULE)], json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    result = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or result.get("failed"):
        raise SystemExit("cuda_binary_info failed on %s: %s%s" % (library, result.get("msg"), proc.stderr[-2000:]))
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each (median printed); default 3")
    parser.add_argument("--package", default=LIBRARY_PACKAGE, help="pinned wheel holding the library (default %s)" % LIBRARY_PACKAGE)
    parser.add_argument("--member", default=LIBRARY_MEMBER, help="the library inside it (default %s)" % LIBRARY_MEMBER)
    parser.add_argument("--library", help="a library file to use instead of the wheel's")
    parser.add_argument("--no-full", action="store_true", help="skip the reader=cuobjdump run")
    args = parser.parse_args()

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
