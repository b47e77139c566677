# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where an NVFP4 server's kernels come from on SM 12.0, per SGLang release, and what the host needs for them.

The sglang-kernel wheels these releases pin (0.4.5, 0.4.10) carry no FP4 op at all: SGLang takes NVFP4 from
FlashInfer (``fp4_quantize``, ``mm_fp4``, ``cutlass_fused_moe``, the trtllm-gen MoE), from cuDNN and the CUTLASS
DSL through FlashInfer, and from its own JIT marlin kernels. Most of those are compiled on the serving host at
first use, with nvcc. ``ROWS`` says, for each ``--fp4-gemm-backend`` and ``--moe-runner-backend`` choice (and, as
the ``--quantization modelopt_fp4`` row, for the activation quantization of the W4A4 linear layers, which every
GEMM choice but marlin runs), who provides the SM120 kernels:

- ``flashinfer-jit``: a FlashInfer JIT module (``modules``), built by nvcc from the wheel's own ``data/csrc``
  sources into FlashInfer's cache (``jit_cache_path``) unless a prebuilt one is found (the install's ``data/aot``,
  which neither wheel ships, or a flashinfer-jit-cache package, which the package index does not have);
- ``flashinfer-cubin``: trtllm-gen cubins, from the ``flashinfer-cubin`` package or downloaded at first use;
- ``cudnn``: cuDNN's FP4 GEMM through ``nvidia-cudnn-frontend``;
- ``cutlass-dsl``: CuTe DSL kernels of ``nvidia-cutlass-dsl``, compiled in-process;
- ``sglang-jit``: SGLang's own JIT kernels (tvm-ffi, nvcc at first use);
- ``refused``: SGLang refuses the choice for NVFP4.

