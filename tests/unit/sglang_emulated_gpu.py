# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's own start-up path for checkpoint directories, on emulated CUDA GPUs (run in SGLang's interpreter).

    echo '{"capabilities": ["9.0", "12.0"], "paths": [...]}' | .cache/sglang-venv/bin/python tests/unit/sglang_emulated_gpu.py

Only the CUDA queries are faked (``torch.cuda.is_available``, ``get_device_capability``, ``device_count``,
``mem_get_info``, ``get_device_properties``, ``torch.version.cuda``), and ``sgl_kernel``, the compiled kernel
library that SGLang imports on CUDA, is a stand-in whose kernels raise when called (none runs at start-up; its
``scalar_type`` module is left missing so SGLang takes its own CPU fallback for the type table). The rest is
SGLang's code, in the order a server runs it:

1. ``ServerArgs(model_path=...).resolve_once()``: the argument pipeline with the model overrides and the post-process
   passes (``--dtype`` and ``--kv-cache-dtype`` per architecture and GPU);
2. ``ModelConfig.from_server_args``: the quantization method (with each method's ``override_quantization_method``,
   gptq -> gptq_marlin on a capable GPU) and the model dtype;
3. ``model_loader.loader._get_quantization_config``: the quantization config class, its minimum capability check and
   its activation dtypes;
4. ``mem_cache.kv_cache_dtype.configure_kv_cache_dtype`` with the resolved ``--kv-cache-dtype``.

torch and the ``sglang`` package are imported once, with the GPU not yet chosen (the GPU-independent half of a start-up's
imports), and each GPU then goes on in a child forked from that process, with the same code in the same order a
fresh interpreter runs. The child is that fresh interpreter as long as nothing before the fork asked what the GPU is
(only the capability and the properties differ between GPUs): each such question is recorded, and when there was one,
every GPU runs in an interpreter of its own instead. What comes after the fork may ask: SGLang 0.5.23's
``sglang.srt`` modules read the capability when imported (``layers/deep_gemm_wrapper/configurer.py``).

Prints one line ``EMULATED_GPU_RESULT=<json>``: ``{"sglang_version", "shared_import", "gpus": [{"capability",
"answers"}]}``. Test-only: the collection never fakes a GPU.
"""

import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import traceback
import types

MARKER = "EMULATED_GPU_RESULT="
MEMORY = 140 << 30
NAME = "Emulated GPU"  # the same for every capability, and no real GPU's (SGLang matches some names, such as "ZW")


class _Kernels(types.ModuleType):
    """sgl_kernel stand-in: every name is a kernel that refuses to run."""

    __path__ = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def kernel(*args, **kwargs):
            raise RuntimeError("emulated GPU: kernel sgl_kernel.%s cannot run" % name)
        return kernel


class _KernelFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "sgl_kernel.scalar_type":
            return None
        if name == "sgl_kernel" or name.startswith("sgl_kernel."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Kernels(spec.name)
        module.__version__ = "0.4.2"
        return module

    def exec_module(self, module):
        pass


def emulate(torch, gpu):
    """A CUDA GPU of capability gpu["capability"] ((major, minor)); while that is None, each question that depends on
    it is recorded in gpu["asked"] (and answered with (0, 0))."""
    def capability():
        if gpu["capability"] is None:
            gpu["asked"].append("".join(traceback.format_stack(limit=6)[:-2]))
            return (0, 0)
        return gpu["capability"]

    def properties(device=None):
        major, minor = capability()
        return types.SimpleNamespace(name=NAME, major=major, minor=minor, total_memory=MEMORY, multi_processor_count=132,
                                     L2_cache_size=50 << 20, warp_size=32, gcnArchName="")
    torch.version.cuda = "12.9"
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda device: None
    torch.cuda.get_device_capability = lambda device=None: capability()
    torch.cuda.get_device_name = lambda device=None: NAME  # as torch answers: get_device_properties(device).name
    torch.cuda.mem_get_info = lambda device=None: (MEMORY, MEMORY)
    torch.cuda.get_device_properties = properties
    sys.meta_path.insert(0, _KernelFinder())


def torchvision_without_ops(torch):
    """The project's venv keeps a torchvision without compiled ops beside it; declare the op schemas it registers."""
    no_ops = os.path.join(sys.prefix, "torchvision-no-ops")
    if os.path.isdir(no_ops) and no_ops not in sys.path:
        sys.path.insert(0, no_ops)
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    return lib


