# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read a Hugging Face checkpoint directory the way SGLang does.

Pure Python (stdlib only, Python 3.9+). Covers ``config.json`` (flat or with a nested
``text_config``), NVIDIA ModelOpt quantization metadata in both layouts (nested
``hf_quant_config.json`` and inline ``quantization_config``), the safetensors index and its
shards. Every failure raises :class:`CheckpointError` whose message names the file and the fix.
"""

from __future__ import annotations

import json
import os
import struct

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto
from ansible_collections.llmops.sglang.plugins.module_utils._coerce import dtype_name, whole_number
from ansible_collections.llmops.sglang.plugins.module_utils._files import NotRegularFile, file_kind, open_regular, read_regular

CONFIG_JSON = "config.json"
HF_QUANT_JSON = "hf_quant_config.json"
INDEX_JSON = "model.safetensors.index.json"
SINGLE_SHARD = "model.safetensors"

# Guards against absurd values in hand-edited or corrupt configs (no real model is near them).
MAX_LAYERS = 100000
MAX_DIM = 1 << 24
# A safetensors header is JSON; real ones are a few MB at most and the safetensors library refuses
# headers over 100 MB.
MAX_HEADER_BYTES = 100 * 1000 * 1000
# config.json, hf_quant_config.json and the index are read whole: real ones are kilobytes (an index of a
# thousand shards is a few MB).
MAX_JSON_BYTES = 64 * 1024 * 1024
# No real config nests this deep; deeper JSON is refused before anything walks it.
MAX_JSON_DEPTH = 64

MODEL_DTYPES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
}
KV_SCALE_NAMES = ("k_scale", "v_scale", "kv_scale")
LINEAR_DIM_KEYS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                   "linear_value_head_dim", "linear_conv_kernel_dim")


class CheckpointError(Exception):
    """A checkpoint (or config dict) that cannot be read; the message says what to fix."""


# ---------------------------------------------------------------------------------------------
# Files


def json_depth_exceeds(value, limit=MAX_JSON_DEPTH):
    """True when ``value`` nests lists/objects more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return False


