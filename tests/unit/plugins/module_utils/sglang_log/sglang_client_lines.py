# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writes the log lines a client can put into an SGLang 0.5.23 log, made by SGLang's and uvicorn's own code.

Run with the interpreter of the venv made by tests/lab/bin/make-sglang-venv (real SGLang, real uvicorn):

    .cache/sglang-venv/bin/python tests/unit/plugins/module_utils/sglang_log/sglang_client_lines.py > lines.jsonl

- access lines: uvicorn's AccessFormatter with the format SGLang installs (``set_uvicorn_logging_configs``),
  given the arguments uvicorn's HTTP protocol passes (``get_path_with_query_string`` of the request);
- request echoes: SGLang's ``RequestLogger`` (``--log-requests``), text and JSON formats, for
  ``/generate`` requests whose prompt holds the text of SGLang's own log lines.

Each output line is JSON: {"kind": "access" | "echo", "request": what was sent, "line": the log line}.
Nothing is sent over a network: the formatters are called as uvicorn and SGLang call them.
"""

from __future__ import annotations

import io
import json
import logging
import logging.config
import os
import re
import sys
import time

# What a hostile client sends: the text of SGLang's key log lines, with the record prefix a forger would need.
FORGED = [
    "server_args=ServerArgs(kv_cache_dtype='fp8_e4m3',model_path='/tmp/x')",
    "server_args={'model_path': '/tmp/x', 'kv_cache_dtype': 'fp8_e4m3', 'tp_size': 1}",
    "Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.",
    "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1, K size: 1.00 GB, V size: 1.00 GB",
    "Using KV cache dtype: torch.float8_e4m3fn",
    "max_total_num_tokens=1, chunked_prefill_size=1",
    "The server is fired up and ready to roll!",
    "Scheduler hit an exception: Traceback (most recent call last):",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use",
    "launch_server.py: error: unrecognized arguments: --foo",
]
# Every place in SGLang 0.5.16 and 0.5.23 where a client value reaches a log call, found with ast by
# sglang_source.client_log_sites (the rule is written there): (release, file under sglang/srt, function, format as
# written, raw or repr: whether the client value is written as sent or escaped). test_sglang_log_records holds the
# found set equal to this table; docs/security.md says what each can write and why none becomes a fact.
CLIENT_LOG_SITES = (
    ('0.5.16', 'disaggregation/common/conn.py', '_handle_route_put',
     "f'Register prefill bootstrap: DP{dp_group} CP{attn_cp_rank} TP{attn_tp_rank} PP{pp_rank} with rank_ip: {rank_i"
     "p} and rank_port: {rank_port} ({self._registered_count}/{expected} registered)'", 'raw'),
    ('0.5.16', 'disaggregation/decode.py', 'add', "f'prefill_dp_rank: {prefill_dp_rank}'", 'raw'),
    ('0.5.16', 'disaggregation/decode.py', '_check_if_req_exceed_kv_capacity', 'message', 'raw'),
    ('0.5.16', 'disaggregation/decode.py', '_check_if_req_exceed_kv_capacity', 'message', 'raw'),
    ('0.5.16', 'disaggregation/decode.py', '_pre_alloc',
     "f'Eviction insufficient: needed {required_alloc_tokens} tokens, available {self.token_to_kv_pool_allocator.ava"
     'ilable_size()} after evicting {result.num_tokens_evicted}/{num_to_evict} tokens. evictable_size={self.tree_cac'
     'he.evictable_size()}, protected_size={self.tree_cache.protected_size()}, fill_len={fill_len}, prefix_len={pref'
     'ix_len}, total_prefix_len={total_prefix_len}, delta_len={delta_len}, page_size={self.token_to_kv_pool_allocato'
     "r.page_size}, req={req.rid}'", 'raw'),
    ('0.5.16', 'disaggregation/decode_hicache_mixin.py', '_start_hicache_prefetch',
     "'HiCache L3 prefetch failed for rid=%s: %s; falling back to L2-only LoadingBack'", 'raw'),
    ('0.5.16', 'disaggregation/encode_receiver.py', '__init__', "f'Waiting for input self.embedding_port = {self.embedding_port!r}'", 'repr'),
    ('0.5.16', 'disaggregation/encode_receiver.py', '_send_encode_request',
     "f'Dispatching {len(mm_data)} mm items to {len(encode_urls)} encoder(s) {encode_urls} for request {obj.rid}'", 'raw'),
    ('0.5.16', 'disaggregation/encode_receiver.py', '_send_encode_request',
     "f'No encoder URLs available for request {obj.rid}; processing without encoder disaggregation.'", 'raw'),
    ('0.5.16', 'disaggregation/encode_server.py', 'start',
     "f'Encoder profiling started. output_dir={self.output_dir} profile_id={self.profile_id}'", 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', '_check_if_req_exceed_kv_capacity', 'message', 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'handle_inflight_transfer_failure', 'error_message', 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'handle_inflight_transfer_failure', 'error_message', 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'handle_bootstrap_failure', 'error_message', 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'handle_bootstrap_failure', 'error_message', 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'handle_pending_bootstrap',
     "raise RuntimeError(f'Unexpected poll state {poll} for req {req.rid} in handle_pending_bootstrap')", 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'maybe_send_cached_prefix_chunk', 'req', 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'send_kv_chunk', "'send_kv_chunk skip: rid=%s start_send_idx=%s end_idx=%s'", 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'optimistic_release_and_requeue',
     "f'Req {req.rid} exhausted optimistic prefill attempts falling back to bootstrap queue'", 'raw'),
    ('0.5.16', 'disaggregation/prefill.py', 'optimistic_release_and_requeue',
     "f'Req {req.rid} optimistic prefill yielded ({req.prefill_attempt_count}/{max_attempts} attempts used)'", 'raw'),
    ('0.5.16', 'disaggregation/utils.py', 'set_buf',
     "raise RuntimeError(f'top_logprobs_num {top_logprobs_len} exceeds disaggregation metadata capacity {max_top_log"
     "probs_len}. Lower top_logprobs_num or increase the metadata buffer.')", 'raw'),
    ('0.5.16', 'disaggregation/utils.py', 'set_buf',
     "raise RuntimeError(f'Sampling mask length {mask_len} exceeds disaggregation metadata capacity {max_mask_len}. "
     "Increase SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS.')", 'raw'),
    ('0.5.16', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream', "'Unmapped streaming finish_reason %r; defaulting to end_turn'", 'repr'),
    ('0.5.16', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream', "'Forwarding upstream stream error (%s): %s'", 'raw'),
    ('0.5.16', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream', "'Failed to parse Anthropic stream chunk (%s): %s'", 'raw'),
    ('0.5.16', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream',
     "'Dropping tool_call argument delta with no open tool_use block: %r'", 'repr'),
    ('0.5.16', 'entrypoints/grpc_bridge.py', '_run_generate', "'gRPC generate error for rid=%s: %s'", 'raw'),
    ('0.5.16', 'entrypoints/grpc_bridge.py', '_run_embed', "'gRPC embed error for rid=%s: %s'", 'raw'),
    ('0.5.16', 'entrypoints/harmony_utils.py', 'get_developer_message', "'harmony: ignoring unsupported response tool type %r'", 'repr'),
    ('0.5.16', 'entrypoints/openai/serving_base.py', 'extract_routed_dp_rank_from_header',
     'raise HTTPException(HTTPException(status_code=400, detail=f"Invalid X-Data-Parallel-Rank header: must be an in'
     'teger, got \'{header_value}\'"))', 'raw'),
    ('0.5.16', 'entrypoints/openai/serving_transcription.py', '_handle_non_streaming_request', '"Auto-detected language: \'%s\'"', 'raw'),
    ('0.5.16', 'entrypoints/openai/serving_transcription.py', '_generate_transcription_stream', '"Auto-detected language: \'%s\'"', 'raw'),
    ('0.5.16', 'entrypoints/openai/streaming_asr.py', 'process_asr_chunk', "'[streaming_asr] chunk %d failed'", 'repr'),
    ('0.5.16', 'entrypoints/openai/streaming_asr.py', 'process_asr_chunk', "'[streaming_asr] empty response for chunk %d'", 'repr'),
    ('0.5.16', 'function_call/apertus2509_detector.py', 'parse_streaming_increment', "f'Model attempted to call undefined function: {name}'", 'raw'),
    ('0.5.16', 'function_call/apertus2509_detector.py', '_parse_apertus_call_list', "f'Model attempted to call undefined function: {name}'", 'raw'),
    ('0.5.16', 'function_call/inkling_detector.py', 'detect_and_parse', 'payload', 'raw'),
    ('0.5.16', 'function_call/inkling_detector.py', 'parse_streaming_increment', 'payload', 'raw'),
    ('0.5.16', 'function_call/internlm_detector.py', 'detect_and_parse',
     "f'[InternLM Tool Call] Model attempted to call undefined function: {name}, available_tools={list(tool_indices."
     "keys())}'", 'raw'),
    ('0.5.16', 'function_call/kimik2_detector.py', 'detect_and_parse', 'function_id', 'raw'),
    ('0.5.16', 'function_call/kimik2_detector.py', 'detect_and_parse', "f'function_name {function_name}'", 'raw'),
    ('0.5.16', 'function_call/kimik2_detector.py', 'parse_streaming_increment', "'Kimi-K2 unrecognized tool_call_id %r; skipping section.'", 'repr'),
    ('0.5.16', 'function_call/lfm2_detector.py', '_parse_tool_calls_content', "f'JSON parsing failed: {error}, trying Pythonic format'", 'raw'),
    ('0.5.16', 'function_call/lfm2_detector.py', '_parse_tool_calls_content', "f'Failed to parse tool calls: {error}'", 'raw'),
    ('0.5.16', 'function_call/mimo_detector.py', 'detect_and_parse', "f'Unknown function: {func_name}'", 'raw'),
    ('0.5.16', 'function_call/mimo_detector.py', '_parse_tool_call', 'param_value', 'raw'),
    ('0.5.16', 'function_call/minimax_m2.py', 'parse_streaming_increment', "f'Invalid function name: {function_name}'", 'raw'),
    ('0.5.16', 'function_call/utils.py', '_get_tool_schema_defs',
     'raise ValueError(f"Tool definition \'{def_name}\' has multiple schemas, which is not supported.")', 'raw'),
    ('0.5.16', 'lora/lora_drainer.py', '_update_draining_loras', "f'LoRA adapter {min_eligible_adapter} is draining for {starving_adapter}'", 'raw'),
    ('0.5.16', 'managers/data_parallel_controller.py', 'update_active_ranks',
     "'[Elastic EP][DPC] active rank status len=%d != max_dp_size=%d; ignoring update'", 'repr'),
    ('0.5.16', 'managers/data_parallel_controller.py', 'update_active_ranks',
     "'[DPC] update_active_ranks: status len=%d != max_dp_size=%d; ignoring update'", 'repr'),
    ('0.5.16', 'managers/data_parallel_controller.py', 'maybe_external_dp_rank_routing', "raise ValueError(f'DP rank {rank} is not active.')", 'raw'),
    ('0.5.16', 'managers/data_parallel_controller.py', 'maybe_external_dp_rank_routing', "f'Direct routing to DP rank {rank}'", 'raw'),
    ('0.5.16', 'managers/detokenizer_manager.py', '_decode_batch_token_id_output',
     "raise RuntimeError(f'Decode status not found for request {rid}. It may be due to the request being evicted fro"
     'm the decode status due to memory pressure. Please increase the maximum number of requests by setting the SGLA'
     'NG_DETOKENIZER_MAX_STATES environment variable to a bigger value than the default value. The current value is '
     "{DETOKENIZER_MAX_STATES}. For more details, see: https://github.com/sgl-project/sglang/issues/2812')", 'raw'),
    ('0.5.16', 'managers/hisparse_coordinator.py', 'admit_request_direct', "'HiSparse: admitting request %s directly'", 'raw'),
    ('0.5.16', 'managers/hisparse_coordinator.py', 'alloc_device_buffer',
     "'HiSparse: alloc_device_buffer failed for req %s (compressed_len=%d, alloc_size=%d)'", 'raw'),
    ('0.5.16', 'managers/schedule_policy.py', 'calc_priority', "raise ValueError(f'Unknown CacheAware Policy: policy={policy!r}')", 'repr'),
    ('0.5.16', 'managers/schedule_policy.py', 'calc_priority', "raise ValueError(f'Unknown CacheAgnostic Policy: policy={policy!r}')", 'repr'),
    ('0.5.16', 'managers/schedule_policy.py', '_sort_by_routing_key',
     "f'routing_key_counts={dict(routing_key_counts)}, waiting_keys_before={waiting_keys_before}'", 'raw'),
    ('0.5.16', 'managers/schedule_policy.py', '_sort_by_routing_key', "f'waiting_keys_after={waiting_keys_after}'", 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'handle_generate_request', 'error_msg', 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'attach_hicache_storage_wrapped',
     "f'Attached HiCache storage backend: {recv_req.hicache_storage_backend}'", 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'set_internal_state', "f'Updating {k} is not supported.'", 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'set_internal_state',
     "f'Updating {k} to {v} is rejected because it is out of the valid range [1, {self.max_running_requests // self."
     "ps.pp_size}].'", 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'set_internal_state', "f'dspark_force_budget_frac must be in (0, 1] or null, got {v}.'", 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'handle_rpc_request', "f'handle_rpc_request: {recv_req.method}, param: {recv_req.parameters}'", 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'handle_rpc_request', "f'Failed to call rpc {recv_req.method}: {str(e)}'", 'raw'),
    ('0.5.16', 'managers/scheduler.py', 'abort_request', "f'Abort queued request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.16', 'managers/scheduler.py', 'abort_request', "f'Abort dLLM queued request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.16', 'managers/scheduler.py', 'abort_request', "f'Abort bootstrap queue request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.16', 'managers/scheduler.py', 'abort_request', "f'Abort inflight queue request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.16', 'managers/scheduler.py', 'abort_request', "f'Abort running request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.16', 'managers/scheduler.py', 'handle_scale_elastic_ep',
     "'[Elastic EP][scale] request received: new_ep_size=%d old_ep_size=%d max_ep_size=%d'", 'repr'),
    ('0.5.16', 'managers/scheduler.py', 'handle_scale_elastic_ep',
     "'[Elastic EP][scale] scale requested: target_ep_size=%d; waiting for a joining cohort'", 'repr'),
    ('0.5.16', 'managers/scheduler.py', 'expert_distribution_handle',
     "raise ValueError(f'Unrecognized ExpertDistributionReq value: recv_req={recv_req!r}')", 'repr'),
    ('0.5.16', 'managers/scheduler_components/batch_result_processor.py', '_maybe_collect_routed_experts',
     "'routed_experts row-count mismatch for req %s: got %d, expected %d (seqlen=%d, raw_seqlen=%d, cached_tokens=%d"
     ", start_len=%s). This indicates a silent bug.'", 'raw'),
    ('0.5.16', 'managers/scheduler_components/batch_result_processor.py', '_apply_prefill_grammar',
     "f'Grammar accept_token failed for req {req.rid} with token {next_token_id}: {e}'", 'raw'),
    ('0.5.16', 'managers/scheduler_components/batch_result_processor.py', '_accept_grammar_tokens',
     "f'Grammar accept_token failed for req {req.rid} with token {tokens}: {e}'", 'raw'),
    ('0.5.16', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_disk', 'message', 'raw'),
    ('0.5.16', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_distributed', 'message', 'raw'),
    ('0.5.16', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_tensor', 'message', 'raw'),
    ('0.5.16', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_ipc', 'message', 'raw'),
    ('0.5.16', 'managers/scheduler_input_blocker.py', '_handle_recv_req', "raise NotImplementedError(f'recv_req={recv_req!r}')", 'repr'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', '_execute_profile', 'raise RuntimeError(result.message)', 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter', "'Start load Lora adapter. Lora name=%s, path=%s'", 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter',
     'raise ValueError(f"Didn\'t find any LoRA adapters when trying to evict LRU LoRA adapter. LoRA registry is: {sel'
     'f.lora_registry._registry}")', 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter',
     'f"Unloading least recently used LoRA adapter \'{lru_lora_name}\' (current number of adapters: {self.lora_registr'
     'y.num_registered_loras}, max allowed: {self.server_args.max_loaded_loras})"', 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter',
     'raise ValueError(f"Error while unloading LRU LoRA adapter \'{lru_lora_name}\': {unload_result.error_message}")', 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors', "'Start load Lora adapter from tensors. Lora name=%s'", 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors',
     'raise ValueError(f"Didn\'t find any LoRA adapters when trying to evict LRU LoRA adapter. LoRA registry is: {sel'
     'f.lora_registry._registry}")', 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors',
     'f"Unloading least recently used LoRA adapter \'{lru_lora_name}\' (current number of adapters: {self.lora_registr'
     'y.num_registered_loras}, max allowed: {self.server_args.max_loaded_loras})"', 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors',
     'raise ValueError(f"Error while unloading LRU LoRA adapter \'{lru_lora_name}\': {unload_result.error_message}")', 'raw'),
    ('0.5.16', 'managers/tokenizer_control_mixin.py', 'unload_lora_adapter', "'Start unload Lora adapter. Lora name=%s'", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', 'generate_request', "f'routed_dp_rank={obj.routed_dp_rank} is ignored because dp_size={dp_size}'", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', 'generate_request',
     "raise ValueError(f'routed_dp_rank={obj.routed_dp_rank} out of range [0, {dp_size})')", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_tokenize_one_request',
     "'Ignoring malformed mm_hashes entry %r; this item will fall back to hash_feature().'", 'repr'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_validate_one_request',
     'f"Requested token count ({input_token_num} input + {max_new_tokens} new) exceeds the model\'s context length ({'
     'self.context_len} tokens). Truncating max_new_tokens."', 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_validate_one_request', 'raise ValueError(error_msg)', 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_validate_token_ids_logprob',
     "raise ValueError(f'token_ids_logprob contains out-of-vocabulary token id {token_id}; valid range is [0, {vocab"
     "_size}).')", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_wait_one_response',
     "raise ValueError(f'Request is disconnected from the client side (type 1). Abort request obj.rid={obj.rid!r}')", 'repr'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_wait_one_response', 'out_list', 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_wait_one_response',
     "raise ValueError(f'Request is disconnected from the client side (type 3). Abort request obj.rid={obj.rid!r}')", 'repr'),
    ('0.5.16', 'managers/tokenizer_manager.py', 'update_weights_from_disk', "'Start update_weights. Load format=%s'", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', 'configure_logging', "f'Config logging: obj={obj!r}'", 'repr'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_handle_batch_output',
     "f'Received output for rid={rid!r} but the state was deleted in TokenizerManager.'", 'repr'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_handle_abort_req',
     "'Abort request for rid=%s not found in rid_to_state; likely already finished/removed.'", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_validate_and_resolve_lora',
     'raise ValueError(f"LoRA adapter \'{first_adapter}\' was requested, but LoRA is not enabled. Please launch the se'
     'rver with --enable-lora flag and preload adapters using --lora-paths or /load_lora_adapter endpoint.")', 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_resolve_lora_path',
     "raise ValueError(f'Got LoRA adapter that has never been loaded: {lora_path}\\nAll loaded adapters: {self.lora_r"
     "ef_cache.keys()}.')", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_resolve_lora_path', "f'Reloading evicted adapter: {lora_path}'", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_resolve_lora_path',
     "raise ValueError(f'Failed to implicitly load LoRA adapter {lora_path}: {load_result.error_message}')", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_init_req_state', "raise ValueError(f'Duplicate request ID detected: {rid}')", 'raw'),
    ('0.5.16', 'managers/tokenizer_manager.py', '_should_dispatch_to_encoder',
     "'Batch request (batch_size=%d) is not supported in EPD disaggregation mode; skipping encoder dispatch.'", 'repr'),
    ('0.5.16', 'managers/tp_worker.py', 'load_lora_adapter_from_tensors',
     "raise RuntimeError(f'[LORA-CHECK] rank{self.tp_rank} adapter sync MISMATCH of {len(exp)} expected: {len(mismat"
     "ch)} value-diff {mismatch[:5]}, {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}')", 'raw'),
    ('0.5.16', 'mem_cache/session_radix_cache.py', '_tag_session_leaf', "'tag session %s: node=%d holders=%d indexed=%d'", 'raw'),
    ('0.5.16', 'mem_cache/storage/hf3fs/mini_3fs_metadata_server.py', 'initialize',
     'f"Rank {rank} namespace \'{namespace}\' already exists. Initialization request ignored."', 'raw'),
    ('0.5.16', 'mem_cache/storage/hf3fs/mini_3fs_metadata_server.py', 'initialize',
     'f"Rank {rank} namespace \'{namespace}\' initialized with different num_pages. Existing: {self.state.ranks[key].n'
     'um_pages}, New: {num_pages}"', 'raw'),
    ('0.5.16', 'mem_cache/storage/hf3fs/mini_3fs_metadata_server.py', 'initialize',
     'f"Initializing new Rank {rank} namespace \'{namespace}\' with {num_pages} pages."', 'raw'),
    ('0.5.16', 'session/session_controller.py', 'open', "f'session id {session_id} already exist, cannot open.'", 'raw'),
    ('0.5.16', 'session/session_controller.py', 'close', "f'session id {session_id} does not exist, cannot delete.'", 'raw'),
    ('0.5.16', 'session/session_controller.py', 'close', 'session_id', 'raw'),
    ('0.5.16', 'session/streaming_session.py', 'try_cache_finished_req', 'session_id', 'raw'),
    ('0.5.16', 'speculative/spec_utils.py', 'generate_token_bitmask',
     "f'Bit mask generation took {tree_traverse_time} seconds with grammar: {req.grammar}'", 'raw'),
    ('0.5.16', 'utils/request_logger.py', 'log_received_request',
     "f'Receive: obj={_dataclass_to_string_truncated(obj, max_length, skip_names=skip_names)}{headers_str}'", 'raw'),
    ('0.5.16', 'utils/request_logger.py', 'log_openai_received_request',
     "f'Receive OpenAI: obj={_dataclass_to_string_truncated(obj_to_log, max_length)}{headers_str}'", 'raw'),
    ('0.5.16', 'utils/request_logger.py', 'log_finished_request', "f'Finish: obj={obj_str}{headers_str}{out_str}'", 'raw'),
    ('0.5.23', 'disaggregation/common/conn.py', '_handle_route_put',
     "f'Register prefill bootstrap: DP{dp_group} CP{attn_cp_rank} TP{attn_tp_rank} PP{pp_rank} with rank_ip: {rank_i"
     "p} and rank_port: {rank_port} ({self._registered_count}/{expected} registered)'", 'raw'),
    ('0.5.23', 'disaggregation/decode.py', 'add', "f'prefill_dp_rank: {prefill_dp_rank}'", 'raw'),
    ('0.5.23', 'disaggregation/decode.py', '_check_if_req_exceed_kv_capacity', 'message', 'raw'),
    ('0.5.23', 'disaggregation/decode.py', '_pre_alloc',
     "f'Eviction insufficient: needed {required_alloc_tokens} tokens, available {self._radix_full_available()} after"
     ' evicting {result.num_tokens_evicted}/{num_to_evict} tokens. evictable_size={self._radix_full_evictable()}, pr'
     'otected_size={self._radix_full_protected()}, fill_len={fill_len}, prefix_len={prefix_len}, total_prefix_len={t'
     "otal_prefix_len}, delta_len={delta_len}, page_size={self.token_to_kv_pool_allocator.page_size}, req={req.rid}'", 'raw'),
    ('0.5.23', 'disaggregation/decode.py', '_pre_alloc', "'%s'", 'raw'),
    ('0.5.23', 'disaggregation/decode_hicache_mixin.py', '_start_hicache_prefetch',
     "'HiCache L3 prefetch failed for rid=%s: %s; falling back to L2-only LoadingBack'", 'raw'),
    ('0.5.23', 'disaggregation/encoder/receiver.py', '__init__', "f'Waiting for input self.embedding_port = {self.embedding_port!r}'", 'repr'),
    ('0.5.23', 'disaggregation/encoder/receiver.py', '_send_encode_request',
     "f'Dispatching {len(mm_data)} mm items to {len(encode_urls)} encoder(s) {encode_urls} for request {obj.rid}'", 'raw'),
    ('0.5.23', 'disaggregation/encoder/receiver.py', '_send_encode_request',
     "f'No encoder URLs available for request {obj.rid}; processing without encoder disaggregation.'", 'raw'),
    ('0.5.23', 'disaggregation/encoder/server.py', 'start',
     "f'Encoder profiling started. output_dir={self.output_dir} profile_id={self.profile_id}'", 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', '_check_if_req_exceed_kv_capacity', 'message', 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'handle_inflight_transfer_failure', 'error_message', 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'handle_inflight_transfer_failure', 'error_message', 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', '_retire_aborted_prefill_result', "'Failed to notify KV sender of abort for %s'", 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'handle_bootstrap_failure', 'error_message', 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'handle_bootstrap_failure', 'error_message', 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'handle_pending_bootstrap',
     "raise RuntimeError(f'Unexpected poll state {poll} for req {req.rid} in handle_pending_bootstrap')", 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'send_kv_chunk', 'req', 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', '_send_kv_chunk', "'send_kv_chunk skip: rid=%s start_send_idx=%s end_idx=%s'", 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'optimistic_release_and_requeue',
     "f'Req {req.rid} exhausted optimistic prefill attempts falling back to bootstrap queue'", 'raw'),
    ('0.5.23', 'disaggregation/prefill.py', 'optimistic_release_and_requeue',
     "f'Req {req.rid} optimistic prefill yielded ({req.prefill_attempt_count}/{max_attempts} attempts used)'", 'raw'),
    ('0.5.23', 'disaggregation/role_switch.py', 'handle_pd_role_switch', "'PD role switch rejected (%s -> %s): %s'", 'raw'),
    ('0.5.23', 'disaggregation/role_switch.py', 'handle_pd_role_switch', '*rejection', 'raw'),
    ('0.5.23', 'disaggregation/role_switch.py', 'handle_pd_role_switch',
     "f'insufficient decode CUDA graph headroom: required={required_graph_gb:.3f} GB, available={available_graph_gb:"
     ".3f} GB'", 'raw'),
    ('0.5.23', 'disaggregation/role_switch.py', 'handle_pd_role_switch',
     "'PD role switch (%s -> %s) failed during teardown/rebuild; instance unhealthy: %s'", 'raw'),
    ('0.5.23', 'disaggregation/role_switch.py', 'handle_pd_role_switch', "'PD role switch succeeded: %s -> %s'", 'raw'),
    ('0.5.23', 'disaggregation/utils.py', 'set_buf',
     "raise RuntimeError(f'top_logprobs_num {top_logprobs_len} exceeds disaggregation metadata capacity {max_top_log"
     "probs_len}. Lower top_logprobs_num or increase the metadata buffer.')", 'raw'),
    ('0.5.23', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream', "'Unmapped streaming finish_reason %r; defaulting to end_turn'", 'repr'),
    ('0.5.23', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream', "'Forwarding upstream stream error (%s): %s'", 'raw'),
    ('0.5.23', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream', "'Failed to parse Anthropic stream chunk (%s): %s'", 'raw'),
    ('0.5.23', 'entrypoints/anthropic/serving.py', '_generate_anthropic_stream',
     "'Dropping tool_call argument delta with no open tool_use block: %r'", 'repr'),
    ('0.5.23', 'entrypoints/grpc_bridge.py', '_run_generate', "'gRPC generate error for rid=%s: %s'", 'raw'),
    ('0.5.23', 'entrypoints/grpc_bridge.py', '_run_embed', "'gRPC embed error for rid=%s: %s'", 'raw'),
    ('0.5.23', 'entrypoints/harmony_utils.py', 'get_developer_message', "'harmony: ignoring unsupported response tool type %r'", 'repr'),
    ('0.5.23', 'entrypoints/openai/serving_base.py', 'extract_routed_dp_rank_from_header',
     'raise HTTPException(HTTPException(status_code=400, detail=f"Invalid X-Data-Parallel-Rank header: must be an in'
     'teger, got \'{header_value}\'"))', 'raw'),
    ('0.5.23', 'entrypoints/openai/serving_transcription.py', '_generate_transcription_stream', '"Auto-detected language: \'%s\'"', 'raw'),
    ('0.5.23', 'entrypoints/openai/serving_transcription.py', '_generate_long_audio_stream', '"Auto-detected language: \'%s\'"', 'raw'),
    ('0.5.23', 'entrypoints/openai/streaming_asr.py', 'process_asr_chunk', "'[streaming_asr] chunk %d failed'", 'repr'),
    ('0.5.23', 'entrypoints/openai/streaming_asr.py', 'process_asr_chunk', "'[streaming_asr] empty response for chunk %d'", 'repr'),
    ('0.5.23', 'function_call/apertus2509_detector.py', 'parse_streaming_increment', "f'Model attempted to call undefined function: {name}'", 'raw'),
    ('0.5.23', 'function_call/apertus2509_detector.py', '_parse_apertus_call_list', "f'Model attempted to call undefined function: {name}'", 'raw'),
    ('0.5.23', 'function_call/gigachat35_detector.py', 'parse_streaming_increment', "f'[GigaChat35] undefined function call: {name}'", 'raw'),
    ('0.5.23', 'function_call/inkling_detector.py', '_canonical_json_call', 'payload', 'raw'),
    ('0.5.23', 'function_call/inkling_detector.py', '_recover_last_json_call', 'payload', 'raw'),
    ('0.5.23', 'function_call/internlm_detector.py', 'detect_and_parse',
     "f'[InternLM Tool Call] Model attempted to call undefined function: {name}, available_tools={list(tool_indices."
     "keys())}'", 'raw'),
    ('0.5.23', 'function_call/kimik2_detector.py', 'detect_and_parse', 'function_id', 'raw'),
    ('0.5.23', 'function_call/kimik2_detector.py', 'detect_and_parse', "f'function_name {function_name}'", 'raw'),
    ('0.5.23', 'function_call/kimik2_detector.py', 'parse_streaming_increment', "'Kimi-K2 unrecognized tool_call_id %r; skipping section.'", 'repr'),
    ('0.5.23', 'function_call/kimik3_structural_tag.py', '_tool_arguments_format',
     "raise ValueError(f'Kimi K3 strict tool {tool.function.name!r} must define parameters')", 'repr'),
    ('0.5.23', 'function_call/kimik3_structural_tag.py', '_tool_arguments_format',
     "raise ValueError(f'Kimi K3 tool {tool.function.name!r} parameters must be an object schema')", 'repr'),
    ('0.5.23', 'function_call/lfm2_detector.py', '_parse_tool_calls_content', "f'JSON parsing failed: {error}, trying Pythonic format'", 'raw'),
    ('0.5.23', 'function_call/lfm2_detector.py', '_parse_tool_calls_content', "f'Failed to parse tool calls: {error}'", 'raw'),
    ('0.5.23', 'function_call/mimo_detector.py', 'detect_and_parse', "f'Unknown function: {func_name}'", 'raw'),
    ('0.5.23', 'function_call/mimo_detector.py', '_parse_tool_call', 'param_value', 'raw'),
    ('0.5.23', 'function_call/minimax_m2.py', 'parse_streaming_increment', "f'Invalid function name: {function_name}'", 'raw'),
    ('0.5.23', 'function_call/utils.py', '_get_tool_schema_defs',
     'raise ValueError(f"Tool definition \'{def_name}\' has multiple schemas, which is not supported.")', 'raw'),
    ('0.5.23', 'lora/lora_drainer.py', '_update_draining_loras', "f'LoRA adapter {min_eligible_adapter} is draining for {starving_adapter}'", 'raw'),
    ('0.5.23', 'managers/data_parallel_controller.py', 'update_active_ranks',
     "'[Elastic EP][DPC] active rank status len=%d != max_dp_size=%d; ignoring update'", 'repr'),
    ('0.5.23', 'managers/data_parallel_controller.py', 'update_active_ranks',
     "'[DPC] update_active_ranks: status len=%d != max_dp_size=%d; ignoring update'", 'repr'),
    ('0.5.23', 'managers/data_parallel_controller.py', 'maybe_external_dp_rank_routing', "raise ValueError(f'DP rank {rank} is not active.')", 'raw'),
    ('0.5.23', 'managers/data_parallel_controller.py', 'maybe_external_dp_rank_routing', "f'Direct routing to DP rank {rank}'", 'raw'),
    ('0.5.23', 'managers/detokenizer_manager.py', '_decode_batch_token_id_output',
     "raise RuntimeError(f'Decode status not found for request {rid}. It may be due to the request being evicted fro"
     'm the decode status due to memory pressure. Please increase the maximum number of requests by setting the SGLA'
     'NG_DETOKENIZER_MAX_STATES environment variable to a bigger value than the default value. The current value is '
     "{DETOKENIZER_MAX_STATES}. For more details, see: https://github.com/sgl-project/sglang/issues/2812')", 'raw'),
    ('0.5.23', 'managers/hisparse_coordinator.py', 'admit_request_direct', "'HiSparse: admitting request %s directly'", 'raw'),
    ('0.5.23', 'managers/hisparse_coordinator.py', 'alloc_device_buffer',
     "'HiSparse: alloc_device_buffer failed for req %s (compressed_len=%d, alloc_size=%d)'", 'raw'),
    ('0.5.23', 'managers/schedule_policy.py', 'calc_priority', "'Experimental shortest-prefill-first: queue=%d shortest_uncached=%d'", 'repr'),
    ('0.5.23', 'managers/schedule_policy.py', 'calc_priority', "raise ValueError(f'Unknown CacheAware Policy: policy={policy!r}')", 'repr'),
    ('0.5.23', 'managers/schedule_policy.py', 'calc_priority', "raise ValueError(f'Unknown CacheAgnostic Policy: policy={policy!r}')", 'repr'),
    ('0.5.23', 'managers/schedule_policy.py', '_sort_by_routing_key',
     "f'routing_key_counts={dict(routing_key_counts)}, waiting_keys_before={waiting_keys_before}'", 'raw'),
    ('0.5.23', 'managers/schedule_policy.py', '_sort_by_routing_key', "f'waiting_keys_after={waiting_keys_after}'", 'raw'),
    ('0.5.23', 'managers/schedule_policy.py', 'add_one_req',
     "raise RuntimeError(f'HiCache load-back must commit all promised FULL tokens or none: req={req.rid} promised={p"
     "romised_host_hit} loaded={req.host_loaded_length}')", 'raw'),
    ('0.5.23', 'managers/scheduler.py', '_handle_generate_request', 'error_msg', 'raw'),
    ('0.5.23', 'managers/scheduler.py', '_handle_generate_request', 'error_msg', 'raw'),
    ('0.5.23', 'managers/scheduler.py', '_retry_storage_prefetch',
     "'HiCache storage prefetch reissue cap reached req=%s attempts=%d; the request is admitted without further L3 l"
     "ookups'", 'raw'),
    ('0.5.23', 'managers/scheduler.py', '_retry_storage_prefetch', "'HiCache storage prefetch re-issue req=%s attempt=%d'", 'raw'),
    ('0.5.23', 'managers/scheduler.py', '_prefetch_after_device_hit_loss',
     "'HiCache device prefix shrank before admission req=%s lookup_match=%d current_match=%d; reissuing storage look"
     "up'", 'raw'),
    ('0.5.23', 'managers/scheduler.py', '_reject_sampling_mask_request', "f'{error_msg}, req.rid={req.rid!r}'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'attach_hicache_storage_wrapped',
     "f'Attached HiCache storage backend: {recv_req.hicache_storage_backend}'", 'raw'),
    ('0.5.23', 'managers/scheduler.py', 'handle_rpc_request', "f'handle_rpc_request: {recv_req.method}, param: {recv_req.parameters}'", 'raw'),
    ('0.5.23', 'managers/scheduler.py', 'handle_rpc_request', "f'Failed to call rpc {recv_req.method}: {str(e)}'", 'raw'),
    ('0.5.23', 'managers/scheduler.py', 'abort_request', "f'Abort queued request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'abort_request', "f'Abort dLLM queued request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'abort_request', "f'Abort bootstrap queue request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'abort_request', "f'Abort inflight queue request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'abort_request', "f'Abort running request. req.rid={req.rid!r}'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'handle_scale_elastic_ep',
     "'[Elastic EP][scale] request received: new_ep_size=%d old_ep_size=%d max_ep_size=%d'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'handle_scale_elastic_ep',
     "'[Elastic EP][scale] scale requested: target_ep_size=%d; waiting for a joining cohort'", 'repr'),
    ('0.5.23', 'managers/scheduler.py', 'expert_distribution_handle',
     "raise ValueError(f'Unrecognized ExpertDistributionReq value: recv_req={recv_req!r}')", 'repr'),
    ('0.5.23', 'managers/scheduler_components/batch_result_processor.py', '_maybe_collect_routed_experts',
     "'routed_experts row-count mismatch for req %s: got %d, expected %d (seqlen=%d, raw_seqlen=%d, cached_tokens=%d"
     ", start_len=%s). This indicates a silent bug.'", 'raw'),
    ('0.5.23', 'managers/scheduler_components/batch_result_processor.py', '_apply_prefill_grammar',
     "f'Grammar accept_token failed for req {req.rid} with token {next_token_id}: {e}'", 'raw'),
    ('0.5.23', 'managers/scheduler_components/batch_result_processor.py', '_accept_grammar_tokens',
     "f'Grammar accept_token failed for req {req.rid} with token {tokens}: {e}'", 'raw'),
    ('0.5.23', 'managers/scheduler_components/internal_state.py', 'set_internal_state',
     "raise UpdateRejected(f'Updating {key} is not supported.')", 'raw'),
    ('0.5.23', 'managers/scheduler_components/logprob_result_processor.py', '_flatten_input_top_logprobs',
     "'Falling back to nested input top logprobs for rid=%s: %s'", 'raw'),
    ('0.5.23', 'managers/scheduler_components/output_streamer.py', '_stream_output_generation',
     "raise ValueError(f'duplicate customized_info key: {key}')", 'raw'),
    ('0.5.23', 'managers/scheduler_components/output_streamer.py', '_stream_output_generation',
     "raise ValueError(f'customized_info key {key!r} returned {len(values)} values for {len(acc.output_reqs)} reques"
     "ts')", 'repr'),
    ('0.5.23', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_disk', 'message', 'raw'),
    ('0.5.23', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_distributed', 'message', 'raw'),
    ('0.5.23', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_tensor', 'message', 'raw'),
    ('0.5.23', 'managers/scheduler_components/weight_updater.py', 'update_weights_from_ipc', 'message', 'raw'),
    ('0.5.23', 'managers/scheduler_input_blocker.py', '_handle_recv_req', "raise NotImplementedError(f'recv_req={recv_req!r}')", 'repr'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', '_execute_profile', 'raise RuntimeError(result.message)', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter', "'Start load Lora adapter. Lora name=%s, path=%s'", 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter',
     'raise ValueError(f"LoRA adapter \'{obj.lora_name}\' has an incomplete unload. Retry the unload before loading it'
     ' again.")', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter',
     'raise ValueError(f"Didn\'t find any LoRA adapters when trying to evict LRU LoRA adapter. LoRA registry is: {sel'
     'f.lora_registry._registry}")', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter',
     'f"Unloading least recently used LoRA adapter \'{lru_lora_name}\' (current number of adapters: {self.lora_registr'
     'y.num_registered_loras}, max allowed: {get_lora().max_loaded_loras})"', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter',
     'raise ValueError(f"Error while unloading LRU LoRA adapter \'{lru_lora_name}\': {unload_result.error_message}")', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors', "'Start load Lora adapter from tensors. Lora name=%s'", 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors',
     'raise ValueError(f"LoRA adapter \'{obj.lora_name}\' has an incomplete unload. Retry the unload before loading it'
     ' again.")', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors',
     'raise ValueError(f"Didn\'t find any LoRA adapters when trying to evict LRU LoRA adapter. LoRA registry is: {sel'
     'f.lora_registry._registry}")', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors',
     'f"Unloading least recently used LoRA adapter \'{lru_lora_name}\' (current number of adapters: {self.lora_registr'
     'y.num_registered_loras}, max allowed: {get_lora().max_loaded_loras})"', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'load_lora_adapter_from_tensors',
     'raise ValueError(f"Error while unloading LRU LoRA adapter \'{lru_lora_name}\': {unload_result.error_message}")', 'raw'),
    ('0.5.23', 'managers/tokenizer_control_mixin.py', 'unload_lora_adapter', "'Start unload Lora adapter. Lora name=%s'", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', 'generate_request',
     "f'routed_dp_rank={obj.routed_dp_rank} is ignored because num_dp_ranks={num_dp_ranks}'", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', 'generate_request',
     "raise ValueError(f'routed_dp_rank={obj.routed_dp_rank} out of range [0, {num_dp_ranks})')", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_tokenize_one_request',
     "'Ignoring malformed mm_hashes entry %r; this item will fall back to hash_feature().'", 'repr'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_normalize_mm_content_hashes',
     "raise ValueError(f'Conflicting content hashes for image_data[{index}]')", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_validate_one_request',
     'f"Requested token count ({input_token_num} input + {max_new_tokens} new) exceeds the model\'s context length ({'
     'self.context_len} tokens). Truncating max_new_tokens."', 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_validate_one_request', 'raise ValueError(error_msg)', 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_validate_token_ids_logprob',
     "raise ValueError(f'token_ids_logprob contains out-of-vocabulary token id {token_id}; valid range is [0, {vocab"
     "_size}).')", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_stream_one_response',
     "raise ValueError(f'Request is disconnected from the client side (type 1). Abort request obj.rid={obj.rid!r}')", 'repr'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_stream_one_response', 'out_list', 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_stream_one_response',
     "raise ValueError(f'Request is disconnected from the client side (type 3). Abort request obj.rid={obj.rid!r}')", 'repr'),
    ('0.5.23', 'managers/tokenizer_manager.py', 'update_weights_from_disk', "'Start update_weights. Load format=%s'", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', 'configure_logging', "f'Config logging: obj={obj!r}'", 'repr'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_handle_batch_output',
     "f'Received output for rid={rid!r} but the state was deleted in TokenizerManager.'", 'repr'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_handle_abort_req',
     "'Abort request for rid=%s not found in rid_to_state; likely already finished/removed.'", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_validate_and_resolve_lora',
     'raise ValueError(f"LoRA adapter \'{first_adapter}\' was requested, but LoRA is not enabled. Please launch the se'
     'rver with --enable-lora flag and preload adapters using --lora-paths or /load_lora_adapter endpoint.")', 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_resolve_lora_path',
     "raise ValueError(f'Got LoRA adapter that has never been loaded: {lora_path}\\nAll loaded adapters: {self.lora_r"
     "ef_cache.keys()}.')", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_resolve_lora_path', "f'Reloading evicted adapter: {lora_path}'", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_resolve_lora_path',
     "raise ValueError(f'Failed to implicitly load LoRA adapter {lora_path}: {load_result.error_message}')", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_init_req_state', "raise ValueError(f'Duplicate request ID detected: {rid}')", 'raw'),
    ('0.5.23', 'managers/tokenizer_manager.py', '_should_dispatch_to_encoder',
     "'Batch request (batch_size=%d) is not supported in EPD disaggregation mode; skipping encoder dispatch.'", 'repr'),
    ('0.5.23', 'managers/tp_worker.py', 'load_lora_adapter_from_tensors',
     "raise RuntimeError(f'[LORA-CHECK] rank{get_parallel().tp_rank} adapter sync MISMATCH of {len(exp)} expected: {"
     'len(mismatch)} value-diff {mismatch[:5]}, {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}'
     "')", 'raw'),
    ('0.5.23', 'mem_cache/buffer_mode/pipeline.py', 'prepare_staged_prefetch',
     "'HiCache staged prefetch deferred req=%s reason=shrunk matched=%d now=%d tokens=%d'", 'raw'),
    ('0.5.23', 'mem_cache/buffer_mode/pipeline.py', 'defer_staged_admission',
     "'HiCache staged prefetch deferred at admission req=%s reason=device_capacity pool=%s tokens=%d defers=%d'", 'raw'),
    ('0.5.23', 'mem_cache/buffer_mode/pipeline.py', 'defer_staged_admission',
     "'HiCache staged prefetch dropped after %d device_capacity deferrals req=%s pool=%s tokens=%d'", 'raw'),
    ('0.5.23', 'mem_cache/storage/hf3fs/mini_3fs_metadata_server.py', 'initialize',
     'f"Rank {rank} namespace \'{namespace}\' already exists. Initialization request ignored."', 'raw'),
    ('0.5.23', 'mem_cache/storage/hf3fs/mini_3fs_metadata_server.py', 'initialize',
     'f"Rank {rank} namespace \'{namespace}\' initialized with different num_pages. Existing: {self.state.ranks[key].n'
     'um_pages}, New: {num_pages}"', 'raw'),
    ('0.5.23', 'mem_cache/storage/hf3fs/mini_3fs_metadata_server.py', 'initialize',
     'f"Initializing new Rank {rank} namespace \'{namespace}\' with {num_pages} pages."', 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', 'checkpoint', 'req.rid', 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_start_external_load',
     "'LMCache retrieve declined for %s: a parallel rank cannot allocate %d GPU slots'", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_start_external_load', "'LMCache retrieve submission failed for %s'", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_publish_external_loaded_prefix',
     "raise RuntimeError(f'LMCache Mamba checkpoint lies beyond the request KV boundary: {total_hit}>{token_ids_len}"
     " for request {req.rid}')", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_publish_external_loaded_prefix',
     "raise RuntimeError(f'LMCache loaded prefix was inserted but is not reusable across all UnifiedRadixCache compo"
     "nents: {matched.device_prefix_len}/{total_hit} tokens for request {req.rid}')", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_submit_store',
     "'LMCache store skipped for %s: no new resident chunk after token %d (%d/%d tokens)'", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_submit_store',
     "'LMCache store for %s is limited to the common resident prefix: %d/%d tokens'", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_submit_store',
     "'LMCache store skipped for %s: store indices length: %d, store start: %d, key length: %d'", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_submit_store',
     "'LMCache store skipped for %s: no Mamba checkpoint at token %d'", 'raw'),
    ('0.5.23', 'mem_cache/storage/lmcache/lmcache_unified_radix_cache.py', '_submit_store', "'LMCache store submission failed for %s'", 'raw'),
    ('0.5.23', 'multimodal/processors/dots_note_omni.py', 'process_mm_data_async', "'[dots_mm] rid=%s request videos=%d images=%d audios=%d'", 'raw'),
    ('0.5.23', 'multimodal/processors/dots_note_omni.py', 'process_mm_data_async',
     "raise ValueError('Unsupported dots note omni video_config fields: ' + ', '.join(sorted(video_config)))", 'raw'),
    ('0.5.23', 'multimodal/processors/dots_note_omni.py', 'process_mm_data_async',
     "'[dots_mm] rid=%s video_preprocess elapsed=%.3fs expanded_frames=%d expanded_audio_segments=%d content_items=%"
     "d after_preprocess images=%d audios=%d'", 'raw'),
    ('0.5.23', 'rust_server/server.py', 'push_abort', "'Rust egress closed; dropped abort of %s during shutdown'", 'raw'),
    ('0.5.23', 'session/session_controller.py', 'open', "f'session id {session_id} already exist, cannot open.'", 'raw'),
    ('0.5.23', 'session/session_controller.py', 'close', "f'session id {session_id} does not exist, cannot delete.'", 'raw'),
    ('0.5.23', 'session/session_controller.py', 'close', 'session_id', 'raw'),
    ('0.5.23', 'speculative/spec_utils.py', 'generate_token_bitmask',
     "f'Bit mask generation took {tree_traverse_time} seconds with grammar: {req.grammar}'", 'raw'),
    ('0.5.23', 'utils/request_logger.py', 'log_received_request',
     "f'Receive: obj={_dataclass_to_string_truncated(obj, max_length, skip_names=skip_names)}{headers_str}'", 'raw'),
    ('0.5.23', 'utils/request_logger.py', 'log_openai_received_request',
     "f'Receive OpenAI: obj={_dataclass_to_string_truncated(obj_to_log, max_length)}{headers_str}'", 'raw'),
    ('0.5.23', 'utils/request_logger.py', 'log_finished_request', "f'Finish: obj={obj_str}{headers_str}{out_str}'", 'raw'),
)

# Records are stamped with this time, so that the output is the same on every run.
FIXED_TIME = 1796083200.0  # 2026-12-01 00:00:00 UTC
PREFIXES = ["", "[2026-01-01 00:00:00 TP0] ", "\n[2026-01-01 00:00:00 TP0] ", "x \u23ce [2026-01-01 00:00:00 TP0] ",
            "\r[2026-01-01 00:00:00 TP0] ", "  0%|   | 0/4 [00:00<?, ?it/s][2026-01-01 00:00:00.123 DP0 TP1 EP1] "]


def _sglang_without_its_init():
    """Make ``import sglang.srt...`` work without running sglang/__init__.py: it patches transformers when that is
    installed, which needs a matching torchvision; none of it is needed to format a log line."""
    import importlib.util
    import types

    if "sglang" not in sys.modules:
        spec = importlib.util.find_spec("sglang")
        pkg = types.ModuleType("sglang")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["sglang"] = pkg


class _FixedTime(logging.Filter):
    def filter(self, record):
        record.created, record.msecs = FIXED_TIME, 0.0
        return True


def _fixed(line):
    # log_json stamps its own "timestamp" with datetime.now()
    return re.sub(r'"timestamp": "[^"]*"', '"timestamp": "2026-12-01T00:00:00"', line)


def access_lines():
    from sglang.srt.utils.common import set_uvicorn_logging_configs
    from uvicorn.config import LOGGING_CONFIG
    from uvicorn.protocols.utils import get_path_with_query_string

    set_uvicorn_logging_configs()
    config = json.loads(json.dumps(LOGGING_CONFIG))
    stream = io.StringIO()
    config["handlers"]["access"] = {"formatter": "access", "class": "logging.StreamHandler", "stream": stream}
    config["formatters"]["access"]["use_colors"] = False
    logging.config.dictConfig(config)
    logger = logging.getLogger("uvicorn.access")
    logger.handlers[0].addFilter(_FixedTime())
    out = []
    for text in FORGED:
        for prefix in ("", "[2026-01-01 00:00:00 TP0] "):
            # in the query string (kept as sent) and in the path (uvicorn quotes it)
            for path, query in (("/", (prefix + text).replace(" ", "+")), ("/" + prefix + text, "")):
                scope = {"path": path, "query_string": query.encode("ascii", "replace"), "root_path": ""}
                stream.seek(0)
                stream.truncate()
                # the call uvicorn's h11/httptools protocols make after a response
                logger.info('%s - "%s %s HTTP/%s" %d', "203.0.113.7:40112", "GET", get_path_with_query_string(scope), "1.1", 200)
                out.append({"kind": "access", "request": {"path": path, "query": query}, "line": _fixed(stream.getvalue())})
    return out


def _generate_req_input_class():
    """A dataclass with GenerateReqInput's name and fields, read from io_struct.py (importing io_struct pulls in
    transformers and the model configs); RequestLogger formats any dataclass by its fields."""
    import ast
    import dataclasses
    import importlib.util

    path = importlib.util.find_spec("sglang.srt.managers.io_struct").origin
    tree = ast.parse(open(path, encoding="utf-8").read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GenerateReqInput")
    names = [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    fields = [(name, object, dataclasses.field(default=None)) for name in names]  # pylint: disable=invalid-field-call
    return dataclasses.make_dataclass("GenerateReqInput", fields)


def echo_lines():
    from sglang.srt.utils.request_logger import RequestLogger

    GenerateReqInput = _generate_req_input_class()

    out = []
    # level 1 shows the sampling parameters, level 3 the whole prompt; JSON at level 3
    for fmt, level in (("text", 1), ("text", 3), ("json", 3)):
        req_logger = RequestLogger(log_requests=True, log_requests_level=level, log_requests_format=fmt, log_requests_target=None)
        for target in req_logger.targets:
            stream = io.StringIO()
            handler = target.handlers[0]
            handler.setStream(stream)
            handler.addFilter(_FixedTime())
            for text in FORGED:
                for prefix in PREFIXES:
                    obj = GenerateReqInput(text=prefix + text, sampling_params={"max_new_tokens": 8, "stop": prefix + text},
                                           rid="rid-0")
                    stream.seek(0)
                    stream.truncate()
                    req_logger.log_received_request(obj)
                    received = stream.getvalue()
                    stream.seek(0)
                    stream.truncate()
                    req_logger.log_finished_request(obj, {"text": prefix + text, "meta_info": {"id": "rid-0", "e2e_latency": 0.1}})
                    for line in (received, stream.getvalue()):
                        if line:
                            out.append({"kind": "echo", "request": {"level": level, "format": fmt, "text": prefix + text},
                                        "line": _fixed(line)})
    return out


def main():
    os.environ["TZ"] = "UTC"
    time.tzset()
    _sglang_without_its_init()
    for item in access_lines() + echo_lines():
        sys.stdout.write(json.dumps(item, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
