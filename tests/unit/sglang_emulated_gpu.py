# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's own start-up path for checkpoint directories, on an emulated CUDA GPU (run in SGLang's interpreter).

    echo '{"capability": "9.0", "paths": [...]}' | .cache/sglang-venv/bin/python tests/unit/sglang_emulated_gpu.py

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

Prints one line ``EMULATED_GPU_RESULT=<json>``. Test-only: the collection never fakes a GPU.
"""

import importlib.abc
import importlib.machinery
import json
import os
import sys
import types

MARKER = "EMULATED_GPU_RESULT="
MEMORY = 140 << 30


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


def emulate(torch, major, minor):
    torch.version.cuda = "12.9"
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda device: None
    torch.cuda.get_device_capability = lambda device=None: (major, minor)
    torch.cuda.get_device_name = lambda device=None: "Emulated GPU sm_%d%d" % (major, minor)
    torch.cuda.mem_get_info = lambda device=None: (MEMORY, MEMORY)
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        name="Emulated GPU", major=major, minor=minor, total_memory=MEMORY, multi_processor_count=132,
        L2_cache_size=50 << 20, warp_size=32, gcnArchName="")
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


def main():
    request = json.loads(sys.stdin.read())
    major, minor = (int(x) for x in request["capability"].split("."))
    import torch
    emulate(torch, major, minor)
    keep = torchvision_without_ops(torch)  # noqa: F841  the op schemas live as long as the library object
    import sglang
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
    from sglang.srt.model_loader.loader import _get_quantization_config
    from sglang.srt.server_args import ServerArgs
    api = {"ServerArgs": ServerArgs, "resolution_result": resolution_result, "ModelConfig": ModelConfig,
           "LoadConfig": LoadConfig, "get_quantization_config": _get_quantization_config,
           "configure_kv_cache_dtype": configure_kv_cache_dtype}
    result = {"sglang_version": sglang.__version__, "capability": request["capability"],
              "answers": [start(p, torch, api) for p in request["paths"]]}
    sys.stdout.write(MARKER + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
