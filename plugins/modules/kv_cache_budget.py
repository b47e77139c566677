#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kv_cache_budget
short_description: Compute SGLang's per-GPU KV-cache and Mamba-state budget for a model
version_added: 0.1.0
description:
  - Computes, per GPU, the KV-cache bytes per token for a KV dtype and tensor-parallel size, and for hybrid
    (Gated DeltaNet) models the Mamba state bytes per request slot, the way SGLang sizes its pools.
  - KV heads are replicated when the TP size exceeds their count (kv_heads_per_rank = max(1, kv_heads // tp));
    only full-attention layers hold KV.
  - With O(free_memory_gib), O(total_memory_gib) and O(mem_fraction_static) it also computes the token
    capacity (C(max_total_num_tokens)) and the Mamba slot count, and how many requests of each of
    O(context_lengths) fit.
  - With O(observed_pool) it works backwards from a C(KV Cache is allocated) log line to the bytes per element
    the server actually allocated, which tells a bf16 KV cache (about 2.0) from an FP8 one (about 1.0).
  - Pure computation on the managed host; reads the checkpoint's JSON files when O(checkpoint) is given.
author:
  - llmops maintainers (@llmops)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in diff mode) when in diff mode.
    support: none
options:
  checkpoint:
    description:
      - Checkpoint directory to read C(config.json) and C(hf_quant_config.json) from.
      - Exactly one of O(checkpoint) and O(model_config) is required.
    type: path
  model_config:
    description:
      - The model's C(config.json) as a dict (for example from C(ansible.builtin.slurp) plus C(from_json)).
    type: dict
  hf_quant_config:
    description:
      - The checkpoint's C(hf_quant_config.json) as a dict, used with O(model_config) to resolve C(auto).
    type: dict
  gpu:
    description:
      - The GPU the server runs on, for SGLang's architecture and GPU rules when C(auto) is resolved (for example
        DeepSeek sparse attention keeps a bf16 KV cache below compute capability 10.0 and an FP8 one from it), the
        result of M(llmops.sglang.gpu_info), or a dict with C(compute_capability) and optionally C(count). Unset,
        C(auto) is resolved for any GPU (see RV(kv_cache_dtype_auto_decided_for)).
    type: dict
  tp_size:
    description:
      - Tensor-parallel size (C(--tp-size)).
    type: int
    default: 1
  kv_cache_dtype:
    description:
      - The C(--kv-cache-dtype) value. V(auto) is resolved the way SGLang does (M(llmops.sglang.checkpoint_info)),
        from the architecture on O(gpu), then the checkpoint's quantization metadata (C(fp8_e4m3) when it declares
        an FP8 KV cache, else the model dtype).
      - Modelled dtypes are V(auto), V(bf16), V(bfloat16), V(float16), V(fp8_e4m3) and V(fp8_e5m2).
    type: str
    default: auto
  mamba_ssm_dtype:
    description:
      - SSM state dtype (C(--mamba-ssm-dtype)). Defaults to the config's C(mamba_ssm_dtype), else V(float32).
    type: str
  mamba_conv_dtype:
    description:
      - Convolution state dtype of the Mamba pool.
    type: str
    default: bfloat16
  free_memory_gib:
    description:
      - Free GPU memory per GPU after the weights load, in GiB (the smallest across ranks; the C(avail mem) of
        C(Load weight end)).
    type: float
  total_memory_gib:
    description:
      - Total memory of one GPU in GiB.
    type: float
  mem_fraction_static:
    description:
      - C(--mem-fraction-static).
    type: float
  context_lengths:
    description:
      - Context lengths (tokens per request) to report concurrency for.
    type: list
    elements: int
    default: [32768, 131072]
  mamba_full_memory_ratio:
    description:
      - C(--mamba-full-memory-ratio); the Mamba pool gets rest x r / (1 + r) of the memory left for caches.
    type: float
    default: 0.9
  max_mamba_cache_size:
    description:
      - C(--max-mamba-cache-size); a fixed Mamba slot count instead of the ratio split.
    type: int
  mamba_slots_per_request:
    description:
      - Mamba slots one running request holds. V(1) gives an upper bound; with the radix cache SGLang reserves
        about 3, more with speculative decoding.
    type: int
    default: 1
  page_size:
    description:
      - C(--page-size); the token capacity is rounded down to a multiple of it.
    type: int
    default: 1
  observed_pool:
    description:
      - A pool SGLang reported, either the C(KV Cache is allocated ...) log line itself or a dict with
        C(tokens) and C(k_gb) (K size in GB) or C(kv_gb) (combined KV size), optionally C(layers) (for example
        1 for a NEXTN draft pool).
      - The result RV(observed) gives the bytes per element and the dtype actually allocated.
    type: raw
