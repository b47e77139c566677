#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test-only stand-in for an SGLang 0.5.23 server (``python -m sglang.launch_server`` / ``sglang serve``).

The real server needs GPUs; lab hosts have none. This script takes SGLang's launch arguments, reads the
checkpoint's ``config.json`` / ``hf_quant_config.json`` and behaves like SGLang 0.5.23 where a deployment looks
(every log line it prints is one of SGLANG_LOG, each checked against SGLang's source by tests/unit):

* startup log lines on stdout (unbuffered): the ``server_args={...}`` dump (a dict of the resolved server args,
  ``api_key`` in clear, as SGLang logs it), per-rank ``[ts TPn]`` lines (``Load weight begin/end``,
  ``Mamba Cache is allocated``, ``KV Cache is allocated. dtype: ...`` with sizes computed from the model config,
  ``Memory pool end``, ``Capture target decode CUDA graph begin/end``, the TP0 ``max_total_num_tokens=...``
  line), uvicorn's lines and ``The server is fired up and ready to roll!``.
* the KV-cache dtype resolution: ``--kv-cache-dtype auto`` plus a checkpoint whose KV metadata says FP8 runs
  ``torch.float8_e4m3fn`` silently: the model runner resolves ``auto`` at load and keeps that to itself, so
  ``/server_info`` says ``auto`` at the top level and in ``internal_states``; only the pool line's dtype and
  size show it. The "no scaling factors" warning is printed on every rank (target and draft model) only when
  the server args say ``fp8_e4m3`` (an explicit flag, or ``--attention-backend tokenspeed_mla``, which SGLang
  0.5.23 turns into ``fp8_e4m3`` over any flag) and no ``--quantization-param-path`` is given.
* HTTP (only on node rank 0, and only once "uvicorn" is up, after the weights are loaded): ``/health`` and
  ``/health_generate`` (503 during warm-up, 200 when ready), ``/server_info`` and ``/get_server_info`` in
  0.5.23's shape (every ServerArgs field as resolved, ``launch_command`` as typed with its secrets in clear, the
  scheduler's init info, ``internal_states`` with 0.5.23's ``memory_usage`` fields, ``version``), ``/model_info``
  and ``/get_model_info``, ``/v1/models``, ``/v1/chat/completions`` (streaming SSE and not), ``/v1/completions``,
  ``/generate``, ``/flush_cache`` and ``/metrics`` (``--enable-metrics``). ``--api-key`` requires
  ``Authorization: Bearer KEY`` (401 ``{"error": "Unauthorized"}``); health and metrics are exempt.
* generation is deterministic: a fixed text, one word per token, ``--sim-ttft-ms`` before the first token and
  ``--sim-tokens-per-second`` per request after it (slowed by ``--sim-batch-slowdown`` per extra concurrent
  request: 170 tok/s alone gives about 2,100 tok/s aggregate at 32 requests). A prompt that states a needle
  (``... needle is: VALUE`` / ``needle: VALUE``) and asks about the needle is answered ``The needle is VALUE.``
* faults (``--sim-fault`` or ``SGLANG_SIM_FAULT``):
  ``oom`` prints a CUDA out-of-memory scheduler traceback while the weights load and exits 1;
  ``crash`` exits 1 within a fraction of a second on every start (a crash loop under ``Restart=``);
  ``hang`` starts uvicorn but never finishes warm-up (``/health`` stays 503);
  ``port_in_use`` prints uvicorn's "address already in use" error and exits 1 (also what happens for real
  when the port is taken);
  ``ignore_sigterm`` spawns a child process (``sglang::scheduler_TP0`` in its command line) that ignores
  SIGTERM and outlives the main process (it exits by itself after ``SGLANG_SIM_CHILD_MAX_SECONDS``, 600);
  ``degrade_recall`` corrupts needle answers whose needle sits deeper than ``--sim-recall-depth``
  (a fraction of the prompt) - the hook for accuracy-canary tests.
* ``SGLANG_SIM_STATE_FILE``: a JSON file with the simulator's view (parsed arguments, resolved KV dtype,
  pool sizes, node layout, status, child pids), rewritten at start, when ready and at exit.
* multi-node (``--nnodes N --node-rank R --dist-init-addr HOST:PORT``): like torch.distributed's TCP store, node 0
  listens on PORT and waits for the other N-1 nodes, each of which connects to HOST:PORT (retrying) and reports its
  rank, ``--nnodes`` and ``--tp-size``; node 0 refuses a mismatch. A node that waits longer than
  ``--sim-rendezvous-timeout`` logs torch's timeout error and exits 1. The state file records who joined. Each
  joined node keeps its connection open for its life; when it dies, node 0 logs NCCL's error and exits 1 (as a
  collective with a dead peer fails), so node 0 never serves alone.
* SIGTERM / SIGINT: logs the shutdown and exits 0.

Every ``--sim-*`` option can also be set with an environment variable ``SGLANG_SIM_<NAME>`` (flags win).
Unknown SGLang flags are tolerated with a warning line. Leading ``-m sglang.launch_server`` or ``serve``
words are ignored, so the script can stand in for either command line.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GIB = float(1 << 30)

KV_CACHE_DTYPE_CHOICES = ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"]
# flag value -> (torch dtype as logged, bytes per element; packed FP4 counts half a byte, scales ignored)
KV_DTYPES = {
    "fp8_e5m2": ("torch.float8_e5m2", 1.0),
    "fp8_e4m3": ("torch.float8_e4m3fn", 1.0),
    "mxfp8": ("torch.float8_e4m3fn", 1.0),
    "bf16": ("torch.bfloat16", 2.0),
    "bfloat16": ("torch.bfloat16", 2.0),
    "nvfp4": ("torch.float4_e2m1fn_x2", 0.5),
    "fp4_mx_block16": ("torch.float4_e2m1fn_x2", 0.5),
}
MODEL_DTYPES = {
    "bfloat16": ("torch.bfloat16", 2.0),
    "float16": ("torch.float16", 2.0),
    "half": ("torch.float16", 2.0),
    "float32": ("torch.float32", 4.0),
}
FAULTS = ("none", "oom", "crash", "hang", "port_in_use", "ignore_sigterm", "degrade_recall")

# Every line the simulator logs as SGLang 0.5.23 does, with the file that prints it (under sglang/srt/);
# tests/unit/test_sglang_sim.py matches each printed line against that file's format strings.
SGLANG_LOG = {
    "deprecated_backend": ("--%s=%s is deprecated; use '%s' instead.", "arg_groups/serving_hook.py"),
    "tokenspeed_fp8": ("tokenspeed_mla required FP8 KV; setting --kv-cache-dtype=fp8_e4m3.", "arg_groups/serving_hook.py"),
    "server_args": ("server_args=%s", "entrypoints/engine.py"),
    "load_begin": ("Load weight begin. avail mem=%.2f GB", "model_executor/model_runner.py"),
    "nvfp4": ("Detected nvfp4 checkpoint.", "layers/quantization/modelopt_quant.py"),
    "fp8_no_scales": ("Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.",
                      "model_executor/model_runner_components/load_model_utils.py"),
    # the quantization part (with its ", ") is absent for an unquantized model
    "load_end": ("Load weight end. elapsed=%.2f s, type=%s, %savail mem=%.2f GB, mem usage=%.2f GB.",
                 "model_executor/model_runner.py"),
    "mamba_pool": ("Mamba Cache is allocated. max_mamba_cache_size: %d, conv_state size: %.2fGB, ssm_state size: %.2fGB ",
                   "mem_cache/memory_pool.py"),
    "kv_pool": ("KV Cache is allocated. dtype: %s, #tokens: %d, K size: %.2f GB, V size: %.2f GB", "mem_cache/memory_pool.py"),
    "pool_end": ("Memory pool end. avail mem=%.2f GB", "mem_cache/kv_cache_configurator.py"),
    "linear_backend": ("Linear attention kernel backend: decode=%s, prefill=%s, verify=%s", "layers/attention/linear/utils.py"),
    "hybrid_gdn": ("Using hybrid linear attention backend for hybrid GDN models.", "layers/attention/attention_registry.py"),
    "graph_begin": ("Capture target %s CUDA graph begin. backend=full, num_tokens_per_req=%d, avail mem=%.2f GB",
                    "model_executor/model_runner_components/cuda_graph_setup.py"),
    "graph_end": ("Capture target %s CUDA graph end. bs=%s, elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB.",
                  "model_executor/model_runner_components/cuda_graph_setup.py"),
    "max_tokens": ("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, max_running_requests=%d, "
                   "context_len=%d, available_gpu_mem=%.2f GB", "managers/scheduler.py"),
    "ready": ("The server is fired up and ready to roll!", "entrypoints/http_server.py"),
    # the pool usage parts come from managers/scheduler_components/pool_stats_observer.py
    "prefill_batch": ("Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: %d, %s#running-req: %d, #queue-req: %d, "
                      "#pending-token: %d, cuda graph: %s, input throughput (token/s): %.2f",
                      "managers/scheduler_components/metrics_reporter.py"),
    "decode_batch": ("Decode batch, #running-req: %d, %scuda graph: %s, gen throughput (token/s): %.2f, #queue-req: %d",
                     "managers/scheduler_components/metrics_reporter.py"),
    "scheduler_exception": ("Scheduler hit an exception: %s", "managers/scheduler.py"),
    "sigquit": ("Received sigquit from a child process. It usually means the child failed.", "entrypoints/engine.py"),
}
# backend -> what SGLang 0.5.23 renames it to; it also sets --kv-cache-dtype fp8_e4m3 (arg_groups/serving_hook.py)
FP8_ALIAS_BACKENDS = {"tokenspeed_mla": "cutedsl_mla"}

# name -> (type, default, help); each is --sim-NAME and env SGLANG_SIM_NAME
SIM_OPTIONS = {
    "load_seconds": (float, 2.0, "time the weights take to load"),
    "warmup_seconds": (float, 0.5, "time between uvicorn start and ready (503 meanwhile)"),
    "tokens_per_second": (float, 170.0, "decode rate of one request alone"),
    "ttft_ms": (float, 80.0, "time to the first token"),
    "batch_slowdown": (float, 0.05, "per-request rate = rate / (1 + slowdown * (running - 1))"),
    "output_tokens": (int, 32, "completion length when the request sets no max_tokens"),
    "fault": (str, "none", "one of: " + ", ".join(FAULTS)),
    "recall_depth": (float, 0.5, "degrade_recall: needles deeper than this fraction of the prompt are corrupted"),
    "gpu_mem_gib": (float, 95.59, "memory of each simulated GPU (RTX PRO 6000: 97887 MiB)"),
    "weight_gib": (float, 29.9, "weights per GPU"),
    "version": (str, "0.5.23", "version reported by /server_info"),
    "state_file": (str, None, "JSON file with the simulator's view"),
    "rendezvous_timeout": (float, 60.0, "multi-node: how long the nodes wait for each other at --dist-init-addr"),
}

