#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: checkpoint_info
short_description: Inspect a model checkpoint directory the way SGLang reads it
version_added: 0.1.0
description:
  - Reads C(config.json) (including a nested C(text_config)), C(hf_quant_config.json) and
    C(model.safetensors.index.json) of a Hugging Face checkpoint directory on the managed host.
  - Reports the architecture (layer count, full-attention layer ids, KV heads, head dim, linear-attention
    (Gated DeltaNet) dimensions, dtype, context length) and the quantization metadata in both NVIDIA ModelOpt
    layouts (nested C(quantization) in C(hf_quant_config.json) and inline C(quantization_config) with
    C(kv_cache_scheme) in C(config.json)).
  - Reports what C(--kv-cache-dtype auto) resolves to, following SGLang 0.5.23's code per quantization config
    class. C(config.json)'s C(quantization_config) is used alone when present (only C(modelopt_mixed) without a
    per-layer map or KV metadata falls back to C(hf_quant_config.json)); C(hf_quant_config.json) is read only
    when C(config.json) has no quantization block. The ModelOpt FP8 class takes a C(kv_cache_scheme) object
    (float, 8 bits) over C(kv_cache_quant_algo); the NVFP4 class also takes a string scheme C(FP8)/C(FLOAT8);
    compressed-tensors counts only a static, symmetric, per-tensor, 8-bit float scheme. The KV cache is
    C(fp8_e4m3) when the class ends up with C(kv_cache_quant_algo) C(FP8) (any case), else the model dtype.
    A KV field of the wrong type or with another value is reported in RV(notes), naming the field.
  - With O(gpu) the answer is SGLang's on that GPU. Its server arguments set C(--dtype) or C(--kv-cache-dtype)
    for some architectures (gpt-oss MXFP4 runs bfloat16, DeepSeek-V4 an FP8 KV cache, DeepSeek sparse attention
    an FP8 KV cache from compute capability 10.0 and bf16 below, whatever the checkpoint says), GPTQ and AWQ run
    as C(gptq_marlin) and C(awq_marlin) from capability 8.0, and each quantization config class has a minimum
    capability below which SGLang refuses to start (MXFP8 below 10.0). C(rules) in RV(quantization.kv_auto) names the
    rules that applied with SGLang's file and line. Without O(gpu) the answer is for any GPU and
    C(could_change) in RV(quantization.kv_auto) names the rules a GPU could bring in; where the GPU itself sets the KV
    dtype (DeepSeek sparse attention) no answer holds for every GPU and RV(kv_cache_dtype_auto) is null.
  - With O(sglang_python), the installed SGLang resolves C(auto) with its own code too; both answers are
    reported side by side in RV(sglang_auto) and, when they differ, RV(kv_cache_dtype_auto) is SGLang's. Where
    the probe could not run a path the answer goes through (the server arguments' overrides and the loader's
    capability checks, which it never runs; marlin conversion and the methods registered only on CUDA, on a host
    without CUDA), it says so in RV(sglang_auto.not_run) and the collection's answer stands.
  - Reports whether calibrated C(k_scale)/C(v_scale)/C(kv_scale) tensors exist. Without them an FP8 KV cache
    runs with scale 1.0.
  - Lists every shard named by the index with its size on disk. Safetensors headers are read to tell a
    truncated shard from a complete one.
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
  path:
    description:
      - The checkpoint directory, the one holding C(config.json) and the C(*.safetensors) shards.
    type: path
    required: true
  verify_shards:
    description:
      - Fail when a shard named by the index (or by O(expected_sizes)) is missing, empty, truncated, of the
        wrong size, or lacks tensors the index places in it. The failure message names every bad shard.
      - When false the same findings are only reported in RV(shards).
    type: bool
    default: false
  expected_sizes:
    description:
      - Optional map of shard file name (relative to O(path)) to its exact size in bytes, for example from the
        model hub's file listing. A shard smaller than its entry counts as truncated, any other difference as
        a size mismatch.
    type: dict
  gpu:
    description:
      - The GPU the server runs on, for SGLang's architecture and GPU rules. Either the result of
        M(llmops.sglang.gpu_info) (the lowest C(compute_capability) of its C(gpus) counts, C(gpu_count) the count)
        or a dict with C(compute_capability) (for example V(12.0)) and optionally C(count).
      - A M(llmops.sglang.gpu_info) result that lists no GPU counts as unset. Unset, the answer is for any GPU.
    type: dict
  sglang_python:
    description:
      - Interpreter of the SGLang install on the host (for example C(/opt/sglang/venv/bin/python)). When set,
        a probe shipped with this collection runs SGLang's own C(ModelConfig), C(get_quant_config) and
        C(configure_kv_cache_dtype) on the checkpoint (no GPU, no weights read) and its answer is trusted.
        C(ModelConfig) is built as the server builds it without C(--trust-remote-code), so configuration code the
        checkpoint ships (named in C(auto_map)) is never imported.
      - When the interpreter is missing or SGLang does not import, RV(sglang_auto.error) says so, a note is
        added and the collection's own answer stands, unless O(sglang_required) is true.
    type: path
  sglang_required:
    description:
      - Fail when O(sglang_python) is set but SGLang cannot be asked.
    type: bool
    default: false
  sglang_timeout:
    description:
      - Seconds the SGLang probe may take (importing SGLang takes tens of seconds on a cold cache).
    type: int
    default: 300
