# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compile FlashInfer JIT modules ahead of time with FlashInfer's own generators, into its prebuilt (AOT) layout.

Run by the Python of a venv that holds the pinned flashinfer-python (and the torch it imports), with
CUDA_HOME, FLASHINFER_CUDA_ARCH_LIST, FLASHINFER_WORKSPACE_BASE and MAX_JOBS set by the caller and ninja on PATH.
Argument: one JSON object ``{"out": DIR, "modules": [{"name": ..., "generator": "package.module:function"}]}``.
For each module it calls the generator (which renders the module's generated sources and returns its JitSpec),
checks the spec's name, runs ``spec.build()`` (ninja + nvcc, exactly what FlashInfer runs at first use) and copies
the built library to ``DIR/<name>/<name>.so``: the path under ``flashinfer/data/aot`` that FlashInfer loads without
compiling (flashinfer/jit/env.py get_aot_artifacts; docs/fp4_kernels.md says why this layout).
Prints one JSON object: flashinfer version, nvcc flags and per module seconds, bytes and the .so path; exit 1 with
``{"error": ...}`` on a failure. Used by the fp4_kernels role and by tests/bench/fp4_module_build.py.
"""

import hashlib
import importlib
import json
import os
import shutil
import sys
import time


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build(request):
    from flashinfer.version import __version__ as version  # pylint: disable=import-error

    answer = {"flashinfer": version, "arch_list": os.environ.get("FLASHINFER_CUDA_ARCH_LIST"), "modules": []}
    for item in request["modules"]:
        package, function = item["generator"].split(":", 1)
        started = time.time()
        spec = getattr(importlib.import_module(package), function)()
        if spec.name != item["name"]:
            raise RuntimeError("%s made a spec named %s, not %s" % (item["generator"], spec.name, item["name"]))
        spec.build(verbose=os.environ.get("FLASHINFER_JIT_VERBOSE") == "1")
        built = str(spec.jit_library_path)
        target_dir = os.path.join(request["out"], spec.name)
        os.makedirs(target_dir, exist_ok=True)
        target = os.path.join(target_dir, spec.name + ".so")
        shutil.copyfile(built, target + ".part")
        os.replace(target + ".part", target)
        answer["modules"].append({
            "name": spec.name, "generator": item["generator"], "seconds": round(time.time() - started, 1),
            "path": target, "bytes": os.path.getsize(target), "sha256": sha256(target), "sources": len(spec.sources),
            "nvcc_flags": [f for f in spec.extra_cuda_cflags if f.startswith("-gencode")],
        })
    return answer


def main():
    try:
        answer = build(json.loads(sys.argv[1]))
    except Exception as exc:  # the caller reads the cause from the JSON  # pylint: disable=broad-except
        print(json.dumps({"error": "%s: %s" % (type(exc).__name__, str(exc)[-4000:])}))
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