def _short(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return text if len(text) <= 600 else text[:600] + "..."


def start(path, torch, api):
    names = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32",
             torch.float8_e4m3fn: "fp8_e4m3", torch.float8_e5m2: "fp8_e5m2"}
    answer = {"path": path, "stage": None, "error": None, "dtype_flag": None, "kv_cache_dtype_flag": None,
              "quantization": None, "config_class": None, "kv_cache_quant_algo": None, "model_dtype": None,
              "kv_cache_dtype_auto": None}
    stage = "server_args"
    try:
        server_args = api["ServerArgs"](model_path=path)
        server_args.resolve_once()
        kv_flag = api["resolution_result"](server_args, "kv_cache_dtype")
        answer["dtype_flag"] = api["resolution_result"](server_args, "dtype")
        answer["kv_cache_dtype_flag"] = kv_flag
        stage = "model_config"
        model_config = api["ModelConfig"].from_server_args(server_args)
        answer["quantization"] = model_config.quantization
        answer["model_dtype"] = names.get(model_config.dtype, str(model_config.dtype))
        stage = "quant_config"
        quant_config = api["get_quantization_config"](model_config, api["LoadConfig"]())
        answer["config_class"] = type(quant_config).__name__ if quant_config is not None else None
        algo = getattr(quant_config, "kv_cache_quant_algo", None)
        answer["kv_cache_quant_algo"] = json.loads(json.dumps(algo, default=repr))
        stage = "kv_cache_dtype"
        resolved, kv_dtype = api["configure_kv_cache_dtype"](
            server_args_kv_cache_dtype=kv_flag, model=types.SimpleNamespace(quant_config=quant_config),
            model_dtype=model_config.dtype, is_draft_worker=False, is_dflash=False,
            speculative_draft_attention_backend=None)
        answer["kv_cache_dtype_auto"] = resolved or names.get(kv_dtype, str(kv_dtype).replace("torch.", ""))
    except (Exception, SystemExit) as exc:
        answer["error"], answer["stage"] = _short(exc), stage
    return answer


def _pair(capability):
    major, minor = (int(x) for x in capability.split("."))
    return (major, minor)


def _sglang_api():
    """SGLang's start-up functions; importing them may ask about the GPU."""
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
    from sglang.srt.model_loader.loader import _get_quantization_config
    from sglang.srt.server_args import ServerArgs
    return {"ServerArgs": ServerArgs, "resolution_result": resolution_result, "ModelConfig": ModelConfig, "LoadConfig": LoadConfig,
            "get_quantization_config": _get_quantization_config, "configure_kv_cache_dtype": configure_kv_cache_dtype}


def _answers(torch, paths):
    api = _sglang_api()
    return [start(p, torch, api) for p in paths]


def _forked(gpu, capability, paths, torch):
    """The answers for one GPU from a child of this process, which has imported torch and sglang with no GPU chosen."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read)
            gpu["capability"] = _pair(capability)
            with os.fdopen(write, "w") as out:
                out.write(json.dumps(_answers(torch, paths)))
            status = 0
        except BaseException:  # noqa: BLE001  the child says why on stderr and exits without running the parent's code
            traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as got:
        data = got.read()
    _pid, status = os.waitpid(pid, 0)
    if status:
        raise SystemExit("emulated GPU %s: the forked start-up failed (wait status %d)" % (capability, status))
    return json.loads(data)


def _fresh(capability, paths):
    """The answers for one GPU from a fresh interpreter that emulates it from the start."""
    done = subprocess.run([sys.executable, "-B", os.path.abspath(__file__)], input=json.dumps({"capabilities": [capability], "paths": paths}),
                          capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        raise SystemExit("emulated GPU %s gave no answer (exit %s): %s" % (capability, done.returncode, done.stderr[-3000:]))
    return json.loads(lines[-1][len(MARKER):])["gpus"][0]["answers"]


def main():
    request = json.loads(sys.stdin.read())
    capabilities, paths = request["capabilities"], request["paths"]
    import torch
    gpu = {"capability": _pair(capabilities[0]) if len(capabilities) == 1 else None, "asked": []}
    emulate(torch, gpu)
    keep = torchvision_without_ops(torch)  # noqa: F841  the op schemas live as long as the library object
    import sglang
    if len(capabilities) == 1:
        answers = [_answers(torch, paths)]
    elif gpu["asked"]:
        # an import asked what the GPU is, and may keep the answer: a process per GPU, as a server would be
        sys.stderr.write("emulated GPUs: the import asked about the GPU, one interpreter per GPU:\n%s" % gpu["asked"][0])
        answers = [_fresh(c, paths) for c in capabilities]
    else:
        answers = [_forked(gpu, c, paths, torch) for c in capabilities]
    result = {"sglang_version": sglang.__version__, "shared_import": len(capabilities) > 1 and not gpu["asked"],
              "gpus": [{"capability": c, "answers": a} for c, a in zip(capabilities, answers)]}
    sys.stdout.write(MARKER + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