notes:
  - Reads files only; never changes the host.
  - Bounded reads. C(config.json), C(hf_quant_config.json) and the index are read up to 64 MiB each, a
    safetensors header up to 100 MB; JSON nested more than 64 levels is refused with a clear error.
  - A shard is truncated when it is shorter than its own safetensors header says, when it is shorter than
    its O(expected_sizes) entry, or (for shards whose header cannot be read) when all shards together are
    smaller than the index's C(metadata.total_size).
"""

EXAMPLES = r"""
- name: Inspect the staged checkpoint
  llmops.sglang.checkpoint_info:
    path: /models/Qwen3.5-397B-A17B-NVFP4
  register: ckpt

- name: Refuse to serve a checkpoint whose KV cache would silently become FP8
  ansible.builtin.assert:
    that: ckpt.kv_cache_dtype_auto != 'fp8_e4m3' or sglang_kv_cache_dtype in ['bf16', 'bfloat16']
    fail_msg: "{{ ckpt.kv_cache_quant_source }} turns the KV cache to FP8 with --kv-cache-dtype auto"

- name: What --kv-cache-dtype auto becomes on an H200 (compute capability 9.0)
  llmops.sglang.checkpoint_info:
    path: /models/DeepSeek-V3.2
    gpu:
      compute_capability: "9.0"
      count: 8
  register: ckpt

- name: Verify that every shard is present and complete before restarting the service
  llmops.sglang.checkpoint_info:
    path: /models/Qwen3.5-397B-A17B-NVFP4
    verify_shards: true
"""

RETURN = r"""
path:
  description: Absolute path of the checkpoint directory.
  returned: always
  type: str
  sample: /models/Qwen3.5-397B-A17B-NVFP4
files:
  description: The metadata files found (null when absent).
  returned: always
  type: dict
  contains:
    config_json:
      description: Path of C(config.json).
      type: str
    hf_quant_config_json:
      description: Path of C(hf_quant_config.json), or null.
      type: str
    index_json:
      description: Path of C(model.safetensors.index.json), or null.
      type: str