notes:
  - GB in SGLang's log lines means 2**30 bytes; this module reports GiB with the same meaning.
  - FP4/MX KV dtypes (V(nvfp4), V(mxfp8), V(fp4_e2m1)) and multi-head latent attention models are not modelled.
"""

EXAMPLES = r"""
- name: Budget for Qwen3.5-397B at TP8 with a bf16 KV cache
  llmops.sglang.kv_cache_budget:
    checkpoint: /models/Qwen3.5-397B-A17B-NVFP4
    tp_size: 8
    kv_cache_dtype: bf16
    free_memory_gib: 64.4
    total_memory_gib: 95.6
    mem_fraction_static: 0.85
    context_lengths: [32768, 131072, 262144]
  register: budget

- name: Prove the running server allocated a bf16 KV cache
  llmops.sglang.kv_cache_budget:
    checkpoint: /models/Qwen3.5-397B-A17B-NVFP4
    tp_size: 8
    kv_cache_dtype: bf16
    observed_pool: "{{ kv_alloc_line }}"
  register: kv
  failed_when: kv.observed.inferred_kv_dtype != 'bfloat16'
"""

RETURN = r"""
tp_size:
  description: The tensor-parallel size used.
  returned: always
  type: int
  sample: 8
kv_cache_dtype:
  description: The requested C(--kv-cache-dtype).
  returned: always
  type: str
  sample: auto
kv_cache_dtype_resolved:
  description: The KV dtype the budget is computed for (C(auto) resolved).
  returned: always
  type: str
  sample: fp8_e4m3
kv_cache_dtype_auto:
  description: What C(auto) resolves to for this model.
  returned: always
  type: str
  sample: fp8_e4m3
kv_cache_quant_source:
  description: File and key that decided C(auto), or null.
  returned: always
  type: str
kv_bytes_per_element:
  description: Bytes per KV element.
  returned: always
  type: int
  sample: 2
kv_heads_per_rank:
  description: KV heads stored on each GPU.
  returned: always
  type: int
  sample: 1
head_dim:
  description: Attention head dimension.
  returned: always
  type: int
  sample: 256
full_attention_layers:
  description: Layers holding KV.
  returned: always
  type: int
  sample: 15
kv_bytes_per_token_per_gpu:
  description: K plus V bytes one token takes on each GPU.
  returned: always
  type: int
  sample: 15360