def parse_json_text(raw):
    """json.loads with the nesting bound; ValueError (the message says why) for anything else than JSON."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ValueError("nested deeper than the JSON parser allows")
    if json_depth_exceeds(data):
        raise ValueError("nested more than %d levels deep, which no real config does" % MAX_JSON_DEPTH)
    return data


def not_regular_message(label, path, kind):
    """Why a checkpoint file that is a FIFO, socket, device or directory is not read, and the fix."""
    return ("%s at %s is %s, not a regular file, and was not opened: remove it and stage the real %s there "
            "(re-download or re-copy the checkpoint)" % (label, path, kind, label))


def load_json(path, what=None):
    """Load a JSON object from ``path`` (at most MAX_JSON_BYTES); errors name the file and how to fix it."""
    label = what or os.path.basename(path)
    try:
        raw = read_regular(path, MAX_JSON_BYTES)
    except FileNotFoundError:
        raise CheckpointError("%s not found at %s: stage the complete checkpoint there or fix the path" % (label, path))
    except NotRegularFile as exc:
        raise CheckpointError(not_regular_message(label, path, exc.kind))
    except OSError as exc:
        raise CheckpointError("cannot read %s at %s (%s): make it readable by the user running the task "
                              "(check permissions, or use become)" % (label, path, exc.strerror or exc))
    if len(raw) > MAX_JSON_BYTES:
        raise CheckpointError("%s at %s is larger than %d MiB, which no real %s is: the file is corrupt or not "
                              "the checkpoint's; re-download it" % (label, path, MAX_JSON_BYTES >> 20, label))
    try:
        data = parse_json_text(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CheckpointError("%s at %s is not UTF-8 text (byte %d): the file is corrupt; re-download it"
                              % (label, path, exc.start))
    except ValueError as exc:
        raise CheckpointError("%s at %s is not valid JSON (%s): the file is corrupt or truncated; re-download it"
                              % (label, path, exc))
    if not isinstance(data, dict):
        raise CheckpointError("%s at %s must hold a JSON object, found %s: re-download the file"
                              % (label, path, type(data).__name__))
    return data


# ---------------------------------------------------------------------------------------------
# Architecture


def _text_view(config):
    """Top-level keys overlaid with ``text_config`` (multimodal Qwen3.5 keeps the LM there)."""
    view = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
    text = config.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise CheckpointError("config.json: text_config must be an object, found %s: fix or re-download config.json"
                              % type(text).__name__)
    if text:
        view.update(text)
    return view


def _int(view, key, minimum=0, maximum=MAX_DIM, required=False):
    value = view.get(key)
    if value is None:
        if required:
            raise CheckpointError("config.json: %s is missing: the config does not describe a decoder model; "
                                  "use the model's own config.json" % key)
        return None
    number = whole_number(value)
    if number is None:
        raise CheckpointError("config.json: %s must be an integer, found %r: fix or re-download config.json"
                              % (key, value))
    if number < minimum or number > maximum:
        raise CheckpointError("config.json: %s=%d is outside %d..%d: fix or re-download config.json"
                              % (key, number, minimum, maximum))
    return number


def normalize_model_dtype(value):
    """'torch.bfloat16' / 'bf16' -> 'bfloat16'; None when not a known floating dtype."""
    return MODEL_DTYPES.get(dtype_name(value))


def parse_architecture(config):
    """Architecture facts SGLang sizes its KV and Mamba pools from."""
    if not isinstance(config, dict):
        raise CheckpointError("model config must be a JSON object, found %s: pass the parsed config.json"
                              % type(config).__name__)
    view = _text_view(config)
    warnings = []

    layer_types = view.get("layer_types")
    n_layers = _int(view, "num_hidden_layers", 1, MAX_LAYERS, required=layer_types is None)
    interval = _int(view, "full_attention_interval", 1, MAX_LAYERS)
    full, linear, other = [], [], []
    if layer_types is not None:
        if not isinstance(layer_types, list) or not all(isinstance(t, str) for t in layer_types):
            raise CheckpointError("config.json: layer_types must be a list of strings: fix or re-download config.json")
        if not layer_types or len(layer_types) > MAX_LAYERS:
            raise CheckpointError("config.json: layer_types has %d entries: fix or re-download config.json"
                                  % len(layer_types))
        if n_layers is not None and len(layer_types) != n_layers:
            raise CheckpointError("config.json: layer_types has %d entries but num_hidden_layers is %d: "
                                  "the config is inconsistent; re-download it" % (len(layer_types), n_layers))
        n_layers = len(layer_types)
        for i, kind in enumerate(layer_types):
            (full if kind == "full_attention" else linear if kind == "linear_attention" else other).append(i)
        layers_from = "layer_types"
    elif interval is not None:
        full = [i for i in range(n_layers) if (i + 1) % interval == 0]
        linear = [i for i in range(n_layers) if (i + 1) % interval != 0]
        layers_from = "full_attention_interval"
    else:
        full = list(range(n_layers))
        layers_from = "num_hidden_layers"
    if other:
        warnings.append("layer_types has %d layers that are neither full nor linear attention (%s); "
                        "they are not counted in the KV budget" % (len(other), sorted({layer_types[i] for i in other})))

    heads = _int(view, "num_attention_heads", 1)
    kv_heads = _int(view, "num_key_value_heads", 1)
    if kv_heads is None:
        kv_heads = heads  # plain multi-head attention
    hidden = _int(view, "hidden_size", 1, 1 << 30)
    head_dim = _int(view, "head_dim", 1)
    if head_dim is None and hidden is not None and heads:
        head_dim = hidden // heads
    linear_dims = {key: _int(view, key, 1) for key in LINEAR_DIM_KEYS}
    if linear and any(v is None for v in linear_dims.values()):
        missing = [k for k, v in linear_dims.items() if v is None]
        warnings.append("linear-attention layers present but %s missing: Mamba state size unknown" % ", ".join(missing))

    model_dtype_raw = view.get("dtype", view.get("torch_dtype"))
    model_dtype = normalize_model_dtype(model_dtype_raw)
    if model_dtype is None:
        warnings.append("dtype/torch_dtype %r not recognised; assuming bfloat16" % (model_dtype_raw,))
        model_dtype = "bfloat16"
    ssm_raw = view.get("mamba_ssm_dtype")
    mamba_ssm_dtype = normalize_model_dtype(ssm_raw) if ssm_raw is not None else None
    if ssm_raw is not None and mamba_ssm_dtype is None:
        warnings.append("mamba_ssm_dtype %r not recognised; ignored" % (ssm_raw,))

    architectures = config.get("architectures")
    if not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
        architectures = []
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else None
    text_model_type = view.get("model_type") if isinstance(view.get("model_type"), str) else None
    mla = view.get("kv_lora_rank") is not None
    arch = {
        "architectures": architectures,
        "model_type": model_type,
        "text_model_type": text_model_type,
        "attention": "mla" if mla else "mha",
        "num_hidden_layers": n_layers,
        "layer_types_from": layers_from,
        "full_attention_interval": interval,
        "full_attention_layer_ids": full,
        "linear_attention_layer_ids": linear,
        "other_layer_ids": other,
        "num_full_attention_layers": len(full),
        "num_linear_attention_layers": len(linear),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "torch_dtype": model_dtype,
        "mamba_ssm_dtype": mamba_ssm_dtype,
        "max_position_embeddings": _int(view, "max_position_embeddings", 1, 1 << 40),
        "num_experts": _int(view, "num_experts", 0),
        "num_experts_per_tok": _int(view, "num_experts_per_tok", 0),
        "warnings": warnings,
    }
    arch.update(linear_dims)
    if head_dim is None:
        warnings.append("head_dim unknown (no head_dim, hidden_size or num_attention_heads)")
    if mla:
        warnings.append("multi-head latent attention (kv_lora_rank) detected: the KV budget does not model it")
    return arch


# ---------------------------------------------------------------------------------------------
# Quantization


def _kv_algo_string(value):
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _scheme_is_fp8(scheme):
    return isinstance(scheme, dict) and scheme.get("type") == "float" and scheme.get("num_bits") == 8


def _string_list(value):
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _group_size(qc):
    gs = qc.get("group_size")
    if isinstance(gs, int) and not isinstance(gs, bool):
        return gs
    groups = qc.get("config_groups")
    if isinstance(groups, dict):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            gs = weights.get("group_size") if isinstance(weights, dict) else None
            if isinstance(gs, int) and not isinstance(gs, bool):
                return gs
    return None


def parse_quant_config(qc, source):
    """Normalise one quantization block (flat or nested) as SGLang's ModelOpt loader reads it.

    Flat (config.json ``quantization_config``): ``quant_algo``, ``kv_cache_quant_algo`` or
    ``kv_cache_scheme``, ``ignore``. Nested (``hf_quant_config.json``, also seen inside
    ``quantization_config``): ``quantization.quant_algo``, ``quantization.kv_cache_quant_algo``,
    ``quantization.exclude_modules``. Flat keys win, like the loader.
    """
    if not isinstance(qc, dict):
        raise CheckpointError("%s: quantization block must be an object, found %s: fix or re-download the file"
                              % (source, type(qc).__name__))
    nested = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else None
    producer = qc.get("producer") if isinstance(qc.get("producer"), dict) else {}
    quant_method = qc.get("quant_method") if isinstance(qc.get("quant_method"), str) else None
    if quant_method is None and isinstance(producer.get("name"), str):
        quant_method = producer["name"]
    result = {
        "source": source,
        "layout": None,
        "quant_method": quant_method,
        "quant_algo": None,
        "kv_cache_quant_algo": None,
        "kv_cache_quant_key": None,
        "kv_cache_scheme": None,
        "group_size": None,
        "exclude_modules": [],
        "producer": {k: v for k, v in producer.items() if isinstance(v, (str, int, float))},
    }
    flat_algo = qc.get("quant_algo")
    if isinstance(flat_algo, str):
        result["layout"] = "flat"
        result["quant_algo"] = flat_algo
        result["group_size"] = _group_size(qc)
        result["exclude_modules"] = _string_list(qc.get("ignore")) or _string_list(qc.get("exclude_modules"))
    elif nested is not None:
        result["layout"] = "nested"
        algo = nested.get("quant_algo")
        result["quant_algo"] = algo if isinstance(algo, str) else None
        result["group_size"] = _group_size(nested)
        result["exclude_modules"] = _string_list(nested.get("exclude_modules")) or _string_list(nested.get("ignore"))
    # KV: flat string, then flat scheme, then the nested string.
    kv = _kv_algo_string(qc.get("kv_cache_quant_algo"))
    if kv:
        result["kv_cache_quant_algo"], result["kv_cache_quant_key"] = kv, "kv_cache_quant_algo"
    elif qc.get("kv_cache_scheme") is not None:
        scheme = qc.get("kv_cache_scheme")
        result["kv_cache_scheme"] = scheme if isinstance(scheme, dict) else None
        if _scheme_is_fp8(scheme):
            result["kv_cache_quant_algo"], result["kv_cache_quant_key"] = "FP8", "kv_cache_scheme"
    if result["kv_cache_quant_algo"] is None and nested is not None:
        kv = _kv_algo_string(nested.get("kv_cache_quant_algo"))
        if kv:
            result["kv_cache_quant_algo"], result["kv_cache_quant_key"] = kv, "quantization.kv_cache_quant_algo"
    result["sglang_method"] = _sglang_method(result)
    return result


def _sglang_method(parsed):
    """The --quantization name SGLang auto-detects for a ModelOpt block, else the raw method."""
    method, algo = parsed["quant_method"], (parsed["quant_algo"] or "").upper()
    if method == "modelopt" or parsed["producer"].get("name") == "modelopt":
        if algo == "FP8":
            return "modelopt_fp8"
        if "FP4" in algo:
            return "modelopt_fp4"
        if algo == "MIXED_PRECISION":
            return "modelopt_mixed"
        return "modelopt"
    return method


def resolve_kv_cache_dtype_auto(kv_cache_quant_algo, model_dtype):
    """SGLang's last step (mem_cache/kv_cache_dtype.py): FP8 E4M3 iff a string whose upper case is FP8."""
    if isinstance(kv_cache_quant_algo, str) and kv_cache_quant_algo.upper() == "FP8":
        return "fp8_e4m3"
    return model_dtype


