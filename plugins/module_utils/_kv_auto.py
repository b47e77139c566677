# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What ``--kv-cache-dtype auto`` becomes, following SGLang 0.5.23's code per quantization config class.

SGLang's path at start (paths under ``sglang/srt/``):

1. ``configs/model_config.py`` ``_verify_quantization`` picks the quantization method from
   ``config.json``'s ``quantization_config`` (a ModelOpt block is named by ``_parse_modelopt_quant_config``,
   and that name is written back into the block), else ``compression_config``, else
   ``hf_quant_config.json`` (only when ``config.json`` has no quantization block).
2. ``model_loader/weight_utils.py`` ``get_quant_config`` builds the config class from ``config.json``'s
   block alone when there is one (``quantization_config``, ``text_config.quantization_config``,
   ``compression_config``); only ``modelopt_mixed`` without a per-layer map or KV metadata falls back to
   the file. Otherwise it reads the class's file (``hf_quant_config.json`` for ModelOpt).
3. Each class's ``from_config`` sets ``kv_cache_quant_algo`` by its own rules (below).
4. ``mem_cache/kv_cache_dtype.py``: under ``auto`` the KV cache is FP8 E4M3 iff ``kv_cache_quant_algo``
   is a string whose upper case is ``FP8``; otherwise the model dtype.

Around those steps SGLang applies rules by architecture and GPU (``RULES``, one row each with its file and line):
the server arguments set ``--dtype`` or ``--kv-cache-dtype`` for some architectures before the checkpoint's
quantization is read (step 0); each method's ``override_quantization_method`` converts GPTQ and AWQ to their
marlin kernels on a capable GPU (step 1); the loader refuses a config class below its minimum compute capability
or for a model dtype it cannot run (step 2). With a GPU (``gpu``) every rule is applied for its capability;
without one the answer is for "any GPU" and ``could_change`` names the rules a GPU could bring in.

