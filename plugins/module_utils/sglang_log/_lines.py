# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every log line the SGLang log audit keys on, with where it comes from.

One table, so that a test can check each line against the installed SGLang's source (and, for lines
other programs print, against theirs): a line SGLang stops printing, or prints in another wording,
fails that test instead of silently turning a signal into "unknown". A rule or fact that keys on a
line names its entry here (``line``/``lines``).

Fields of an entry:

- ``id``: the name facts and rules refer to;
- ``regex``: what the message must match, AT ITS START (``re.match`` on the message: for a ``record``
  the text after SGLang's ``[time ranks]`` prefix, for a ``print`` the line itself); text that only
  appears later in a message, as in an echoed prompt, never matches;
- ``literal``: plain text every matching line contains (the scanner looks for it before parsing), or a
  tuple of texts one of which it contains;
- ``form``: ``record`` (a record of SGLang's logger: accepted only with SGLang's prefix), ``print``
  (printed by SGLang without a prefix: a bare line), ``uvicorn`` (uvicorn's own record, after its
  ``LEVEL:`` prefix), ``text`` (searched anywhere in a line that is neither a request echo nor an
  access line: exception lines of tracebacks, which carry no prefix);
- ``origin`` and ``source``: the package and its file that prints it (``origin`` ``sglang``,
  ``uvicorn`` or ``python`` (the standard library) are checked against the installed source;
  ``external`` lines come from compiled code, torch or CUDA, and say so in ``source``);
- ``emitters``: the calls that print it there (``info``, ``warning``, ``error``, ``debug``, ``print``,
  ``raise`` for an exception's text, ``assign`` for a message built in a variable);
- ``versions``: the SGLang releases it was seen in; ``last_seen`` is set for lines SGLang 0.5.23 no
  longer prints (the parser still reads them in older logs);
- ``examples``: messages as the checked source prints them; ``legacy``: older wordings still read.
"""

from __future__ import annotations

CHECKED_SGLANG = "0.5.23"

LOG_LINES = (
    # --- facts: the configuration as SGLang resolved it ---------------------------------------------------
    {
        "id": "server_args_dump", "regex": r"server_args=(?=ServerArgs\(|\{)", "literal": "server_args=",
        "form": "record", "origin": "sglang", "source": "srt/entrypoints/engine.py", "emitters": ("info",),
        "versions": "all; ServerArgs(...) repr through 0.5.18 (f\"{server_args=}\"), a dict of resolved values since 0.5.19 "
                    "(server_args.resolved_dict())",
        # the same text before the value in every release: what changed is the value it prints
        "examples": ("server_args={'model_path': '/models/qwen', 'kv_cache_dtype': 'bf16', 'tp_size': 8}",
                     "server_args=ServerArgs(model_path='/models/qwen', kv_cache_dtype='auto', tp_size=4)"),
        "legacy": (),
    },
    {
        "id": "fp8_no_scales", "regex": r"Using FP8 KV cache but no scaling factors provided",
        "literal": "Using FP8 KV cache but no scaling factors provided",
        "form": "record", "origin": "sglang", "emitters": ("warning",),
        "source": "srt/model_executor/model_runner_components/load_model_utils.py",
        "versions": "all; only for an explicit --kv-cache-dtype fp8_e4m3 (never under auto) since 0.5.23",
        "examples": ("Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.",),
        "legacy": ("Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0. "
                   "This may lead to less accurate results!",),
    },
    {
        "id": "kv_dtype_used", "regex": r"Using KV cache dtype: (?P<dtype>torch\.\w+)", "literal": "Using KV cache dtype: ",
        "form": "record", "origin": "sglang", "source": "srt/model_executor/model_runner.py", "emitters": ("info",),
        "versions": "0.4 to 2026-04 dev builds", "last_seen": "2026-04 dev build 0.0.0.dev11582 (fixture 005)",
        "examples": (), "legacy": ("Using KV cache dtype: torch.float8_e4m3fn",),
    },
    {
        # a label ("Full", "SWA", ...) may come first; with SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1 the pool is reserved
        # address space first ("VA upper bound")
        "id": "kv_pool",
        "regex": r"(?:[\w.-]+ ){0,6}KV Cache (?:is allocated|VA upper bound)\.", "literal": "KV Cache ",
        "form": "record", "origin": "sglang", "source": "srt/mem_cache/memory_pool.py", "emitters": ("info",),
        "versions": "all; dtype since 2026, VA upper bound in 0.5.23",
        "examples": ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 327310, K size: 2.50 GB, V size: 2.50 GB",
                     "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 3262823, KV size: 186.77 GB",
                     "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 454112, K size: 3.46 GB, V size: 3.46 GB",
                     "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 8192, K size: 0.10 GB, V size: 0.10 GB"),
        "legacy": ("KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB",
                   "KV Cache is allocated. K size: 24.48 GB, V size: 24.48 GB."),
    },
    {
        "id": "mamba_pool", "regex": r"Mamba Cache is allocated\. ", "literal": "Mamba Cache is allocated",
        "form": "record", "origin": "sglang", "source": "srt/mem_cache/memory_pool.py", "emitters": ("info",),
        "versions": "hybrid (GDN/Mamba) models since 2025",
        "examples": ("Mamba Cache is allocated. max_mamba_cache_size: 186, conv_state size: 0.10GB, ssm_state size: 4.38GB ",
                     "Mamba Cache is allocated. max_mamba_cache_size: 48, conv_state size: 0.09GB, ssm_state size: 6.46GB "
                     "intermediate_ssm_state_cache size: 1.20GB intermediate_conv_window_cache size: 0.02GB "),
        "legacy": (),
    },
    {
        "id": "max_total_num_tokens", "regex": r"max_total_num_tokens=(?P<n>\d+), ", "literal": "max_total_num_tokens=",
        "form": "record", "origin": "sglang", "source": "srt/managers/scheduler.py", "emitters": ("info",),
        "versions": "all (TP0 only)",
        "examples": ("max_total_num_tokens=1557504, chunked_prefill_size=1024, max_prefill_tokens=16384, "
                     "max_running_requests=8, context_len=8192, available_gpu_mem=3.39 GB",),
        "legacy": ("max_total_num_tokens=46611, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=4097, "
                   "context_len=131072",),
    },
    {
        "id": "max_total_num_tokens_offline", "regex": r"max_total_num_tokens=(?P<n>\d+)\s*$", "literal": "max_total_num_tokens=",
        "form": "print", "origin": "sglang", "source": "benchmark/one_batch.py", "emitters": ("rank_print",),
        "versions": "all (offline one-batch benchmark)",
        "examples": ("max_total_num_tokens=4096",), "legacy": (),
    },
    {
        "id": "context_tp_size", "regex": r"Context: .*?\btp_size=(?P<tp>\d+)", "literal": "Context: ",
        "form": "record", "origin": "sglang", "source": "srt/model_executor/model_runner.py", "emitters": ("warning",),
        "versions": "all (printed when a rank cannot select its GPU)",
        "examples": ("Context: self.device='cuda' get_device().gpu_id=0 os.environ.get('CUDA_VISIBLE_DEVICES')='0,1' "
                     "get_parallel().tp_rank=0 get_parallel().tp_size=2",),
        "legacy": ("Context: self.device='cuda' self.gpu_id=0 os.environ.get('CUDA_VISIBLE_DEVICES')='0,1,2,3,0,1,2,3' "
                   "self.tp_rank=0 self.tp_size=2",),
    },
    {
        "id": "kv_dtype_set_by_model", "regex": r"Setting KV cache dtype to \w+ for ", "literal": "Setting KV cache dtype to ",
        "form": "record", "origin": "sglang", "source": "srt/arg_groups/overrides.py", "emitters": ("warning",),
        "versions": "2026 and later", "examples": ("Setting KV cache dtype to fp8_e4m3 for DeepseekV4ForCausalLM.",), "legacy": (),
    },
    # --- startup phases -----------------------------------------------------------------------------------
    {
        "id": "load_weight_begin", "regex": r"Load weight begin\.", "literal": "Load weight begin.",
        "form": "record", "origin": "sglang", "source": "srt/model_executor/model_runner.py", "emitters": ("info",),
        "versions": "all", "examples": ("Load weight begin. avail mem=93.10 GB",), "legacy": (),
    },
    {
        # an unquantized model prints no quant= part and, since 0.5.x, no dtype=
        "id": "load_weight_end", "regex": r"Load weight end\.", "literal": "Load weight end.",
        "form": "record", "origin": "sglang", "source": "srt/model_executor/model_runner.py", "emitters": ("info",),
        "versions": "all",
        "examples": ("Load weight end. elapsed=5.46 s, type=Qwen3ForCausalLM, avail mem=60.00 GB, mem usage=16.10 GB.",
                     "Load weight end. elapsed=14.05 s, type=Qwen3_5MoeForConditionalGeneration, quant=modelopt_fp4, "
                     "quant_algo=NVFP4, avail mem=60.00 GB, mem usage=33.43 GB."),
        "legacy": ("Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.90 GB, mem usage=23.23 GB.",),
    },
    {
        "id": "memory_pool_end", "regex": r"Memory pool end\.", "literal": "Memory pool end.",
        "form": "record", "origin": "sglang", "source": "srt/mem_cache/kv_cache_configurator.py", "emitters": ("info",),
        "versions": "all", "examples": ("Memory pool end. avail mem=8.40 GB",), "legacy": (),
    },
    {
        "id": "capture_graph_begin", "regex": r"Capture [\w .-]*?graph begin", "literal": "Capture ",
        "form": "record", "origin": "sglang", "source": "srt/model_executor/model_runner_components/cuda_graph_setup.py",
        "emitters": ("info",), "versions": "all; 'Capture <role> <phase> CUDA graph begin.' in 0.5.23",
        "examples": ("Capture target prefill CUDA graph begin. backend=full, num_tokens=[64, 128], avail mem=8.10 GB",),
        "legacy": ("Capture cuda graph begin. This can take up to several minutes. avail mem=8.10 GB",
                   "Capture target decode NPU graph begin. backend=full, num_tokens_per_bs=1"),
    },
    {
        "id": "uvicorn_running", "regex": r"Uvicorn running on ", "literal": "Uvicorn running on ",
        "form": "record", "origin": "sglang", "source": "srt/entrypoints/http_server.py", "emitters": ("info",),
        "versions": "0.5.23 (with --enable-http-worker-reuseport)",
        "examples": ("Uvicorn running on 127.0.0.1:30000 with 4 SO_REUSEPORT workers",), "legacy": (),
    },
    {
        "id": "uvicorn_running_own", "regex": r"Uvicorn running on ", "literal": "Uvicorn running on ",
        "form": "uvicorn", "origin": "uvicorn", "source": "config.py", "emitters": ("assign",),
        "versions": "uvicorn 0.51 and later (SGLang 0.5.23 needs uvicorn>=0.51)",
        "examples": ("Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",), "legacy": (),
    },
    {
        # uvicorn's lifespan startup ends: the socket is bound right after; no startup record of SGLang follows
        "id": "uvicorn_startup_complete", "regex": r"Application startup complete\.", "literal": "Application startup complete",
        "form": "uvicorn", "origin": "uvicorn", "source": "lifespan/on.py", "emitters": ("info",),
        "versions": "all", "examples": ("Application startup complete.",), "legacy": (),
    },
    {
        # a ValueError of a request (a duplicate rid, a bad field), logged with its client text raw
        "id": "http_request_error", "regex": r"\[http_server\] Error: ", "literal": "[http_server] Error: ",
        "form": "record", "origin": "sglang", "source": "srt/entrypoints/http_server.py", "emitters": ("error",),
        "versions": "all", "examples": ("[http_server] Error: Duplicate request ID detected: rid-1",), "legacy": (),
    },
    {
        "id": "ready", "regex": r"The server is fired up and ready to roll!", "literal": "The server is fired up and ready to roll!",
        "form": "record", "origin": "sglang", "source": "srt/entrypoints/http_server.py", "emitters": ("info",),
        "versions": "all", "examples": ("The server is fired up and ready to roll!",), "legacy": (),
    },
    # --- findings -----------------------------------------------------------------------------------------
    {
        "id": "scheduler_exception", "regex": r"Scheduler hit an exception: ", "literal": "Scheduler hit an exception",
        "form": "record", "origin": "sglang", "source": "srt/managers/scheduler.py", "emitters": ("error",),
        "versions": "all", "examples": ("Scheduler hit an exception: Traceback (most recent call last):",), "legacy": (),
    },
    {
        "id": "child_sigquit", "regex": r"Received sigquit from a child process", "literal": "Received sigquit from a child process",
        "form": "record", "origin": "sglang", "source": "srt/entrypoints/engine.py", "emitters": ("error",),
        "versions": "all", "examples": ("Received sigquit from a child process. It usually means the child failed.",), "legacy": (),
    },
    {
        "id": "health_check_failed", "regex": r"Health check failed\. Server couldn't get a response",
        "literal": "Health check failed. Server couldn't get a response",
        "form": "record", "origin": "sglang", "source": "srt/entrypoints/http_server.py",
        "emitters": ("error",), "versions": "all",
        "examples": ("Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. "
                     "tic start time: 10:01:02. last_heartbeat time: 10:00:40",), "legacy": (),
    },
    {
        "id": "kv_pool_full", "regex": r"KV cache pool is full\. Retract requests", "literal": "KV cache pool is full. Retract requests",
        "form": "record", "origin": "sglang", "source": "srt/managers/scheduler.py", "emitters": ("assign",),
        "versions": "all", "examples": ("KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 512",),
        "legacy": ("KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.7000 -> 0.8000",),
    },
    {
        "id": "param_not_found", "regex": r"Parameter \S+ not found in params_dict", "literal": " not found in params_dict",
        "form": "record", "origin": "sglang", "source": "srt/models/glm4_moe.py", "emitters": ("warning",),
        "versions": "all (many model classes)",
        "examples": ("Parameter model.layers.3.mlp.gate.e_score_correction_bias not found in params_dict",), "legacy": (),
    },
    {
        "id": "moe_default_config", "regex": r"Using default MoE kernel config\. Performance might be sub-optimal",
        "literal": "Using default MoE kernel config. Performance might be sub-optimal",
        "form": "record", "origin": "sglang",
        "source": "srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py", "emitters": ("warning",),
        "versions": "all (Triton MoE runner)",
        "examples": ("Using default MoE kernel config. Performance might be sub-optimal! Config file not found at "
                     "/x/E=512,N=128,device_name=NVIDIA_H200.json, you can create them with "
                     "https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton",), "legacy": (),
    },
    {
        "id": "fp8_block_default_config", "regex": r"Using default W8A8 Block FP8 kernel config\. Performance might be sub-optimal",
        "literal": "Using default W8A8 Block FP8 kernel config", "form": "record", "origin": "sglang",
        "source": "kernels/ops/gemm/fp8_kernel.py", "emitters": ("warning",), "versions": "all (Triton FP8 block GEMM)",
        "examples": ("Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! Config file not found at /x.json",),
        "legacy": (),
    },
    {
        # raised as RuntimeError(msg, cls): the message is printed unformatted, "%s" included
        "id": "fp8_scales_unsupported",
        "regex": r".*?Using FP8 KV cache and scaling factors provided but model (?:%s|\S+) does not support loading scaling factors",
        "literal": "Using FP8 KV cache and scaling factors provided but model ",
        "form": "text", "origin": "sglang",
        "source": "srt/model_executor/model_runner_components/load_model_utils.py", "emitters": ("raise",), "versions": "all",
        "examples": ("Using FP8 KV cache and scaling factors provided but model %s does not support loading scaling factors.",),
        "legacy": (),
    },
    {
        "id": "not_enough_memory", "regex": r".*?Not enough memory\. Please try to increase --mem-fraction-static",
        "literal": "Not enough memory. Please try to increase --mem-fraction-static",
        "form": "text", "origin": "sglang", "source": "srt/model_executor/pool_configurator.py",
        "emitters": ("assign",), "versions": "all",
        "examples": ("Not enough memory. Please try to increase --mem-fraction-static.",), "legacy": (),
    },
    {
        "id": "rank_load_mismatch",
        "regex": r".*?could finish the model loading, but there are other ranks that didn't finish loading",
        "literal": "could finish the model loading, but there are other ranks that didn't finish loading",
        "form": "text", "origin": "sglang",
        "source": "srt/model_executor/model_runner_components/load_model_utils.py", "emitters": ("raise",), "versions": "all",
        "examples": ("TP rank 3 could finish the model loading, but there are other ranks that didn't finish loading. It is likely due "
                     "to unexpected failures (e.g., OOM) or a slow node.",), "legacy": (),
    },
    {
        "id": "cuda_oom", "regex": r".*?(?:CUDA out of memory|OutOfMemoryError)", "literal": ("CUDA out of memory", "OutOfMemoryError"),
        "form": "text", "origin": "external", "source": "torch (c10 CUDA caching allocator, C++)", "emitters": (),
        "versions": "all", "examples": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",),
        "legacy": ("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB.",),
    },
    {
        "id": "no_kernel_image", "regex": r".*?no kernel image is available for execution on the device",
        "literal": "no kernel image is available for execution on the device",
        "form": "text", "origin": "external",
        "source": "CUDA runtime (cudaGetErrorString), via torch and sgl-kernel", "emitters": (), "versions": "all",
        "examples": ("CUDA error (/sgl-kernel/flash_fwd_launch_template.h:166): no kernel image is available for execution on the device",),
        "legacy": (),
    },
    # --- startup failures that are no SGLang record ------------------------------------------------------
    {
        "id": "port_in_use", "regex": r".*?(?:error while attempting to bind on address|[Aa]ddress already in use)",
        "literal": ("error while attempting to bind on address", "ddress already in use"), "form": "text", "origin": "python",
        "source": "asyncio/base_events.py", "emitters": ("assign",),
        "versions": "all (uvicorn logs the OSError of asyncio's create_server)",
        "examples": ("[Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",),
        "legacy": ("[Errno 98] Address already in use",),
    },
    {
        "id": "argparse_unrecognized", "regex": r".*?error: unrecognized arguments: ", "literal": "error: unrecognized arguments",
        "form": "text", "origin": "python", "source": "argparse.py", "emitters": ("assign",), "versions": "all",
        "examples": ("launch_server.py: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer",), "legacy": (),
    },
    {
        "id": "argparse_bad_argument", "regex": r".*?error: argument -[-\w/]+: ", "literal": "error: argument -",
        "form": "text", "origin": "python", "source": "argparse.py", "emitters": ("assign",), "versions": "all",
        "examples": ("launch_server.py: error: argument --kv-cache-dtype: invalid choice: 'fp16' (choose from auto, fp8_e5m2)",),
        "legacy": (),
    },
    {
        "id": "argparse_missing", "regex": r".*?error: the following arguments are required: ",
        "literal": "error: the following arguments are required", "form": "text", "origin": "python", "source": "argparse.py",
        "emitters": ("error",), "versions": "all", "examples": ("launch_server.py: error: the following arguments are required: --model-path",),
        "legacy": (),
    },
    # --- tracebacks ---------------------------------------------------------------------------------------
    {
        "id": "traceback", "regex": r".*?Traceback \(most recent call last\)", "literal": "Traceback (most recent call last)",
        "form": "text", "origin": "python", "source": "traceback.py", "emitters": ("emit",), "versions": "all",
        "examples": ("Traceback (most recent call last):",), "legacy": (),
    },
    {
        "id": "traceback_chained", "regex": r"(?:During handling of the above exception|The above exception was the direct cause)",
        "literal": "above exception", "form": "text", "origin": "python", "source": "traceback.py", "emitters": ("assign",),
        "versions": "all", "examples": ("During handling of the above exception, another exception occurred:",
                                        "The above exception was the direct cause of the following exception:"),
        "legacy": (),
    },
    {
        "id": "exception_ignored", "regex": r"Exception ignored in", "literal": "Exception ignored in", "form": "text",
        "origin": "external", "source": "CPython (Python/errors.c, PyErr_WriteUnraisable)", "emitters": (), "versions": "all",
        "examples": ("Exception ignored in: <function Engine.__del__ at 0x7f>",), "legacy": (),
    },
    # --- offline benchmarks: a traceback after their results is exit noise ------------------------------------
    {
        "id": "offline_total_latency", "regex": r"Total\. latency: ", "literal": "Total. latency", "form": "print",
        "origin": "sglang", "source": "benchmark/one_batch.py", "emitters": ("rank_print",), "versions": "all",
        "examples": ("Total. latency:  0.476 s, throughput:     35.72 token/s",), "legacy": (),
    },
    {
        "id": "offline_warmup", "regex": r"Warmup \.\.\.", "literal": "Warmup ...", "form": "print",
        "origin": "sglang", "source": "benchmark/one_batch.py", "emitters": ("rank_print",), "versions": "all",
        "examples": ("Warmup ...",), "legacy": (),
    },
    {
        "id": "offline_benchmark", "regex": r"Benchmark \.\.\.", "literal": "Benchmark ...", "form": "print",
        "origin": "sglang", "source": "benchmark/one_batch.py", "emitters": ("rank_print",), "versions": "all",
        "examples": ("Benchmark ...",), "legacy": (),
    },
    {
        "id": "offline_throughput_result", "regex": r"=*\s*Offline Throughput Benchmark Result",
        "literal": "Benchmark Result", "form": "print", "origin": "sglang",
        "source": "multimodal_gen/benchmarks/bench_offline_throughput.py", "emitters": ("format",), "versions": "all",
        "examples": (" Offline Throughput Benchmark Result ",), "legacy": (),
    },
)

BY_ID = dict((entry["id"], entry) for entry in LOG_LINES)

# The records of a server start: facts and startup phases. Once the server accepts requests a look-alike of one
# is never a fact (sglang_log._facts), and the rule startup_record_after_ready reports it.
STARTUP_LINE_IDS = ("server_args_dump", "fp8_no_scales", "kv_dtype_used", "kv_pool", "mamba_pool", "max_total_num_tokens",
                    "context_tp_size", "kv_dtype_set_by_model", "load_weight_begin", "load_weight_end", "memory_pool_end",
                    "capture_graph_begin")