# SGLang 0.5.23's ServerArgs fields in order (sglang/srt/arg_groups/field_order.py; tests/unit/test_sglang_sim.py
# compares them with the installed package) and the values its parser gives when only --model-path is set
# (prepare_server_args([...]).resolved_dict(), read 2026-12-01): False for FALSE_FIELDS, the value listed in
# SERVER_ARGS_DEFAULTS, else None.
SERVER_ARGS_FIELDS = tuple("""
    model_path tokenizer_path tokenizer_mode tokenizer_backend tokenizer_worker_num detokenizer_worker_num
    skip_tokenizer_init load_format model_loader_extra_config trust_remote_code context_length is_embedding
    enable_multimodal revision model_impl model_config_parser json_model_override_args dtype quantization
    quantization_param_path kv_cache_dtype enable_fp32_lm_head modelopt_quant modelopt_checkpoint_restore_path
    modelopt_checkpoint_save_path modelopt_export_path quantize_and_serve rl_quant_profile enable_tf32_matmul
    mem_fraction_static max_running_requests max_queued_requests max_total_tokens chunked_prefill_size
    prefill_decode_interval enable_dynamic_chunking max_prefill_tokens prefill_max_requests schedule_policy
    enable_priority_scheduling disable_priority_preemption default_priority_value abort_on_priority_when_disabled
    schedule_low_priority_values_first priority_scheduling_preemption_threshold retraction_policy
    schedule_conservativeness page_size c128_page_size swa_full_tokens_ratio disable_hybrid_swa_memory
    radix_eviction_policy radix_eviction_policy_config prefill_only_disable_kv_cache disable_radix_cache
    enable_page_major_kv_layout enable_unified_memory disable_chunked_prefix_cache disable_overlap_schedule
    num_continuous_decode_steps scheduler_recv_interval enable_mixed_chunk nccl_port dist_timeout dist_init_addr
    gated_launch_port nnodes node_rank tp_size dcp_size pp_size pp_max_micro_batch_size pp_async_batch_depth dp_size
    attn_dp_size load_balance_method attn_cp_size moe_dp_size dwdp_size dcp_comm_backend dcp_replicate_q_proj
    enable_prefill_cp cp_strategy enable_dsa_cache_layer_split enable_cp_decode_attn_tp enable_kv_cache_sharding
    enable_dp_attention enable_dp_attention_local_control_broadcast enable_dp_lm_head enable_tp_lm_head_all_to_all
    enable_attn_tp_input_scattered enable_shared_experts_attn_tp shared_experts_tp_size enable_dense_mlp_attn_tp
    enable_layernorm_sp disable_attn_tp_gather enable_p2p_check device base_gpu_id gpu_id_step random_seed
    mlx_enable_sampling watchdog_timeout soft_watchdog_timeout sleep_on_idle use_ray custom_sigquit_handler numa_node
    gc_threshold host port fastapi_root_path smg_grpc_mode grpc_mode grpc_port grpc_worker_threads sidecar
    sidecar_args skip_server_warmup warmups enable_http2 http2_max_concurrent_streams
    http2_initial_connection_window_size ssl_keyfile ssl_certfile ssl_ca_certs ssl_keyfile_password enable_ssl_refresh
    api_key admin_api_key served_model_name weight_version chat_template trust_request_chat_template
    hf_chat_template_name completion_template file_storage_path enable_cache_report return_input_ids return_output_ids
    reasoning_parser default_chat_template_kwargs strip_thinking_cache enable_strict_thinking tool_call_parser
    tool_server sampling_defaults asr_max_buffer_seconds asr_max_concurrent_sessions preferred_sampling_params
    allow_auto_truncate stream_interval batch_notify_size stream_response_default_include_usage
    incremental_streaming_output enable_streaming_session enable_session_radix_cache log_level log_level_http
    log_requests log_requests_level log_requests_format log_requests_target uvicorn_access_log_exclude_prefixes
    crash_dump_folder show_time_cost enable_metrics smg_http_sidecar_port enable_mfu_metrics
    enable_metrics_for_all_schedulers load_snapshot_publish_interval tokenizer_metrics_custom_labels_header
    tokenizer_metrics_allowed_custom_labels extra_metric_labels bucket_time_to_first_token bucket_inter_token_latency
    bucket_e2e_request_latency prompt_tokens_buckets generation_tokens_buckets gc_warning_threshold_secs
    decode_log_interval enable_request_time_stats_logging kv_events_config load_publish_endpoint
    enable_forward_pass_metrics forward_pass_metrics_worker_id forward_pass_metrics_ipc_name enable_trace
    trace_modules otlp_traces_endpoint export_metrics_to_file export_metrics_to_file_dir stat_loggers
    constrained_json_whitespace_pattern constrained_json_disable_any_whitespace constrained_json_max_whitespace_cnt
    attention_backend decode_attention_backend enable_lean_attention prefill_attention_backend sampling_backend
    grammar_backend radix_cache_backend mm_attention_backend fp8_gemm_runner_backend fp4_gemm_runner_backend
    bf16_gemm_backend dsa_prefill_backend dsv4_prefill_backend dsa_decode_backend dsa_paged_mqa_logits_backend
    dsa_topk_backend disable_flashinfer_autotune flashinfer_autotune_skip_ops mamba_backend cuda_graph_config
    cuda_graph_backend_decode cuda_graph_backend_prefill cuda_graph_max_bs_decode cuda_graph_max_bs_prefill
    cuda_graph_bs_decode cuda_graph_bs_prefill cuda_graph_prefill_max_context disable_prefill_cuda_graph
    disable_decode_cuda_graph disable_cuda_graph disable_cuda_graph_padding enable_profile_cuda_graph
    enable_cudagraph_gc debug_cuda_graph enable_layerwise_nvtx_marker enable_nccl_nvls enable_symm_mem
    triton_attention_reduce_in_fp32 triton_attention_num_kv_splits triton_attention_split_tile_size
    flashinfer_mla_disable_ragged enable_fused_qk_norm_rope enable_precise_embedding_interpolation
    enable_fused_moe_sum_all_reduce enable_deepseek_v4_fp4_indexer disable_custom_all_reduce enable_mscclpp
    enable_torch_symm_mem enable_scattered_sconv pre_warm_nccl boundary_reduction enable_quant_communications
    enable_flashinfer_allreduce_fusion enforce_disable_flashinfer_allreduce_fusion flashinfer_allreduce_fusion_backend
    enable_aiter_allreduce_fusion enable_torch_compile enable_torch_compile_debug_mode torch_compile_max_bs
    speculative_algorithm uno_lora_path speculative_draft_model_path speculative_draft_model_revision
    speculative_draft_load_format speculative_num_steps speculative_eagle_topk speculative_num_draft_tokens
    speculative_dflash_block_size speculative_dspark_block_size speculative_dspark_sps_table_path
    speculative_dspark_confidence_sts_path speculative_dspark_align_verify_tokens_to_graph_tier
    speculative_accept_threshold_single speculative_accept_threshold_acc speculative_use_rejection_sampling
    speculative_token_map speculative_attention_mode speculative_draft_attention_backend speculative_dsa_topk_backend
    speculative_draft_kv_cache_dtype speculative_draft_window_size speculative_moe_runner_backend
    speculative_moe_a2a_backend speculative_enable_w4a4_mxfp4_megamoe speculative_draft_model_quantization
    _speculative_draft_quantization_explicitly_set enable_multi_layer_eagle speculative_adaptive
    speculative_adaptive_config decoupled_spec_bind_endpoint decoupled_spec_connect_endpoints decoupled_spec_rank
    decoupled_spec_role spec_trace_dir speculative_ngram_min_bfs_breadth speculative_ngram_max_bfs_breadth
    speculative_ngram_match_type speculative_ngram_max_trie_depth speculative_ngram_capacity
    speculative_ngram_external_corpus_path speculative_ngram_external_sam_budget
    speculative_ngram_external_corpus_max_tokens ep_size moe_a2a_backend enable_w4a4_mxfp4_megamoe deepep_v2_mode
    moe_runner_backend flashinfer_mxfp4_moe_precision deepep_mode fuseep_mode deepep_dispatcher_output_dtype
    ep_num_redundant_experts ep_dispatch_algorithm init_expert_location enable_eplb eplb_algorithm
    eplb_rebalance_num_iterations eplb_rebalance_layers_per_chunk eplb_min_rebalancing_utilization_threshold
    expert_distribution_recorder_mode expert_distribution_recorder_buffer_size expert_balancedness_report_mode
    deepep_config moe_dense_tp_size elastic_ep_backend enable_elastic_expert_backup mooncake_ib_device
    enable_waterfill ep_join_mode ep_join_rank_offset elastic_ep_initial_size max_ep_size elastic_ep_scale_timeout
    disable_flashinfer_cutlass_moe_fp4_allgather disable_shared_experts_fusion enforce_shared_experts_fusion
    max_mamba_cache_size mamba_ssm_dtype mamba_max_states_per_path enable_mamba_cache_stochastic_rounding
    mamba_cache_philox_rounds mamba_full_memory_ratio mamba_radix_cache_strategy uses_mamba_radix_cache
    mamba_track_interval enable_int8_mamba_checkpoint int8_mamba_ckpt_size linear_attn_backend
    linear_attn_decode_backend linear_attn_prefill_backend linear_attn_verify_backend enable_linear_replayssm
    linear_replayssm_cache_len enable_linear_replayssm_spec enable_hierarchical_cache hicache_host_memory_mode
    hicache_ratio hicache_size hicache_write_policy hicache_io_backend hicache_mem_layout hicache_storage_backend
    hicache_storage_prefetch_policy hicache_storage_backend_extra_config hicache_storage_prefetch_retry_poll_interval
    hicache_storage_prefetch_retry_max_attempts enable_unified_cache_external_linker
    unified_cache_external_linker_backend enable_hisparse hisparse_config enable_broadcast_mm_inputs_process
    enable_prefix_mm_cache mm_enable_dp_encoder mm_process_config mm_processor_worker_num mm_io_worker_num
    allowed_media_domains media_url_max_file_size_mb mm_preprocess_cache_size_mb trust_mm_content_hashes
    limit_mm_data_per_request enable_mm_global_cache image_processor_backend mm_global_cache_backend
    disable_fast_image_processor mm_feature_transport enable_lora enable_lora_overlap_loading max_lora_rank
    lora_target_modules lora_paths max_loaded_loras max_loras_per_batch lora_eviction_policy lora_backend
    max_lora_chunk_size experts_shared_outer_loras lora_use_virtual_experts lora_strict_loading
    lora_drain_wait_threshold enable_two_batch_overlap enable_single_batch_overlap tbo_token_distribution_threshold
    cpu_offload_gb offload_group_size offload_num_in_group offload_prefetch_step offload_mode enable_lmcache
    lmcache_config_file enable_flexkv flexkv_config_file kt_weight_path kt_method kt_cpuinfer kt_threadpool_count
    kt_num_gpu_experts kt_max_deferred_experts_per_token dllm_algorithm dllm_algorithm_config dllm_fdfo
    disaggregation_mode disaggregation_transfer_backend disaggregation_bootstrap_port disaggregation_ib_device
    disaggregation_decode_enable_radix_cache disaggregation_decode_enable_offload_kvcache
    disaggregation_decode_retraction_backup num_reserved_decode_tokens disaggregation_decode_extra_slots
    disaggregation_decode_polling_interval optimistic_prefill_attempts encoder_only language_only language_model_only
    encoder_transfer_backend encoder_urls encoder_bootstrap_port encoder_register_urls
    enable_adaptive_dispatch_to_encoder enable_pdmux pdmux_config_path sm_group_num startup_weight_load_mode
    custom_weight_loader weight_loader_disable_mmap weight_loader_prefetch_checkpoints
    weight_loader_prefetch_num_threads weight_loader_drop_cache_after_load
    remote_instance_weight_loader_seed_instance_ip remote_instance_weight_loader_seed_instance_service_port
    remote_instance_weight_loader_send_weights_group_ports remote_instance_weight_loader_backend
    remote_instance_weight_loader_start_seed_via_transfer_engine engine_info_bootstrap_port modelexpress_config
    download_dir model_checksum delete_ckpt_after_loading decrypted_config_file decrypted_draft_config_file
    checkpoint_engine_wait_weights_before_ready enable_prefill_delayer prefill_delayer_max_delay_passes
    prefill_delayer_token_usage_low_watermark prefill_delayer_forward_passes_buckets
    prefill_delayer_wait_seconds_buckets prefill_delayer_queue_min_ratio prefill_delayer_max_delay_ms
    min_free_slots_delay enable_deterministic_inference rl_on_policy_target kv_canary kv_canary_real_data
    kv_canary_sweep_interval enable_dynamic_batch_tokenizer dynamic_batch_tokenizer_batch_size
    dynamic_batch_tokenizer_batch_timeout enable_tokenizer_batch_encode disable_tokenizer_batch_decode
    debug_tensor_dump_output_folder debug_tensor_dump_layers debug_tensor_dump_input_file enable_memory_saver
    enable_weights_cpu_backup enable_draft_weights_cpu_backup enable_custom_logit_processor
    enable_return_hidden_states return_hidden_states_mode enable_return_routed_experts enable_return_indexer_topk
    sampling_mask_max_tokens disable_outlines_disk_cache enable_mis weight_cache_mode weight_cache_socket
    weight_cache_timeout forward_hooks msprobe_dump_config ple_offload_embedding ple_offload_backend ple_offload_dir
    disaggregation_enable_kv_checksum enable_pd_role_switch speculative_domino_candidate_pool_size
    flashinfer_a2a_dispatch_type cuda_graph_max_seq_len_prefill prefill_kv_cache_dequant_dtype dsv4_attn_backend
    otlp_service_name _radix_eviction_policy_explicitly_set hicache_host_memory_fraction enable_linker_mla_dedup
    _swa_full_tokens_ratio_explicitly_set swa_prefix_tails enable_encoder_swa_bounded_replay
    enable_decoder_swa_bounded_replay enable_response_store disaggregation_decode_host_receive_threshold
    qsa_indexer_dtype disaggregation_decode_allocation_policy speculative_boundary_reduction
    speculative_use_block_verification speculative_draft_sink_size disable_aiter_allreduce_fusion_in_prefill
    disable_aiter_allreduce_fusion_in_decode enable_amd_monokernel dsa_triton_union enable_dsa_fused_indexer
    enable_cp_tp_group_sharing enable_watermark watermark_config watermark_key watermark_key_b
    watermark_context_window watermark_mixing_probability watermark_max_probability watermark_default_enabled
    watermark_enforce_all grpc_response_timeout_secs enable_paged_experts paged_experts_num_resident
    enable_nvidia_megakernel enable_megamoe_for_layernorm_sp enable_http_worker_reuseport
    prefill_decode_interval_min_bs unified_cache_external_linker_config enable_return_aux_hidden_states
    aux_hidden_state_capture return_aux_hidden_state_layer_ids
""".split())
FALSE_FIELDS = frozenset("""
    skip_tokenizer_init trust_remote_code is_embedding enable_fp32_lm_head quantize_and_serve enable_tf32_matmul
    enable_dynamic_chunking enable_priority_scheduling disable_priority_preemption abort_on_priority_when_disabled
    schedule_low_priority_values_first disable_hybrid_swa_memory prefill_only_disable_kv_cache disable_radix_cache
    enable_page_major_kv_layout enable_unified_memory disable_chunked_prefix_cache disable_overlap_schedule
    enable_mixed_chunk enable_prefill_cp enable_dsa_cache_layer_split enable_cp_decode_attn_tp
    enable_kv_cache_sharding enable_dp_attention enable_dp_attention_local_control_broadcast enable_dp_lm_head
    enable_attn_tp_input_scattered enable_shared_experts_attn_tp enable_dense_mlp_attn_tp enable_layernorm_sp
    disable_attn_tp_gather enable_p2p_check mlx_enable_sampling sleep_on_idle use_ray smg_grpc_mode grpc_mode
    skip_server_warmup enable_http2 enable_ssl_refresh trust_request_chat_template enable_cache_report
    return_input_ids return_output_ids strip_thinking_cache enable_strict_thinking allow_auto_truncate
    stream_response_default_include_usage incremental_streaming_output enable_streaming_session
    enable_session_radix_cache log_requests show_time_cost enable_metrics enable_mfu_metrics
    enable_metrics_for_all_schedulers enable_request_time_stats_logging enable_forward_pass_metrics enable_trace
    export_metrics_to_file constrained_json_disable_any_whitespace disable_flashinfer_autotune
    disable_prefill_cuda_graph disable_decode_cuda_graph disable_cuda_graph disable_cuda_graph_padding
    enable_profile_cuda_graph enable_cudagraph_gc debug_cuda_graph enable_layerwise_nvtx_marker enable_nccl_nvls
    enable_symm_mem triton_attention_reduce_in_fp32 flashinfer_mla_disable_ragged
    enable_precise_embedding_interpolation enable_fused_moe_sum_all_reduce enable_deepseek_v4_fp4_indexer
    disable_custom_all_reduce enable_mscclpp enable_torch_symm_mem enable_scattered_sconv pre_warm_nccl
    enable_quant_communications enable_flashinfer_allreduce_fusion enforce_disable_flashinfer_allreduce_fusion
    enable_aiter_allreduce_fusion enable_torch_compile enable_torch_compile_debug_mode
    speculative_dspark_align_verify_tokens_to_graph_tier speculative_use_rejection_sampling enable_multi_layer_eagle
    speculative_adaptive enable_w4a4_mxfp4_megamoe enable_eplb enable_elastic_expert_backup enable_waterfill
    disable_flashinfer_cutlass_moe_fp4_allgather disable_shared_experts_fusion enforce_shared_experts_fusion
    enable_mamba_cache_stochastic_rounding uses_mamba_radix_cache enable_int8_mamba_checkpoint enable_linear_replayssm
    enable_linear_replayssm_spec enable_hierarchical_cache enable_unified_cache_external_linker enable_hisparse
    enable_broadcast_mm_inputs_process enable_prefix_mm_cache mm_enable_dp_encoder trust_mm_content_hashes
    enable_mm_global_cache disable_fast_image_processor lora_use_virtual_experts lora_strict_loading
    enable_two_batch_overlap enable_single_batch_overlap enable_lmcache enable_flexkv
    disaggregation_decode_enable_radix_cache disaggregation_decode_enable_offload_kvcache encoder_only language_only
    language_model_only enable_adaptive_dispatch_to_encoder enable_pdmux weight_loader_disable_mmap
    weight_loader_prefetch_checkpoints weight_loader_drop_cache_after_load
    remote_instance_weight_loader_start_seed_via_transfer_engine delete_ckpt_after_loading
    checkpoint_engine_wait_weights_before_ready enable_prefill_delayer enable_deterministic_inference
    enable_dynamic_batch_tokenizer enable_tokenizer_batch_encode disable_tokenizer_batch_decode enable_memory_saver
    enable_weights_cpu_backup enable_draft_weights_cpu_backup enable_custom_logit_processor
    enable_return_hidden_states enable_return_routed_experts enable_return_indexer_topk disable_outlines_disk_cache
    enable_mis disaggregation_enable_kv_checksum enable_pd_role_switch _radix_eviction_policy_explicitly_set
    enable_linker_mla_dedup enable_encoder_swa_bounded_replay enable_response_store speculative_use_block_verification
    disable_aiter_allreduce_fusion_in_prefill disable_aiter_allreduce_fusion_in_decode enable_amd_monokernel
    enable_cp_tp_group_sharing enable_watermark watermark_default_enabled watermark_enforce_all enable_paged_experts
    enable_nvidia_megakernel enable_megamoe_for_layernorm_sp enable_http_worker_reuseport
    enable_return_aux_hidden_states
""".split())
SERVER_ARGS_DEFAULTS = {
    'tokenizer_mode': 'auto', 'tokenizer_backend': 'huggingface', 'tokenizer_worker_num': 1,
    'detokenizer_worker_num': 1, 'load_format': 'auto', 'model_loader_extra_config': '{}', 'model_impl': 'auto',
    'model_config_parser': 'auto', 'json_model_override_args': '{}', 'dtype': 'auto', 'kv_cache_dtype': 'auto',
    'max_prefill_tokens': 16384, 'schedule_policy': 'fcfs', 'priority_scheduling_preemption_threshold': 10,
    'retraction_policy': 'length', 'schedule_conservativeness': 1.0, 'c128_page_size': 16,
    'swa_full_tokens_ratio': 0.8, 'radix_eviction_policy': 'lru', 'num_continuous_decode_steps': 1,
    'scheduler_recv_interval': 1, 'nnodes': 1, 'node_rank': 0, 'tp_size': 1, 'dcp_size': 1, 'pp_size': 1,
    'pp_async_batch_depth': 0, 'dp_size': 1, 'attn_dp_size': 1, 'load_balance_method': 'auto', 'attn_cp_size': 1,
    'moe_dp_size': 1, 'dwdp_size': 1, 'base_gpu_id': 0, 'gpu_id_step': 1, 'watchdog_timeout': 300,
    'host': '127.0.0.1', 'port': 30000, 'fastapi_root_path': '', 'http2_max_concurrent_streams': 200,
    'http2_initial_connection_window_size': 1048576, 'weight_version': 'default', 'sampling_defaults': 'model',
    'asr_max_buffer_seconds': 60, 'asr_max_concurrent_sessions': 32, 'stream_interval': 1, 'batch_notify_size': 16,
    'log_level': 'info', 'log_requests_level': 2, 'log_requests_format': 'text',
    'uvicorn_access_log_exclude_prefixes': [], 'load_snapshot_publish_interval': 15,
    'tokenizer_metrics_custom_labels_header': 'x-custom-labels', 'gc_warning_threshold_secs': 0.0,
    'decode_log_interval': 40, 'forward_pass_metrics_worker_id': '', 'trace_modules': 'request',
    'otlp_traces_endpoint': 'localhost:4317', 'fp8_gemm_runner_backend': 'auto', 'fp4_gemm_runner_backend': 'auto',
    'bf16_gemm_backend': 'auto', 'dsv4_prefill_backend': 'auto', 'dsa_paged_mqa_logits_backend': 'auto',
    'dsa_topk_backend': 'sgl-kernel', 'mamba_backend': 'triton', 'triton_attention_num_kv_splits': 8,
    'boundary_reduction': 'auto', 'torch_compile_max_bs': 32, 'speculative_accept_threshold_single': 1.0,
    'speculative_accept_threshold_acc': 1.0, 'speculative_attention_mode': 'prefill',
    'speculative_dsa_topk_backend': 'sgl-kernel', 'decoupled_spec_role': 'null',
    'speculative_ngram_min_bfs_breadth': 1, 'speculative_ngram_max_bfs_breadth': 10,
    'speculative_ngram_match_type': 'BFS', 'speculative_ngram_max_trie_depth': 18,
    'speculative_ngram_capacity': 10000000, 'speculative_ngram_external_sam_budget': 0,
    'speculative_ngram_external_corpus_max_tokens': 10000000, 'ep_size': 1, 'moe_a2a_backend': 'none',
    'deepep_v2_mode': 'direct', 'moe_runner_backend': 'auto', 'flashinfer_mxfp4_moe_precision': 'default',
    'deepep_mode': 'auto', 'fuseep_mode': 2, 'deepep_dispatcher_output_dtype': 'auto', 'ep_num_redundant_experts': 0,
    'init_expert_location': 'trivial', 'eplb_algorithm': 'auto', 'eplb_rebalance_num_iterations': 1000,
    'eplb_min_rebalancing_utilization_threshold': 1.0, 'expert_balancedness_report_mode': 'off',
    'ep_join_rank_offset': 0, 'elastic_ep_scale_timeout': 600, 'mamba_max_states_per_path': -1,
    'mamba_cache_philox_rounds': 0, 'mamba_full_memory_ratio': 0.9, 'mamba_radix_cache_strategy': 'auto',
    'mamba_track_interval': 256, 'linear_attn_backend': 'triton', 'linear_replayssm_cache_len': 16,
    'hicache_host_memory_mode': 'cache', 'hicache_size': 0, 'hicache_write_policy': 'write_through',
    'hicache_io_backend': 'kernel', 'hicache_mem_layout': 'page_first', 'hicache_storage_prefetch_policy': 'timeout',
    'hicache_storage_prefetch_retry_poll_interval': 8, 'hicache_storage_prefetch_retry_max_attempts': 8,
    'unified_cache_external_linker_backend': 'mooncake', 'mm_processor_worker_num': 0, 'mm_io_worker_num': 0,
    'allowed_media_domains': [], 'media_url_max_file_size_mb': 64, 'image_processor_backend': 'auto',
    'mm_global_cache_backend': 'mooncake', 'max_loras_per_batch': 8, 'lora_eviction_policy': 'lru',
    'lora_backend': 'csgmv', 'max_lora_chunk_size': 16, 'lora_drain_wait_threshold': 0.0,
    'tbo_token_distribution_threshold': 0.48, 'cpu_offload_gb': 0, 'offload_group_size': -1,
    'offload_num_in_group': 1, 'offload_prefetch_step': 1, 'offload_mode': 'cpu', 'kt_method': 'AMXINT4',
    'kt_threadpool_count': 2, 'dllm_fdfo': True, 'disaggregation_mode': 'null',
    'disaggregation_transfer_backend': 'mooncake', 'disaggregation_bootstrap_port': 8998,
    'num_reserved_decode_tokens': 512, 'disaggregation_decode_polling_interval': 1, 'optimistic_prefill_attempts': 0,
    'encoder_transfer_backend': 'auto', 'encoder_urls': [], 'encoder_bootstrap_port': 8997,
    'encoder_register_urls': [], 'sm_group_num': 8, 'startup_weight_load_mode': 'serial',
    'weight_loader_prefetch_num_threads': 4, 'remote_instance_weight_loader_backend': 'nccl',
    'engine_info_bootstrap_port': 6789, 'prefill_delayer_max_delay_passes': 30, 'kv_canary': 'none',
    'kv_canary_real_data': 'none', 'kv_canary_sweep_interval': 0, 'dynamic_batch_tokenizer_batch_size': 32,
    'dynamic_batch_tokenizer_batch_timeout': 0.002, 'sampling_mask_max_tokens': 4096, 'weight_cache_mode': 'off',
    'weight_cache_timeout': 1800, 'ple_offload_backend': 'pinned', 'speculative_domino_candidate_pool_size': 2048,
    'prefill_kv_cache_dequant_dtype': 'auto', 'dsv4_attn_backend': 'auto', 'hicache_host_memory_fraction': 0.8,
    'disaggregation_decode_host_receive_threshold': 1.0, 'qsa_indexer_dtype': 'auto',
    'disaggregation_decode_allocation_policy': 'early', 'speculative_boundary_reduction': 'rs+rsv',
    'dsa_triton_union': 0, 'watermark_config': '<redacted>', 'watermark_key': '<redacted>',
    'watermark_key_b': '<redacted>', 'watermark_context_window': 4, 'watermark_mixing_probability': 0.5,
    'watermark_max_probability': 1.0, 'grpc_response_timeout_secs': 300, 'prefill_decode_interval_min_bs': 0,
}