def resolve_quantization(config, hf_quant=None, model_dtype="bfloat16", hf_quant_files=None, gpu=None):
    """Which quantization metadata SGLang uses and what ``auto`` KV resolves to (``_kv_auto``'s rules).

    ``model_dtype`` is kept for callers; ``auto`` follows SGLang's own model dtype rule. ``gpu``: the GPU the
    server runs on (``_kv_auto.normalize_gpu``); None answers for any GPU.
    """
    warnings = []
    cfg_qc = config.get("quantization_config") if isinstance(config, dict) else None
    if cfg_qc is None and isinstance(config, dict) and isinstance(config.get("text_config"), dict):
        cfg_qc = config["text_config"].get("quantization_config")
    from_cfg = parse_quant_config(cfg_qc, "config.json:quantization_config") if cfg_qc is not None else None
    from_hf = parse_quant_config(hf_quant, HF_QUANT_JSON) if hf_quant is not None else None
    primary = from_cfg or from_hf

    try:
        auto = _kv_auto.resolve(config if isinstance(config, dict) else {}, hf_quant, hf_quant_files, gpu)
    except ValueError as exc:
        raise CheckpointError("gpu: %s" % exc)
    warnings.extend(auto.pop("warnings"))
    if auto["gpu"] is None and auto["kv_cache_dtype_auto"] and set(auto["cuda_paths"]) & {"dtype", "kv", "convert"}:
        warnings.append("--kv-cache-dtype auto -> %s is SGLang %s's answer for any GPU; on the server's GPU these rules "
                        "could change it: %s. Give the GPU (compute capability) to decide it"
                        % (auto["kv_cache_dtype_auto"], auto["sglang_version"], "; ".join(auto["could_change"])))
    raw_kv = auto["kv_cache_quant_algo"]
    kv_algo = raw_kv if isinstance(raw_kv, str) and raw_kv not in ("", "auto") else None
    kv_source = "%s (%s)" % (auto["decided_by"], auto["kv_field"]) if kv_algo else None
    if auto["refused"]:
        warnings.append("SGLang %s would not start with this checkpoint: %s" % (auto["sglang_version"], auto["refused"]))
    if from_cfg and from_hf and auto["decided_by"] and auto["decided_by"].startswith("config.json"):
        hf_kv = from_hf["kv_cache_quant_algo"]
        if hf_kv and resolve_kv_cache_dtype_auto(hf_kv, "x") != resolve_kv_cache_dtype_auto(kv_algo, "x"):
            warnings.append("%s says KV %s but SGLang %s reads config.json's quantization_config alone (KV %s); "
                            "%s is not consulted" % (HF_QUANT_JSON, hf_kv, auto["sglang_version"], kv_algo or "none",
                                                     HF_QUANT_JSON))
    return {
        "method": auto["quantization"] if auto["quantization"] else (primary["sglang_method"] if primary else None),
        "quant_algo": primary["quant_algo"] if primary else None,
        "group_size": primary["group_size"] if primary else None,
        "producer": primary["producer"] if primary else {},
        "source": auto["decided_by"] or auto["method_from"] or (primary["source"] if primary else None),
        "exclude_modules": primary["exclude_modules"] if primary else [],
        "config_json": from_cfg,
        "hf_quant_config_json": from_hf,
        "kv_cache_quant_algo": kv_algo,
        "kv_cache_quant_source": kv_source,
        "kv_cache_dtype_auto": auto["kv_cache_dtype_auto"],
        "kv_cache_dtype_auto_decided_for": auto["decided_for"],
        # SGLang 0.5.23 never falls back to hf_quant_config.json for KV metadata: the same answer.
        "kv_cache_dtype_auto_without_hf_fallback": auto["kv_cache_dtype_auto"],
        "kv_auto": auto,
        "warnings": warnings,
    }