architecture:
  description: Architecture facts that size the KV cache and the Mamba state.
  returned: always
  type: dict
  contains:
    architectures:
      description: The C(architectures) list of C(config.json).
      type: list
      elements: str
      sample: [Qwen3_5MoeForConditionalGeneration]
    model_type:
      description: Top-level C(model_type).
      type: str
      sample: qwen3_5_moe
    text_model_type:
      description: C(model_type) of the language model (C(text_config) when nested).
      type: str
      sample: qwen3_5_moe_text
    attention:
      description: C(mha) (multi-head or grouped-query attention) or C(mla) (multi-head latent attention).
      type: str
    num_hidden_layers:
      description: Decoder layers.
      type: int
      sample: 60
    layer_types_from:
      description: Where the layer kinds came from, C(layer_types), C(full_attention_interval) or C(num_hidden_layers).
      type: str
    full_attention_interval:
      description: C(full_attention_interval) from the config, or null.
      type: int
    full_attention_layer_ids:
      description: Layers with a KV cache.
      type: list
      elements: int
      sample: [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59]
    linear_attention_layer_ids:
      description: Linear-attention (Gated DeltaNet) layers, which hold Mamba-style state instead of KV.
      type: list
      elements: int
    other_layer_ids:
      description: Layers of any other kind (not counted in KV budgets).
      type: list
      elements: int
    num_full_attention_layers:
      description: Count of full-attention layers.
      type: int
      sample: 15
    num_linear_attention_layers:
      description: Count of linear-attention layers.
      type: int
      sample: 45
    hidden_size:
      description: Hidden size.
      type: int
    num_attention_heads:
      description: Query heads.
      type: int
    num_key_value_heads:
      description: KV heads.
      type: int
      sample: 2
    head_dim:
      description: Attention head dimension.
      type: int
      sample: 256
    linear_num_key_heads:
      description: Linear-attention key heads.
      type: int
    linear_num_value_heads:
      description: Linear-attention value heads.
      type: int
    linear_key_head_dim:
      description: Linear-attention key head dimension.
      type: int
    linear_value_head_dim:
      description: Linear-attention value head dimension.
      type: int
    linear_conv_kernel_dim:
      description: Linear-attention short convolution kernel size.
      type: int
    torch_dtype:
      description: Model dtype (C(dtype) or C(torch_dtype)).
      type: str
      sample: bfloat16
    mamba_ssm_dtype:
      description: C(mamba_ssm_dtype) from the config, or null.
      type: str
    max_position_embeddings:
      description: Native context length.
      type: int
      sample: 262144
    num_experts:
      description: Routed experts (MoE), or null.
      type: int
    num_experts_per_tok:
      description: Experts per token (MoE), or null.
      type: int
quantization:
  description: Quantization metadata as SGLang uses it.
  returned: always
  type: dict
  contains:
    method:
      description: The quantization method SGLang auto-detects, for example C(modelopt_fp4).
      type: str
      sample: modelopt_fp4
    quant_algo:
      description: Weight quantization algorithm.
      type: str
      sample: NVFP4
    group_size:
      description: Quantization group size.
      type: int
      sample: 16
    producer:
      description: Producer name and version.
      type: dict
    source:
      description: The block SGLang reads first (C(config.json:quantization_config) or C(hf_quant_config.json)).
      type: str
    exclude_modules:
      description: Modules left unquantized (C(exclude_modules) or C(ignore)).
      type: list
      elements: str
    config_json:
      description: The parsed C(quantization_config) of C(config.json), or null.
      type: dict
    hf_quant_config_json:
      description: The parsed C(hf_quant_config.json), or null.
      type: dict
    kv_cache_quant_algo:
      description: Effective KV-cache quantization algorithm.
      type: str
    kv_cache_quant_source:
      description: File and key the KV-cache algorithm came from.
      type: str
    kv_cache_dtype_auto:
      description: What C(--kv-cache-dtype auto) resolves to.
      type: str
    kv_cache_dtype_auto_without_hf_fallback:
      description: Kept for compatibility; equal to C(kv_cache_dtype_auto) (SGLang 0.5.23 never falls back to C(hf_quant_config.json) for KV metadata).
      type: str
    kv_cache_dtype_auto_decided_for:
      description: C(capability M.m) when O(gpu) was given, else C(any GPU).
      type: str
    kv_auto:
      description:
        - How C(auto) was resolved, by SGLang 0.5.23's rules. C(sglang_version), C(quantization) (the method SGLang
          selects), C(method_from), C(config_class), C(decided_by) (the file and block the class was built from),
          C(kv_field), C(kv_cache_quant_algo) (the value the class holds, any JSON type), C(model_dtype),
          C(kv_cache_dtype_auto) and C(refused) (SGLang's reason when it would not start, else null).
        - C(gpu) (C(compute_capability), C(count)) or null, C(decided_for) (C(capability M.m) or C(any GPU)),
          C(rules) (each rule that applied, with C(rule), C(kind), C(says) and C(source), C(sglang/srt/FILE:LINE)),
          C(decided_by_rule) (the rule that set the KV dtype, or the model dtype it follows; null when the
          quantization config decided), C(could_change) (without a GPU, the rules a GPU could bring in, each with its
          file and line) and C(cuda_paths) (the kinds of rule the answer went through).
      type: dict
kv_cache_quant_algo:
  description: Effective KV-cache quantization algorithm (C(FP8)), or null.
  returned: always
  type: str
  sample: FP8
kv_cache_quant_source:
  description: File and key the KV-cache algorithm came from, or null.
  returned: always
  type: str
  sample: hf_quant_config.json (quantization.kv_cache_quant_algo)
kv_cache_dtype_auto:
  description:
    - What C(--kv-cache-dtype auto) resolves to for this checkpoint (C(fp8_e4m3) or the model dtype); SGLang's
      own answer when O(sglang_python) was asked and answered. Null when SGLang would refuse to start, or when the
      answer depends on the GPU and O(gpu) is unset.
  returned: always
  type: str
  sample: fp8_e4m3
kv_cache_dtype_auto_decided_for:
  description: The GPU the answer was decided for, C(capability M.m) from O(gpu), or C(any GPU).
  returned: always
  type: str
  sample: capability 12.0
kv_cache_dtype_auto_model:
  description: The collection's own answer (SGLang 0.5.23's rules), the same as RV(kv_cache_dtype_auto) unless SGLang disagreed.
  returned: always
  type: str
  sample: fp8_e4m3