INIT_MEM_GIB = 1.2          # CUDA context + NCCL, taken before the weights load
PEER_LOSS_GRACE = 2.0       # seconds node 0 outlives a dead peer: a stop of the whole model ends it cleanly first
CUDA_GRAPH_GIB = 0.48       # "Capture target decode CUDA graph end. ... mem usage="
DECODE_LOG_INTERVAL = 40    # SGLang's --decode-log-interval default
ANSWER = ("This is a deterministic answer from the SGLang simulator. It stands in for a real model "
          "so that deployment checks can exercise the serving path without GPUs.")
NEEDLE_RE = re.compile(r"needle\b[^\n:]{0,40}?(?:\bis\b\s*:?|:)\s*[\"'`]?([A-Za-z0-9][A-Za-z0-9_\-]*)", re.IGNORECASE)


class Stop(Exception):
    """Raised in the main thread once SIGTERM/SIGINT arrived."""


class PeerLost(Exception):
    """Raised in node 0's main thread once a joined node has been gone for PEER_LOSS_GRACE seconds."""


class Log(object):
    """SGLang's line format: ``[%Y-%m-%d %H:%M:%S{ rank tags}] message``, flushed per line."""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def line(self, msg, tags=""):
        ts = time.strftime("%Y-%m-%d %H:%M:%S")
        self.write("[%s%s] %s\n" % (ts, tags, msg))

    def write(self, text):
        with self.lock:
            self.stream.write(text)
            self.stream.flush()