# ---------------------------------------------------------------------------------------------
# Weights: index, KV scales, shards


def kv_scale_tensors(names):
    """Count tensors that carry calibrated KV-cache scales (``k_scale``/``v_scale``/``kv_scale``)."""
    found = {"k_scale": [], "v_scale": [], "kv_scale": []}
    for name in names:
        if not isinstance(name, str):
            continue
        leaf = name.rsplit(".", 1)[-1]
        for kind in KV_SCALE_NAMES:
            if leaf == kind or leaf.endswith("_" + kind):
                found[kind].append(name)
                break
    return {
        "k_scale": len(found["k_scale"]),
        "v_scale": len(found["v_scale"]),
        "kv_scale": len(found["kv_scale"]),
        "present": any(found.values()),
        "examples": sorted(found["k_scale"] + found["v_scale"] + found["kv_scale"])[:6],
    }


def read_safetensors_header(path):
    """Return (header, expected file size, tensor data bytes); CheckpointError on a short/corrupt file."""
    name = os.path.basename(path)
    try:
        fh = open_regular(path)
    except NotRegularFile as exc:
        raise CheckpointError(not_regular_message("shard " + name, path, exc.kind))
    with fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(8)
        if len(head) < 8:
            raise CheckpointError("shard %s is %d bytes, too short for a safetensors header: re-download it" % (name, size))
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES or 8 + n > size:
            raise CheckpointError("shard %s header claims %d bytes but the file has %d: the shard is truncated or "
                                  "not safetensors; re-download it" % (name, n, size))
        raw = fh.read(n)
    try:
        header = parse_json_text(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError("shard %s has an unreadable safetensors header (%s): re-download it" % (name, exc))
    if not isinstance(header, dict):
        raise CheckpointError("shard %s has a malformed safetensors header: re-download it" % name)
    end = 0
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) and not isinstance(o, bool)
                                                                        and o >= 0 for o in offsets)
                and offsets[0] <= offsets[1]):
            raise CheckpointError("shard %s: tensor %s has bad data_offsets: re-download the shard" % (name, key))
        end = max(end, offsets[1])
    return header, 8 + n + end, end


