# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compile a real FlashInfer FP4 JIT module ahead of time for sm_120a, time it, and check it kernel by kernel.

No GPU is needed. Given a venv with the pinned flashinfer-python (and the CPU or CUDA torch it imports) and a CUDA
toolkit, it runs roles/fp4_kernels/files/flashinfer_build.py (what the fp4_kernels role runs on its build host:
FlashInfer's own generator, then ``spec.build()``, i.e. ninja + nvcc), from a cold FlashInfer workspace, with
FLASHINFER_CUDA_ARCH_LIST=12.0a (``--arch-list``) and MAX_JOBS = the cores (``--jobs``). Then it reads the built
``.so`` with the collection's cuda_binary reader (the functions behind ``cuda_binary_info require_kernels``) and
requires kernels matching ``fp4|e2m1`` in cubins for sm_120a. Prints one JSON object: seconds (wall and CPU), cores,
jobs, load average before and after, nvcc and flashinfer versions, .so bytes and sha256, cubins per arch, kernels, FP4 kernels
(and a few of their names). docs/evidence/flashinfer-fp4-module-build.md records runs.

Offline: ``--wheel-dir DIR`` makes the venv (WORK/venv) with ``pip install --no-index --no-deps DIR/*.whl``: put into
DIR flashinfer-python, the pure-Python packages its JIT import needs (apache-tvm-ffi, filelock, jinja2, markupsafe,
numpy, packaging, einops, click, requests, tabulate, tqdm, nvidia-ml-py and requests' four), ninja, a torch (the CPU
build is enough; a CUDA torch needs its nvidia-* wheels too) with its own dependencies (filelock, typing-extensions,
sympy, mpmath, networkx, jinja2, fsspec), and the CUDA 13 toolkit wheels nvidia-cuda-nvcc, nvidia-cuda-crt,
nvidia-cuda-runtime, nvidia-cuda-cccl, nvidia-nvvm, nvidia-cuda-culibos and nvidia-curand. Without ``--cuda`` the toolkit is the
venv's ``nvidia/cu13`` (those wheels). The evidence doc lists the exact wheels of a run.

The link of a FlashInfer module names ``-L$cuda_home/lib64 -lcudart -lcuda`` (the driver). A toolkit made of wheels
has lib/ (no lib64/), only libcudart.so.13 (no libcudart.so) and no driver stub (lib64/stubs/libcuda.so of a full CUDA
install), so the script puts what is missing into WORK/link: the libcudart.so link, and a libcuda.so made the way the
toolkit's stub is, a shared object with soname libcuda.so.1 and no code (the module resolves the driver's symbols
from the real libcuda.so.1 where it is loaded). nvidia-curand is there for its headers (CUTLASS includes
curand_kernel.h).

Usage: python tests/bench/fp4_module_build.py --work DIR (--venv VENV | --wheel-dir WHEELS) [--cuda CUDA_HOME]
           [--module fp4_gemm_cutlass_sm120] [--arch-list 12.0a] [--jobs N]
Exit status 0 when the module built and its sm_120a cubins hold FP4 kernels, 1 when not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "collections"))

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.plugins.module_utils._fp4_kernels import GENERATORS  # noqa: E402  pylint: disable=wrong-import-position

DRIVER = ROOT / "roles" / "fp4_kernels" / "files" / "flashinfer_build.py"
FP4_PATTERN = "fp4|e2m1"


def fail(message, status=2):
    sys.stderr.write("fp4_module_build: %s\n" % message)
    raise SystemExit(status)


def run(argv, **kwargs):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False, **kwargs)


def make_venv(wheel_dir, venv):
    """A venv holding every wheel of wheel_dir, installed with no index and no dependency resolution."""
    wheels = sorted(glob.glob(os.path.join(wheel_dir, "*.whl")))
    if not wheels:
        fail("no wheel in %s: put flashinfer-python, its JIT import's dependencies, ninja, torch and the CUDA 13 "
             "toolkit wheels there (see this script's docstring)" % wheel_dir)
    if not (venv / "bin" / "python").exists():
        proc = run([sys.executable, "-m", "venv", str(venv)])
        if proc.returncode:
            fail("python -m venv %s failed: %s" % (venv, proc.stdout[-2000:]))
    proc = run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps"] + wheels)
    if proc.returncode:
        fail("pip could not install the wheels of %s: %s" % (wheel_dir, proc.stdout[-3000:]))
    return [{"wheel": os.path.basename(w), "bytes": os.path.getsize(w)} for w in wheels]


def venv_cuda(python):
    """The venv's nvidia/cu13 (the toolkit wheels) when it has an nvcc."""
    proc = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    root = pathlib.Path(proc.stdout.strip()) / "nvidia" / "cu13"
    return root if (root / "bin" / "nvcc").exists() else None


def link_folder(cuda, work):
    """-L folders for the module's link (-L$cuda_home/lib64 -lcudart -lcuda): a toolkit made of wheels has lib/, no
    lib64/, no libcudart.so link (only libcudart.so.13) and no driver stub; what is missing is made in WORK/link."""
    lib = cuda / ("lib64" if (cuda / "lib64").exists() else "lib")
    folders, made = ([] if lib.name == "lib64" else [str(lib)]), []
    link = work / "link"
    if not (lib / "libcudart.so").exists():
        found = sorted(lib.glob("libcudart.so.*"))
        if not found:
            fail("%s has no libcudart.so*: install nvidia-cuda-runtime (the CUDA runtime) into the toolkit" % lib)
        link.mkdir(parents=True, exist_ok=True)
        target = link / "libcudart.so"
        if target.is_symlink() or target.exists():
            target.unlink()
        target.symlink_to(found[0])
        made.append("libcudart.so -> %s" % found[0].name)
    have = any((cuda / d / "stubs" / "libcuda.so").exists() for d in ("lib64", "lib"))
    if not have and os.path.exists("/sbin/ldconfig"):
        have = "libcuda.so " in run(["/sbin/ldconfig", "-p"]).stdout
    if not have:
        link.mkdir(parents=True, exist_ok=True)
        source = link / "libcuda_stub.c"
        source.write_text("/* link-time stand-in for the CUDA driver, as the toolkit's stubs/libcuda.so */\n")
        proc = run([os.environ.get("CC", "cc"), "-shared", "-Wl,-soname,libcuda.so.1", "-o", str(link / "libcuda.so"), str(source)])
        if proc.returncode:
            fail("could not make the libcuda.so link stub with cc: %s" % proc.stdout[-2000:])
        made.append("libcuda.so stub (soname libcuda.so.1, no code)")
    if made:
        folders.append(str(link))
    return folders, made


def kernel_check(path, arch):
    """cubins per arch, kernels and FP4 kernels of the built library, by cuda_binary_info's own functions."""
    patterns = cb.kernel_patterns([FP4_PATTERN])
    required = [cb.normalize_arch(arch)]
    read = cb.kernel_reader()

    def kernels(library, cubins):
        return cb.scan_kernels(library, cubins, read, patterns, required)

    started = time.time()
    result = cb.inspect_path(str(path), kernels=kernels, list_cubins=True)
    rows, missing = cb.kernel_report(result["libraries"], patterns, required)
    cubins = [c for lib in result["libraries"] for c in lib.get("cubins", [])]
    per_arch = {}
    for cubin in cubins:
        per_arch[cubin["arch"]] = per_arch.get(cubin["arch"], 0) + 1
    row = rows[0]
    scanned = result["libraries"][0].get("kernels") or {}
    return {
        "check_seconds": round(time.time() - started, 2),
        "cubins": len(cubins), "cubins_per_arch": per_arch, "elf_archs": result["elf_archs"], "ptx_archs": result["ptx_archs"],
        "required_arch": required[0], "kernels_in_required_cubins": scanned.get("kernels", 0),
        "fp4_pattern": FP4_PATTERN, "fp4_kernels": row["count"], "fp4_code_bytes": row["code_bytes"],
        "fp4_examples": [k["readable"][:200] for k in row["kernels"][:3]],
        "ok": not missing and required[0] in result["elf_archs"],
        "failure": cb.missing_kernels_message(result, rows) if missing else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--work", required=True, help="work folder (venv, FlashInfer workspace, the built module)")
    parser.add_argument("--venv", help="a venv with the pinned flashinfer-python and torch")
    parser.add_argument("--wheel-dir", help="make WORK/venv offline from the wheels of this folder")
    parser.add_argument("--cuda", help="CUDA_HOME (default: the venv's nvidia/cu13, else /usr/local/cuda)")
    parser.add_argument("--module", default="fp4_gemm_cutlass_sm120", choices=sorted(GENERATORS))
    parser.add_argument("--arch-list", default="12.0a", help="FLASHINFER_CUDA_ARCH_LIST (space-separated)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="MAX_JOBS (default: the cores)")
    args = parser.parse_args()
    work = pathlib.Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    wheels = None
    if args.wheel_dir:
        wheels = make_venv(args.wheel_dir, work / "venv")
        venv = work / "venv"
    elif args.venv:
        venv = pathlib.Path(args.venv).resolve()
    else:
        fail("give --venv (a venv with flashinfer-python) or --wheel-dir (wheels to make one from)")
    python = str(venv / "bin" / "python")
    if not os.path.exists(python):
        fail("%s does not exist: give a venv made with python -m venv" % python)
    cuda = pathlib.Path(args.cuda).resolve() if args.cuda else (venv_cuda(python) or pathlib.Path("/usr/local/cuda"))
    nvcc = cuda / "bin" / "nvcc"
    if not nvcc.exists():
        fail("%s does not exist: give --cuda (a CUDA toolkit) or put the nvidia-cuda-nvcc wheels into the venv" % nvcc)
    nvcc_version = run([str(nvcc), "--version"]).stdout.strip().splitlines()[-2:]
    link_dirs, link_made = link_folder(cuda, work)
    workspace = work / "flashinfer-workspace"
    shutil.rmtree(workspace, ignore_errors=True)  # a cold build: nothing from an earlier run is reused
    out = work / "aot"
    env = dict(os.environ, CUDA_HOME=str(cuda), FLASHINFER_CUDA_ARCH_LIST=args.arch_list, FLASHINFER_WORKSPACE_BASE=str(workspace),
               MAX_JOBS=str(args.jobs), PATH=os.pathsep.join([str(venv / "bin"), str(cuda / "bin"), os.environ.get("PATH", "")]))
    if link_dirs:
        env["FLASHINFER_EXTRA_LDFLAGS"] = " ".join("-L" + d for d in link_dirs)
    request = {"out": str(out), "modules": [{"name": args.module, "generator": GENERATORS[args.module]}]}
    load_before = os.getloadavg()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    proc = subprocess.run([python, str(DRIVER), json.dumps(request)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, check=False)
    seconds = time.time() - started
    load_after = os.getloadavg()
    # CPU time of the build's processes (nvcc, cicc, ptxas, the host compiler): what a shared machine's load does not change
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    try:
        built = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        built = {"error": "the build printed no JSON: %s" % proc.stderr[-3000:]}
    report = {
        "module": args.module, "arch_list": args.arch_list, "seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1),
        "cores": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(), "jobs": args.jobs, "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after], "nvcc": nvcc_version, "cuda_home": str(cuda), "link_made": link_made,
        "python": sys.version.split()[0], "wheels": wheels,
    }
    if built.get("error"):
        report["error"] = built["error"]
        print(json.dumps(report, indent=2))
        return 1
    module = built["modules"][0]
    report.update(flashinfer=built["flashinfer"], so=module["path"], so_bytes=module["bytes"], so_sha256=module["sha256"],
                  sources=module["sources"], gencode=module["nvcc_flags"])
    required = "sm_" + args.arch_list.split()[0].replace(".", "")
    report.update(kernel_check(module["path"], required))
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
