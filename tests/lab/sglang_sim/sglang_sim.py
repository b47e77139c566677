#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test-only stand-in for an SGLang server (``python -m sglang.launch_server``).

The real server needs GPUs; lab hosts have none. This script takes SGLang's launch arguments, reads the
checkpoint's ``config.json`` / ``hf_quant_config.json`` and behaves like SGLang where a deployment looks:

* startup log lines on stdout (unbuffered) in SGLang's formats: the ``server_args=ServerArgs(...)`` dump,
  per-rank ``[ts TPn]`` lines (``Load weight begin/end``, ``Using KV cache dtype`` on TP0 only,
  ``Mamba Cache is allocated``, ``KV Cache is allocated`` with sizes computed from the model config,
  ``Capture cuda graph begin/end``, the TP0 ``max_total_num_tokens=...`` line), uvicorn's lines and
  ``The server is fired up and ready to roll!``. Like SGLang, the dump shows ``api_key`` in clear.
* the KV-cache dtype resolution: ``--kv-cache-dtype auto`` plus a checkpoint whose KV metadata says FP8
  runs ``torch.float8_e4m3fn`` and rewrites the scheduler's copy to ``fp8_e4m3`` (``/server_info``
  ``internal_states[0].kv_cache_dtype``) WITHOUT the "no scaling factors" warning; the warning is printed on
  every rank only when the flag string is literally ``fp8_e4m3`` while weights load and no
  ``--quantization-param-path`` is given (with speculative decoding the draft model, loaded after the
  rewrite, prints it once per rank).
* HTTP (only on node rank 0, and only once "uvicorn" is up, after the weights are loaded): ``/health`` and
  ``/health_generate`` (503 during warm-up, 200 when ready), ``/server_info`` and ``/get_server_info``,
  ``/model_info`` and ``/get_model_info``, ``/v1/models``, ``/v1/chat/completions`` (streaming SSE and not),
  ``/v1/completions``, ``/generate``, ``/flush_cache`` and ``/metrics`` (``--enable-metrics``). ``--api-key``
  requires ``Authorization: Bearer KEY`` (401 ``{"error": "Unauthorized"}``); health and metrics are exempt.
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
  ``--sim-rendezvous-timeout`` logs torch's timeout error and exits 1. The state file records who joined.
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

INIT_MEM_GIB = 1.2          # CUDA context + NCCL, "Init torch distributed ends. mem usage="
CUDA_GRAPH_GIB = 0.48       # "Capture cuda graph end. mem usage="
DECODE_LOG_INTERVAL = 40    # SGLang's --decode-log-interval default
ANSWER = ("This is a deterministic answer from the SGLang simulator. It stands in for a real model "
          "so that deployment checks can exercise the serving path without GPUs.")
NEEDLE_RE = re.compile(r"needle\b[^\n:]{0,40}?(?:\bis\b\s*:?|:)\s*[\"'`]?([A-Za-z0-9][A-Za-z0-9_\-]*)", re.IGNORECASE)


class Stop(Exception):
    """Raised in the main thread once SIGTERM/SIGINT arrived."""


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

def build_parser():
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
    a("--moe-runner-backend", default="auto")
    a("--fp4-gemm-backend", default="auto")
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
    a("--cuda-graph-max-bs", type=int)
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
    return p


SIM_DESTS = set("sim_" + n for n in SIM_OPTIONS)


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