k_bytes_per_token_per_gpu:
  description: K bytes one token takes on each GPU (the C(K size) of the log line divided by C(#tokens)).
  returned: always
  type: int
  sample: 7680
mamba_bytes_per_slot_per_gpu:
  description: Mamba state bytes (conv plus SSM over all linear layers) per request slot on each GPU; 0 without linear layers.
  returned: always
  type: int
  sample: 24007680
mamba:
  description: Mamba state breakdown, or null for models without linear-attention layers.
  returned: always
  type: dict
  contains:
    linear_attention_layers:
      description: Linear-attention layers.
      type: int
    conv_dim:
      description: Convolution channels before sharding.
      type: int
    conv_dtype:
      description: Convolution state dtype.
      type: str
    ssm_dtype:
      description: SSM state dtype.
      type: str
    conv_bytes_per_layer:
      description: Conv state bytes per layer per slot per GPU.
      type: int
    ssm_bytes_per_layer:
      description: SSM state bytes per layer per slot per GPU.
      type: int
    conv_bytes_per_slot_per_gpu:
      description: Conv state bytes per slot per GPU.
      type: int
    ssm_bytes_per_slot_per_gpu:
      description: SSM state bytes per slot per GPU.
      type: int
    bytes_per_slot_per_gpu:
      description: Total per slot per GPU.
      type: int
pool:
  description: Pool capacity, or null when the memory options are not given.
  returned: always
  type: dict
  contains:
    reserved_gib:
      description: total x (1 - mem_fraction_static), kept free for activations and CUDA graphs.
      type: float
    rest_gib:
      description: Memory left for the KV and Mamba pools.
      type: float
    mamba_pool_gib:
      description: Memory given to the Mamba pool.
      type: float
    kv_pool_gib:
      description: Memory given to the KV pool.
      type: float
    mamba_slots:
      description: Mamba slots (C(max_mamba_cache_size)), or null for non-hybrid models.
      type: int
    max_total_num_tokens:
      description: KV tokens per GPU pool.
      type: int
    not_enough_memory:
      description: True when no KV pool fits (SGLang would refuse to start).
      type: bool
concurrency:
  description: One entry per context length.
  returned: always
  type: list
  elements: dict
  contains:
    context_length:
      description: Tokens per request.
      type: int
    kv_gib_per_request:
      description: KV GiB one such request takes on each GPU.
      type: float
    kv_limited_requests:
      description: Requests that fit in the KV pool, or null without memory options.
      type: int
    mamba_limited_requests:
      description: Requests the Mamba slots allow, or null.
      type: int
    max_concurrent_requests:
      description: The smaller of the two, or null.
      type: int
    exceeds_max_position_embeddings:
      description: The length is beyond the model's native context.
      type: bool
observed:
  description: Backwards inference from O(observed_pool), or null.
  returned: always
  type: dict
  contains:
    tokens:
      description: C(#tokens) of the pool.
      type: int
    size_gib:
      description: The size used (K size, or the combined KV size).
      type: float
    size_field:
      description: C(k_gb) or C(kv_gb).
      type: str
    layers:
      description: Layers assumed in the pool.
      type: int
    logged_dtype:
      description: The dtype printed by newer SGLang on the same line, or null.
      type: str
    bytes_per_element:
      description: Bytes per element actually allocated.
      type: float
      sample: 2.0023
    inferred_kv_dtype:
      description: C(float32), C(bfloat16) (any 16-bit type), C(fp8) or C(fp4); null when it cannot be told.
      type: str
      sample: bfloat16
    matches_expected:
      description: Whether the inferred width equals the width of RV(kv_cache_dtype_resolved).
      type: bool
    note:
      description: Why no dtype was inferred, or null.
      type: str
kv_cache_dtype_auto_decided_for:
  description: The GPU C(auto) was resolved for, C(capability M.m) from O(gpu), or C(any GPU).
  returned: always
  type: str
  sample: capability 12.0
architecture:
  description: The architecture summary the budget used (see M(llmops.sglang.checkpoint_info)).
  returned: always
  type: dict
notes:
  description: Findings worth a look.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils._checkpoint import (
    CheckpointError,
    describe_config,
    inspect_checkpoint,
)
from ansible_collections.llmops.sglang.plugins.module_utils._kv_budget import BudgetError, plan


def main():
    module = AnsibleModule(
        argument_spec=dict(
            checkpoint=dict(type="path"),
            model_config=dict(type="dict"),
            hf_quant_config=dict(type="dict"),
            gpu=dict(type="dict"),
            tp_size=dict(type="int", default=1),
            kv_cache_dtype=dict(type="str", default="auto"),
            mamba_ssm_dtype=dict(type="str"),
            mamba_conv_dtype=dict(type="str", default="bfloat16"),
            free_memory_gib=dict(type="float"),
            total_memory_gib=dict(type="float"),
            mem_fraction_static=dict(type="float"),
            context_lengths=dict(type="list", elements="int", default=[32768, 131072]),
            mamba_full_memory_ratio=dict(type="float", default=0.9),
            max_mamba_cache_size=dict(type="int"),
            mamba_slots_per_request=dict(type="int", default=1),
            page_size=dict(type="int", default=1),
            observed_pool=dict(type="raw"),
        ),
        mutually_exclusive=[("checkpoint", "model_config"), ("checkpoint", "hf_quant_config")],
        required_one_of=[("checkpoint", "model_config")],
        required_together=[("free_memory_gib", "total_memory_gib", "mem_fraction_static")],
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["checkpoint"]:
            info = inspect_checkpoint(p["checkpoint"], scan=False, gpu=p["gpu"])
            arch, quant, notes = info["architecture"], info["quantization"], info["warnings"]
        else:
            arch, quant = describe_config(p["model_config"], p["hf_quant_config"], gpu=p["gpu"])
            notes = arch.pop("warnings") + quant.pop("warnings")
        result = plan(
            arch,
            tp_size=p["tp_size"],
            kv_cache_dtype=p["kv_cache_dtype"],
            auto_dtype=quant["kv_cache_dtype_auto"],
            mamba_ssm_dtype=p["mamba_ssm_dtype"],
            mamba_conv_dtype=p["mamba_conv_dtype"],
            free_memory_gib=p["free_memory_gib"],
            total_memory_gib=p["total_memory_gib"],
            mem_fraction_static=p["mem_fraction_static"],
            context_lengths=p["context_lengths"],
            mamba_full_memory_ratio=p["mamba_full_memory_ratio"],
            max_mamba_cache_size=p["max_mamba_cache_size"],
            mamba_slots_per_request=p["mamba_slots_per_request"],
            page_size=p["page_size"],
            observed_pool=p["observed_pool"],
        )
    except (CheckpointError, BudgetError) as exc:
        module.fail_json(msg=str(exc))

    notes = list(notes) + result.pop("warnings")
    module.exit_json(
        changed=False,
        kv_cache_dtype_auto=quant["kv_cache_dtype_auto"],
        kv_cache_dtype_auto_decided_for=quant["kv_cache_dtype_auto_decided_for"],
        kv_cache_quant_source=quant["kv_cache_quant_source"],
        architecture=arch,
        notes=notes,
        **result
    )


if __name__ == "__main__":
    main()