Fields of a row: ``release``, ``flag``, ``choice``; ``becomes`` (what ``auto`` turns into on SM 12.0; such a row
has nothing else); ``provider``; ``entry`` (what SGLang calls); ``modules`` (FlashInfer JIT module names, described
in ``FLASHINFER``); ``sm120`` (whether that provider has SM 12.0 kernels); ``basis`` (the file:line that decides
``sm120``: FlashInfer's capability list, JIT generator or arch rule, or SGLang's own word); ``needs`` (what the
host must have; ``nvcc>=X`` is the first toolkit that builds an ``sm_120a``/``sm_120f`` target for it); ``site``
(SGLang's file:line where the kernel is called or the choice resolved).

``--moe-runner-backend`` rows cover the choices ModelOptNvFp4FusedMoEMethod asks about that run through a plain
(``none`` all-to-all) runner, plus ``auto`` and what it refuses; flashinfer_megamoe (tied to its own all-to-all)
and lora_marlin are not tabled. Only SM 12.0 is tabled.

tests/unit/plugins/module_utils/test_fp4_kernels.py rebuilds every row from SGLang's source (0.5.23 installed,
0.5.16 unpacked) and the pinned flashinfer-python wheels' files (tests/fixtures/flashinfer/) and requires equality:
a release that moves a kernel, a choice or a line fails there. docs/fp4_sm120.md tells the story.
Standard library only; no Ansible imports.
"""

from __future__ import annotations

import os

from ansible_collections.llmops.sglang.plugins.module_utils._cuda_toolkit import version_tuple
from ansible_collections.llmops.sglang.plugins.module_utils._nvidia_smi import normalize_compute_cap
from ansible_collections.llmops.sglang.plugins.module_utils._sglang_args_checker import split_flag

CAPABILITY = "12.0"
GEMM_FLAG, MOE_FLAG, QUANT_FLAG = "--fp4-gemm-backend", "--moe-runner-backend", "--quantization"
NVFP4_QUANTIZATIONS = ("modelopt_fp4",)
# The first nvcc that compiles each SM 12.0 target (FlashInfer's own rule agrees: flashinfer/compilation_context.py)
NVCC_FIRST = {"sm_120a": "12.8", "sm_120f": "12.9"}
# The SM 12.0 target the collection builds for and proves, once: the arch, its arch-specific suffix (sm_120a, which
# nvcc 12.9 and newer can widen to the family target sm_120f) and the first toolkit that compiles it. The preflight's
# and sgl_kernel's arch and toolkit settings default to null, which their plans resolve to these.
SM120_TARGET = {"arch": "120", "suffix": "a", "toolkit_min": NVCC_FIRST["sm_120a"]}


def sm120_arch(spelling="nvcc"):
    """The SM 12.0 target as nvcc spells it (``sm_120a``) or as CMake does (``120a``)."""
    arch = SM120_TARGET["arch"] + SM120_TARGET["suffix"]
    return "sm_" + arch if spelling == "nvcc" else arch


# What each SGLang release pins (its METADATA Requires-Dist)
RELEASES = {
    "0.5.16": {"flashinfer-python": "0.6.14", "sglang-kernel": "0.4.5", "nvidia-cutlass-dsl": "4.6.0", "torch": "2.11.0"},
    "0.5.23": {"flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10", "nvidia-cutlass-dsl": "4.8.0", "torch": "2.14.1"},
}

_FUSED_MOE_SOURCES = (
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_tma_warp_specialized_input.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp8_uint4.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp8_fp8.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp8_fp4.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp4_fp4.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp32_fp32.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp16_uint8.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp16_uint4.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp16_fp16.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_uint8.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_uint4.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_fp8.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_bf16.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_bf16_fp4.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_kernels_fp16_fp4.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/fp8_blockscale_gemm/fp8_blockscale_gemm.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_mixed_utils.cu",
    "fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu",
    "fused_moe/cutlass_backend/deepgemm_jit_setup.cu",
    "fused_moe/cutlass_backend/cutlass_fused_moe_instantiation.cu",
    "nv_internal/cpp/common/envUtils.cpp",
    "nv_internal/cpp/common/logger.cpp",
    "nv_internal/cpp/common/stringUtils.cpp",
    "nv_internal/cpp/common/tllmException.cpp",
    "nv_internal/cpp/common/memoryUtils.cu",
    "nv_internal/tensorrt_llm/kernels/preQuantScaleKernel.cu",
    "nv_internal/tensorrt_llm/kernels/cutlass_kernels/cutlass_heuristic.cpp",
    "nv_internal/tensorrt_llm/kernels/lora/lora.cpp",
)
_FP4_QUANTIZATION_SOURCES = (
    "nv_internal/tensorrt_llm/thop/fp4Quantize.cpp",
    "nv_internal/tensorrt_llm/thop/fp4Op.cpp",
    "nv_internal/cpp/kernels/quantization.cu",
    "nv_internal/cpp/common/envUtils.cpp",
    "nv_internal/cpp/common/logger.cpp",
    "nv_internal/cpp/common/stringUtils.cpp",
    "nv_internal/cpp/common/tllmException.cpp",
)
_CUDNN = ("nvidia-cudnn-frontend>=1.13", "cuDNN backend_version>=91002")
_TRTLLM_MOE = "flashinfer.trtllm_fp4_block_scale_moe, flashinfer.trtllm_fp4_block_scale_routed_moe"

# FlashInfer's generator of each SM 12.0 FP4 module, as importable names (the same in 0.6.14 and 0.7.2; its file and
# line are FLASHINFER[version]["modules"][name]["generator"], and a test finds the function there)
GENERATORS = {
    "fp4_gemm_cutlass_sm120": "flashinfer.jit.gemm.core:gen_gemm_sm120_module_cutlass_fp4",
    "fused_moe_120": "flashinfer.jit.fused_moe:gen_cutlass_fused_moe_sm120_module",
    "fp4_quantization_120f": "flashinfer.jit.fp4_quantization:gen_fp4_quantization_sm120f_module",
}

# The pinned flashinfer-python wheels: the SM 12.0 target FlashInfer picks under each CUDA (None: it refuses),
# the JIT modules an NVFP4 server builds on SM 12.0 ("arch": "context" follows sm120_targets, else a fixed target;
# "generated": more sources are written at build time from templates or a generator), which mm_fp4 backends
# accept capability 12.0 (and the requirement function that says so), cuDNN's FP4 minimums, and whether
# CuteDslMoEWrapper accepts 12.0.
FLASHINFER = {
    "0.6.14": {
        "wheel": "flashinfer_python-0.6.14-py3-none-any.whl", "sha256": "d124369346a3d48eac67e31c42f7a3c813bcc0abc10e2e36db413b7b3dfd97df",
        "sm120_targets": (("12.8", None), ("12.9", "sm_120f"), ("13.0", "sm_120f")),
        "modules": {
            "fp4_gemm_cutlass_sm120": {
                "sources": ("fp4_gemm_cutlass_sm120.cu",), "templates": ("fp4_gemm_cutlass_sm120.jinja",),
                "arch": "context", "generated": True, "generator": "flashinfer/jit/gemm/core.py:202", "nvcc": "12.9"},
            "fused_moe_120": {
                "sources": _FUSED_MOE_SOURCES, "templates": (), "arch": "context", "generated": True,
                "generator": "flashinfer/jit/fused_moe.py:58", "nvcc": "12.9"},
            "fp4_quantization_120f": {
                "sources": _FP4_QUANTIZATION_SOURCES, "templates": (), "arch": "sm_120f", "generated": False,
                "generator": "flashinfer/jit/fp4_quantization.py:84", "nvcc": "12.9"},
        },
        "mm_fp4": {
            "cudnn": (True, "flashinfer/gemm/gemm_base.py:5396"),
            "trtllm": (False, "flashinfer/gemm/gemm_base.py:5438"),
            "cutlass": (True, "flashinfer/gemm/gemm_base.py:5465"),
            "cute-dsl": (False, "flashinfer/gemm/gemm_base.py:5489"),
            "b12x": (True, "flashinfer/gemm/gemm_base.py:5519"),
        },
        "cudnn": _CUDNN,
        "cute_dsl_moe": (False, "flashinfer/fused_moe/cute_dsl/fused_moe.py:322"),
    },
    "0.7.2": {
        "wheel": "flashinfer_python-0.7.2-py3-none-any.whl", "sha256": "770550a0aa92b2f10e6c9a1f048dd43713f0f3bb6a12710186fcf8e4e9c99bd8",
        "sm120_targets": (("12.8", "sm_120a"), ("12.9", "sm_120f"), ("13.0", "sm_120f")),
        "modules": {
            "fp4_gemm_cutlass_sm120": {
                "sources": ("fp4_gemm_cutlass_sm120.cu",), "templates": ("fp4_gemm_cutlass_sm120.jinja",),
                "arch": "context", "generated": True, "generator": "flashinfer/jit/gemm/core.py:257", "nvcc": "12.8"},
            "fused_moe_120": {
                "sources": _FUSED_MOE_SOURCES, "templates": (), "arch": "context", "generated": True,
                "generator": "flashinfer/jit/fused_moe.py:108", "nvcc": "12.8"},
            "fp4_quantization_120f": {
                "sources": _FP4_QUANTIZATION_SOURCES, "templates": (), "arch": "sm_120f", "generated": False,
                "generator": "flashinfer/jit/fp4_quantization.py:93", "nvcc": "12.9"},
        },
        "mm_fp4": {
            "cudnn": (True, "flashinfer/gemm/gemm_base.py:7517"),
            "trtllm": (False, "flashinfer/gemm/gemm_base.py:7559"),
            "cutlass": (True, "flashinfer/gemm/gemm_base.py:7586"),
            "cute-dsl": (True, "flashinfer/gemm/gemm_base.py:7614"),
            "cutedsl_low_latency": (False, "flashinfer/gemm/gemm_base.py:7673"),
            "b12x": (True, "flashinfer/gemm/gemm_base.py:7710"),
        },
        "cudnn": _CUDNN,
        "cute_dsl_moe": (False, "flashinfer/fused_moe/cute_dsl/fused_moe.py:616"),
    },
}

FIELDS = ("release", "flag", "choice", "becomes", "provider", "entry", "modules", "sm120", "basis", "needs", "site")
ROWS = tuple(dict(zip(FIELDS, row)) for row in (
    ("0.5.16", "--quantization", "modelopt_fp4", None, "flashinfer-jit", "flashinfer.fp4_quantize(backend='cuda')", ("fp4_quantization_120f",), True,
     "flashinfer/jit/fp4_quantization.py:84", ("nvcc>=12.9",), "sglang/srt/layers/quantization/fp4_utils.py:24"),
    ("0.5.16", "--fp4-gemm-backend", "auto", "flashinfer_cutlass", None, None, (), None,
     None, (), "sglang/srt/layers/quantization/fp4_utils.py:156"),
    ("0.5.16", "--fp4-gemm-backend", "flashinfer_cudnn", None, "cudnn", "flashinfer.mm_fp4(backend='cudnn')", (), True,
     "flashinfer/gemm/gemm_base.py:5396", _CUDNN, "sglang/srt/layers/quantization/modelopt_quant.py:145"),
    ("0.5.16", "--fp4-gemm-backend", "flashinfer_cutedsl", None, "cutlass-dsl", "flashinfer.mm_fp4(backend='cute-dsl')", (), False,
     "flashinfer/gemm/gemm_base.py:5489", ("nvidia-cutlass-dsl==4.6.0",), "sglang/srt/layers/quantization/modelopt_quant.py:145"),
    ("0.5.16", "--fp4-gemm-backend", "flashinfer_cutlass", None, "flashinfer-jit", "flashinfer.mm_fp4(backend='cutlass')", ("fp4_gemm_cutlass_sm120",), True,
     "flashinfer/gemm/gemm_base.py:5465", ("nvcc>=12.9",), "sglang/srt/layers/quantization/modelopt_quant.py:145"),
    ("0.5.16", "--fp4-gemm-backend", "flashinfer_trtllm", None, "flashinfer-cubin", "flashinfer.mm_fp4(backend='trtllm')", (), False,
     "flashinfer/gemm/gemm_base.py:5438", ("flashinfer-cubin",), "sglang/srt/layers/quantization/modelopt_quant.py:145"),
    ("0.5.16", "--fp4-gemm-backend", "marlin", None, "sglang-jit", "sglang.jit_kernel.gptq_marlin.gptq_marlin_gemm", (), True,
     "sglang/jit_kernel/utils/arch.py:37", ("nvcc>=12.9",), "sglang/srt/layers/quantization/modelopt_quant.py:1659"),
    ("0.5.16", "--moe-runner-backend", "auto", "flashinfer_cutlass", None, None, (), None,
     None, (), "sglang/srt/arg_groups/overrides.py:2003"),
    ("0.5.16", "--moe-runner-backend", "cutlass", None, "refused", None, (), False,
     "sglang/srt/layers/quantization/modelopt_quant.py:2453", (), "sglang/srt/layers/quantization/modelopt_quant.py:2453"),
    ("0.5.16", "--moe-runner-backend", "flashinfer_cutedsl", None, "cutlass-dsl", "flashinfer.CuteDslMoEWrapper", (), False,
     "flashinfer/fused_moe/cute_dsl/fused_moe.py:322", ("nvidia-cutlass-dsl==4.6.0",), "sglang/srt/layers/moe/moe_runner/flashinfer_cutedsl.py:240"),
    ("0.5.16", "--moe-runner-backend", "flashinfer_cutlass", None, "flashinfer-jit", "flashinfer.cutlass_fused_moe", ("fused_moe_120",), True,
     "flashinfer/jit/fused_moe.py:58", ("nvcc>=12.9",), "sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py:107"),
    ("0.5.16", "--moe-runner-backend", "flashinfer_trtllm", None, "flashinfer-cubin", _TRTLLM_MOE, (), False,
     "sglang/srt/arg_groups/overrides.py:2005", ("flashinfer-cubin",), "sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py:932"),
    ("0.5.16", "--moe-runner-backend", "flashinfer_trtllm_routed", None, "flashinfer-cubin", _TRTLLM_MOE, (), False,
     "sglang/srt/arg_groups/overrides.py:2005", ("flashinfer-cubin",), "sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py:932"),
    ("0.5.16", "--moe-runner-backend", "marlin", None, "sglang-jit", "sglang.jit_kernel.moe_wna16_marlin.moe_wna16_marlin_gemm", (), True,
     "sglang/jit_kernel/utils/arch.py:37", ("nvcc>=12.9",), "sglang/srt/layers/moe/moe_runner/marlin.py:121"),
    ("0.5.23", "--quantization", "modelopt_fp4", None, "flashinfer-jit", "flashinfer.fp4_quantize(backend='cuda')", ("fp4_quantization_120f",), True,
     "flashinfer/jit/fp4_quantization.py:93", ("nvcc>=12.9",), "sglang/srt/layers/quantization/fp4_utils.py:24"),
    ("0.5.23", "--fp4-gemm-backend", "auto", "flashinfer_cutlass", None, None, (), None,
     None, (), "sglang/srt/layers/quantization/fp4_utils.py:160"),
    ("0.5.23", "--fp4-gemm-backend", "flashinfer_cudnn", None, "cudnn", "flashinfer.mm_fp4(backend='cudnn')", (), True,
     "flashinfer/gemm/gemm_base.py:7517", _CUDNN, "sglang/srt/layers/quantization/modelopt_quant.py:169"),
    ("0.5.23", "--fp4-gemm-backend", "flashinfer_cutedsl", None, "cutlass-dsl", "flashinfer.mm_fp4(backend='cute-dsl')", (), True,
     "flashinfer/gemm/gemm_base.py:7614", ("nvidia-cutlass-dsl==4.8.0",), "sglang/srt/layers/quantization/modelopt_quant.py:169"),
    ("0.5.23", "--fp4-gemm-backend", "flashinfer_cutlass", None, "flashinfer-jit", "flashinfer.mm_fp4(backend='cutlass')", ("fp4_gemm_cutlass_sm120",), True,
     "flashinfer/gemm/gemm_base.py:7586", ("nvcc>=12.8",), "sglang/srt/layers/quantization/modelopt_quant.py:169"),
    ("0.5.23", "--fp4-gemm-backend", "flashinfer_trtllm", None, "flashinfer-cubin", "flashinfer.mm_fp4(backend='trtllm')", (), False,
     "flashinfer/gemm/gemm_base.py:7559", ("flashinfer-cubin",), "sglang/srt/layers/quantization/modelopt_quant.py:169"),
    ("0.5.23", "--fp4-gemm-backend", "marlin", None, "sglang-jit", "sglang.kernels.ops.gemm.gptq_marlin.gptq_marlin_gemm", (), True,
     "sglang/kernels/jit/utils/arch.py:82", ("nvcc>=12.8",), "sglang/srt/layers/quantization/modelopt_quant.py:2083"),
    ("0.5.23", "--moe-runner-backend", "auto", "flashinfer_cutlass", None, None, (), None,
     None, (), "sglang/srt/arg_groups/overrides.py:1518"),
    ("0.5.23", "--moe-runner-backend", "cutlass", None, "refused", None, (), False,
     "sglang/srt/layers/quantization/modelopt_quant.py:3145", (), "sglang/srt/layers/quantization/modelopt_quant.py:3145"),
    ("0.5.23", "--moe-runner-backend", "flashinfer_cutedsl", None, "cutlass-dsl", "flashinfer.CuteDslMoEWrapper", (), False,
     "flashinfer/fused_moe/cute_dsl/fused_moe.py:616", ("nvidia-cutlass-dsl==4.8.0",), "sglang/srt/layers/moe/moe_runner/flashinfer_cutedsl.py:318"),
    ("0.5.23", "--moe-runner-backend", "flashinfer_cutlass", None, "flashinfer-jit", "flashinfer.cutlass_fused_moe", ("fused_moe_120",), True,
     "flashinfer/jit/fused_moe.py:108", ("nvcc>=12.8",), "sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py:162"),
    ("0.5.23", "--moe-runner-backend", "flashinfer_trtllm", None, "flashinfer-cubin", _TRTLLM_MOE, (), False,
     "sglang/srt/arg_groups/overrides.py:1520", ("flashinfer-cubin",), "sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py:1207"),
    ("0.5.23", "--moe-runner-backend", "flashinfer_trtllm_routed", None, "flashinfer-cubin", _TRTLLM_MOE, (), False,
     "sglang/srt/arg_groups/overrides.py:1520", ("flashinfer-cubin",), "sglang/srt/layers/moe/moe_runner/flashinfer_trtllm.py:1207"),
    ("0.5.23", "--moe-runner-backend", "marlin", None, "sglang-jit", "sglang.kernels.ops.moe.moe_wna16_marlin.moe_wna16_marlin_gemm", (), True,
     "sglang/kernels/jit/utils/arch.py:82", ("nvcc>=12.8",), "sglang/srt/layers/moe/moe_runner/marlin.py:121"),
))

PROVIDERS = {
    "flashinfer-jit": "a FlashInfer JIT module, compiled by nvcc on the host at first use unless prebuilt",
    "flashinfer-cubin": "trtllm-gen cubins from the flashinfer-cubin package, else downloaded at first use",
    "cudnn": "cuDNN's FP4 GEMM (nvidia-cudnn-frontend and the cuDNN libraries)",
    "cutlass-dsl": "CuTe DSL kernels of nvidia-cutlass-dsl, compiled in the server process at first use",
    "sglang-jit": "SGLang's own JIT kernels (tvm-ffi), compiled by nvcc on the host at first use",
    "refused": "SGLang refuses this choice for NVFP4",
    # no row names it: the sglang-kernel wheels 0.4.5 and 0.4.10 carry no FP4 op (no scaled_fp4_quant,
    # no cutlass_scaled_fp4_mm, no symbol with fp4 in common_ops), measured on the PyPI wheels
    "sgl-kernel": "an op of the sglang-kernel wheel",
}


def jit_cache_path(flashinfer_version, arch, module, base=None):
    """Where FlashInfer looks for a JIT module it built (and builds it): ``$FLASHINFER_WORKSPACE_BASE`` (default: the
    service user's home) ``/.cache/flashinfer/<version>/<arch>/cached_ops/<module>/<module>.so``; ``arch`` is the
    joined target list, ``120f`` or ``120a`` for one SM 12.0 GPU (flashinfer/jit/env.py, flashinfer/jit/core.py)."""
    base = base or "~"
    return os.path.join(base, ".cache", "flashinfer", flashinfer_version, arch, "cached_ops", module, module + ".so")


def launch_flags(args):
    """{flag: value} of the FP4-relevant flags in a unit's launch words (``--flag value`` or ``--flag=value``; the last
    one wins, as with argparse). A null value (a null setting templated into the words: the role leaves that flag out)
    sets nothing."""
    found = {}
    words = [None if w is None else str(w) for w in args or ()]
    for i, word in enumerate(words):
        if word is None:
            continue
        name, value = split_flag(word)
        if name in (GEMM_FLAG, MOE_FLAG, QUANT_FLAG):
            value = value if value is not None else (words[i + 1] if i + 1 < len(words) else None)
            if value is not None:
                found[name] = value
    return found


def rows_for(release, flag):
    return {row["choice"]: row for row in ROWS if row["release"] == release and row["flag"] == flag}


def _problem(flag, value, problem, fix):
    return {"flag": flag, "value": value, "problem": problem, "fix": fix}


def _alternatives(release, flag):
    """The fix for a choice without SM 12.0 kernels: what auto becomes, then the other choices that have them."""
    table = rows_for(release, flag)
    auto = table.get("auto", {}).get("becomes")
    good = [c for c, row in table.items() if row["sm120"] and c != auto]
    text = "use %s %s (what auto becomes on SM 12.0 in SGLang %s)" % (flag, auto, release) if auto else "use"
    return text + ("; other choices with SM 12.0 kernels: %s" % ", ".join(good) if good else "")


def kernel_plan(release, capability, args, quant_algo=None):
    """The rows an NVFP4 unit uses on this GPU and what is wrong with its choices.

    ``args`` are the unit's launch words, ``quant_algo`` the checkpoint's (``hf_quant_config.json``), ``capability``
    the GPU's compute capability (``"12.0"``, ``12.0``, ``120`` or ``(12, 0)``). Returns ``rows`` (the resolved rows
    in use), ``modules`` (FlashInfer JIT modules they load), ``needs`` (what the host must have) and ``problems``
    (each with ``flag``, ``value``, ``problem`` and ``fix``). Nothing is checked for a GPU other than SM 12.0 or a
    checkpoint and flags that are not NVFP4."""
    plan = {"release": release, "nvfp4": False, "rows": [], "modules": [], "needs": [], "problems": []}
    flags = launch_flags(args)
    quant = flags.get(QUANT_FLAG)
    nvfp4_checkpoint = str(quant_algo or "").upper() == "NVFP4"
    if isinstance(capability, (tuple, list)) and len(capability) == 2:
        capability = "%s.%s" % tuple(capability)
    if normalize_compute_cap(capability) != CAPABILITY or not (nvfp4_checkpoint or quant in NVFP4_QUANTIZATIONS):
        return plan
    plan["nvfp4"] = True
    problems = plan["problems"]
    if release not in RELEASES:
        problems.append(_problem(None, release, "SGLang %s is not in the FP4 kernel table (releases: %s)" % (release, ", ".join(RELEASES)),
                                 "pin a tabled SGLang release, or add the release's rows to _fp4_kernels.py with its test"))
        return plan
    if nvfp4_checkpoint and quant not in (None, "modelopt") + NVFP4_QUANTIZATIONS:
        problems.append(_problem(QUANT_FLAG, quant, "the checkpoint is NVFP4 (quant_algo NVFP4) but %s %s names another method" % (QUANT_FLAG, quant),
                                 "drop %s (SGLang reads the checkpoint's quantization config) or set it to modelopt_fp4" % QUANT_FLAG))
    used = []
    for flag in (GEMM_FLAG, MOE_FLAG):
        table = rows_for(release, flag)
        choice = flags.get(flag) or "auto"
        row = table.get(choice)
        if row is not None and row["becomes"]:
            row = table[row["becomes"]]
        if row is None:
            problems.append(_problem(flag, choice, "%s %s is not an NVFP4 choice tabled for SGLang %s on SM 12.0 (tabled: %s)"
                                     % (flag, choice, release, ", ".join(sorted(table))), _alternatives(release, flag)))
            continue
        used.append(row)
        if row["provider"] == "refused":
            problems.append(_problem(flag, choice, "SGLang %s refuses %s %s for NVFP4 (%s)" % (release, flag, row["choice"], row["site"]),
                                     _alternatives(release, flag)))
        elif not row["sm120"]:
            problems.append(_problem(flag, choice, "%s %s has no SM 12.0 kernels in SGLang %s: %s (%s) comes from %s, which has none (%s)"
                                     % (flag, row["choice"], release, row["entry"], row["site"], row["provider"], row["basis"]),
                                     _alternatives(release, flag)))
    if used and used[0]["flag"] == GEMM_FLAG and used[0]["provider"] != "sglang-jit":
        # W4A4 linear layers quantize their activations with fp4_quantize; marlin (W4A16) does not
        used.insert(0, rows_for(release, QUANT_FLAG)["modelopt_fp4"])
    plan["rows"] = used
    for row in used:
        plan["modules"] += [m for m in row["modules"] if m not in plan["modules"]]
        plan["needs"] += [n for n in row["needs"] if n not in plan["needs"]]
    return plan


def nvcc_users(plan, prebuilt=False):
    """{X: rows} of the plan's ``nvcc>=X`` needs; FlashInfer JIT rows need no nvcc on the host when their modules
    were built ahead of time (``prebuilt``)."""
    users = {}
    for row in plan["rows"]:
        if prebuilt and row["provider"] == "flashinfer-jit":
            continue
        for need in row["needs"]:
            if need.startswith("nvcc>="):
                users.setdefault(need[len("nvcc>="):], []).append(row)
    return users


def _jit_what(rows):
    modules = [m for row in rows for m in row["modules"]]
    return ("FlashInfer JIT modules %s" % ", ".join(modules)) if modules else "SGLang's JIT kernels"


def nvcc_minimum(plan, archs=(), prebuilt=False):
    """The oldest nvcc a host needs and why: the first toolkit that compiles each of ``archs`` (``NVCC_FIRST``) and
    each ``nvcc>=X`` of the plan's rows (see ``nvcc_users``). Returns (release or None, [reason, ...])."""
    found = [(NVCC_FIRST[a], "%s needs nvcc %s" % (a, NVCC_FIRST[a])) for a in archs if a in NVCC_FIRST]
    for minimum, rows in nvcc_users(plan, prebuilt).items():
        found.append((minimum, "%s (%s) compile at first use with nvcc %s or newer" % (_jit_what(rows), ", ".join(row["entry"] for row in rows), minimum)))
    if not found:
        return None, []
    top = max((m for m, _why in found), key=version_tuple)
    return top, [why for m, why in found if m == top]