``resolve`` reproduces that without SGLang; ``run_probe`` asks an installed SGLang (see
``_kv_auto_probe``). A differential test runs both over the checkpoint shapes in the fixtures.
Standard library only; no Ansible imports.
"""

from __future__ import annotations

import json
import os

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto_probe
from ansible_collections.llmops.sglang.plugins.module_utils._nvidia_smi import compute_cap_int, normalize_compute_cap
from ansible_collections.llmops.sglang.plugins.module_utils._process import MAX_OUTPUT_BYTES, NoAnswer, ask_python

SGLANG_VERSION = "0.5.23"
CONFIG_JSON = "config.json"
HF_QUANT_JSON = "hf_quant_config.json"

# Quantization names SGLang 0.5.23 registers on a CUDA host (layers/quantization/__init__.py).
SUPPORTED_METHODS = frozenset([
    "fp8", "mxfp8", "minimax_m3_nvfp4", "blockwise_int8", "modelopt", "modelopt_fp8", "modelopt_fp4",
    "nvfp4_online", "modelopt_mixed", "w8a8_int8", "w8a8_fp8", "awq", "awq_marlin", "bitsandbytes", "gguf",
    "gptq_marlin", "moe_wna16", "compressed-tensors", "w4afp8", "petit_nvfp4", "quark", "quark_mxfp4",
    "auto-round", "auto-round-int8", "modelslim", "quark_int4fp8_moe", "humming", "mxfp_w4a8", "mxfp4",
])
# The class each name builds (the GPTQ, AWQ and Quark classes carry no kv_cache_quant_algo: QuarkConfig keeps its KV
# scheme as kv_cache_config, which configure_kv_cache_dtype does not read); classes not listed here carry none either.
CONFIG_CLASSES = {
    "modelopt": "ModelOptFp8Config", "modelopt_fp8": "ModelOptFp8Config", "modelopt_fp4": "ModelOptFp4Config",
    "modelopt_mixed": "ModelOptMixedPrecisionConfig", "fp8": "Fp8Config", "mxfp8": "Fp8Config",
    "compressed-tensors": "CompressedTensorsConfig", "w4afp8": "W4AFp8Config", "gptq_marlin": "GPTQMarlinConfig",
    "awq_marlin": "AWQMarlinConfig", "awq": "AWQConfig", "mxfp4": "Mxfp4Config", "quark": "QuarkConfig",
    "quark_mxfp4": "QuarkConfig",
}
MODELOPT_FILE_CLASSES = ("ModelOptFp8Config", "ModelOptFp4Config", "ModelOptMixedPrecisionConfig")
NVFP4_ALGOS = ("FP8", "NVFP4", "NVFP4_AWQ", "W4A16_NVFP4")
DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32", "float": "float32"}


# ---------------------------------------------------------------------------------------------
# SGLang 0.5.23's architecture and GPU rules: one row each, with the file (under sglang/srt/) and line that decides.
# test_kv_auto reads every row back from the installed SGLang with ast, and runs SGLang's start-up under emulated
# GPUs of capability 9.0, 10.0 and 12.0 against this model.
#   dtype           the server args set --dtype for these architectures (quant_method: only for that method)
#   kv              the server args set --kv-cache-dtype while it is auto (min_capability: value from that capability
#                   on, `below` under it; `unless`: a config key that keeps `below`; `needs`: a config key the rule
#                   needs; modelled False: SGLang's condition is not modelled, the row is only named)
#   convert         override_quantization_method: the method becomes `value` on a GPU of min_capability or newer
#   min_capability  the loader refuses the config class below this capability (`mxfp8`: Fp8Config as MXFP8)
#   act_dtype       the loader refuses a model dtype the class cannot run
#   when            (kv rows) the condition, in words, for kv_cache_guard's messages
DSA_ARCHS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
             "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
             "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM")
MARLIN_GROUP_SIZES = (-1, 32, 64, 128)
# Methods SGLang serves on CUDA only through a conversion (gptq is not registered there), and methods a host
# without CUDA does not register.
CONVERTED = ("gptq",)
CUDA_REGISTRY_ONLY = ("mxfp4",)
RULES = (
    {"id": "dtype-bfloat16", "kind": "dtype", "architectures": ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration"),
     "value": "bfloat16", "at": ("arg_groups/model_override_base.py", 20)},
    {"id": "gpt-oss-mxfp4-bfloat16", "kind": "dtype", "architectures": ("GptOssForCausalLM",), "quant_method": "mxfp4",
     "value": "bfloat16", "at": ("arg_groups/model_overrides/gpt_oss.py", 63)},
    {"id": "muse-spark-fp8-kv", "kind": "kv", "architectures": ("MuseSparkForConditionalGeneration",), "value": "fp8_e4m3",
     "at": ("arg_groups/overrides.py", 320)},
    # on NVIDIA GPUs; SGLang uses bfloat16 on NPUs
    {"id": "deepseek-v4-fp8-kv", "kind": "kv", "architectures": ("DeepseekV4ForCausalLM",), "value": "fp8_e4m3",
     "at": ("arg_groups/overrides.py", 903)},
    {"id": "deepseek-dsa-kv", "kind": "kv", "architectures": DSA_ARCHS, "needs": "index_topk", "unless": "learnable_sink",
     "min_capability": 100, "value": "fp8_e4m3", "below": "bfloat16", "at": ("arg_groups/overrides.py", 534),
     "when": "for a DeepSeek sparse-attention (DSA) checkpoint on an SM100 or newer GPU"},
    {"id": "minimax-m3-nvfp4-fp8-kv", "kind": "kv", "architectures": ("MiniMaxM3SparseForCausalLM",
                                                                      "MiniMaxM3SparseForConditionalGeneration"),
     "modelled": False, "value": "fp8_e4m3", "at": ("arg_groups/model_overrides/minimax_m3.py", 117),
     "when": "for its NVFP4 (minimax_m3_nvfp4) checkpoints"},
    {"id": "gptq-marlin", "kind": "convert", "method": "gptq", "value": "gptq_marlin", "min_capability": 80,
     "at": ("layers/quantization/gptq/gptq.py", 429)},
    {"id": "awq-marlin", "kind": "convert", "method": "awq", "value": "awq_marlin", "min_capability": 80,
     "at": ("layers/quantization/awq/awq.py", 345)},
    {"id": "min-capability-ModelOptFp8Config", "kind": "min_capability", "config_class": "ModelOptFp8Config", "value": 89,
     "at": ("layers/quantization/modelopt_quant.py", 463)},
    {"id": "min-capability-ModelOptFp4Config", "kind": "min_capability", "config_class": "ModelOptFp4Config", "value": 80,
     "at": ("layers/quantization/modelopt_quant.py", 1550)},
    {"id": "min-capability-ModelOptMixedPrecisionConfig", "kind": "min_capability",
     "config_class": "ModelOptMixedPrecisionConfig", "value": 80, "at": ("layers/quantization/modelopt_quant.py", 847)},
    {"id": "min-capability-Fp8Config", "kind": "min_capability", "config_class": "Fp8Config", "value": 80, "mxfp8": 100,
     "at": ("layers/quantization/fp8.py", 339)},
    {"id": "min-capability-CompressedTensorsConfig", "kind": "min_capability", "config_class": "CompressedTensorsConfig",
     "value": 70, "at": ("layers/quantization/compressed_tensors/compressed_tensors.py", 161)},
    {"id": "min-capability-W4AFp8Config", "kind": "min_capability", "config_class": "W4AFp8Config", "value": 90,
     "at": ("layers/quantization/w4afp8.py", 71)},
    {"id": "min-capability-GPTQMarlinConfig", "kind": "min_capability", "config_class": "GPTQMarlinConfig", "value": 80,
     "at": ("layers/quantization/gptq/gptq.py", 387)},
    {"id": "min-capability-AWQMarlinConfig", "kind": "min_capability", "config_class": "AWQMarlinConfig", "value": 80,
     "at": ("layers/quantization/awq/awq.py", 308)},
    {"id": "min-capability-AWQConfig", "kind": "min_capability", "config_class": "AWQConfig", "value": 75,
     "at": ("layers/quantization/awq/awq.py", 116)},
    {"id": "min-capability-Mxfp4Config", "kind": "min_capability", "config_class": "Mxfp4Config", "value": 80,
     "at": ("layers/quantization/mxfp4.py", 339)},
    {"id": "min-capability-QuarkConfig", "kind": "min_capability", "config_class": "QuarkConfig", "value": 70,
     "at": ("layers/quantization/quark/quark.py", 399)},
    {"id": "act-dtype-AWQConfig", "kind": "act_dtype", "config_class": "AWQConfig", "value": ("float16",),
     "at": ("layers/quantization/awq/awq.py", 106)},
)
LOADER_CAPABILITY_CHECK = ("model_loader/loader.py", 259)
LOADER_ACT_DTYPE_CHECK = ("model_loader/loader.py", 267)


def where(at):
    """'sglang/srt/FILE:LINE' of a rule."""
    return "sglang/srt/%s:%d" % at


def capability_text(capability):
    return "%d.%d" % divmod(capability, 10)


def normalize_gpu(gpu):
    """{'compute_capability': 'M.m', 'capability': M*10+m, 'count': n or None} from a capability or a gpu_info result.

    ``gpu``: None, a capability ('12.0', 12.0, 120), or a dict with ``compute_capability`` (and ``count`` or
    ``gpu_count``) or ``gpus`` (gpu_info's list: the lowest capability counts). A gpu_info result that lists no GPU
    (a host without one, or nvidia-smi failed) or no capability is None: the answer is then for any GPU. ValueError
    names a bad value.
    """
    if gpu is None or (isinstance(gpu, dict) and gpu.get("compute_capability") is None and gpu.get("gpus") == []):
        return None
    count = None
    if isinstance(gpu, dict):
        count = gpu.get("count", gpu.get("gpu_count"))
        value = gpu.get("compute_capability")
        if value is None and isinstance(gpu.get("gpus"), list):
            caps = [g.get("compute_capability") for g in gpu["gpus"] if isinstance(g, dict)]
            caps = [_parse_capability(c) for c in caps if c is not None]
            if not caps:
                return None   # nvidia-smi reported no capability (an old driver): the answer is for any GPU
            value = capability_text(min(caps))
            count = len(gpu["gpus"]) if count is None else count
        if value is None:
            raise ValueError("gpu has no compute_capability (nor gpus with one): pass gpu_info's result or "
                             "{compute_capability: '12.0', count: 8}")
    else:
        value = gpu
    capability = _parse_capability(value)
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise ValueError("gpu count must be a whole number of GPUs, got %r" % (count,))
    return {"compute_capability": capability_text(capability), "capability": capability, "count": count}


def _parse_capability(value):
    capability = compute_cap_int(normalize_compute_cap(value))
    if capability is None or capability < 10:
        raise ValueError("compute capability must look like '9.0', '10.0' or '12.0' (major.minor), got %r" % (value,))
    return capability


def _rule_text(rule):
    """What a rule does, for results and notes."""
    kind = rule["kind"]
    if kind == "dtype":
        extra = " with %s quantization" % rule["quant_method"] if rule.get("quant_method") else ""
        text = "%s%s: SGLang sets --dtype %s" % ("/".join(rule["architectures"][:2]), extra, rule["value"])
    elif kind == "kv":
        text = "%s: SGLang sets --kv-cache-dtype %s while it is auto" % ("/".join(rule["architectures"][:2]), rule["value"])
        if rule.get("min_capability"):
            text += " on capability %s or newer, %s below" % (capability_text(rule["min_capability"]), rule["below"])
        if rule.get("unless"):
            text += " (%s with %s)" % (rule["below"], rule["unless"])
        if rule.get("modelled") is False:
            text += " for some checkpoints and launch settings (not modelled here)"
    elif kind == "convert":
        text = "%s becomes %s on capability %s or newer when marlin runs its bits and group size" % (
            rule["method"], rule["value"], capability_text(rule["min_capability"]))
    elif kind == "min_capability":
        text = "%s needs capability %s" % (rule["config_class"], capability_text(rule["value"]))
        if rule.get("mxfp8"):
            text += " (%s as MXFP8)" % capability_text(rule["mxfp8"])
    else:
        text = "%s runs a model dtype of %s only" % (rule["config_class"], " or ".join(rule["value"]))
    return "%s (%s)" % (text, where(rule["at"]))


def _rule(kind, **match):
    for rule in RULES:
        if rule["kind"] == kind and all(rule.get(k) == v for k, v in match.items()):
            return rule
    return None


def _server_args_rules(config, view, gpu):
    """Step 0: (dtype rule, kv rule, kv value or None, rules a GPU could change) for the architecture."""
    names = config.get("architectures")
    arch = names[0] if isinstance(names, list) and names and _is_str(names[0]) else None
    block = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else {}
    dtype_rule, kv_rule, kv_value, could = None, None, None, []
    for rule in RULES:
        if rule["kind"] not in ("dtype", "kv") or arch not in rule["architectures"]:
            continue
        if rule["kind"] == "dtype":
            if rule.get("quant_method") is None or block.get("quant_method") == rule["quant_method"]:
                dtype_rule = rule
            continue
        if rule.get("modelled") is False or (rule.get("needs") and view.get(rule["needs"]) is None):
            if rule.get("modelled") is False:
                could.append(rule)
            continue
        kv_rule = rule
        if rule.get("unless") and view.get(rule["unless"]):
            kv_value = rule["below"]
        elif rule.get("min_capability") is None:
            kv_value = rule["value"]
        elif gpu is None:
            kv_value, kv_rule = None, None
            could.append(rule)
        else:
            kv_value = rule["value"] if gpu["capability"] >= rule["min_capability"] else rule["below"]
    return dtype_rule, kv_rule, kv_value, could


def _marlin_ok(method, block):
    """Whether marlin runs this GPTQ/AWQ block (is_gptq_marlin_compatible, is_awq_marlin_compatible), GPU aside."""
    bits, group_size = block.get("bits"), block.get("group_size")
    if method == "gptq":
        if block.get("checkpoint_format") == "marlin" or block.get("is_marlin_format", False):
            return False
        sym, desc_act = block.get("sym"), block.get("desc_act")
        if None in (bits, group_size, sym, desc_act):
            return False
        return (bits, sym) in ((4, True), (8, True)) and group_size in MARLIN_GROUP_SIZES
    zero_point = block.get("zero_point")
    if None in (bits, group_size, zero_point):
        return False
    # AWQ's types are uint4/uint8 with a zero point; marlin runs uint4 with one only
    return bits == 4 and bool(zero_point) and group_size in MARLIN_GROUP_SIZES


def _convert(method, block, gpu, could):
    """Step 1's conversion: (method, the rule that converted or None)."""
    rule = _rule("convert", method=method)
    if rule is None or not isinstance(block, dict) or not _marlin_ok(method, block):
        return method, None
    if gpu is None:
        could.append(rule)
        return rule["value"], rule
    if gpu["capability"] >= rule["min_capability"]:
        return rule["value"], rule
    return method, None


class Refused(Exception):
    """SGLang 0.5.23 refuses to start with this checkpoint (its message is the reason)."""


def _is_str(value):
    return isinstance(value, str)


def _get(block, key, default=None, where="quantization block"):
    if not isinstance(block, dict):
        raise Refused("%s is %s, not an object" % (where, type(block).__name__))
    return block.get(key, default)


def _view(config):
    text = config.get("text_config")
    return dict(config, **text) if isinstance(text, dict) else config


def model_dtype(config):
    """SGLang's model dtype under ``--dtype auto`` (configs/model_config.py ``_get_and_verify_dtype``)."""
    view = _view(config)
    raw = view.get("dtype") or view.get("torch_dtype")
    name = DTYPES.get(raw) if _is_str(raw) else None
    if name is None or name == "float32":
        model_type = view.get("model_type") if _is_str(view.get("model_type")) else ""
        return "bfloat16" if model_type.startswith("gemma") else "float16"
    return name


# ---------------------------------------------------------------------------------------------
# Step 1: the method (ModelConfig._parse_quant_hf_config, _parse_modelopt_quant_config, _verify_quantization)


def _modelopt_method(block):
    """``_parse_modelopt_quant_config``: the method a ModelOpt block names, or None."""
    inner = block.get("quantization", block)
    if not isinstance(inner, dict):
        return None
    nested = inner.get("quantization")
    section = nested if isinstance(nested, dict) else inner
    if not section:
        return None
    algo = section.get("quant_algo")
    if algo == "MIXED_PRECISION":
        layers = section.get("quantized_layers") or {}
        if not isinstance(layers, dict):
            raise Refused("quantized_layers is %s, not an object" % type(layers).__name__)
        nvfp4 = any(str(info.get("quant_algo", "")).upper() in ("NVFP4", "W4A16_NVFP4")
                    for info in layers.values() if isinstance(info, dict))
        return {"quant_method": "modelopt_mixed" if nvfp4 else "w4afp8", "quant_algo": algo}
    if algo and not isinstance(algo, (str, list, dict)):
        raise Refused("quant_algo is %r, not a string" % (algo,))   # SGLang fails on 'FP4' in <number>
    if algo and ("FP4" in algo or "NVFP4" in algo):
        return {"quant_method": "modelopt_fp4", "quant_algo": algo}
    if algo == "FP8":
        return {"quant_method": "modelopt_fp8", "quant_algo": algo}
    if algo == "MXFP8":
        parsed = {"quant_method": "mxfp8", "quant_algo": algo, "activation_scheme": "dynamic"}
        kv = section.get("kv_cache_quant_algo")
        if kv is None:
            scheme = section.get("kv_cache_scheme")
            if isinstance(scheme, dict) and scheme.get("type") == "float" and scheme.get("num_bits") == 8:
                kv = "FP8"
        if kv is not None:
            parsed["kv_cache_quant_algo"] = kv
        return parsed
    return None


def _detect(config, hf_quant, gpu=None, could=None):
    """(method, config.json block as SGLang later reads it, source of the method, convert rule or None)."""
    block = config.get("quantization_config")
    if block is not None:
        if not isinstance(block, dict):
            raise Refused("config.json quantization_config is %s, not an object" % type(block).__name__)
        if "quant_method" not in block or block["quant_method"] == "modelopt":
            parsed = _modelopt_method({"quantization": block})
            if parsed:
                block = dict(block, **parsed)   # SGLang updates the config's block in place
        detected, source = block, "config.json:quantization_config"
    else:
        detected, source = config.get("compression_config"), "config.json:compression_config"
        if detected is None and hf_quant is not None:
            detected, source = _modelopt_method(hf_quant), HF_QUANT_JSON
    if detected is None:
        return None, block, None, None
    method = _get(detected, "quant_method", "", source)
    if not _is_str(method):
        raise Refused("%s quant_method is %r, not a string" % (source, method))
    method, converted = _convert(method.lower(), detected, gpu, could if could is not None else [])
    if method not in SUPPORTED_METHODS:
        raise Refused("Unknown quantization method: %s (from %s)%s" % (method, source, _not_converted(method, detected, gpu)))
    return method, block, source, converted


def _not_converted(method, block, gpu):
    """Why a GPTQ checkpoint is not served: SGLang registers gptq on CUDA only as gptq_marlin."""
    rule = _rule("convert", method=method)
    if rule is None:
        return ""
    if gpu is not None and gpu["capability"] < rule["min_capability"]:
        why = "capability %s is below %s" % (gpu["compute_capability"], capability_text(rule["min_capability"]))
    else:
        why = "marlin does not run its bits/sym/group_size (or it is already in marlin format)"
    return ": on CUDA SGLang serves %s only as %s, and %s (%s)" % (method, rule["value"], why, where(rule["at"]))


# ---------------------------------------------------------------------------------------------
# Step 3: each class's from_config -> kv_cache_quant_algo (raw, as the class stores it)


def _scheme_fp8(scheme):
    return scheme.get("type") == "float" and scheme.get("num_bits") == 8


def _modelopt_fp8(cfg):
    """ModelOptFp8Config.from_config: a scheme dict wins; a non-dict scheme is ignored."""
    if cfg.get("quant_algo") is not None:
        algo, scheme = cfg.get("quant_algo"), cfg.get("kv_cache_scheme")
        if isinstance(scheme, dict):
            return algo, ("FP8" if _scheme_fp8(scheme) else None), "kv_cache_scheme"
        return algo, cfg.get("kv_cache_quant_algo"), "kv_cache_quant_algo"
    if "quantization" not in cfg:
        raise Refused("Cannot find 'quant_algo' in the model's quantization config")
    section = cfg["quantization"]
    algo = _get(section, "quant_algo", where="quantization")
    kv = _get(section, "kv_cache_quant_algo", where="quantization")
    if algo is None:
        raise Refused("Cannot find 'quant_algo' in the model's quantization config")
    if algo != "FP8":
        raise Refused("ModelOptFp8Config only supports regular FP8 quantization, but found %r" % (algo,))
    return algo, kv, "quantization.kv_cache_quant_algo"


def _common_group_size(cfg):
    sizes = set()
    for block in (cfg, cfg.get("quantization")):
        if isinstance(block, dict) and isinstance(block.get("group_size"), int):
            sizes.add(block["group_size"])
    groups = cfg.get("config_groups") or {}
    if not isinstance(groups, dict):
        raise Refused("config_groups is %s, not an object" % type(groups).__name__)
    for group in groups.values():
        if isinstance(group, dict):
            for sub in [group] + [v for v in group.values() if isinstance(v, dict)]:
                if isinstance(sub.get("group_size"), int):
                    sizes.add(sub["group_size"])
    if len(sizes) != 1:
        raise Refused("No group_size found in config." if not sizes else
                      "Inconsistent group_size values: %s" % sorted(sizes))


def _modelopt_fp4(cfg):
    """ModelOptFp4Config.from_config: also takes a string scheme (FP8/FLOAT8, FP4/FLOAT4/NVFP4)."""
    if cfg.get("quant_algo") is not None:
        algo, scheme, field = cfg.get("quant_algo"), cfg.get("kv_cache_scheme"), "kv_cache_scheme"
        if isinstance(scheme, dict):
            kv = "FP8" if _scheme_fp8(scheme) else "auto"
        elif _is_str(scheme):
            name = scheme.strip().upper()
            kv = "FP8" if name in ("FP8", "FLOAT8") else "NVFP4" if name in ("FP4", "FLOAT4", "NVFP4") else "auto"
        else:
            kv, field = cfg.get("kv_cache_quant_algo") or "auto", "kv_cache_quant_algo"
        exclude = cfg.get("ignore", cfg.get("modules_to_not_convert", cfg.get("exclude_modules", [])))
    else:
        section = cfg.get("quantization")
        if not isinstance(section, dict) or "quant_algo" not in section:
            raise Refused("Cannot find 'quant_algo' in the model's quantization config")
        algo, field = section["quant_algo"], "quantization.kv_cache_quant_algo"
        kv = section.get("kv_cache_quant_algo") or "auto"
        try:
            _common_group_size(cfg)
        except Refused as exc:   # SGLang re-raises this as the quant_algo message
            raise Refused("Cannot find 'quant_algo' in the model's quantization config (%s)" % exc)
        exclude = section.get("exclude_modules", [])
    if algo not in NVFP4_ALGOS:
        raise Refused("ModelOpt currently only supports: FP8, NVFP4, NVFP4_AWQ, W4A16_NVFP4 (found %r)" % (algo,))
    if exclude is None:
        raise Refused("NVFP4 quantization requires group_size and exclude_modules specified in the quantization config")
    return algo, kv, field


def _modelopt_mixed(cfg):
    """ModelOptMixedPrecisionConfig.from_config: scheme dict float/8 -> FP8, float/4 -> NVFP4, else auto."""
    if cfg.get("quant_algo") is not None:
        algo, scheme, field = cfg.get("quant_algo"), cfg.get("kv_cache_scheme"), "kv_cache_scheme"
        if isinstance(scheme, dict):
            kv = "FP8" if _scheme_fp8(scheme) else (
                "NVFP4" if scheme.get("type") == "float" and scheme.get("num_bits") == 4 else "auto")
        else:
            kv, field = cfg.get("kv_cache_quant_algo"), "kv_cache_quant_algo"
        layers = cfg.get("quantized_layers", {})
    else:
        if "quantization" not in cfg:
            raise Refused("Cannot find any of ['quantization'] in the model's quantization config")
        section = cfg["quantization"]
        algo = _get(section, "quant_algo", where="quantization")
        kv, field = _get(section, "kv_cache_quant_algo", where="quantization"), "quantization.kv_cache_quant_algo"
        layers = section.get("quantized_layers", {})
    if algo != "MIXED_PRECISION":
        raise Refused("ModelOptMixedPrecisionConfig only supports MIXED_PRECISION checkpoints")
    if not layers:
        raise Refused("MIXED_PRECISION quantization requires a non-empty quantized_layers map")
    return algo, kv, field


def _fp8(cfg):
    """Fp8Config.from_config: kv_cache_quant_algo as written; quant_method and activation_scheme required."""
    for key in ("quant_method", "activation_scheme"):
        if key not in cfg:
            raise Refused("Cannot find any of ['%s'] in the model's quantization config" % key)
    return cfg.get("quant_algo"), cfg.get("kv_cache_quant_algo"), "kv_cache_quant_algo"


def _compressed_tensors(cfg):
    """CompressedTensorsConfig: FP8 only for a static, symmetric, per-tensor, 8-bit float kv_cache_scheme."""
    scheme = cfg.get("kv_cache_scheme")
    if not isinstance(scheme, dict):
        # SGLang reads kv_cache_quant_algo through getattr(..., None): a non-dict scheme makes the property
        # fail with AttributeError, which reads as None.
        return None, None, "kv_cache_scheme"
    supported = (_scheme_fp8(scheme) and scheme.get("strategy") == "tensor" and scheme.get("symmetric", True)
                 and not scheme.get("dynamic", False))
    return None, ("FP8" if supported else None), "kv_cache_scheme"


def _awq(cfg):
    """AWQConfig (the AWQ kernels without marlin): 4-bit weights only; no KV metadata."""
    bits = cfg.get("w_bit", cfg.get("bits"))
    if bits is None:
        raise Refused("Cannot find any of ['w_bit', 'bits'] in the model's quantization config")
    if bits != 4:
        raise Refused("Currently, only 4-bit weight quantization is supported for AWQ, but got %s bits." % (bits,))
    return None, None, None


FROM_CONFIG = {
    "ModelOptFp8Config": _modelopt_fp8, "ModelOptFp4Config": _modelopt_fp4,
    "ModelOptMixedPrecisionConfig": _modelopt_mixed, "Fp8Config": _fp8,
    "CompressedTensorsConfig": _compressed_tensors, "AWQConfig": _awq,
}


# ---------------------------------------------------------------------------------------------
# Step 2: which block builds the class (model_loader/weight_utils.py get_quant_config)


def _checkpoint_block(config, detected_block):
    """resolve_checkpoint_quant_spec: quantization_config, text_config's, then compression_config."""
    if detected_block is not None:
        return detected_block, "config.json:quantization_config"
    text = config.get("text_config")
    if isinstance(text, dict) and text.get("quantization_config") is not None:
        return text["quantization_config"], "config.json:text_config.quantization_config"
    if config.get("compression_config") is not None:
        return config["compression_config"], "config.json:compression_config"
    return None, None


def _class_and_block(method, config, detected_block, hf_quant, hf_quant_files):
    """(class name, block, file) get_quant_config builds; block None for a class built without one."""
    cls = CONFIG_CLASSES.get(method)
    block, source = _checkpoint_block(config, detected_block)
    if block is not None:
        if not isinstance(block, dict):
            raise Refused("%s is %s, not an object" % (source, type(block).__name__))
        mixed_incomplete = method == "modelopt_mixed" and (
            "quantized_layers" not in block or ("kv_cache_quant_algo" not in block and "kv_cache_scheme" not in block))
        if not mixed_incomplete:
            return cls, block, source
    if cls not in MODELOPT_FILE_CLASSES:
        # Fp8Config, CompressedTensorsConfig and the classes without KV metadata read no file here.
        return cls, None, None
    files = [f for f in (hf_quant_files if hf_quant_files is not None else
                         ([HF_QUANT_JSON] if hf_quant is not None else [])) if f.endswith(HF_QUANT_JSON)]
    if not files:
        if method == "modelopt_fp4":
            return "_ModelOptFp4OnlineConfig", None, None   # weights quantized at load, no KV metadata
        raise Refused("Cannot find the config file for %s" % method)
    if len(files) > 1:
        raise Refused("Found multiple config files for %s: %s" % (method, sorted(files)))
    if not isinstance(hf_quant, dict):
        raise Refused("%s is not a JSON object" % HF_QUANT_JSON)
    producer = hf_quant.get("producer", {})
    name = _get(producer, "name", "", "%s producer" % HF_QUANT_JSON)
    if _is_str(name) and name.startswith("modelopt"):
        section = hf_quant.get("quantization") if isinstance(hf_quant.get("quantization"), dict) else hf_quant
        algo = section.get("quant_algo")
        if algo is None:
            raise Refused("Invalid quant_config, quantization method: %s (no quant_algo in %s)" % (method, HF_QUANT_JSON))
        if algo == "FP8" or method == "modelopt_fp8":
            cls = "ModelOptFp8Config"
        elif _is_str(algo) and "FP4" in algo:
            cls = "ModelOptFp4Config"
    return cls, hf_quant, HF_QUANT_JSON


# ---------------------------------------------------------------------------------------------
# The whole resolution


KV_FIELDS = ("kv_cache_scheme", "kv_cache_quant_algo")


def kv_field_warnings(block, config_class, source, kv_dtype):
    """One warning per KV field of the block that says something SGLang does not turn into an FP8 KV cache."""
    fields = [(k, block.get(k)) for k in KV_FIELDS if k in block]
    section = block.get("quantization")
    if isinstance(section, dict):
        fields += [("quantization." + k, section.get(k)) for k in KV_FIELDS if k in section]
    warnings = []
    for field, value in fields:
        if value is None or value == "auto":
            continue
        shown = json.dumps(value, sort_keys=True)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        kind = "" if isinstance(value, (str, dict)) else " (a %s, not a string)" % type(value).__name__
        warnings.append("%s %s is %s%s: SGLang %s's %s does not read it as an FP8 KV cache, so "
                        "--kv-cache-dtype auto keeps the KV cache in %s; fix the field or pass --kv-cache-dtype "
                        "explicitly" % (source, field, shown, kind, SGLANG_VERSION, config_class, kv_dtype))
    return warnings


def resolve(config, hf_quant=None, hf_quant_files=None, gpu=None):
    """SGLang 0.5.23's ``--kv-cache-dtype auto`` for a parsed config.json (and hf_quant_config.json).

    ``hf_quant_files``: names of the ``*.json`` files in the directory that end in ``hf_quant_config.json``
    (default: that file alone when ``hf_quant`` is given). ``gpu``: the GPU it runs on (``normalize_gpu``), or None
    for an answer for any GPU. Returns a dict; ``refused`` holds SGLang's reason when it would not start,
    ``rules`` the architecture and GPU rules that applied, ``decided_by_rule`` the one that set the KV dtype or the
    model dtype it follows, ``could_change`` (without a GPU) the rules a GPU could bring in.
    """
    result = {"sglang_version": SGLANG_VERSION, "quantization": None, "method_from": None, "config_class": None,
              "decided_by": None, "kv_field": None, "kv_cache_quant_algo": None, "model_dtype": None,
              "kv_cache_dtype_auto": None, "refused": None, "warnings": [], "gpu": None, "decided_for": "any GPU",
              "rules": [], "decided_by_rule": None, "could_change": [], "cuda_paths": []}
    gpu = normalize_gpu(gpu)
    if gpu is not None:
        result["gpu"] = {"compute_capability": gpu["compute_capability"], "count": gpu["count"]}
        result["decided_for"] = "capability %s" % gpu["compute_capability"]
    if not isinstance(config, dict):
        result["refused"] = "config.json is not a JSON object"
        return result
    could, applied = [], []
    dtype_rule, kv_rule, kv_flag, could_arch = _server_args_rules(config, _view(config), gpu)
    could.extend(could_arch)
    result["model_dtype"] = dtype_rule["value"] if dtype_rule else model_dtype(config)
    applied.extend(r for r in (dtype_rule, kv_rule) if r)
    try:
        method, block, method_from, converted = _detect(config, hf_quant, gpu, could)
        result.update(quantization=method, method_from=method_from)
        if converted is not None and gpu is not None:
            applied.append(converted)
        kv = None
        if method is not None:
            cls, source_block, decided_by = _class_and_block(method, config, block, hf_quant, hf_quant_files)
            result.update(config_class=cls, decided_by=decided_by)
            reader = FROM_CONFIG.get(cls)
            if reader is not None and source_block is not None:
                _algo, kv, field = reader(source_block)
                result["kv_field"] = field
            _loader_checks(cls, method, result["model_dtype"], gpu, applied, could)
            if kv_flag is None and source_block is not None and not (_is_str(kv) and kv.upper() == "FP8"):
                result["warnings"] = kv_field_warnings(source_block, cls, decided_by, result["model_dtype"])
        shown = kv if isinstance(kv, (list, dict)) and len(json.dumps(kv)) <= 200 else json.dumps(kv)[:200]
        result["kv_cache_quant_algo"] = kv if kv is None or isinstance(kv, (str, int, float, bool)) else shown
    except Refused as exc:
        result["refused"] = str(exc)
        _report_rules(result, applied, could)
        return result
    fp8 = _is_str(kv) and kv.upper() == "FP8"
    if kv_flag is not None:
        # the server args no longer say auto: the checkpoint's KV metadata is not consulted
        result["kv_cache_dtype_auto"] = kv_flag
        result["decided_by_rule"] = "%s %s" % (kv_rule["id"], where(kv_rule["at"]))
    elif gpu is None and any(r["kind"] == "kv" and r.get("min_capability") for r in could_arch):
        # SGLang sets the KV dtype by the GPU before the checkpoint is read: no answer holds for every GPU
        rule = [r for r in could_arch if r["kind"] == "kv" and r.get("min_capability")][0]
        result["warnings"].append("--kv-cache-dtype auto depends on the GPU for this checkpoint: %s. Give the GPU "
                                  "(compute capability) to decide it" % _rule_text(rule))
    else:
        result["kv_cache_dtype_auto"] = "fp8_e4m3" if fp8 else result["model_dtype"]
        if not fp8 and dtype_rule is not None:
            result["decided_by_rule"] = "%s %s" % (dtype_rule["id"], where(dtype_rule["at"]))
    _report_rules(result, applied, could)
    return result


def _loader_checks(cls, method, dtype, gpu, applied, could):
    """Step 2: the loader's minimum capability and activation dtype checks (model_loader/loader.py)."""
    cap_rule = _rule("min_capability", config_class=cls)
    if cap_rule is not None:
        minimum = cap_rule.get("mxfp8") if method == "mxfp8" and cap_rule.get("mxfp8") else cap_rule["value"]
        if gpu is None:
            could.append(cap_rule)
        else:
            applied.append(cap_rule)
            if gpu["capability"] < minimum:
                sources = (where(cap_rule["at"]), where(LOADER_CAPABILITY_CHECK))
                raise Refused("The quantization method %s is not supported for the current GPU. Minimum capability: %d. "
                              "Current capability: %d. (%s, %s)" % ((method, minimum, gpu["capability"]) + sources))
    act_rule = _rule("act_dtype", config_class=cls)
    if act_rule is not None and dtype not in act_rule["value"]:
        raise Refused("%s is not supported for quantization method %s. Supported dtypes: %s (%s, %s); pass --dtype %s"
                      % (dtype, method, list(act_rule["value"]), where(act_rule["at"]), where(LOADER_ACT_DTYPE_CHECK),
                         act_rule["value"][0]))


def _report_rules(result, applied, could):
    result["rules"] = [{"rule": r["id"], "kind": r["kind"], "says": _rule_text(r), "source": where(r["at"])}
                       for r in applied]
    # the paths of SGLang's start-up this answer went through that a host without CUDA cannot run
    kinds = set(r["kind"] for r in applied + could if r["kind"] in ("dtype", "kv", "convert"))
    refused = result["refused"] or ""
    kinds.update(k for k, text in (("act_dtype", "is not supported for quantization method"),
                                   ("min_capability", "is not supported for the current GPU"),
                                   ("convert", "on CUDA SGLang serves")) if text in refused)
    if result["quantization"] in CUDA_REGISTRY_ONLY:
        kinds.add("registry")
    result["cuda_paths"] = sorted(kinds)
    seen = set()
    result["could_change"] = [_rule_text(r) for r in could if not (r["id"] in seen or seen.add(r["id"]))]


# ---------------------------------------------------------------------------------------------
# The oracle: the installed SGLang's own answer


class ProbeError(Exception):
    """The installed SGLang could not be asked (interpreter missing, sglang not importable, no answer)."""


def run_probe(python, paths, timeout=300, max_output=MAX_OUTPUT_BYTES, env=None):
    """SGLang's answers for checkpoint directories, from ``python`` (the SGLang install's interpreter).

    ``env``: extra environment variables for the interpreter.
    """
    if not _is_str(python) or not python:
        raise ProbeError("sglang_python must be the path of the SGLang install's interpreter")
    if not os.path.exists(python):
        raise ProbeError("SGLang interpreter %s does not exist: set sglang_python to the python of the SGLang "
                         "install (for example /opt/sglang/venv/bin/python)" % python)
    if os.path.isdir(python) or not os.access(python, os.X_OK):
        raise ProbeError("SGLang interpreter %s is not an executable file" % python)
    try:
        request = {"paths": list(paths), "cuda_methods": sorted(SUPPORTED_METHODS | set(CONVERTED))}
        result, rc, printed = ask_python(python, _kv_auto_probe, json.dumps(request), timeout,
                                         env=dict({"HF_HUB_OFFLINE": "1"}, **(env or {})), max_bytes=max_output,
                                         timeout_fix="raise sglang_timeout")
    except NoAnswer as exc:
        raise ProbeError(str(exc))
    if not isinstance(result, dict):
        tail = "\n".join(printed.strip().splitlines()[-8:])[-1500:]
        raise ProbeError("%s gave no answer (exit code %s); is it a Python 3.9+ interpreter? Last output: %s"
                         % (python, rc, tail))
    if "import_error" in result:
        raise ProbeError("SGLang is not importable by %s: %s; point sglang_python at the SGLang install's "
                         "interpreter" % (python, result["import_error"]))
    return result


def compare(model, sglang_answer):
    """Side by side; SGLang's answer is the one to trust, except where it could not run a CUDA-only path the model's
    answer goes through (a host without CUDA): then ``agree`` is None and the model's answer stands (``used``)."""
    keys = ("quantization", "config_class", "kv_cache_dtype_auto")
    skipped = set(sglang_answer.get("not_run_paths") or [])
    side = {"model": dict((k, model.get(k)) for k in keys + ("refused",)), "not_run": list(sglang_answer.get("not_run") or []),
            "sglang": dict((k, sglang_answer.get(k)) for k in keys + ("error",))}
    kinds = set(model.get("cuda_paths") or [])
    if ("server_args" in skipped and kinds & {"dtype", "kv"}) or ("loader" in skipped and kinds & {"act_dtype", "min_capability"}) or (
            "cuda" in skipped and (kinds & {"convert", "registry"}
                                   or sglang_answer.get("kv_cache_dtype_auto") is None and not sglang_answer.get("error"))):
        side.update(agree=None, used="model")
        return side
    model_refused, sglang_error = model.get("refused"), sglang_answer.get("error")
    if model_refused or sglang_error:
        agree = bool(model_refused) == bool(sglang_error)
    else:
        agree = model.get("kv_cache_dtype_auto") == sglang_answer.get("kv_cache_dtype_auto")
    side.update(agree=agree, used="model" if agree else "sglang")
    return side