sglang_auto:
  description: The installed SGLang's answer next to the collection's, when O(sglang_python) is set; null otherwise.
  returned: always
  type: dict
  contains:
    python:
      description: The interpreter asked.
      type: str
    sglang_version:
      description: The SGLang version that answered, or null.
      type: str
    error:
      description: Why SGLang could not be asked (interpreter missing, SGLang not importable, no answer), or null.
      type: str
    agree:
      description: Whether both answers are the same; null when SGLang was not asked, or when it could not run a
        path the answer goes through (RV(sglang_auto.not_run)).
      type: bool
    used:
      description: Whose answer RV(kv_cache_dtype_auto) is, C(model) or C(sglang).
      type: str
    not_run:
      description: The parts of SGLang's start-up the probe could not run here, for which the collection's answer stands.
      type: list
      elements: str
    model:
      description: The collection's answer (C(quantization), C(config_class), C(kv_cache_dtype_auto), C(refused)).
      type: dict
    sglang:
      description: SGLang's answer (C(quantization), C(config_class), C(kv_cache_dtype_auto), C(error)).
      type: dict
kv_scales_present:
  description: Whether any C(k_scale)/C(v_scale)/C(kv_scale) tensor is named by the weights.
  returned: always
  type: bool
  sample: false
kv_scale_tensors:
  description: Counts of KV scale tensors and a few example names.
  returned: always
  type: dict
  contains:
    k_scale:
      description: Tensors named C(*k_scale).
      type: int
    v_scale:
      description: Tensors named C(*v_scale).
      type: int
    kv_scale:
      description: Tensors named C(*kv_scale).
      type: int
    present:
      description: Any of the above.
      type: bool
    examples:
      description: Up to six tensor names.
      type: list
      elements: str
fp8_kv_with_unit_scales:
  description: True when C(auto) resolves to FP8 and the checkpoint carries no KV scales (the KV cache runs with scale 1.0).
  returned: always
  type: bool
  sample: true
shards:
  description: Every shard named by the index (or the single C(model.safetensors)) with its state on disk.
  returned: always
  type: dict
  contains:
    source:
      description: C(model.safetensors.index.json), C(model.safetensors), or null when neither exists.
      type: str
    count:
      description: Number of shards checked.
      type: int
    files:
      description: One entry per shard with C(name), C(path), C(tensors_in_index), C(exists), C(size_bytes),
        C(expected_bytes), C(data_bytes), C(status) (C(ok), C(missing), C(empty), C(truncated), C(size_mismatch),
        C(mismatch) or C(unreadable)) and C(problem).
      type: list
      elements: dict
    index_total_size:
      description: C(metadata.total_size) of the index, or null.
      type: int
    on_disk_bytes:
      description: Sum of the shard sizes on disk.
      type: int
    missing:
      description: Missing shards.
      type: list
      elements: str
    truncated:
      description: Truncated or empty shards.
      type: list
      elements: str
    problems:
      description: One sentence per bad shard.
      type: list
      elements: str
    ok:
      description: True when at least one shard exists and every shard is complete.
      type: bool