def nvcc_problems(plan, nvcc, prebuilt=False):
    """Problems of a host's nvcc (its version, ``""`` for none; None: not known, nothing checked) for a plan's JIT
    builds: each ``nvcc>=X`` the plan needs must be met, or the server compiles at first request and fails there.
    ``prebuilt``: the FlashInfer JIT modules were built ahead of time, so only the other JIT kernels need nvcc."""
    if nvcc is None:
        return []
    out = []
    for minimum, users in nvcc_users(plan, prebuilt).items():
        if nvcc and version_tuple(nvcc) is not None and version_tuple(nvcc) >= version_tuple(minimum):
            continue
        problem = ("the host has no nvcc" if not nvcc else "the host's nvcc %s is older than %s" % (nvcc, minimum))
        fix = "install a CUDA toolkit %s or newer (nvcc %s) on the server" % (minimum, minimum)
        if any(row["provider"] == "flashinfer-jit" for row in users):
            fix += (", or build the FP4 modules ahead of time with the fp4_kernels role (site.yml: sglang_build_fp4_kernels: "
                    "true; modules built another way: sglang_fp4_modules_prebuilt: true), which puts them into the venv's "
                    "flashinfer/data/aot, where FlashInfer loads them without compiling")
        out.append(_problem(None, nvcc or None, "%s, and %s (%s) compile at the first request with nvcc %s or newer"
                            % (problem, _jit_what(users), ", ".join(row["entry"] for row in users), minimum), fix))
    return out


def launch_problems(release, capability, args, quant_algo=None, nvcc=None, prebuilt=False):
    """Every problem of a unit's FP4 launch on this GPU: its backend choices against the table and, when ``nvcc`` is
    given, the host's nvcc against what the JIT kernels need (``prebuilt``: see ``nvcc_problems``). Each problem has
    ``flag``, ``value``, ``problem`` and ``fix``; an empty list when the launch has SM 12.0 kernels for everything it
    uses."""
    plan = kernel_plan(release, capability, args, quant_algo)
    return plan["problems"] + (nvcc_problems(plan, nvcc, prebuilt) if plan["rows"] else [])