def _shard_record(directory, shard, tensors, expected_sizes):
    path = os.path.join(directory, shard)
    rec = {"name": shard, "path": path, "tensors_in_index": tensors, "exists": False, "size_bytes": None,
           "expected_bytes": None, "data_bytes": None, "status": "ok", "problem": None}
    try:
        st = os.stat(path)
    except OSError:
        rec.update(status="missing", problem="%s is missing" % shard)
        return rec, None
    rec["exists"] = True
    rec["size_bytes"] = st.st_size
    header = None
    kind = file_kind(st.st_mode)
    if kind:
        rec.update(status="unreadable", problem=not_regular_message(shard, path, kind))
    elif st.st_size == 0:
        rec.update(status="empty", problem="%s is empty (0 bytes)" % shard)
    elif shard.endswith(".safetensors"):
        try:
            header, expected, data = read_safetensors_header(path)
            rec["expected_bytes"], rec["data_bytes"] = expected, data
            if st.st_size < expected:
                rec.update(status="truncated", problem="%s is truncated: %d bytes on disk, header needs %d"
                           % (shard, st.st_size, expected))
        except CheckpointError as exc:
            rec.update(status="truncated", problem=str(exc))
        except OSError as exc:
            rec.update(status="unreadable", problem="%s cannot be read (%s)" % (shard, exc.strerror or exc))
    want = expected_sizes.get(shard) if expected_sizes else None
    if want is not None and rec["status"] == "ok" and st.st_size != want:
        rec["expected_bytes"] = want
        rec.update(status="truncated" if st.st_size < want else "size_mismatch",
                   problem="%s has %d bytes, expected %d" % (shard, st.st_size, want))
    return rec, header


