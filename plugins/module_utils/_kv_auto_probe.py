# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ask the installed SGLang what ``--kv-cache-dtype auto`` becomes for checkpoint directories.

This file is not imported for its functions (``_kv_auto`` imports it for MARKER alone): its source is sent to
the SGLang install's interpreter (``python -c SOURCE``, the request on stdin) by ``_kv_auto.run_probe``. It runs SGLang's own code path,
the one the server runs at start: ``ModelConfig`` (which quantization method the checkpoint selects),
``model_loader.weight_utils.get_quant_config`` (which file and which config class) and
``mem_cache.kv_cache_dtype.configure_kv_cache_dtype`` (what ``auto`` becomes). Nothing is loaded
on a GPU and no weights are read. It does not run the server arguments' overrides by architecture and GPU, and on
a host without CUDA neither the GPU-dependent parts of the quantization config (marlin conversion, capability
checks, methods registered only on CUDA): each answer names those in ``not_run``/``not_run_paths``, and a method
this host cannot register is not reported as a refusal (``_kv_auto.compare`` then keeps the collection's answer).

It prints one line, ``LLMOPS_KV_AUTO_PROBE_RESULT=<json>``, on stdout; everything SGLang prints goes to
stderr (``_script_answer``). Python 3.9+, standard library and SGLang only.
"""

import sys

try:
    from ansible_collections.llmops.sglang.plugins.module_utils._script_answer import answer
except ImportError:
    pass  # in SGLang's interpreter, where ask_python sent _script_answer's source ahead of this one

MARKER = "LLMOPS_KV_AUTO_PROBE_RESULT="
MAX_TEXT = 600
# The checkpoint files SGLang opens here. A FIFO, socket or device in their place would hang SGLang's open (until the
# probe's timeout), so SGLang is only asked about a directory where each is a regular file or absent: the rule of
# _files.open_regular, restated because this script runs alone in SGLang's interpreter.
CHECKPOINT_FILES = ("config.json", "hf_quant_config.json", "model.safetensors.index.json")


def _short(text):
    text = str(text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


def _plain(value, depth=0):
    """JSON-safe copy of a config value, bounded in depth and size."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _short(value)
    if depth > 4:
        return _short(repr(value))
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in list(value)[:20]]
    if isinstance(value, dict):
        return dict((str(k), _plain(v, depth + 1)) for k, v in list(value.items())[:20])
    return _short(repr(value))


def _torchvision_without_ops(torch):
    """CPU-only test installs: PyPI's torchvision is a CUDA build whose compiled ops cannot load next to a
    CPU torch, and its import then stops at registering them. SGLang imports torchvision only for image
    preprocessing; declare the two op schemas it registers so its pure-Python part imports. A host with a
    working torchvision is left alone. A venv made by the project's make-sglang-venv keeps that torchvision in
    torchvision-no-ops beside the venv's own packages: it is put on the path when nothing else provides one.
    Returns True when the schemas were declared."""
    import importlib.util
    import os
    if importlib.util.find_spec("torchvision") is None:
        beside = os.path.join(sys.prefix, "torchvision-no-ops")
        if not os.path.isdir(beside):
            return False
        sys.path.append(beside)
        importlib.invalidate_caches()
    try:
        import torchvision  # noqa: F401
        return False
    except RuntimeError as exc:
        if "torchvision::" not in str(exc):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _torchvision_without_ops.lib = lib   # the definitions live as long as the library object
    return True


def _dtype_name(torch, dtype):
    names = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}
    return names.get(dtype, str(dtype).replace("torch.", ""))


def not_regular(path):
    """Why SGLang must not open the checkpoint files of directory path (a FIFO, socket, device or directory in the
    place of one), or None."""
    import os
    import stat
    for name in CHECKPOINT_FILES:
        try:
            mode = os.stat(os.path.join(path, name)).st_mode
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(mode):
            return ("%s in %s is not a regular file (a FIFO, socket, device or directory) and was not opened: remove it "
                    "and stage the real %s there" % (name, path, name))
    return None


