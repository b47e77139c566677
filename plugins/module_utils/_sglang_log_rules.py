# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Default findings of the SGLang log audit, as plain data.

Each rule is a dict with:

- ``id``: stable name, used by ``allow`` waivers and in ``failed_rules``;
- ``severity``: ``error`` (fails a guard unless waived), ``warning`` or ``info``;
- ``pattern``: a Python regular expression searched in every log record (prefix included);
- ``description`` and ``fix``: one sentence each, shown to the operator.

Patterns should contain a plain-text run of a few characters (the scanner uses it to skip
unrelated lines cheaply); a pattern without one makes the audit inspect every line.
"""

from __future__ import annotations

SEVERITIES = ("error", "warning", "info")

DEFAULT_RULES = [
    {
        "id": "fp8_kv_no_scales",
        "severity": "error",
        "pattern": r"Using FP8 KV cache but no scaling factors provided",
        "description": "The KV cache is FP8 E4M3 and runs with unit (1.0) scales: keys and values are stored without calibration.",
        "fix": "Start SGLang with --kv-cache-dtype bf16, or supply calibrated scales with --quantization-param-path.",
    },
    {
        "id": "fp8_kv_effective",
        "severity": "error",
        "pattern": r"(?:Using KV cache dtype: |KV Cache is allocated\. dtype: )torch\.float8_\w+",
        "description": "The KV cache that was actually allocated holds FP8 values.",
        "fix": "Pass --kv-cache-dtype bf16; with 'auto' the checkpoint's kv_cache_quant_algo FP8 silently selects FP8.",
    },
    {
        "id": "kv_dtype_set_by_model",
        "severity": "warning",
        "pattern": r"Setting KV cache dtype to \w+ for ",
        "description": "The model class overrode the KV cache dtype on its own.",
        "fix": "Compare kv_cache_dtype in the server_args dump with the effective dtype; pin --kv-cache-dtype explicitly.",
    },
    {
        "id": "fp8_kv_scales_unsupported",
        "severity": "error",
        "pattern": r"Using FP8 KV cache and scaling factors provided but model \S+ does not support loading scaling factors",
        "description": "KV scales were given but the model class cannot load them.",
        "fix": "Drop --quantization-param-path or use --kv-cache-dtype bf16.",
    },
    {
        "id": "deepgemm_scale_fmt_not_ue8m0",
        "severity": "warning",
        "pattern": r"DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0",
        "description": "DeepGEMM runs with UE8M0 scales on Blackwell but the checkpoint's scales are not UE8M0; SGLang warns of accuracy loss.",
        "fix": "Disable DeepGEMM (SGLANG_ENABLE_JIT_DEEPGEMM=0) or use a checkpoint with scale_fmt ue8m0, then re-check accuracy.",
    },
    {
        "id": "moe_default_kernel_config",
        "severity": "info",
        "pattern": r"Using default (?:MoE kernel|MoE|W8A8 Block FP8 kernel) config\. Performance might be sub-optimal",
        "description": "No tuned Triton kernel config exists for this GPU and shape; the Triton path runs a generic config.",
        "fix": "Tune the kernel with SGLang's benchmark/kernels/fused_moe_triton and install the JSON, or use another MoE runner backend.",
    },
    {
        "id": "cuda_out_of_memory",
        "severity": "error",
        "pattern": r"CUDA out of memory|OutOfMemoryError",
        "description": "A CUDA allocation failed.",
        "fix": "Lower --mem-fraction-static, --cuda-graph-max-bs or --max-running-requests, or free the GPUs.",
    },
    {
        "id": "not_enough_memory",
        "severity": "error",
        "pattern": r"Not enough memory\. Please try to increase --mem-fraction-static",
        "description": "No memory is left for the KV cache after the weights were loaded.",
        "fix": "Raise --mem-fraction-static or use more GPUs (larger --tp-size).",
    },
    {
        "id": "no_kernel_image",
        "severity": "error",
        "pattern": r"no kernel image is available for execution on the device",
        "description": "A CUDA kernel was not compiled for this GPU architecture.",
        "fix": "Install sgl-kernel / FlashInfer builds that include this GPU's architecture (sm_120a for RTX PRO 6000 Blackwell).",
    },
    {
        "id": "scheduler_exception",
        "severity": "error",
        "pattern": r"Scheduler hit an exception",
        "description": "A scheduler process raised an exception and the server goes down.",
        "fix": "Read the traceback in the evidence and fix its cause before restarting.",
    },
    {
        "id": "child_process_failed",
        "severity": "error",
        "pattern": r"Received sigquit from a child process|Child process unexpectedly failed",
        "description": "An SGLang child process died and the server shut itself down.",
        "fix": "Look for the first traceback or CUDA error of the failing rank.",
    },
    {
        "id": "rank_load_mismatch",
        "severity": "error",
        "pattern": r"could finish the model loading, but there are other ranks that didn't finish loading",
        "description": "Some tensor-parallel ranks did not finish loading the model.",
        "fix": "Check every rank for OOM or a slow node.",
    },
    {
        "id": "health_check_failed",
        "severity": "error",
        "pattern": r"Health check failed\. Server couldn't get a response",
        "description": "The server stopped answering its own health check.",
        "fix": "Check for a hung scheduler or detokenizer; restart the service.",
    },
    {
        "id": "cli_argument_error",
        "severity": "error",
        "pattern": r"error: unrecognized arguments|error: argument --[\w-]+: invalid choice: '",
        "description": "The installed SGLang rejected the command line (flag renamed, removed or value not allowed).",
        "fix": "Align the flags with the installed SGLang version's --help.",
    },
    {
        "id": "kv_pool_full",
        "severity": "warning",
        "pattern": r"KV cache pool is full\. Retract requests",
        "description": "The KV cache ran full and requests were retracted.",
        "fix": "Lower --max-running-requests or give the KV cache more memory.",
    },
    {
        "id": "weight_not_loaded",
        "severity": "warning",
        "pattern": r"Parameter \S+ not found in params_dict",
        "description": "A checkpoint tensor has no matching model parameter and was skipped.",
        "fix": "Check that the checkpoint matches the model class and SGLang version.",
    },
]