def scan_shards(directory, index=None, expected_sizes=None):
    """Every shard named by the index (or the single model.safetensors) with its state on disk."""
    expected_sizes = dict(expected_sizes or {})
    for key, value in expected_sizes.items():
        if not isinstance(key, str) or not key or os.path.isabs(key) or ".." in key.split("/"):
            raise CheckpointError("expected_sizes key %r must be a shard file name relative to the checkpoint" % (key,))
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CheckpointError("expected_sizes[%r] must be a byte count (integer >= 0), found %r" % (key, value))
    warnings = []
    counts, weight_map, total_size = {}, {}, None
    if index is not None:
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError("%s has no weight_map object: re-download the index file" % INDEX_JSON)
        for tensor, shard in weight_map.items():
            if not isinstance(shard, str) or not shard or os.path.isabs(shard) or ".." in shard.split("/"):
                raise CheckpointError("%s maps %s to %r, not a shard file name: re-download the index file"
                                      % (INDEX_JSON, tensor, shard))
            counts[shard] = counts.get(shard, 0) + 1
        meta = index.get("metadata")
        if isinstance(meta, dict):
            ts = meta.get("total_size")
            if isinstance(ts, float) and ts.is_integer():
                ts = int(ts)
            if isinstance(ts, int) and not isinstance(ts, bool) and ts >= 0:
                total_size = ts
    elif os.path.exists(os.path.join(directory, SINGLE_SHARD)):
        counts[SINGLE_SHARD] = None
    for shard in expected_sizes:
        if shard not in counts:
            counts[shard] = None
            if index is not None:
                warnings.append("expected_sizes names %s, which %s does not list" % (shard, INDEX_JSON))

    records, headers = [], {}
    for shard in sorted(counts):
        rec, header = _shard_record(directory, shard, counts[shard], expected_sizes)
        records.append(rec)
        if header is not None:
            headers[shard] = header

    # Tensors the index places in a shard whose header lacks them: a stale or swapped shard.
    for rec in records:
        header = headers.get(rec["name"])
        if header is None or rec["status"] != "ok" or not weight_map:
            continue
        lost = [t for t, s in weight_map.items() if s == rec["name"] and t not in header]
        if lost:
            rec.update(status="mismatch", problem="%s lacks %d tensor(s) the index places in it (e.g. %s): the shard "
                       "belongs to another revision; re-download it" % (rec["name"], len(lost), sorted(lost)[0]))

    on_disk = sum(r["size_bytes"] or 0 for r in records)
    data_bytes = sum(r["data_bytes"] or 0 for r in records)
    if total_size is not None and records:
        all_headers = all(r["data_bytes"] is not None for r in records)
        if all_headers and data_bytes != total_size and all(r["status"] == "ok" for r in records):
            warnings.append("index metadata.total_size is %d but the shards hold %d tensor bytes" % (total_size, data_bytes))
        if on_disk < total_size:
            # Short overall: blame shards not already proven complete by their own header.
            for rec in records:
                if rec["status"] == "ok" and rec["data_bytes"] is None:
                    rec.update(status="truncated", problem="%s may be truncated: the shards hold %d bytes, the index "
                               "metadata.total_size needs %d" % (rec["name"], on_disk, total_size))
    bad = [r for r in records if r["status"] != "ok"]
    return {
        "source": INDEX_JSON if index is not None else (SINGLE_SHARD if records else None),
        "count": len(records),
        "files": records,
        "index_total_size": total_size,
        "on_disk_bytes": on_disk,
        "missing": [r["name"] for r in bad if r["status"] == "missing"],
        "truncated": [r["name"] for r in bad if r["status"] in ("truncated", "empty")],
        "problems": [r["problem"] for r in bad],
        "ok": bool(records) and not bad,
        "warnings": warnings,
        "_tensor_names": list(weight_map) if weight_map else
        [k for h in headers.values() for k in h if k != "__metadata__"],
    }