# ---------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------

def build_parser(given_only=False):
    """SGLang's flags the simulator knows (under SGLang's dest names), then its own --sim-* options.

    given_only: every default is left out, so a parse returns only the flags given.
    """
    p = argparse.ArgumentParser(prog="sglang_sim.py", description="Test-only SGLang server simulator.")
    a = p.add_argument
    a("--model-path", "--model", dest="model_path", required=True)
    a("--tokenizer-path")
    a("--served-model-name")
    a("--trust-remote-code", action="store_true")
    a("--dtype", default="auto")
    a("--load-format", default="auto")
    a("--kv-cache-dtype", default="auto", choices=KV_CACHE_DTYPE_CHOICES)
    a("--quantization")
    a("--quantization-param-path")
    a("--context-length", type=int)
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--api-key")
    a("--mem-fraction-static", type=float)
    a("--max-running-requests", type=int)
    a("--max-total-tokens", type=int)
    a("--chunked-prefill-size", type=int)
    a("--max-prefill-tokens", type=int, default=16384)
    a("--page-size", type=int, default=1)
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    a("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    a("--ep-size", "--expert-parallel-size", dest="ep_size", type=int, default=1)
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr")
    a("--attention-backend")
    a("--decode-attention-backend")
    a("--moe-runner-backend", default="auto")
    a("--fp4-gemm-backend", dest="fp4_gemm_runner_backend", default="auto")
    a("--reasoning-parser")
    a("--tool-call-parser")
    a("--speculative-algorithm")
    a("--speculative-num-steps", type=int)
    a("--speculative-eagle-topk", type=int)
    a("--speculative-num-draft-tokens", type=int)
    a("--mamba-radix-cache-strategy", default="auto", choices=["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"])
    a("--mamba-ssm-dtype", choices=["float32", "bfloat16", "float16"])
    a("--max-mamba-cache-size", type=int)
    a("--mamba-full-memory-ratio", type=float, default=0.9)
    a("--mamba-track-interval", type=int, default=256)
    a("--disable-custom-all-reduce", action="store_true")
    a("--disable-radix-cache", action="store_true")
    a("--enable-metrics", action="store_true")
    a("--enable-dp-attention", action="store_true")
    a("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", dest="cuda_graph_max_bs_decode", type=int)
    a("--skip-server-warmup", action="store_true")
    a("--log-level", default="info")
    a("--log-requests", action="store_true")
    a("--watchdog-timeout", type=float, default=300)
    a("--download-dir")
    a("--model-loader-extra-config", default="{}")
    a("--json-model-override-args", default="{}")
    sim = p.add_argument_group("simulator")
    for name, (typ, _default, helptext) in SIM_OPTIONS.items():
        kwargs = dict(dest="sim_" + name, type=typ, default=None, help="%s (env SGLANG_SIM_%s)" % (helptext, name.upper()))
        if name == "fault":
            kwargs["choices"] = FAULTS
        sim.add_argument("--sim-" + name.replace("_", "-"), **kwargs)
    if given_only:
        for action in p._actions:
            action.default = argparse.SUPPRESS
    return p


SIM_DESTS = set("sim_" + n for n in SIM_OPTIONS)


def launch_command(argv):
    """SGLang's launch_command: the arguments as typed, joined by spaces (the simulator's --sim-* options left out)."""
    words, skip = [], False
    for word in strip_launcher(argv):
        if skip:
            skip = False
        elif word.startswith("--sim-"):
            skip = "=" not in word
        else:
            words.append(word)
    return " ".join(words)


def strip_launcher(argv):
    """Drop ``-m sglang.launch_server`` / ``serve`` so either command line can be pasted."""
    argv = list(argv)
    if argv[:2] == ["-m", "sglang.launch_server"]:
        return argv[2:]
    if argv[:1] in (["serve"], ["sglang.launch_server"]):
        return argv[1:]
    return argv


def sim_settings(ns):
    out = {}
    for name, (typ, default, _h) in SIM_OPTIONS.items():
        value = getattr(ns, "sim_" + name)
        if value is None:
            env = os.environ.get("SGLANG_SIM_" + name.upper())
            if env not in (None, ""):
                try:
                    value = typ(env)
                except ValueError:
                    raise SystemExit("SGLANG_SIM_%s=%r is not a valid %s" % (name.upper(), env, typ.__name__))
        out[name] = default if value is None else value
    if out["fault"] not in FAULTS:
        raise SystemExit("unknown fault %r (choose from %s)" % (out["fault"], ", ".join(FAULTS)))
    return out


# ---------------------------------------------------------------------------------------------------------
# Checkpoint
# ---------------------------------------------------------------------------------------------------------

def _load_json(path):
    with open(path, "r") as handle:
        return json.load(handle)


def read_checkpoint(model_path):
    """What SGLang takes from config.json / hf_quant_config.json for this simulation."""
    cfg = _load_json(os.path.join(model_path, "config.json"))
    text = cfg.get("text_config") or cfg
    n_layers = int(text.get("num_hidden_layers", 1))
    layer_types = text.get("layer_types")
    if layer_types:
        full = sum(1 for t in layer_types if t == "full_attention")
        linear = sum(1 for t in layer_types if t == "linear_attention")
    elif text.get("full_attention_interval"):
        interval = int(text["full_attention_interval"])
        full = sum(1 for i in range(n_layers) if (i + 1) % interval == 0)
        linear = n_layers - full
    else:
        full, linear = n_layers, 0
    heads = int(text.get("num_attention_heads", 1))
    hidden = int(text.get("hidden_size", heads))
    dtype = text.get("dtype") or text.get("torch_dtype") or cfg.get("dtype") or cfg.get("torch_dtype") or "bfloat16"
    model = {
        "architecture": (cfg.get("architectures") or ["UnknownForCausalLM"])[0],
        "model_type": cfg.get("model_type"),
        "num_layers": n_layers,
        "full_layers": full,
        "linear_layers": linear,
        "kv_heads": int(text.get("num_key_value_heads", heads)),
        "head_dim": int(text.get("head_dim") or hidden // max(1, heads)),
        "dtype": dtype,
        "context_length": int(text.get("max_position_embeddings") or cfg.get("max_position_embeddings") or 4096),
        "linear_num_key_heads": int(text.get("linear_num_key_heads", 0) or 0),
        "linear_num_value_heads": int(text.get("linear_num_value_heads", 0) or 0),
        "linear_key_head_dim": int(text.get("linear_key_head_dim", 0) or 0),
        "linear_value_head_dim": int(text.get("linear_value_head_dim", 0) or 0),
        "linear_conv_kernel_dim": int(text.get("linear_conv_kernel_dim", 4) or 4),
    }
    model["quant"] = read_quant(model_path, cfg)
    return model


def read_quant(model_path, cfg):
    """quant method/algo and the KV-cache quant algo, config.json's quantization_config first."""
    method = algo = kv_algo = None
    producer = None
    qc = cfg.get("quantization_config")
    if isinstance(qc, dict):
        method = qc.get("quant_method")
        algo = qc.get("quant_algo")
        kv_algo = qc.get("kv_cache_quant_algo")
        scheme = qc.get("kv_cache_scheme")
        if kv_algo is None and isinstance(scheme, dict) and scheme.get("type") == "float" and scheme.get("num_bits") == 8:
            kv_algo = "FP8"
        producer = (qc.get("producer") or {}).get("name")
    hq_path = os.path.join(model_path, "hf_quant_config.json")
    if os.path.isfile(hq_path):
        hq = _load_json(hq_path)
        nested = hq.get("quantization") or {}
        producer = producer or (hq.get("producer") or {}).get("name")
        algo = algo or nested.get("quant_algo")
        if kv_algo is None:
            kv_algo = nested.get("kv_cache_quant_algo")
    if method == "modelopt" or producer == "modelopt":
        method = {"NVFP4": "modelopt_fp4", "FP8": "modelopt_fp8"}.get(str(algo).upper(), "modelopt")
    return {"method": method, "algo": algo, "kv_cache_quant_algo": kv_algo}


def resolve_kv(setting, model):
    """(the model runner's kv_cache_dtype string, torch dtype, bytes per element) for the server args' setting.

    As SGLang 0.5.23's mem_cache/kv_cache_dtype.py: auto is FP8 E4M3 when the checkpoint's KV quant algo is FP8,
    else the model dtype (the string then stays auto). The server args keep the setting either way.
    """
    if setting == "auto":
        kv_algo = model["quant"]["kv_cache_quant_algo"]
        if isinstance(kv_algo, str) and kv_algo.upper() == "FP8":
            return "fp8_e4m3", "torch.float8_e4m3fn", 1.0
        torch_dtype, size = MODEL_DTYPES.get(str(model["dtype"]), MODEL_DTYPES["bfloat16"])
        return "auto", torch_dtype, size
    torch_dtype, size = KV_DTYPES[setting]
    return setting, torch_dtype, size


# ---------------------------------------------------------------------------------------------------------
# Memory plan
# ---------------------------------------------------------------------------------------------------------

def plan_memory(args, sim, model, kv_bytes, speculative):
    total = sim["gpu_mem_gib"]
    mfs = args.mem_fraction_static if args.mem_fraction_static is not None else 0.85
    tp = max(1, args.tp_size)
    avail_start = total - INIT_MEM_GIB
    avail_loaded = avail_start - sim["weight_gib"]
    rest = avail_loaded - total * (1.0 - mfs)
    kv_heads = max(1, model["kv_heads"] // tp)
    hd = model["head_dim"]
    cell = kv_heads * 2 * hd * model["full_layers"] * kv_bytes
    draft_cell = kv_heads * 2 * hd * kv_bytes if speculative else 0.0

    # Gated DeltaNet state per request slot: conv state (bf16) + SSM state (fp32 unless --mamba-ssm-dtype)
    mamba_slot = 0.0
    conv_slot = ssm_slot = 0.0
    if model["linear_layers"]:
        conv_dim = (2 * model["linear_num_key_heads"] * model["linear_key_head_dim"]
                    + model["linear_num_value_heads"] * model["linear_value_head_dim"])
        conv_slot = conv_dim // tp * (model["linear_conv_kernel_dim"] - 1) * 2.0 * model["linear_layers"]
        ssm_bytes = 4.0 if (args.mamba_ssm_dtype or "float32") == "float32" else 2.0
        ssm_slot = (model["linear_num_value_heads"] // tp * model["linear_value_head_dim"]
                    * model["linear_key_head_dim"] * ssm_bytes * model["linear_layers"])
        mamba_slot = conv_slot + ssm_slot

    plan = {"total_gib": total, "mem_fraction_static": mfs, "avail_start_gib": avail_start,
            "avail_loaded_gib": avail_loaded, "rest_gib": rest, "kv_heads_per_rank": kv_heads,
            "cell_bytes": cell + draft_cell, "mamba_slot_bytes": mamba_slot}
    if rest <= 0:
        plan["ok"] = False
        return plan
    rest_bytes = rest * GIB
    mamba_slots = 0
    if mamba_slot:
        if args.max_mamba_cache_size:
            mamba_slots = int(args.max_mamba_cache_size)
        else:
            ratio = args.mamba_full_memory_ratio
            mamba_slots = int(rest_bytes * ratio / (1.0 + ratio) // mamba_slot)
        rest_bytes -= mamba_slots * mamba_slot
    tokens = int(max(0.0, rest_bytes) // (cell + draft_cell)) if cell else 0
    if args.max_total_tokens:
        tokens = min(tokens, args.max_total_tokens)
    page = max(1, args.page_size)
    tokens = tokens // page * page
    plan["ok"] = tokens > 0
    plan["max_total_num_tokens"] = tokens
    plan["mamba_slots"] = mamba_slots
    plan["conv_gib"] = mamba_slots * conv_slot / GIB
    plan["ssm_gib"] = mamba_slots * ssm_slot / GIB
    # the brief K/V size of the log line: tokens x heads per rank x head_dim x full layers x bytes
    plan["k_gib"] = tokens * kv_heads * hd * model["full_layers"] * kv_bytes / GIB
    plan["draft_k_gib"] = tokens * kv_heads * hd * kv_bytes / GIB if speculative else 0.0
    kv_total = 2 * (plan["k_gib"] + plan["draft_k_gib"])
    plan["kvcache_gib"] = kv_total
    plan["pool_end_avail_gib"] = avail_loaded - kv_total - mamba_slots * mamba_slot / GIB
    plan["available_gpu_mem_gib"] = plan["pool_end_avail_gib"] - CUDA_GRAPH_GIB
    if args.max_running_requests:
        mrr = args.max_running_requests
    elif speculative:
        mrr = 48
    elif mamba_slots:
        mrr = max(1, mamba_slots // 3)
    else:
        mrr = 2048
    if mamba_slots:
        mrr = min(mrr, max(1, mamba_slots // 3))
    plan["max_running_requests"] = mrr
    return plan


# ---------------------------------------------------------------------------------------------------------
# The simulated server
# ---------------------------------------------------------------------------------------------------------

class Simulator(object):
    def __init__(self, argv, stream):
        self.argv = list(argv)
        self.log = Log(stream)
        self.parser = build_parser()
        ns, unknown = self.parser.parse_known_args(strip_launcher(argv))
        self.args = ns
        self.given = vars(build_parser(given_only=True).parse_known_args(strip_launcher(argv))[0])
        self.unknown = unknown
        self.sim = sim_settings(ns)
        self.fault = self.sim["fault"]
        self.stopping = False
        self.peer_lost = None       # (node rank, when) of a joined node whose connection closed
        self.status = "starting"
        self.lock = threading.Lock()
        self.httpd = None
        self.children = []
        self.exit_code = None
        self.pid = os.getpid()
        self.started = time.time()
        # runtime counters for /metrics and /server_info
        self.running = 0
        self.num_requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.decode_steps = 0
        self.recent_tokens = deque()
        self.ttft_obs = []
        self.e2e_obs = []

        a = self.args
        if a.speculative_algorithm and a.speculative_algorithm.upper() == "NEXTN":
            self.spec_algo = "EAGLE"   # SGLang rewrites NEXTN during post-init
        else:
            self.spec_algo = a.speculative_algorithm
        self.served_name = a.served_model_name or a.model_path
        tp = max(1, a.tp_size)
        nnodes = max(1, a.nnodes)
        per_node = max(1, tp // nnodes)
        first = a.node_rank * per_node
        self.ranks = list(range(first, min(tp, first + per_node))) or [first]
        self.serves_http = a.node_rank == 0

    # -- helpers ------------------------------------------------------------------------------------------

    def tags(self, rank):
        a = self.args
        if a.tp_size <= 1:
            return ""
        out = " TP%d" % rank
        if a.ep_size > 1:
            out += " EP%d" % (rank // max(1, a.tp_size // a.ep_size))
        return out

    def each_rank(self, fmt):
        for rank in self.ranks:
            self.log.line(fmt(rank) if callable(fmt) else fmt, self.tags(rank))

    def rank0(self, msg):
        if 0 in self.ranks:
            self.log.line(msg, self.tags(0))

    def pause(self, seconds):
        end = time.time() + max(0.0, seconds)
        while True:
            if self.stopping:
                raise Stop()
            if self.peer_lost is not None and time.time() - self.peer_lost[1] >= PEER_LOSS_GRACE:
                raise PeerLost()
            left = end - time.time()
            if left <= 0:
                return
            time.sleep(min(0.02, left))

    def on_signal(self, signum, _frame):
        self.stopping = True

    def server_args(self):
        """ServerArgs.resolved_dict() of SGLang 0.5.23: every field in order, the flags given, what resolution sets."""
        a = self.args
        out = dict((name, False if name in FALSE_FIELDS else SERVER_ARGS_DEFAULTS.get(name)) for name in SERVER_ARGS_FIELDS)
        out.update((dest, value) for dest, value in self.given.items() if dest not in SIM_DESTS)
        out.update(self.backends)
        out.update({
            "tokenizer_path": a.tokenizer_path or a.model_path,
            "served_model_name": self.served_name,
            "device": "cuda",
            "kv_cache_dtype": self.kv_setting,
            "mem_fraction_static": self.plan["mem_fraction_static"],
            "chunked_prefill_size": self.chunked_prefill_size,
            "speculative_algorithm": self.spec_algo,
        })
        if self.spec_algo and a.max_running_requests is None:
            out["max_running_requests"] = 48
        return out

    def write_state(self):
        path = self.sim["state_file"]
        if not path:
            return
        a = self.args
        state = {
            "pid": self.pid,
            "argv": self.argv,
            "args": {k: v for k, v in vars(a).items() if k not in SIM_DESTS},
            "unknown_args": self.unknown,
            "sim": self.sim,
            "status": self.status,
            "exit_code": self.exit_code,
            "host": a.host,
            "port": a.port,
            "serves_http": self.serves_http,
            "tp_size": a.tp_size,
            "ranks": self.ranks,
            "nnodes": a.nnodes,
            "node_rank": a.node_rank,
            "dist_init_addr": a.dist_init_addr,
            "rendezvous": getattr(self, "meeting", None),
            "kv_cache_dtype_flag": a.kv_cache_dtype,
            # after argument resolution (/server_info), and what the model runner made of it
            "kv_cache_dtype_server_args": getattr(self, "kv_setting", None),
            "kv_cache_dtype_resolved": getattr(self, "kv_string", None),
            "kv_torch_dtype": getattr(self, "kv_torch", None),
            "fp8_scale_warning": getattr(self, "fp8_warning", None),
            "quantization": getattr(self, "quant_method", None),
            "max_total_num_tokens": (getattr(self, "plan", None) or {}).get("max_total_num_tokens"),
            "plan": getattr(self, "plan", None),
            "children": [c.pid for c in self.children],
        }
        tmp = "%s.%d.tmp" % (path, self.pid)
        with open(tmp, "w") as handle:
            json.dump(state, handle, indent=1, sort_keys=True, default=str)
        os.replace(tmp, path)

    # -- startup ------------------------------------------------------------------------------------------

    def run(self):
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        try:
            code = self._run()
        except Stop:
            code = self.shutdown()
        except PeerLost:
            self.log.write("torch.distributed.DistBackendError: NCCL error: remote process exited or there was a network error "
                           "(node %d of %d)\n" % (self.peer_lost[0], self.args.nnodes))
            code = 1
        self.exit_code = code
        self.status = "exited" if self.status != "stopped" else "stopped"
        self.write_state()
        return code

    def _run(self):
        a = self.args
        if self.unknown:
            # the simulator's own line: real SGLang refuses unknown flags (sglang_args_check catches them)
            self.log.line("WARNING sglang_sim: ignoring unrecognized arguments: %s" % " ".join(self.unknown))
        try:
            self.model = read_checkpoint(a.model_path)
        except (OSError, ValueError) as exc:
            self.log.write("Traceback (most recent call last):\n  File \"sglang/launch_server.py\", line 13, in <module>\n"
                           "    server_args = prepare_server_args(sys.argv[1:])\n%s: %s\n" % (type(exc).__name__, exc))
            return 1
        self.quant_method = a.quantization or self.model["quant"]["method"]
        self.resolve_backends()
        self.kv_string, self.kv_torch, kv_bytes = resolve_kv(self.kv_setting, self.model)
        self.plan = plan_memory(a, self.sim, self.model, kv_bytes, bool(self.spec_algo))
        self.context_len = a.context_length or self.model["context_length"]
        self.chunked_prefill_size = a.chunked_prefill_size or 8192
        # load_model_utils.load_kv_cache_scales checks the server args (auto never warns), for target and draft alike
        self.fp8_warning = self.kv_setting == "fp8_e4m3" and not a.quantization_param_path
        if self.fault == "ignore_sigterm":
            self.spawn_stubborn_child()
        self.write_state()

        self.log.line(self.fmt("server_args", self.server_args()))
        load = self.sim["load_seconds"]
        self.pause(0.03 * load if self.fault != "crash" else 0.02)
        if a.nnodes > 1 and not self.rendezvous():
            return 1
        if self.fault == "crash":
            self.crash_traceback()
            return 1
        plan = self.plan
        self.each_rank(self.fmt("load_begin", plan["avail_start_gib"]))
        if self.fault == "oom":
            self.pause(0.3 * load)
            self.oom_traceback()
            return 1
        t0 = time.time()
        self.pause(load)
        if self.quant_method == "modelopt_fp4":
            self.each_rank(self.fmt("nvfp4"))
        if self.fp8_warning:
            self.each_rank(self.fmt("fp8_no_scales"))
        quant = ""
        if self.quant_method:
            quant = "quant=%s, quant_algo=%s, " % (self.quant_method, self.model["quant"]["algo"])
        self.each_rank(self.fmt("load_end", time.time() - t0, self.model["architecture"], quant, plan["avail_loaded_gib"],
                                self.sim["weight_gib"]))
        if not plan["ok"]:
            self.not_enough_memory()
            return 1
        if plan["mamba_slots"]:
            self.each_rank(self.fmt("mamba_pool", plan["mamba_slots"], plan["conv_gib"], plan["ssm_gib"]))
        for rank in self.ranks:
            self.log.line(self.fmt("kv_pool", self.kv_torch, plan["max_total_num_tokens"], plan["k_gib"], plan["k_gib"]),
                          self.tags(rank))
            self.log.line(self.fmt("pool_end", plan["pool_end_avail_gib"]), self.tags(rank))
        if self.model["linear_layers"]:
            self.rank0(self.fmt("linear_backend", "triton", "triton", "triton"))
            self.each_rank(self.fmt("hybrid_gdn"))
        if self.spec_algo:
            # the draft model loads like the target: the same FP8 check, then its one-layer KV pool
            if self.fp8_warning:
                self.each_rank(self.fmt("fp8_no_scales"))
            self.each_rank(self.fmt("kv_pool", self.kv_torch, plan["max_total_num_tokens"], plan["draft_k_gib"],
                                    plan["draft_k_gib"]))
        phase, per_req = ("verify", (a.speculative_num_draft_tokens or 4)) if self.spec_algo else ("decode", 1)
        self.each_rank(self.fmt("graph_begin", phase, per_req, plan["pool_end_avail_gib"]))
        max_bs = a.cuda_graph_max_bs_decode or min(plan["max_running_requests"], 256)
        sizes = [bs for bs in [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 96, 128, 160, 192, 256] if bs <= max_bs]
        t0 = time.time()
        self.pause(0.1 * load)
        self.each_rank(self.fmt("graph_end", phase, sizes or [1], time.time() - t0, CUDA_GRAPH_GIB,
                                plan["available_gpu_mem_gib"]))
        self.rank0(self.fmt("max_tokens", plan["max_total_num_tokens"], self.chunked_prefill_size, a.max_prefill_tokens,
                            plan["max_running_requests"], self.context_len, plan["available_gpu_mem_gib"]))
        if not self.serves_http:
            # other nodes run schedulers only
            self.status = "ready"
            self.write_state()
            while True:
                self.pause(3600)
        return self.serve()

    def resolve_backends(self):
        """What SGLang 0.5.23's argument resolution makes of the KV dtype and the attention backends."""
        a = self.args
        self.kv_setting = a.kv_cache_dtype
        self.backends = {"attention_backend": a.attention_backend, "decode_attention_backend": a.decode_attention_backend}
        for dest, value in sorted(self.backends.items()):
            if value in FP8_ALIAS_BACKENDS:
                self.log.line(self.fmt("deprecated_backend", dest.replace("_", "-"), value, FP8_ALIAS_BACKENDS[value]))
                self.backends[dest] = FP8_ALIAS_BACKENDS[value]
        if FP8_ALIAS_BACKENDS.keys() & {a.attention_backend, a.decode_attention_backend} and self.kv_setting != "fp8_e4m3":
            self.log.line(self.fmt("tokenspeed_fp8"))
            self.kv_setting = "fp8_e4m3"

    @staticmethod
    def fmt(name, *values):
        return SGLANG_LOG[name][0] % values

    def rendezvous(self):
        """Meet the other nodes at --dist-init-addr; False (after logging torch's error) when that fails."""
        a = self.args
        host, _sep, port = (a.dist_init_addr or "").rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit():
            self.log.write("ValueError: --dist-init-addr %r is not HOST:PORT (needed with --nnodes %d)\n" % (a.dist_init_addr, a.nnodes))
            return False
        me = {"node_rank": a.node_rank, "nnodes": a.nnodes, "tp_size": a.tp_size}
        timeout = self.sim["rendezvous_timeout"]
        deadline = time.time() + timeout
        self.meeting = {"addr": a.dist_init_addr, "joined": [], "refused": []}
        if a.node_rank == 0:
            peers = []
            listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("", int(port)))
                listener.listen(16)
                listener.settimeout(0.2)
                while len(self.meeting["joined"]) < a.nnodes - 1:
                    if self.stopping:
                        raise Stop()
                    if time.time() > deadline:
                        self.log.write("torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients joined.\n"
                                       % (timeout, len(self.meeting["joined"]) + 1, a.nnodes))
                        return False
                    try:
                        conn, _peer = listener.accept()
                    except socket.timeout:
                        continue
                    conn.settimeout(5)
                    peer = json.loads(conn.makefile().readline() or "{}")
                    ok = (peer.get("nnodes"), peer.get("tp_size")) == (a.nnodes, a.tp_size) \
                        and 0 < peer.get("node_rank", 0) < a.nnodes and peer["node_rank"] not in self.meeting["joined"]
                    conn.sendall((json.dumps(dict(me, ok=ok)) + "\n").encode())
                    self.meeting["joined" if ok else "refused"].append(peer.get("node_rank"))
                    if ok:
                        peers.append((peer["node_rank"], conn))
                    else:
                        conn.close()
            finally:
                listener.close()
            self.write_state()
            for rank, conn in peers:
                threading.Thread(target=self.watch_peer, args=(rank, conn), daemon=True).start()
            return True
        while True:
            if self.stopping:
                raise Stop()
            try:
                conn = socket.create_connection((host, int(port)), timeout=2)
                conn.sendall((json.dumps(me) + "\n").encode())
                reply = json.loads(conn.makefile().readline() or "{}")
                # held open for this process's life: node 0 sees it close when this node dies
                self.store_conn = conn
                break
            except (OSError, ValueError):
                if time.time() > deadline:
                    self.log.write("torch.distributed.DistNetworkError: The client socket has timed out after %ds while trying to "
                                   "connect to (%s, %s).\n" % (timeout, host, port))
                    return False
                self.pause(0.5)
        if not reply.get("ok"):
            self.log.write("RuntimeError: node 0 at %s refused node %d: it runs --nnodes %s --tp-size %s, this node --nnodes %d --tp-size %d\n"
                           % (a.dist_init_addr, a.node_rank, reply.get("nnodes"), reply.get("tp_size"), a.nnodes, a.tp_size))
            return False
        self.meeting["joined"] = [0]
        self.write_state()
        return True

    def watch_peer(self, rank, conn):
        """Node 0 cannot run a model whose other node died: like a collective with a dead peer, it is never ready
        (health 503) once a joined node's connection closed, and fails PEER_LOSS_GRACE seconds later unless it is
        stopping anyway (pause() raises PeerLost)."""
        conn.settimeout(None)
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        if self.peer_lost is None:
            self.peer_lost = (rank, time.time())

    def serve(self):
        a = self.args
        self.log.line("INFO:     Started server process [%d]" % self.pid)
        self.log.line("INFO:     Waiting for application startup.")
        self.log.line("INFO:     Application startup complete.")
        try:
            if self.fault == "port_in_use":
                raise OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))
            self.httpd = make_http_server(self)
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            self.log.line("ERROR:    [Errno %d] error while attempting to bind on address %r: %s"
                          % (exc.errno or 0, (a.host, a.port), reason))
            self.log.line("INFO:     Waiting for application shutdown.")
            self.log.line("INFO:     Application shutdown complete.")
            return 1
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        scheme_host = "[%s]" % a.host if ":" in a.host else a.host
        self.log.line("INFO:     Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (scheme_host, a.port))
        if a.skip_server_warmup:
            self.status = "ready"
        else:
            self.pause(self.sim["warmup_seconds"])
            # the warm-up generation runs on every rank: it cannot finish while a node is gone
            if self.fault != "hang" and self.peer_lost is None:
                self.log.line('INFO:     127.0.0.1:%d - "POST /generate HTTP/1.1" 200 OK' % (40000 + self.pid % 20000))
                self.status = "ready"
        # the state file is current before anyone can read the ready line
        self.write_state()
        if self.status == "ready" and not a.skip_server_warmup:
            self.log.line(self.fmt("ready"))
        while True:
            self.pause(3600)

    def shutdown(self):
        self.status = "stopped"
        if self.httpd is not None:
            self.log.line("INFO:     Shutting down")
            self.httpd.shutdown()
            self.httpd.server_close()
            self.log.line("INFO:     Waiting for application shutdown.")
            self.log.line("INFO:     Application shutdown complete.")
            self.log.line("INFO:     Finished server process [%d]" % self.pid)
        return 0

    # -- faults -------------------------------------------------------------------------------------------

    def spawn_stubborn_child(self):
        limit = float(os.environ.get("SGLANG_SIM_CHILD_MAX_SECONDS", "600"))
        code = ("import signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "end = time.time() + %r\n"
                "while time.time() < end:\n"
                "    time.sleep(0.2)\n" % limit)
        # no inherited stdout: a reader of ours would otherwise wait for this child too
        self.children.append(subprocess.Popen([sys.executable, "-c", code, "sglang::scheduler_TP0"], stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True))

    def _traceback(self, rank, frames, final):
        head = self.fmt("scheduler_exception", "Traceback (most recent call last):")
        body = "".join('  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/%s", line %d, in %s\n    %s\n' % f for f in frames)
        self.log.line(head, self.tags(rank))
        self.log.write(body + final + "\n\n")
        self.log.line(self.fmt("sigquit"))

    SCHEDULER_FRAMES = [
        ("managers/scheduler.py", 3096, "run_scheduler_process", "scheduler = Scheduler("),
        ("managers/scheduler.py", 360, "__init__", "self.init_model_worker()"),
        ("managers/tp_worker.py", 247, "__init__", "self._init_model_runner()"),
        ("model_executor/model_runner.py", 412, "__init__", "self.initialize(min_per_gpu_memory)"),
    ]

    def oom_traceback(self):
        rank = self.ranks[-1]
        gpu = rank % max(1, len(self.ranks))
        total = self.sim["gpu_mem_gib"] - 0.62
        frames = self.SCHEDULER_FRAMES + [
            ("model_executor/model_runner.py", 561, "initialize", "self.load_model()"),
            ("model_executor/model_runner.py", 1032, "load_model", "self.model = get_model("),
            ("model_loader/loader.py", 683, "load_model", "self.load_weights_and_postprocess("),
            ("models/qwen3_5.py", 1291, "load_weights", "weight_loader(param, loaded_weight, shard_id)"),
        ]
        final = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU %d has a total capacity of %.2f GiB "
                 "of which 1.12 GiB is free. Including non-PyTorch memory, this process has %.2f GiB memory in use. Of the allocated "
                 "memory %.2f GiB is allocated by PyTorch, and 412.50 MiB is reserved by PyTorch but unallocated. If reserved but "
                 "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
                 "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
                 % (gpu, total, total - 1.12, total - 1.62))
        self._traceback(rank, frames, final)

    def crash_traceback(self):
        frames = self.SCHEDULER_FRAMES + [
            ("model_executor/model_runner.py", 540, "initialize", "self.init_torch_distributed()"),
            ("layers/layernorm.py", 118, "forward_cuda", "out = rmsnorm(x, self.weight.data, self.variance_epsilon)"),
        ]
        final = ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
                 "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
                 "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                 "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
        self._traceback(self.ranks[0], frames, final)

    def not_enough_memory(self):
        frames = self.SCHEDULER_FRAMES + [
            ("model_executor/model_runner.py", 575, "initialize", "self.init_memory_pool(min_per_gpu_memory)"),
            ("model_executor/model_runner_kv_cache_mixin.py", 402, "init_memory_pool", "raise RuntimeError("),
        ]
        final = ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=%s"
                 % self.plan["mem_fraction_static"])
        self._traceback(self.ranks[0], frames, final)

    # -- generation ---------------------------------------------------------------------------------------

    def plan_answer(self, text, question, max_tokens):
        """(list of token strings, finish_reason)."""
        if "needle" in question.lower():
            found = NEEDLE_RE.search(text)
            if found:
                value = found.group(1)
                depth = found.start() / float(max(1, len(text)))
                if self.fault == "degrade_recall" and depth > self.sim["recall_depth"]:
                    value = corrupt(value)
                words = ("The needle is %s." % value).split(" ")
                return [w if i == 0 else " " + w for i, w in enumerate(words)][:max_tokens or None], "stop"
        words = ANSWER.split(" ")
        count = max_tokens if max_tokens else self.sim["output_tokens"]
        tokens = [(" " if i else "") + words[i % len(words)] for i in range(count)]
        return tokens, ("length" if max_tokens else "stop")

    def generate(self, text, question, max_tokens, emit):
        """Paces tokens like a decoding server; emit(token) is called per token. Returns (tokens, finish, prompt_tokens)."""
        prompt_tokens = max(1, int(math.ceil(len(text) / 4.0)))
        tokens, finish = self.plan_answer(text, question, max_tokens)
        start = time.time()
        with self.lock:
            self.running += 1
            self.num_requests += 1
            self.prompt_tokens += prompt_tokens
        usage = "full token usage: 0.00, mamba usage: 0.00, " if self.model["linear_layers"] else "token usage: 0.00, "
        self.rank0(self.fmt("prefill_batch", 1, prompt_tokens, 0, usage, self.running - 1, 0, 0, False,
                            prompt_tokens / max(1e-3, time.time() - start)))
        try:
            due = start + self.sim["ttft_ms"] / 1000.0
            for i, tok in enumerate(tokens):
                delay = due - time.time()
                if delay > 0:
                    time.sleep(delay)
                emit(tok)
                now = time.time()
                if i == 0:
                    with self.lock:
                        self.ttft_obs.append(now - start)
                self.count_token(now)
                with self.lock:
                    rate = self.sim["tokens_per_second"] / (1.0 + self.sim["batch_slowdown"] * max(0, self.running - 1))
                due += 1.0 / max(rate, 1e-6)
        finally:
            with self.lock:
                self.running -= 1
                self.e2e_obs.append(time.time() - start)
        return tokens, finish, prompt_tokens

    def count_token(self, now):
        with self.lock:
            self.generation_tokens += 1
            self.decode_steps += 1
            self.recent_tokens.append(now)
            while self.recent_tokens and self.recent_tokens[0] < now - 5.0:
                self.recent_tokens.popleft()
            log_now = self.decode_steps % DECODE_LOG_INTERVAL == 0
            running = self.running
        if log_now:
            if self.model["linear_layers"]:
                usage = "#full token: %d, full token usage: 0.00, mamba num: %d, mamba usage: 0.00, " % (
                    self.generation_tokens, running)
            else:
                usage = "#token: %d, token usage: 0.00, " % self.generation_tokens
            if self.spec_algo:
                usage += "accept len: 1.00, accept rate: 0.00, "
            self.rank0(self.fmt("decode_batch", running, usage, True, self.gen_throughput(), 0))

    def gen_throughput(self):
        if len(self.recent_tokens) < 2:
            return 0.0
        span = max(1e-3, self.recent_tokens[-1] - self.recent_tokens[0])
        return (len(self.recent_tokens) - 1) / span


def corrupt(value):
    """A different value of the same shape (digits +1, letters shifted by one)."""
    out = []
    for ch in value:
        if ch.isdigit():
            out.append(str((int(ch) + 1) % 10))
        elif "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + 1) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + 1) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)


# ---------------------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------------------

AUTH_EXEMPT = ("/health", "/health_generate", "/metrics")
# model_executor/graph_memory_usage.py GRAPH_MEMORY_USAGE_KEYS: memory_usage["graph"] always has every phase
GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
HIST_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def make_http_server(sim):
    family = socket.AF_INET6 if ":" in sim.args.host else socket.AF_INET

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True
        request_queue_size = 2048  # a burst of concurrent clients must not lose SYNs (uvicorn's backlog)

    class Handler(SimHandler):
        simulator = sim

    return Server((sim.args.host, sim.args.port), Handler)


class SimHandler(BaseHTTPRequestHandler):
    simulator = None

    def version_string(self):
        return "uvicorn"

    def log_message(self, fmt, *args):
        return

    # -- plumbing -----------------------------------------------------------------------------------------

    def _access(self, code):
        try:
            phrase = self.responses[code][0]
        except KeyError:
            phrase = ""
        host, port = self.client_address[:2]
        self.simulator.log.line('INFO:     %s:%d - "%s %s %s" %d %s' % (host, port, self.command, self.path, self.request_version, code, phrase))

    def _send(self, code, body=b"", ctype="application/json"):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode("utf-8")
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._access(code)

    def _authorized(self, path):
        key = self.simulator.args.api_key
        if not key or path in AUTH_EXEMPT:
            return True
        return self.headers.get("Authorization", "") == "Bearer " + key

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        return json.loads(raw.decode("utf-8") or "{}")

    def _error(self, code, message):
        self._send(code, {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": code})

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def _route(self, method):
        path = self.path.split("?", 1)[0]
        if not self._authorized(path):
            self._send(401, {"error": "Unauthorized"})
            return
        routes = {
            ("GET", "/health"): self.health, ("GET", "/health_generate"): self.health,
            ("GET", "/server_info"): self.server_info, ("GET", "/get_server_info"): self.server_info,
            ("GET", "/model_info"): self.model_info, ("GET", "/get_model_info"): self.model_info,
            ("GET", "/v1/models"): self.models, ("GET", "/metrics"): self.metrics,
            ("GET", "/flush_cache"): self.flush_cache, ("POST", "/flush_cache"): self.flush_cache,
            ("POST", "/v1/chat/completions"): self.chat, ("POST", "/v1/completions"): self.completions,
            ("POST", "/generate"): self.generate_native,
        }
        handler = routes.get((method, path))
        if handler is None:
            known = set(p for _m, p in routes)
            self._send(405 if path in known else 404, {"detail": "Method Not Allowed" if path in known else "Not Found"})
            return
        try:
            handler()
        except (BrokenPipeError, ConnectionResetError):
            pass
        except ValueError as exc:
            self._error(400, "invalid request: %s" % exc)

    # -- endpoints ----------------------------------------------------------------------------------------

    def health(self):
        ready = self.simulator.status == "ready" and self.simulator.peer_lost is None
        self._send(200 if ready else 503, b"", "text/plain")

    def server_info(self):
        """/server_info as SGLang 0.5.23 builds it (entrypoints/http_server.py, utils/common.py build_server_info).

        The server args are the resolved ones (kv_cache_dtype auto stays auto: the model runner's resolution is not
        reported), launch_command is the command line as typed, and neither hides the API key.
        """
        sim = self.simulator
        plan = sim.plan
        fields = sim.server_args()
        graph = dict((phase, 0.0) for phase in GRAPH_PHASES)
        graph["target_verify" if sim.spec_algo else "decode"] = CUDA_GRAPH_GIB
        startup = {"load_weight": sim.sim["load_seconds"], "kv_cache_allocation": 0.01, "scheduler_e2e": sim.sim["load_seconds"],
                   "cuda_graph": dict((phase, 0.1 * sim.sim["load_seconds"] if graph[phase] else 0.0) for phase in GRAPH_PHASES)}
        # managers/scheduler_components/internal_state.py: the scheduler's server args plus its live state
        internal = dict(fields)
        internal.pop("custom_sigquit_handler")  # not serialisable in SGLang: dropped from the readback
        internal.update({
            "world_size": sim.args.tp_size * sim.args.dp_size,
            "startup_time": startup,
            "effective_max_running_requests_per_dp": plan["max_running_requests"],
            "last_gen_throughput": round(sim.gen_throughput(), 2),
            "memory_usage": {"weight": sim.sim["weight_gib"], "kvcache": round(plan["kvcache_gib"], 3),
                             "startup_available": round(plan["available_gpu_mem_gib"], 3),
                             "token_capacity": plan["max_total_num_tokens"], "token_capacity_swa": None, "graph": graph},
        })
        if sim.spec_algo:
            internal["avg_spec_accept_length"] = 1.0
        info = dict(fields)
        info["launch_command"] = launch_command(sim.argv)
        # the scheduler's init info (managers/scheduler.py get_init_info)
        info.update({"status": "ready", "max_total_num_tokens": plan["max_total_num_tokens"],
                     "max_req_input_len": sim.context_len - 1, "startup_time": startup, "hicache_object_layout": None})
        info.update({"kv_events": None, "internal_states": [internal], "version": sim.sim["version"], "frontend": "python"})
        self._send(200, info)

    def model_info(self):
        sim = self.simulator
        self._send(200, {"model_path": sim.args.model_path, "tokenizer_path": sim.args.tokenizer_path or sim.args.model_path,
                         "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
                         "has_image_understanding": False, "has_audio_understanding": False,
                         "model_type": sim.model["model_type"], "architectures": [sim.model["architecture"]]})

    def models(self):
        sim = self.simulator
        model = {"id": sim.served_name, "object": "model", "created": int(sim.started), "owned_by": "sglang",
                 "root": sim.served_name, "max_model_len": sim.context_len}
        self._send(200, {"object": "list", "data": [model]})

    def flush_cache(self):
        self._send(200, b"Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, "
                        b"the operation will not be performed.)\n", "text/plain")

    def metrics(self):
        sim = self.simulator
        if not sim.args.enable_metrics:
            self._send(404, {"detail": "Not Found"})
            return
        label = '{model_name="%s"}' % sim.served_name.replace('"', '\\"')
        with sim.lock:
            running = sim.running
            gauges = [
                ("num_running_reqs", "The number of running requests.", running),
                ("num_used_tokens", "The number of used tokens.", 0),
                ("token_usage", "The token usage.", 0.0),
                ("full_token_usage", "The token usage of full attention layers.", 0.0),
                ("mamba_usage", "The usage of the mamba state pool.", 0.0),
                ("gen_throughput", "The generation throughput (token/s).", sim.gen_throughput()),
                ("num_queue_reqs", "The number of requests in the waiting queue.", 0),
                ("cache_hit_rate", "The prefix cache hit rate.", 0.0),
                ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", sim.plan["max_total_num_tokens"]),
            ]
            counters = [
                ("prompt_tokens_total", "Number of prefill tokens processed.", sim.prompt_tokens),
                ("generation_tokens_total", "Number of generation tokens processed.", sim.generation_tokens),
                ("cached_tokens_total", "Number of cached prompt tokens.", 0),
                ("num_requests_total", "Number of requests processed.", sim.num_requests),
            ]
            hists = [
                ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", list(sim.ttft_obs)),
                ("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", list(sim.e2e_obs)),
            ]
        lines = []
        for name, helptext, value in gauges:
            lines += ["# HELP sglang:%s %s" % (name, helptext), "# TYPE sglang:%s gauge" % name,
                      "sglang:%s%s %s" % (name, label, float(value))]
        for name, helptext, value in counters:
            lines += ["# HELP sglang:%s %s" % (name, helptext), "# TYPE sglang:%s counter" % name,
                      "sglang:%s%s %s" % (name, label, float(value))]
        for name, helptext, obs in hists:
            lines += ["# HELP sglang:%s %s" % (name, helptext), "# TYPE sglang:%s histogram" % name]
            base = label[1:-1]
            for le in HIST_BUCKETS:
                lines.append('sglang:%s_bucket{%s,le="%s"} %s' % (name, base, le, float(sum(1 for o in obs if o <= le))))
            lines.append('sglang:%s_bucket{%s,le="+Inf"} %s' % (name, base, float(len(obs))))
            lines.append("sglang:%s_sum%s %s" % (name, label, float(sum(obs))))
            lines.append("sglang:%s_count%s %s" % (name, label, float(len(obs))))
        self._send(200, ("\n".join(lines) + "\n").encode("utf-8"), "text/plain; version=0.0.4; charset=utf-8")

    # -- generation ---------------------------------------------------------------------------------------

    def _ready_or_503(self):
        if self.simulator.status != "ready":
            self._send(503, {"object": "error", "message": "The server is not ready yet.", "type": "ServiceUnavailable",
                             "param": None, "code": 503})
            return False
        return True

    def _check_len(self, text):
        sim = self.simulator
        tokens = int(math.ceil(len(text) / 4.0))
        if tokens >= sim.context_len:
            self._error(400, "The input (%d tokens) is longer than the model's context length (%d tokens)." % (tokens, sim.context_len))
            return False
        return True

    def chat(self):
        if not self._ready_or_503():
            return
        req = self._body()
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        parts = []
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):
                content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            parts.append(str(content or ""))
        text = "\n".join(parts)
        question = next((p for m, p in zip(reversed(messages), reversed(parts)) if m.get("role") == "user"), parts[-1])
        if not self._check_len(text):
            return
        self._completion(req, text, question, chat=True)

    def completions(self):
        if not self._ready_or_503():
            return
        req = self._body()
        prompt = req.get("prompt")
        text = " ".join(prompt) if isinstance(prompt, list) else str(prompt or "")
        if not self._check_len(text):
            return
        self._completion(req, text, text, chat=False)

    def generate_native(self):
        if not self._ready_or_503():
            return
        req = self._body()
        text = str(req.get("text") or "")
        params = req.get("sampling_params") or {}
        tokens, finish, prompt_tokens = self.simulator.generate(text, text, params.get("max_new_tokens"), lambda tok: None)
        meta = {"id": uuid.uuid4().hex, "prompt_tokens": prompt_tokens, "completion_tokens": len(tokens), "cached_tokens": 0,
                "finish_reason": {"type": finish}}
        self._send(200, {"text": "".join(tokens), "meta_info": meta})

    def _completion(self, req, text, question, chat):
        sim = self.simulator
        max_tokens = req.get("max_completion_tokens") or req.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError("max_tokens must be a positive integer")
        rid = uuid.uuid4().hex
        created = int(time.time())
        model = req.get("model") or sim.served_name
        obj = "chat.completion" if chat else "text_completion"
        if not req.get("stream"):
            tokens, finish, prompt_tokens = sim.generate(text, question, max_tokens, lambda tok: None)
            content = "".join(tokens)
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": content, "reasoning_content": None, "tool_calls": None},
                          "logprobs": None, "finish_reason": finish, "matched_stop": None}
            else:
                choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": finish, "matched_stop": None}
            self._send(200, {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice],
                             "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + len(tokens),
                                       "completion_tokens": len(tokens), "prompt_tokens_details": None}})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk_obj = "chat.completion.chunk" if chat else "text_completion"

        def event(choice, usage=None):
            payload = {"id": rid, "object": chunk_obj, "created": created, "model": model, "choices": [choice] if choice else []}
            if usage is not None:
                payload["usage"] = usage
            self.wfile.write(("data: %s\n\n" % json.dumps(payload)).encode("utf-8"))
            self.wfile.flush()

        def emit(tok):
            if chat:
                event({"index": 0, "delta": {"role": None, "content": tok, "reasoning_content": None, "tool_calls": None},
                       "logprobs": None, "finish_reason": None, "matched_stop": None})
            else:
                event({"index": 0, "text": tok, "logprobs": None, "finish_reason": None, "matched_stop": None})

        if chat:
            event({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None, "matched_stop": None})
        tokens, finish, prompt_tokens = sim.generate(text, question, max_tokens, emit)
        if chat:
            event({"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish, "matched_stop": None})
        else:
            event({"index": 0, "text": "", "logprobs": None, "finish_reason": finish, "matched_stop": None})
        if (req.get("stream_options") or {}).get("include_usage"):
            event(None, {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + len(tokens), "completion_tokens": len(tokens)})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self._access(200)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    sim = Simulator(argv, sys.stdout)
    return sim.run()


if __name__ == "__main__":
    sys.exit(main())