def resolve_kv(flag, model):
    """(scheduler's kv_cache_dtype string, torch dtype, bytes per element) the way SGLang resolves it."""
    if flag == "auto":
        kv_algo = model["quant"]["kv_cache_quant_algo"]
        if isinstance(kv_algo, str) and kv_algo.upper() == "FP8":
            return "fp8_e4m3", "torch.float8_e4m3fn", 1.0
        torch_dtype, size = MODEL_DTYPES.get(str(model["dtype"]), MODEL_DTYPES["bfloat16"])
        return "auto", torch_dtype, size
    torch_dtype, size = KV_DTYPES[flag]
    return flag, torch_dtype, size


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
        self.unknown = unknown
        self.sim = sim_settings(ns)
        self.fault = self.sim["fault"]
        self.stopping = False
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
            left = end - time.time()
            if left <= 0:
                return
            time.sleep(min(0.02, left))

    def on_signal(self, signum, _frame):
        self.stopping = True

    def server_args(self, scheduler=False):
        """ServerArgs fields in parser order; scheduler=True gives the scheduler's copy."""
        a = self.args
        out = {"model_path": a.model_path, "tokenizer_path": a.tokenizer_path or a.model_path,
               "tokenizer_mode": "auto", "skip_tokenizer_init": False}
        for action in self.parser._actions:
            dest = action.dest
            if dest in ("help", "model_path", "tokenizer_path") or dest in SIM_DESTS:
                continue
            out[dest] = getattr(a, dest)
        out["served_model_name"] = self.served_name
        out["device"] = "cuda"
        out["mem_fraction_static"] = self.plan["mem_fraction_static"]
        out["chunked_prefill_size"] = self.chunked_prefill_size
        out["speculative_algorithm"] = self.spec_algo
        if self.spec_algo and a.max_running_requests is None:
            out["max_running_requests"] = 48
        if scheduler:
            out["kv_cache_dtype"] = self.kv_string
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
        self.exit_code = code
        self.status = "exited" if self.status != "stopped" else "stopped"
        self.write_state()
        return code

    def _run(self):
        a = self.args
        if self.unknown:
            self.log.line("WARNING sglang_sim: ignoring unrecognized arguments: %s" % " ".join(self.unknown))
        try:
            self.model = read_checkpoint(a.model_path)
        except (OSError, ValueError) as exc:
            self.log.write("Traceback (most recent call last):\n  File \"sglang/launch_server.py\", line 13, in <module>\n"
                           "    server_args = prepare_server_args(sys.argv[1:])\n%s: %s\n" % (type(exc).__name__, exc))
            return 1
        self.quant_method = a.quantization or self.model["quant"]["method"]
        self.kv_string, self.kv_torch, kv_bytes = resolve_kv(a.kv_cache_dtype, self.model)
        self.plan = plan_memory(a, self.sim, self.model, kv_bytes, bool(self.spec_algo))
        self.context_len = a.context_length or self.model["context_length"]
        self.chunked_prefill_size = a.chunked_prefill_size or 8192
        # the target model checks the flag string before the KV dtype is resolved
        self.fp8_warning = a.kv_cache_dtype == "fp8_e4m3" and not a.quantization_param_path
        self.draft_fp8_warning = bool(self.spec_algo) and self.kv_string == "fp8_e4m3" and not a.quantization_param_path
        if self.fault == "ignore_sigterm":
            self.spawn_stubborn_child()
        self.write_state()

        self.log.line("server_args=ServerArgs(%s)" % ", ".join("%s=%r" % kv for kv in self.server_args().items()))
        load = self.sim["load_seconds"]
        self.each_rank("Init torch distributed begin.")
        self.pause(0.03 * load if self.fault != "crash" else 0.02)
        if a.nnodes > 1 and not self.rendezvous():
            return 1
        self.each_rank("Init torch distributed ends. elapsed=%.2f s, mem usage=%.2f GB" % (0.03 * load, INIT_MEM_GIB))
        if self.fault == "crash":
            self.crash_traceback()
            return 1
        if self.quant_method == "modelopt_fp4":
            self.each_rank("Detected nvfp4 checkpoint. Please note that the format is experimental and subject to change.")
        plan = self.plan
        self.each_rank("Load weight begin. avail mem=%.2f GB" % plan["avail_start_gib"])
        if self.fault == "oom":
            self.pause(0.3 * load)
            self.oom_traceback()
            return 1
        t0 = time.time()
        self.pause(load)
        if self.fp8_warning:
            self.each_rank("Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0. "
                           "This may lead to less accurate results!")
        if self.quant_method:
            quant = "quant=%s, quant_algo=%s" % (self.quant_method, self.model["quant"]["algo"])
        else:
            quant = "dtype=%s" % MODEL_DTYPES.get(str(self.model["dtype"]), MODEL_DTYPES["bfloat16"])[0]
        self.each_rank("Load weight end. elapsed=%.2f s, type=%s, %s, avail mem=%.2f GB, mem usage=%.2f GB."
                       % (time.time() - t0, self.model["architecture"], quant, plan["avail_loaded_gib"], self.sim["weight_gib"]))
        if not plan["ok"]:
            self.not_enough_memory()
            return 1
        self.rank0("Using KV cache dtype: %s" % self.kv_torch)
        if plan["mamba_slots"]:
            self.each_rank("Mamba Cache is allocated. max_mamba_cache_size: %d, conv_state size: %.2fGB, ssm_state size: %.2fGB "
                           % (plan["mamba_slots"], plan["conv_gib"], plan["ssm_gib"]))
        for rank in self.ranks:
            self.log.line("KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB"
                          % (plan["max_total_num_tokens"], plan["k_gib"], plan["k_gib"]), self.tags(rank))
            self.log.line("Memory pool end. avail mem=%.2f GB" % plan["pool_end_avail_gib"], self.tags(rank))
        if self.model["linear_layers"]:
            self.rank0("Linear attention kernel backend: decode=triton, prefill=triton")
            self.rank0("Using hybrid linear attention backend for hybrid GDN models.")
        if self.spec_algo:
            if self.draft_fp8_warning:
                self.each_rank("Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0. "
                               "This may lead to less accurate results!")
            self.each_rank("KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB"
                           % (plan["max_total_num_tokens"], plan["draft_k_gib"], plan["draft_k_gib"]))
        self.each_rank("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB" % plan["pool_end_avail_gib"])
        max_bs = a.cuda_graph_max_bs or min(plan["max_running_requests"], 256)
        sizes = [bs for bs in [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 96, 128, 160, 192, 256] if bs <= max_bs]
        self.rank0("Capture cuda graph bs %s" % (sizes or [1]))
        t0 = time.time()
        self.pause(0.1 * load)
        self.each_rank("Capture cuda graph end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB."
                       % (time.time() - t0, CUDA_GRAPH_GIB, plan["available_gpu_mem_gib"]))
        self.rank0("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, max_running_requests=%d, "
                   "context_len=%d, available_gpu_mem=%.2f GB"
                   % (plan["max_total_num_tokens"], self.chunked_prefill_size, a.max_prefill_tokens,
                      plan["max_running_requests"], self.context_len, plan["available_gpu_mem_gib"]))
        if not self.serves_http:
            # other nodes run schedulers only
            self.status = "ready"
            self.write_state()
            while True:
                self.pause(3600)
        return self.serve()

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
                    with conn:
                        conn.settimeout(5)
                        peer = json.loads(conn.makefile().readline() or "{}")
                        ok = (peer.get("nnodes"), peer.get("tp_size")) == (a.nnodes, a.tp_size) \
                            and 0 < peer.get("node_rank", 0) < a.nnodes and peer["node_rank"] not in self.meeting["joined"]
                        conn.sendall((json.dumps(dict(me, ok=ok)) + "\n").encode())
                        self.meeting["joined" if ok else "refused"].append(peer.get("node_rank"))
            finally:
                listener.close()
            self.write_state()
            return True
        while True:
            if self.stopping:
                raise Stop()
            try:
                with socket.create_connection((host, int(port)), timeout=2) as conn:
                    conn.sendall((json.dumps(me) + "\n").encode())
                    reply = json.loads(conn.makefile().readline() or "{}")
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
            if self.fault != "hang":
                self.log.line('INFO:     127.0.0.1:%d - "POST /generate HTTP/1.1" 200 OK' % (40000 + self.pid % 20000))
                self.status = "ready"
        # the state file is current before anyone can read the ready line
        self.write_state()
        if self.status == "ready" and not a.skip_server_warmup:
            self.log.line("The server is fired up and ready to roll!")
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
        else:
            self.log.line("Received a termination signal. Shutting down.")
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
        head = "Scheduler hit an exception: Traceback (most recent call last):"
        body = "".join('  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/%s", line %d, in %s\n    %s\n' % f for f in frames)
        self.log.line(head, self.tags(rank))
        self.log.write(body + final + "\n\n")
        self.log.line("Received sigquit from a child process. It usually means the child failed.")

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
        self.rank0("Prefill batch, #new-seq: 1, #new-token: %d, #cached-token: 0, full token usage: 0.00, mamba usage: 0.00, "
                   "#running-req: %d, #queue-req: 0" % (prompt_tokens, self.running - 1))
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
            self.rank0("Decode batch, #running-req: %d, #full token: %d, full token usage: 0.00, mamba num: %d, mamba usage: 0.00, "
                       "cuda graph: True, gen throughput (token/s): %.2f, #queue-req: 0"
                       % (running, self.generation_tokens, running, self.gen_throughput()))

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
        self._send(200 if self.simulator.status == "ready" else 503, b"", "text/plain")

    def server_info(self):
        sim = self.simulator
        info = sim.server_args()
        internal = sim.server_args(scheduler=True)
        # secrets stay out of HTTP answers
        info["api_key"] = internal["api_key"] = None
        plan = sim.plan
        internal.update({
            "last_gen_throughput": round(sim.gen_throughput(), 2),
            "memory_usage": {"weight": sim.sim["weight_gib"], "kvcache": round(plan["kvcache_gib"], 2),
                             "token_capacity": plan["max_total_num_tokens"], "cuda_graph": CUDA_GRAPH_GIB},
        })
        if sim.spec_algo:
            internal["avg_spec_accept_length"] = 1.0
        info.update({
            "max_total_num_tokens": plan["max_total_num_tokens"],
            "max_req_input_len": sim.context_len - 1,
            "status": sim.status,
            "internal_states": [internal],
            "version": sim.sim["version"],
        })
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