# ---------------------------------------------------------------------------------------------
# Whole checkpoint


def describe_config(config, hf_quant=None, hf_quant_files=None, gpu=None):
    """Architecture + quantization + auto KV dtype for an in-memory config (no files), on ``gpu`` or any GPU."""
    arch = parse_architecture(config)
    quant = resolve_quantization(config, hf_quant, arch["torch_dtype"], hf_quant_files, gpu)
    return arch, quant


def _hf_quant_files(path, limit=100000):
    """Names ending in hf_quant_config.json when there are several (SGLang then refuses), else None."""
    found = []
    with os.scandir(path) as entries:
        for count, entry in enumerate(entries):
            if count >= limit:
                break
            if entry.name.endswith(HF_QUANT_JSON):
                found.append(entry.name)
    return found if len(found) > 1 else None


def inspect_checkpoint(path, expected_sizes=None, scan=True, gpu=None):
    """Everything checkpoint_info reports about one checkpoint directory (``auto`` decided for ``gpu``, or any GPU)."""
    if not isinstance(path, str) or not path:
        raise CheckpointError("checkpoint path must be a non-empty string")
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise CheckpointError("checkpoint directory %s does not exist: stage the checkpoint there or fix the path" % path)
    if not os.path.isdir(path):
        raise CheckpointError("%s is not a directory: point path at the directory holding config.json" % path)
    config_path = os.path.join(path, CONFIG_JSON)
    if not os.path.exists(config_path):
        raise CheckpointError("config.json not found in %s: point path at the checkpoint directory itself "
                              "(the one holding config.json and the *.safetensors shards)" % path)
    config = load_json(config_path)
    hf_path = os.path.join(path, HF_QUANT_JSON)
    hf_quant = load_json(hf_path) if os.path.exists(hf_path) else None
    index_path = os.path.join(path, INDEX_JSON)
    index = load_json(index_path) if scan and os.path.exists(index_path) else None

    arch, quant = describe_config(config, hf_quant, _hf_quant_files(path), gpu)
    warnings = list(arch.pop("warnings")) + list(quant.pop("warnings"))
    shards, scales = None, None
    if scan:
        shards = scan_shards(path, index, expected_sizes)
        scales = kv_scale_tensors(shards.pop("_tensor_names"))
        warnings.extend(shards.pop("warnings"))
        if not shards["count"]:
            scales = None
            warnings.append("no %s and no %s in %s: weights cannot be checked" % (INDEX_JSON, SINGLE_SHARD, path))
    fp8_auto = quant["kv_cache_dtype_auto"] == "fp8_e4m3"
    # Without weights to look at, the scale tensors are unknown: say nothing about them.
    unit_scales = (not scales["present"] if scales else None) if fp8_auto else False
    if unit_scales:
        warnings.append("--kv-cache-dtype auto runs an FP8 E4M3 KV cache with scale 1.0 for this checkpoint "
                        "(no k_scale/v_scale tensors); pass --kv-cache-dtype bf16 to keep the KV cache in bf16")
    return {
        "path": path,
        "files": {
            "config_json": config_path,
            "hf_quant_config_json": hf_path if hf_quant is not None else None,
            "index_json": index_path if index is not None else None,
        },
        "architecture": arch,
        "quantization": quant,
        "kv_cache_quant_algo": quant["kv_cache_quant_algo"],
        "kv_cache_quant_source": quant["kv_cache_quant_source"],
        "kv_cache_dtype_auto": quant["kv_cache_dtype_auto"],
        "kv_cache_dtype_auto_decided_for": quant["kv_cache_dtype_auto_decided_for"],
        "kv_scales_present": scales["present"] if scales else None,
        "kv_scale_tensors": scales,
        "fp8_kv_with_unit_scales": unit_scales,
        "shards": shards,
        "warnings": warnings,
    }