# What the probe does not run of SGLang's start-up, by key: the server arguments' overrides and the loader's checks
# never (they need the whole launch configuration and the model class), the GPU-dependent parts of the quantization
# config on a host without CUDA. The collection's model answers for these paths (_kv_auto.compare).
NOT_RUN = {
    "server_args": "the server arguments' --dtype and --kv-cache-dtype overrides by architecture and GPU "
                   "(sglang/srt/arg_groups/)",
    "loader": "the loader's minimum-capability and activation-dtype checks (sglang/srt/model_loader/loader.py)",
    "cuda": "on this host without CUDA: each quantization method's marlin conversion (override_quantization_method) "
            "and the methods SGLang registers only on CUDA",
}


def _cuda_only_refusal(error, cuda_methods):
    """The method of an 'Unknown quantization method' SGLang registers (or converts) on CUDA, else None."""
    marker = "Unknown quantization method: "
    if marker not in error:
        return None
    method = error.split(marker, 1)[1].split(".", 1)[0].strip()
    return method if method in cuda_methods else None


def probe_one(path, torch, api, cuda=True, cuda_methods=()):
    """SGLang's answer for one checkpoint directory; without CUDA, ``not_run`` names what could not run."""
    import types
    keys = ["server_args", "loader"] + ([] if cuda else ["cuda"])
    answer = {"path": path, "quantization": None, "config_class": None, "kv_cache_quant_algo": None,
              "model_dtype": None, "kv_cache_dtype_auto": None, "error": None, "stage": None,
              "not_run_paths": keys, "not_run": [NOT_RUN[k] for k in keys]}
    refused = not_regular(path)
    if refused:
        answer["error"], answer["stage"] = _short(refused), "files"
        return answer
    stage = "model_config"
    try:
        # as the server builds it (configs/model_config.py:957, from the server args' trust_remote_code, False unless
        # --trust-remote-code): ModelConfig's own default (True) would import a checkpoint's configuration_*.py named
        # in auto_map instead of SGLang's registered config class, running the checkpoint's code here
        model_config = api["ModelConfig"](model_path=path, trust_remote_code=False)
        answer["quantization"] = model_config.quantization
        answer["model_dtype"] = _dtype_name(torch, model_config.dtype)
        stage = "quant_config"
        quant_config = None
        if model_config.quantization is not None:
            quant_config = api["get_quant_config"](model_config, api["LoadConfig"](), {})
        answer["config_class"] = type(quant_config).__name__ if quant_config is not None else None
        stage = "kv_cache_dtype"
        answer["kv_cache_quant_algo"] = _plain(getattr(quant_config, "kv_cache_quant_algo", None))
        resolved, kv_dtype = api["configure_kv_cache_dtype"](
            server_args_kv_cache_dtype="auto", model=types.SimpleNamespace(quant_config=quant_config),
            model_dtype=model_config.dtype, is_draft_worker=False, is_dflash=False,
            speculative_draft_attention_backend=None)
        answer["kv_cache_dtype_auto"] = resolved or _dtype_name(torch, kv_dtype)
    except (Exception, SystemExit) as exc:
        answer["error"] = _short("%s: %s" % (type(exc).__name__, exc))
        answer["stage"] = stage
        method = None if cuda else _cuda_only_refusal(answer["error"], cuda_methods)
        if method is not None:
            # not a refusal: this host lacks the CUDA registry SGLang serves the method from
            answer["not_run"].append("quantization method %s, which SGLang registers or converts only on CUDA (%s)"
                                     % (method, answer["error"][:160]))
            answer["error"], answer["stage"] = None, None
    return answer


def main(request, result):
    """SGLang's answers for request's paths, added to result (which answer() prints)."""
    try:
        import torch
        result["torchvision_ops_declared"] = _torchvision_without_ops(torch)
        import sglang
        from sglang.srt.configs.load_config import LoadConfig
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype
        from sglang.srt.model_loader.weight_utils import get_quant_config
    except (Exception, SystemExit) as exc:
        result["import_error"] = _short("%s: %s" % (type(exc).__name__, exc))
        return result
    result["sglang_version"] = getattr(sglang, "__version__", None)
    api = {"ModelConfig": ModelConfig, "LoadConfig": LoadConfig, "get_quant_config": get_quant_config,
           "configure_kv_cache_dtype": configure_kv_cache_dtype}
    cuda = bool(torch.cuda.is_available())
    result["cuda"] = cuda
    methods = request.get("cuda_methods") or ()
    result["answers"] = [probe_one(str(p), torch, api, cuda, methods) for p in request.get("paths", [])]
    return result


if __name__ == "__main__":
    answer(main, MARKER)
