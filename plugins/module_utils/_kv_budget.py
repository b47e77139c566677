# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""KV-cache and Mamba-state memory math for SGLang, per GPU.

Pure Python (stdlib only, Python 3.9+). Inputs are the architecture dict produced by
``_checkpoint.parse_architecture`` (or any dict with the same keys). SGLang reports pool
sizes in GB meaning 2**30 bytes, so everything here uses GiB.

- KV bytes per token per GPU = kv_heads_per_rank x (head_dim_k + head_dim_v) x full-attention
  layers x bytes per element, with kv_heads_per_rank = max(1, kv_heads // tp) (KV heads are
  replicated when TP exceeds their count; linear-attention layers hold no KV).
- Mamba (GDN) state per request slot per GPU = per linear layer: conv state
  (conv_dim / tp) x (kernel - 1) in the conv dtype, plus SSM state
  (linear_num_value_heads / tp) x value_head_dim x key_head_dim in the SSM dtype.
- Pool split: rest = free - total x (1 - mem_fraction_static); hybrid models give Mamba
  rest x r / (1 + r) (r = mamba_full_memory_ratio) unless a fixed Mamba slot count is set.
"""

from __future__ import annotations

import math
import re

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import whole_number

GIB = 1 << 30

# Storage bytes per element of the KV dtypes the estimator models. The FP4/MX formats carry
# per-block scales whose layout varies by release, so they are refused rather than guessed.
KV_DTYPE_BYTES = {
    "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2,
    "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8": 1,
    "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e5m2": 1, "float8_e5m2fnuz": 1,
    "float32": 4, "fp32": 4, "float": 4,
}
UNMODELLED_KV_DTYPES = ("mxfp8", "nvfp4", "fp4_e2m1", "fp4_mx_block16")
STATE_DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}
# Inferred-dtype names by bytes per element (16-bit covers bf16 and fp16 alike).
DTYPE_BY_BYTES = ((4.0, "float32"), (2.0, "bfloat16"), (1.0, "fp8"), (0.5, "fp4"))
DEFAULT_CONTEXT_LENGTHS = (32768, 131072)
# Ranges of the inputs: far beyond any GPU or model, small enough that the float math stays finite (1e308 GiB
# would overflow to inf and then to NaN).
MAX_GPU_MEMORY_GIB = 65536
MAX_MAMBA_MEMORY_RATIO = 1000
MAX_COUNT = 1 << 40

_KV_LINE = re.compile(
    r"KV Cache is allocated\.\s*(?:dtype:\s*(?:torch\.)?(?P<dtype>\w+),\s*)?"
    r"(?:#tokens:\s*(?P<tokens>\d+),\s*)?"
    r"(?:K size:\s*(?P<k>\d+(?:\.\d+)?)\s*GB,\s*V size:\s*(?P<v>\d+(?:\.\d+)?)\s*GB"
    r"|KV size:\s*(?P<kv>\d+(?:\.\d+)?)\s*GB)")


class BudgetError(ValueError):
    """Inputs the budget cannot be computed from; the message says what to fix."""


def _norm(name):
    if not isinstance(name, str) or not name.strip():
        return None
    name = name.strip().lower()
    return name[len("torch."):] if name.startswith("torch.") else name


def dtype_bytes(name, what="kv_cache_dtype"):
    """Bytes per element of a KV dtype name (CLI spelling or torch spelling)."""
    key = _norm(name)
    if key == "auto":
        raise BudgetError("%s 'auto' must be resolved first: read the checkpoint (auto becomes fp8_e4m3 when it "
                          "declares an FP8 KV cache, else the model dtype) or pass bf16/fp8_e4m3 explicitly" % what)
    if key in UNMODELLED_KV_DTYPES:
        raise BudgetError("%s %r uses block scales this estimator does not model: use bf16, bfloat16, fp8_e4m3 "
                          "or fp8_e5m2" % (what, name))
    if key not in KV_DTYPE_BYTES:
        raise BudgetError("%s %r is not a known dtype: use one of bf16, bfloat16, fp8_e4m3, fp8_e5m2, float16"
                          % (what, name))
    return KV_DTYPE_BYTES[key]


def state_dtype_bytes(name, what):
    key = _norm(name)
    if key not in STATE_DTYPE_BYTES:
        raise BudgetError("%s %r is not supported: use float32 or bfloat16" % (what, name))
    return STATE_DTYPE_BYTES[key]


def _positive_int(value, what, maximum=MAX_COUNT):
    number = whole_number(value)
    if number is None or number < 1:
        raise BudgetError("%s must be a positive integer, found %r" % (what, number if number is not None else value))
    if number > maximum:
        raise BudgetError("%s must be an integer between 1 and %d, found %d" % (what, maximum, number))
    return number


def _number(value, what, minimum=0.0, maximum=MAX_GPU_MEMORY_GIB):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BudgetError("%s must be a number between %g and %g, found %r" % (what, minimum, maximum, value))
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or not minimum <= number <= maximum:
        raise BudgetError("%s must be a number between %g and %g, found %r" % (what, minimum, maximum, value))
    return number


def _arch_int(arch, key):
    value = arch.get(key)
    if value is None:
        raise BudgetError("model config lacks %s: pass a checkpoint/model_config that defines it" % key)
    return _positive_int(value, key)


def kv_heads_per_rank(kv_heads, tp_size):
    """KV heads one GPU stores: replicated (1 per GPU) once TP exceeds the KV head count."""
    return max(1, kv_heads // tp_size)


def kv_cell(arch, tp_size, kv_dtype):
    """Per-GPU KV bytes per token for one dtype and TP size."""
    if arch.get("attention") == "mla":
        raise BudgetError("multi-head latent attention (kv_lora_rank) models are not modelled: this estimator "
                          "covers MHA/GQA and hybrid linear-attention models")
    tp_size = _positive_int(tp_size, "tp_size")
    per_elem = dtype_bytes(kv_dtype)
    heads = kv_heads_per_rank(_arch_int(arch, "num_key_value_heads"), tp_size)
    head_dim = _arch_int(arch, "head_dim")
    ids = arch.get("full_attention_layer_ids")
    layers = len(ids) if isinstance(ids, list) else _arch_int(arch, "num_full_attention_layers")
    if not layers:
        raise BudgetError("the model config has no full-attention layers, so there is no KV cache to size: "
                          "check layer_types / full_attention_interval")
    k_bytes = heads * head_dim * layers * per_elem
    return {
        "kv_heads_per_rank": heads,
        "head_dim": head_dim,
        "full_attention_layers": layers,
        "bytes_per_element": per_elem,
        "k_bytes_per_token_per_gpu": k_bytes,
        "bytes_per_token_per_gpu": 2 * k_bytes,
    }


def mamba_slot(arch, tp_size, ssm_dtype="float32", conv_dtype="bfloat16"):
    """Per-GPU Mamba (GDN) state bytes for one request slot; None for models without linear layers."""
    ids = arch.get("linear_attention_layer_ids")
    layers = len(ids) if isinstance(ids, list) else (arch.get("num_linear_attention_layers") or 0)
    if not layers:
        return None
    layers = _positive_int(layers, "num_linear_attention_layers")
    tp_size = _positive_int(tp_size, "tp_size")
    nk = _arch_int(arch, "linear_num_key_heads")
    nv = _arch_int(arch, "linear_num_value_heads")
    dk = _arch_int(arch, "linear_key_head_dim")
    dv = _arch_int(arch, "linear_value_head_dim")
    kernel = _arch_int(arch, "linear_conv_kernel_dim")
    conv_dim = 2 * nk * dk + nv * dv
    if nv % tp_size or conv_dim % tp_size:
        raise BudgetError("tp_size %d does not divide linear_num_value_heads %d / conv dim %d: SGLang cannot shard "
                          "this model that way; pick a tp_size that divides them" % (tp_size, nv, conv_dim))
    conv_b = state_dtype_bytes(conv_dtype, "mamba_conv_dtype")
    ssm_b = state_dtype_bytes(ssm_dtype, "mamba_ssm_dtype")
    conv_layer = conv_dim // tp_size * (kernel - 1) * conv_b
    ssm_layer = nv // tp_size * dv * dk * ssm_b
    return {
        "linear_attention_layers": layers,
        "conv_dim": conv_dim,
        "conv_dtype": _norm(conv_dtype),
        "ssm_dtype": _norm(ssm_dtype),
        "conv_bytes_per_layer": conv_layer,
        "ssm_bytes_per_layer": ssm_layer,
        "conv_bytes_per_slot_per_gpu": conv_layer * layers,
        "ssm_bytes_per_slot_per_gpu": ssm_layer * layers,
        "bytes_per_slot_per_gpu": (conv_layer + ssm_layer) * layers,
    }


def pool_capacity(free_memory_gib, total_memory_gib, mem_fraction_static, kv_bytes_per_token,
                  mamba_bytes_per_slot=None, mamba_full_memory_ratio=0.9, max_mamba_cache_size=None, page_size=1):
    """Tokens (and Mamba slots) SGLang can allocate from the memory left after loading weights."""
    free = _number(free_memory_gib, "free_memory_gib")
    total = _number(total_memory_gib, "total_memory_gib")
    mfs = _number(mem_fraction_static, "mem_fraction_static", maximum=1.0)
    if not 0 < mfs <= 1:
        raise BudgetError("mem_fraction_static must be in (0, 1], found %r" % mem_fraction_static)
    if free > total:
        raise BudgetError("free_memory_gib %.2f exceeds total_memory_gib %.2f: pass the free memory measured after "
                          "the weights load and the GPU's total memory" % (free, total))
    ratio = _number(mamba_full_memory_ratio, "mamba_full_memory_ratio", maximum=MAX_MAMBA_MEMORY_RATIO)
    page = _positive_int(page_size, "page_size")
    rest_gib = free - total * (1 - mfs)
    result = {
        "reserved_gib": total * (1 - mfs),
        "rest_gib": rest_gib,
        "mamba_pool_gib": 0.0,
        "kv_pool_gib": 0.0,
        "mamba_slots": None,
        "max_total_num_tokens": 0,
        "not_enough_memory": False,
    }
    if rest_gib <= 0:
        result["not_enough_memory"] = True
        return result
    rest = rest_gib * GIB
    mamba_bytes = 0
    if mamba_bytes_per_slot:
        if max_mamba_cache_size is not None:
            slots = _positive_int(max_mamba_cache_size, "max_mamba_cache_size")
            mamba_bytes = slots * mamba_bytes_per_slot
        else:
            mamba_bytes = rest * ratio / (1 + ratio)
            slots = int(mamba_bytes // mamba_bytes_per_slot)
        result["mamba_slots"] = slots
        result["mamba_pool_gib"] = mamba_bytes / GIB
    kv_bytes = rest - mamba_bytes
    tokens = int(kv_bytes // kv_bytes_per_token) // page * page if kv_bytes > 0 else 0
    result["kv_pool_gib"] = max(kv_bytes, 0) / GIB
    result["max_total_num_tokens"] = tokens
    result["not_enough_memory"] = tokens <= 0
    return result


def concurrency(kv_bytes_per_token, context_lengths, max_total_num_tokens=None, mamba_slots=None,
                mamba_slots_per_request=1, max_position_embeddings=None):
    """Requests of each context length that fit: KV-limited, Mamba-limited and the smaller of the two."""
    per_req = _positive_int(mamba_slots_per_request, "mamba_slots_per_request")
    if isinstance(max_position_embeddings, bool) or not isinstance(max_position_embeddings, int):
        max_position_embeddings = None  # unknown: nothing to compare with
    rows = []
    for length in context_lengths:
        length = _positive_int(length, "context_lengths entry")
        kv_limit = max_total_num_tokens // length if max_total_num_tokens is not None else None
        mamba_limit = mamba_slots // per_req if mamba_slots is not None else None
        limits = [x for x in (kv_limit, mamba_limit) if x is not None]
        rows.append({
            "context_length": length,
            "kv_gib_per_request": length * kv_bytes_per_token / GIB,
            "kv_limited_requests": kv_limit,
            "mamba_limited_requests": mamba_limit,
            "max_concurrent_requests": min(limits) if limits else None,
            "exceeds_max_position_embeddings": bool(max_position_embeddings and length > max_position_embeddings),
        })
    return rows


def parse_kv_pool_line(line):
    """Fields of a ``KV Cache is allocated`` log line, or None when the line has no pool sizes."""
    if not isinstance(line, str):
        return None
    m = _KV_LINE.search(line)
    if not m:
        return None
    out = {"tokens": int(m.group("tokens")) if m.group("tokens") else None, "dtype": m.group("dtype")}
    if m.group("kv") is not None:
        out["kv_gb"] = float(m.group("kv"))
    else:
        out["k_gb"], out["v_gb"] = float(m.group("k")), float(m.group("v"))
    return out


def _observed_fields(pool):
    if isinstance(pool, str):
        parsed = parse_kv_pool_line(pool)
        if parsed is None:
            raise BudgetError("observed_pool %r is not a 'KV Cache is allocated' line with K/KV sizes" % pool[:200])
        pool = parsed
    if not isinstance(pool, dict):
        raise BudgetError("observed_pool must be a dict {tokens, k_gb} / {tokens, kv_gb} or the log line itself")
    if pool.get("tokens") is None:
        raise BudgetError("observed_pool has no #tokens (older SGLang lines omit it): take the token count from "
                          "the max_total_num_tokens= line and pass tokens explicitly")
    tokens = _positive_int(pool.get("tokens"), "observed_pool.tokens")
    if pool.get("k_gb") is not None:
        return tokens, _number(pool["k_gb"], "observed_pool.k_gb"), "k", pool
    if pool.get("kv_gb") is not None:
        return tokens, _number(pool["kv_gb"], "observed_pool.kv_gb"), "kv", pool
    raise BudgetError("observed_pool needs k_gb (K size) or kv_gb (combined KV size) in GB")


def infer_kv_dtype(pool, cell, tolerance=0.03):
    """Bytes per element actually allocated, from one ``KV Cache is allocated`` pool.

    The logged sizes have two decimals and the pool carries one padding page, so the match is
    relative: within ``tolerance`` plus the rounding error of the printed size.
    """
    tokens, size_gb, kind, fields = _observed_fields(pool)
    layers = fields.get("layers")
    layers = _positive_int(layers, "observed_pool.layers") if layers is not None else cell["full_attention_layers"]
    elems = tokens * layers * cell["kv_heads_per_rank"] * cell["head_dim"] * (2 if kind == "kv" else 1)
    result = {
        "tokens": tokens,
        "size_gib": size_gb,
        "size_field": "k_gb" if kind == "k" else "kv_gb",
        "layers": layers,
        "logged_dtype": fields.get("dtype"),
        "bytes_per_element": None,
        "inferred_kv_dtype": None,
        "matches_expected": None,
        "note": None,
    }
    if size_gb <= 0:
        result["note"] = "the logged size is 0.00 GB: too small to infer a dtype"
        return result
    bpe = size_gb * GIB / elems
    result["bytes_per_element"] = round(bpe, 4)
    slack = tolerance + 0.005 / size_gb
    if slack >= 1.0 / 3:
        result["note"] = "the logged size (%.2f GB) is too coarse to tell dtypes apart" % size_gb
        return result
    for size, name in DTYPE_BY_BYTES:
        if abs(bpe / size - 1) <= slack:
            result["inferred_kv_dtype"] = name
            result["matches_expected"] = size == cell["bytes_per_element"]
            return result
    result["note"] = ("%.4f bytes per element matches no dtype: the model config, tp_size or layer count does not "
                      "describe this pool" % bpe)
    return result


def plan(arch, tp_size=1, kv_cache_dtype="auto", auto_dtype=None, mamba_ssm_dtype=None, mamba_conv_dtype="bfloat16",
         free_memory_gib=None, total_memory_gib=None, mem_fraction_static=None, context_lengths=None,
         mamba_full_memory_ratio=0.9, max_mamba_cache_size=None, mamba_slots_per_request=1, page_size=1,
         observed_pool=None):
    """The whole budget: per-token and per-slot bytes, pool capacity, concurrency, observed dtype."""
    if not isinstance(arch, dict):
        raise BudgetError("architecture must be a dict")
    warnings = []
    requested = kv_cache_dtype
    resolved = auto_dtype if _norm(kv_cache_dtype) == "auto" else kv_cache_dtype
    if resolved is None:
        dtype_bytes("auto")
    cell = kv_cell(arch, tp_size, resolved)

    ssm_dtype = mamba_ssm_dtype or arch.get("mamba_ssm_dtype") or "float32"
    mamba = mamba_slot(arch, tp_size, ssm_dtype, mamba_conv_dtype)

    pool = None
    memory = (free_memory_gib, total_memory_gib, mem_fraction_static)
    if any(v is not None for v in memory):
        if any(v is None for v in memory):
            raise BudgetError("free_memory_gib, total_memory_gib and mem_fraction_static are needed together")
        pool = pool_capacity(free_memory_gib, total_memory_gib, mem_fraction_static, cell["bytes_per_token_per_gpu"],
                             mamba["bytes_per_slot_per_gpu"] if mamba else None, mamba_full_memory_ratio,
                             max_mamba_cache_size, page_size)
        if pool["not_enough_memory"]:
            warnings.append("no memory left for the KV pool: SGLang fails with 'Not enough memory. Please try to "
                            "increase --mem-fraction-static.'")

    lengths = list(DEFAULT_CONTEXT_LENGTHS if context_lengths is None else context_lengths)
    rows = concurrency(cell["bytes_per_token_per_gpu"], lengths,
                       pool["max_total_num_tokens"] if pool else None,
                       pool["mamba_slots"] if pool else None,
                       mamba_slots_per_request, arch.get("max_position_embeddings"))
    for row in rows:
        if row["exceeds_max_position_embeddings"]:
            warnings.append("context length %d exceeds max_position_embeddings %s"
                            % (row["context_length"], arch.get("max_position_embeddings")))

    observed = infer_kv_dtype(observed_pool, cell) if observed_pool is not None else None
    if observed and observed["matches_expected"] is False:
        warnings.append("the observed pool holds %s but %s was expected: the server is not running the KV dtype "
                        "you asked for" % (observed["inferred_kv_dtype"], _norm(resolved)))
    return {
        "tp_size": tp_size,
        "kv_cache_dtype": requested,
        "kv_cache_dtype_resolved": _norm(resolved),
        "kv_bytes_per_element": cell["bytes_per_element"],
        "kv_heads_per_rank": cell["kv_heads_per_rank"],
        "head_dim": cell["head_dim"],
        "full_attention_layers": cell["full_attention_layers"],
        "kv_bytes_per_token_per_gpu": cell["bytes_per_token_per_gpu"],
        "k_bytes_per_token_per_gpu": cell["k_bytes_per_token_per_gpu"],
        "mamba": mamba,
        "mamba_bytes_per_slot_per_gpu": mamba["bytes_per_slot_per_gpu"] if mamba else 0,
        "pool": pool,
        "concurrency": rows,
        "observed": observed,
        "warnings": warnings,
    }