notes:
  description: Findings worth a look (FP8 KV with unit scales, disagreeing quantization files, unknown fields).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto
from ansible_collections.llmops.sglang.plugins.module_utils._checkpoint import CheckpointError, inspect_checkpoint
# shipped so that its source can be sent to the SGLang interpreter (AnsiballZ packs what is imported)
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto_probe  # noqa: F401  pylint: disable=unused-import


def ask_sglang(module, info, notes):
    """Put the installed SGLang's answer next to the collection's; SGLang's wins when they differ."""
    python = module.params["sglang_python"]
    info["kv_cache_dtype_auto_model"] = info["kv_cache_dtype_auto"]
    info["sglang_auto"] = None
    if not python:
        return
    side = {"python": python, "sglang_version": None, "error": None, "agree": None, "model": None, "sglang": None}
    info["sglang_auto"] = side
    try:
        result = _kv_auto.run_probe(python, [info["path"]], timeout=module.params["sglang_timeout"])
    except _kv_auto.ProbeError as exc:
        side["error"] = str(exc)
        if module.params["sglang_required"]:
            module.fail_json(msg="cannot ask SGLang what --kv-cache-dtype auto becomes: %s" % exc, notes=notes, **info)
        notes.append("SGLang was not asked (%s); kv_cache_dtype_auto is the collection's model of SGLang %s"
                     % (exc, _kv_auto.SGLANG_VERSION))
        return
    side["sglang_version"] = result.get("sglang_version")
    answers = result.get("answers") or [{}]
    compared = _kv_auto.compare(info["quantization"]["kv_auto"], answers[0])
    side.update(compared)
    if compared["agree"] is None:
        notes.append("SGLang %s's probe could not run %s; kv_cache_dtype_auto is the collection's answer (%s)"
                     % (side["sglang_version"], " nor ".join(compared["not_run"]), info["kv_cache_dtype_auto_decided_for"]))
    elif not compared["agree"]:
        sglang_dtype = compared["sglang"]["kv_cache_dtype_auto"]
        notes.append("SGLang %s answers --kv-cache-dtype auto -> %s (%s) but the collection's model of SGLang %s says "
                     "%s: SGLang's answer is used" % (side["sglang_version"], sglang_dtype,
                                                      compared["sglang"].get("error") or compared["sglang"]["config_class"],
                                                      _kv_auto.SGLANG_VERSION, info["kv_cache_dtype_auto"]))
        info["kv_cache_dtype_auto"] = sglang_dtype
        info["fp8_kv_with_unit_scales"] = (sglang_dtype == "fp8_e4m3" and info["kv_scales_present"] is False)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            verify_shards=dict(type="bool", default=False),
            expected_sizes=dict(type="dict"),
            sglang_python=dict(type="path"),
            sglang_required=dict(type="bool", default=False),
            sglang_timeout=dict(type="int", default=300),
            gpu=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    try:
        info = inspect_checkpoint(module.params["path"], expected_sizes=module.params["expected_sizes"],
                                  gpu=module.params["gpu"])
    except CheckpointError as exc:
        module.fail_json(msg=str(exc))

    notes = info.pop("warnings")
    ask_sglang(module, info, notes)
    if module.params["verify_shards"] and not info["shards"]["ok"]:
        problems = info["shards"]["problems"] or ["no shards found: the checkpoint has neither %s nor %s"
                                                  % ("model.safetensors.index.json", "model.safetensors")]
        module.fail_json(msg="checkpoint %s is incomplete: %s. Re-stage (re-download or re-copy) the listed files."
                         % (info["path"], "; ".join(problems)), notes=notes, **info)
    module.exit_json(changed=False, notes=notes, **info)


if __name__ == "__main__":
    main()
