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

``resolve`` reproduces that without SGLang; ``run_probe`` asks an installed SGLang (see
``_kv_auto_probe``). A differential test runs both over the checkpoint shapes in the fixtures.
Standard library only; no Ansible imports.
"""

from __future__ import annotations

import json
import os

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto_probe
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
# The class each name builds; the ones not listed here carry no KV-cache metadata.
CONFIG_CLASSES = {
    "modelopt": "ModelOptFp8Config", "modelopt_fp8": "ModelOptFp8Config", "modelopt_fp4": "ModelOptFp4Config",
    "modelopt_mixed": "ModelOptMixedPrecisionConfig", "fp8": "Fp8Config", "mxfp8": "Fp8Config",
    "compressed-tensors": "CompressedTensorsConfig", "w4afp8": "W4AFp8Config",
}
MODELOPT_FILE_CLASSES = ("ModelOptFp8Config", "ModelOptFp4Config", "ModelOptMixedPrecisionConfig")
NVFP4_ALGOS = ("FP8", "NVFP4", "NVFP4_AWQ", "W4A16_NVFP4")
DTYPES = {"bfloat16": "bfloat16", "float16": "float16", "half": "float16", "float32": "float32", "float": "float32"}


class Refused(Exception):
    """SGLang 0.5.23 refuses to start with this checkpoint (its message is the reason)."""


def _is_str(value):
    return isinstance(value, str)


def _get(block, key, default=None, where="quantization block"):
    if not isinstance(block, dict):
        raise Refused("%s is %s, not an object" % (where, type(block).__name__))
    return block.get(key, default)


def model_dtype(config):
    """SGLang's model dtype under ``--dtype auto`` (configs/model_config.py ``_get_and_verify_dtype``)."""
    view = config
    text = config.get("text_config")
    if isinstance(text, dict):
        view = dict(config, **text)
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


def _detect(config, hf_quant):
    """(method, config.json block as SGLang later reads it, source of the method)."""
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
        return None, block, None
    method = _get(detected, "quant_method", "", source)
    if not _is_str(method):
        raise Refused("%s quant_method is %r, not a string" % (source, method))
    method = method.lower()
    if method not in SUPPORTED_METHODS:
        raise Refused("Unknown quantization method: %s (from %s)" % (method, source))
    return method, block, source


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


FROM_CONFIG = {
    "ModelOptFp8Config": _modelopt_fp8, "ModelOptFp4Config": _modelopt_fp4,
    "ModelOptMixedPrecisionConfig": _modelopt_mixed, "Fp8Config": _fp8,
    "CompressedTensorsConfig": _compressed_tensors,
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


def resolve(config, hf_quant=None, hf_quant_files=None):
    """SGLang 0.5.23's ``--kv-cache-dtype auto`` for a parsed config.json (and hf_quant_config.json).

    ``hf_quant_files``: names of the ``*.json`` files in the directory that end in ``hf_quant_config.json``
    (default: that file alone when ``hf_quant`` is given). Returns a dict; ``refused`` holds SGLang's reason
    when it would not start.
    """
    result = {"sglang_version": SGLANG_VERSION, "quantization": None, "method_from": None, "config_class": None,
              "decided_by": None, "kv_field": None, "kv_cache_quant_algo": None, "model_dtype": None,
              "kv_cache_dtype_auto": None, "refused": None, "warnings": []}
    if not isinstance(config, dict):
        result["refused"] = "config.json is not a JSON object"
        return result
    result["model_dtype"] = model_dtype(config)
    try:
        method, block, method_from = _detect(config, hf_quant)
        result.update(quantization=method, method_from=method_from)
        kv = None
        if method is not None:
            cls, source_block, decided_by = _class_and_block(method, config, block, hf_quant, hf_quant_files)
            result.update(config_class=cls, decided_by=decided_by)
            reader = FROM_CONFIG.get(cls)
            if reader is not None and source_block is not None:
                _algo, kv, field = reader(source_block)
                result["kv_field"] = field
            if source_block is not None and not (_is_str(kv) and kv.upper() == "FP8"):
                result["warnings"] = kv_field_warnings(source_block, cls, decided_by, result["model_dtype"])
        shown = kv if isinstance(kv, (list, dict)) and len(json.dumps(kv)) <= 200 else json.dumps(kv)[:200]
        result["kv_cache_quant_algo"] = kv if kv is None or isinstance(kv, (str, int, float, bool)) else shown
    except Refused as exc:
        result["refused"] = str(exc)
        return result
    fp8 = _is_str(kv) and kv.upper() == "FP8"
    result["kv_cache_dtype_auto"] = "fp8_e4m3" if fp8 else result["model_dtype"]
    return result


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
        result, rc, printed = ask_python(python, _kv_auto_probe, json.dumps({"paths": list(paths)}), timeout,
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
    """Side by side; SGLang's answer is the one to trust."""
    keys = ("quantization", "config_class", "kv_cache_dtype_auto")
    model_refused, sglang_error = model.get("refused"), sglang_answer.get("error")
    if model_refused or sglang_error:
        agree = bool(model_refused) == bool(sglang_error)
    else:
        agree = model.get("kv_cache_dtype_auto") == sglang_answer.get("kv_cache_dtype_auto")
    return {"agree": agree, "model": dict((k, model.get(k)) for k in keys + ("refused",)),
            "sglang": dict((k, sglang_answer.get(k)) for k in keys + ("error",))}
