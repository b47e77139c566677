# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a server start did, from SGLang's own log records: facts, startup phase, tracebacks, fatal causes.

Facts come only from the lines of ``sglang_log._lines.LOG_LINES``, matched at the start of a message of
the form the table names (an SGLang record, or a line SGLang prints bare); request echoes and access
lines never give a fact, open a traceback or set a fatal cause. The fatal classes live here and nowhere else.

Startup facts are read only before the acceptance point: the first record that the HTTP server is up
(uvicorn's ``Application startup complete``, written before it binds its socket, or ``Uvicorn running on``;
the ready line) or that a request was served (the HTTP server's ``[http_server] Error: `` record of a failed
request). Access lines and request echoes are not needed for it: uvicorn writes its startup line before
either can exist, and they are seldom parsed at all (the scanner skips lines without a key literal).
From there on a client can make SGLang write any line (some sites log client text raw, newlines included:
docs/security.md), so a record that looks like a startup record is never a fact: it is kept as a late
startup record, which the rules report. Each fact is taken once (the first record wins); a new
``server_args=`` dump before the acceptance point starts a new start, after it the dump is a late record.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._lines import BY_ID, STARTUP_LINE_IDS
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._records import (
    BARE, CLIENT_KINDS, SGLANG, UVICORN, rank_sort_key)

PHASES = ("starting", "loading_weights", "kv_pool_allocated", "capturing_cuda_graphs", "warming_up", "ready")
# The fatal causes a log can show, the one place they are defined: none; cuda_oom; no_kernel_image;
# not_enough_memory (no room for the KV cache after the weights); python_exception; truncated_traceback (its
# exception line is cut off); port_in_use (uvicorn could not bind); cli_argument_error (argparse rejected the argv).
FATAL_CLASSES = ("none", "cuda_oom", "no_kernel_image", "not_enough_memory", "python_exception", "truncated_traceback",
                 "port_in_use", "cli_argument_error")
# The causes of a failed start that systemd's state or the wait's budget show rather than the log (sglang_wait_ready),
# each with the advice its message carries (None: the message says it all). With FATAL_CLASSES, every cause a start
# is reported failing with.
UNIT_CAUSES = {"unit_not_loaded": "install it first", "crash_loop": "the server died and systemd restarts it",
               "exited": None, "host_oom": "host RAM, not GPU memory", "timeout": None}

MAX_KV_POOLS = 256
MAX_RANKS = 1024
EVIDENCE_CHARS = 500
# A traceback still open after this many prefixed lines of other ranks is treated as cut off.
TRACEBACK_INTERLEAVE_LIMIT = 200
# Lines parsed one by one after a traceback ends or after a chain / "Exception ignored in" marker; a
# marker only applies to a traceback that starts within this window.
FOLLOW_LINES = 4

TRACEBACK_HEADER = "Traceback (most recent call last)"


def _line_re(line_id):
    return re.compile(BY_ID[line_id]["regex"])


_DUMP = _line_re("server_args_dump")
_FP8_NO_SCALES = _line_re("fp8_no_scales")
_KV_DTYPE_USED = _line_re("kv_dtype_used")
_KV_POOL = _line_re("kv_pool")
_MAMBA = _line_re("mamba_pool")
_MAX_TOKENS = _line_re("max_total_num_tokens")
_MAX_TOKENS_PRINT = _line_re("max_total_num_tokens_offline")
_CONTEXT_TP = _line_re("context_tp_size")
_LOAD_WEIGHT = re.compile("%s|%s" % (BY_ID["load_weight_begin"]["regex"], BY_ID["load_weight_end"]["regex"]))
_MEMORY_POOL_END = _line_re("memory_pool_end")
_CAPTURE = _line_re("capture_graph_begin")
_UVICORN_RUNNING = _line_re("uvicorn_running")
_READY = _line_re("ready")
_UVICORN_STARTED = re.compile("%s|%s" % (BY_ID["uvicorn_startup_complete"]["regex"], BY_ID["uvicorn_running_own"]["regex"]))
_HTTP_REQUEST_ERROR = _line_re("http_request_error")
_OFFLINE_DONE = (_line_re("offline_total_latency"), _line_re("offline_throughput_result"))
_OFFLINE_AGAIN = (_line_re("offline_warmup"), _line_re("offline_benchmark"))
_CHAINED = _line_re("traceback_chained")
_IGNORED = _line_re("exception_ignored")
_PORT = _line_re("port_in_use")
_ARGPARSE = re.compile("|".join(BY_ID[i]["regex"] for i in ("argparse_unrecognized", "argparse_bad_argument", "argparse_missing")))

# startup records but the pool line (a label may come first), by the first character of their message
_STARTUP_RECORDS = {}
for _id in STARTUP_LINE_IDS:
    if _id != "kv_pool":
        _STARTUP_RECORDS.setdefault(BY_ID[_id]["regex"][0], []).append(_line_re(_id))

_DUMP_KV_RE = re.compile(r"[(,{]\s*'?kv_cache_dtype'?\s*[=:]\s*'([^']*)'")
_DUMP_MODEL_RE = re.compile(r"[(,{]\s*'?model_path'?\s*[=:]\s*'([^']*)'")
_DUMP_TP_RE = re.compile(r"[(,{]\s*'?tp_size'?\s*[=:]\s*(\d+)")
_KV_POOL_DETAIL_RE = re.compile(
    r"(?:\s*dtype: (?P<dtype>torch\.\w+),)?(?:\s*#tokens: (?P<tokens>\d+),)?"
    r"\s*(?:K size: (?P<k>[\d.]+) ?GB, V size: (?P<v>[\d.]+) ?GB|KV size: (?P<kv>[\d.]+) ?GB)?")
_MAMBA_DETAIL_RE = re.compile(
    r"max_mamba_cache_size: (?P<size>\d+), conv_state size: (?P<conv>[\d.]+) ?GB, "
    r"ssm_state size: (?P<ssm>[\d.]+) ?GB(?:.*?intermediate_ssm_state_cache size: (?P<issm>[\d.]+) ?GB)?"
    r"(?:.*?intermediate_conv_window_cache size: (?P<iconv>[\d.]+) ?GB)?")
_EXCEPTION_LINE_RE = re.compile(r"(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::\s|:?$)")
_CUDA_ERROR = "CUDA error"


def classify_exception(text):
    """The fatal class of an exception or error text."""
    low = text.lower()
    if "out of memory" in low or "outofmemoryerror" in low:
        return "cuda_oom"
    if "no kernel image is available" in low:
        return "no_kernel_image"
    if "Not enough memory" in text:
        return "not_enough_memory"
    return "python_exception"


def fatal_of_line(msg):
    """(class, text) when a line outside a traceback is a fatal error by itself, else None."""
    if msg.startswith(_CUDA_ERROR) or (("Error" in msg or "Exception" in msg) and _EXCEPTION_LINE_RE.match(msg)):
        return classify_exception(msg), msg
    if "ddress" in msg and _PORT.match(msg):
        return "port_in_use", msg
    if "error: " in msg and _ARGPARSE.match(msg):
        return "cli_argument_error", msg
    return None


def _gb(value):
    return float(value) if value is not None else None


class StartFacts(object):
    """The facts of the latest server start seen (a new server_args dump after progress starts over)."""

    def __init__(self):
        self.starts = 0
        self.reset()

    def reset(self):
        self.fp8_scale_warning = False
        self.kv_cache_dtype_configured = None
        self.server_args_format = None
        self.kv_dtype_effective = None
        self.dump_tp_size = None
        self.other_tp_size = None
        self.model_path = None
        self.max_total_num_tokens = None
        self.kv_pools = []
        self.kv_pools_dropped = 0
        self.mamba_pool = None
        self.ready = False
        self.fatal = None
        self.ranks_seen = set()
        self.phase = 0              # index into PHASES
        # the acceptance point: the HTTP server is up, every later record may hold client text
        self.accepting = False

    def progressed(self):
        return self.phase > 0 or self.ready or self.fatal is not None or bool(self.kv_pools)

    def advance(self, phase):
        idx = PHASES.index(phase)
        if idx > self.phase:
            self.phase = idx

    # -- one record ----------------------------------------------------------------------------

    def accept(self):
        """The acceptance point: from here on a record may hold client text."""
        self.accepting = True

    def see_rank(self, rec):
        """Count the rank of an SGLang record (all a record without a key literal can give)."""
        if rec.kind == SGLANG and rec.prefixed and rec.rank != "main" and len(self.ranks_seen) < MAX_RANKS:
            self.ranks_seen.add(rec.rank)

    def on_record(self, rec):
        """Read one record; True when it is a startup record that came after the acceptance point (no fact)."""
        kind = rec.kind
        if kind == SGLANG:
            self.see_rank(rec)
            return self._sglang(rec.msg, rec.rank)
        if kind == BARE:
            msg = rec.msg
            if msg.startswith("max_total_num_tokens="):
                m = _MAX_TOKENS_PRINT.match(msg)
                if m:
                    if self.accepting:
                        return True
                    if self.max_total_num_tokens is None:
                        self.max_total_num_tokens = int(m.group("n"))
                    self.advance("warming_up")
        elif kind == UVICORN:
            if _UVICORN_STARTED.match(rec.msg):
                self.advance("warming_up")
                self.accept()
        return False

    def _sglang(self, msg, rank):
        """Read one SGLang record; True when it is a startup record that came after the acceptance point."""
        c = msg[:1]
        if c == "T":
            if _READY.match(msg):
                if self.ready:
                    return True     # the ready line comes once per start
                self.ready = True
                self.advance("ready")
                self.accept()
            return False
        if c == "[":
            if _HTTP_REQUEST_ERROR.match(msg):
                self.accept()   # a request was served
            return False
        if c == "U" and _UVICORN_RUNNING.match(msg):
            self.advance("warming_up")
            self.accept()
            return False
        if self.accepting:
            return self._startup_record(msg)
        self._startup(msg, rank)
        return False

    def _startup_record(self, msg):
        """Whether a message is one of the startup records (a look-alike once the server accepts requests)."""
        if "KV Cache " in msg and _KV_POOL.match(msg):
            return True
        return any(r.match(msg) for r in _STARTUP_RECORDS.get(msg[:1], ()))

    def _startup(self, msg, rank):
        c = msg[:1]
        if c == "s":
            if _DUMP.match(msg):
                self._dump(msg)
        elif c == "U":
            if _FP8_NO_SCALES.match(msg):
                self.fp8_scale_warning = True
            else:
                m = _KV_DTYPE_USED.match(msg)
                if m and self.kv_dtype_effective is None:
                    self.kv_dtype_effective = m.group("dtype")
        elif c == "m":
            m = _MAX_TOKENS.match(msg)
            if m:
                if self.max_total_num_tokens is None:
                    self.max_total_num_tokens = int(m.group("n"))
                self.advance("warming_up")
        elif c == "L":
            if _LOAD_WEIGHT.match(msg):
                self.advance("loading_weights")
        elif c == "C":
            if _CAPTURE.match(msg):
                self.advance("capturing_cuda_graphs")
            elif self.other_tp_size is None:
                m = _CONTEXT_TP.match(msg)
                if m:
                    self.other_tp_size = int(m.group("tp"))
        if c == "M":
            if _MEMORY_POOL_END.match(msg):
                self.advance("kv_pool_allocated")
            elif _MAMBA.match(msg):
                self._mamba(msg, rank)
        if "KV Cache " in msg:
            m = _KV_POOL.match(msg)
            if m:
                self._pool(msg[m.end():], rank)

    def _pool(self, detail, rank):
        self.advance("kv_pool_allocated")
        mk = _KV_POOL_DETAIL_RE.match(detail)
        if mk.group("dtype") and self.kv_dtype_effective is None:
            self.kv_dtype_effective = mk.group("dtype")
        if len(self.kv_pools) < MAX_KV_POOLS:
            self.kv_pools.append({
                "rank": rank or "main",
                "tokens": int(mk.group("tokens")) if mk.group("tokens") else None,
                "k_gb": _gb(mk.group("k")),
                "v_gb": _gb(mk.group("v")),
                "kv_gb": _gb(mk.group("kv")),
                "dtype": mk.group("dtype"),
            })
        else:
            self.kv_pools_dropped += 1

    def _mamba(self, msg, rank):
        self.advance("kv_pool_allocated")
        mm = _MAMBA_DETAIL_RE.search(msg)
        if mm and self.mamba_pool is None:
            self.mamba_pool = {
                "rank": rank or "main",
                "max_mamba_cache_size": int(mm.group("size")),
                "conv_state_gb": float(mm.group("conv")),
                "ssm_state_gb": float(mm.group("ssm")),
                "intermediate_ssm_state_gb": _gb(mm.group("issm")),
                "intermediate_conv_window_gb": _gb(mm.group("iconv")),
            }

    def _dump(self, dump):
        if self.progressed():
            # a new server start in the same input: facts describe the latest start
            self.reset()
        self.starts += 1
        # "dict" (resolved values, SGLang 0.5.19 and newer) or "repr" (the ServerArgs as typed, 0.5.18 and older)
        self.server_args_format = "dict" if dump.startswith("{", len("server_args=")) else "repr"
        mk = _DUMP_KV_RE.search(dump)
        self.kv_cache_dtype_configured = mk.group(1) if mk else None
        mm = _DUMP_MODEL_RE.search(dump)
        self.model_path = mm.group(1) if mm else None
        mt = _DUMP_TP_RE.search(dump)
        self.dump_tp_size = int(mt.group(1)) if mt else None

    # -- fatal errors --------------------------------------------------------------------------

    def set_fatal(self, cls, message, loc, rank, chain):
        cur = self.fatal
        replace = (
            cur is None
            or (cur["class"] == "truncated_traceback" and cls != "truncated_traceback")
            # a chained exception supersedes the one it was raised while handling
            or (chain is not None and cur["chain"] == chain and cls != "truncated_traceback")
        )
        if replace:
            self.fatal = {"class": cls, "message": message[:EVIDENCE_CHARS], "line": loc, "rank": rank or "main", "chain": chain}

    def as_dict(self, line_of):
        fatal = {"class": "none", "message": None, "line": None, "rank": None}
        if self.fatal is not None:
            fatal = {"class": self.fatal["class"], "message": self.fatal["message"], "line": line_of(self.fatal["line"]),
                     "rank": self.fatal["rank"]}
        return {
            "fp8_scale_warning": self.fp8_scale_warning,
            "kv_cache_dtype_configured": self.kv_cache_dtype_configured,
            "server_args_format": self.server_args_format,
            "kv_dtype_effective": self.kv_dtype_effective,
            "tp_size": self.dump_tp_size if self.dump_tp_size is not None else self.other_tp_size,
            "model_path": self.model_path,
            "max_total_num_tokens": self.max_total_num_tokens,
            "kv_pools": list(self.kv_pools),
            "mamba_pool": self.mamba_pool,
            "ready": self.ready,
            "fatal": fatal,
            "ranks_seen": sorted(self.ranks_seen, key=rank_sort_key),
            "phase": "failed" if self.fatal is not None else PHASES[self.phase],
            "starts": self.starts,
        }


class TracebackTracker(object):
    """Follows multi-line tracebacks (chained, interleaved with other ranks, cut off) and sets fatal causes.

    ``on_record`` returns the rank a record's rules should count it for (a traceback's exception line
    belongs to the traceback's rank), or False when the record is a frame line inside a traceback.
    """

    def __init__(self, facts, scanner):
        self.facts = facts
        self.scanner = scanner      # its follow / sequential flags make it hand on the lines a traceback needs
        self._tb = None
        self._tb_seq = 0
        self._last_chain = None
        self._chain_pending = None
        self._ignored_pending = False
        self._marker_left = 0       # lines a chain / ignored marker stays valid
        self.offline_done = False

    def on_line(self):
        """Called once per parsed physical line, before its records."""
        if self._marker_left:
            self._marker_left -= 1
            if not self._marker_left:
                self._chain_pending = None
                self._ignored_pending = False

    def on_record(self, rec, loc):
        """None for a line inside a traceback (a frame), else (the rank its rules count for, whether it may give facts)."""
        if rec.kind in CLIENT_KINDS:
            return rec.rank, False  # client text: no fact, no fatal cause, no part of a traceback
        tb = self._tb
        if tb is not None:
            if rec.prefixed:
                # another process's line printed into the traceback
                tb["interleaved"] += 1
                if tb["interleaved"] > TRACEBACK_INTERLEAVE_LIMIT:
                    self.close(None)
            else:
                text = rec.text
                if not text.strip() or text[0] in " \t":
                    self.on_frame(text)
                    return None  # frame, source or caret line
                if TRACEBACK_HEADER in text:
                    self.close(None)
                else:
                    # the exception line belongs to the traceback's rank
                    rank = tb["rank"]
                    self.close(text.strip(), loc)
                    return rank, False
        msg = rec.msg
        if TRACEBACK_HEADER in msg:
            self._open(rec.rank, loc)
            return rec.rank, False
        if rec.kind == BARE:
            if _IGNORED.match(msg):
                # the traceback that follows is printed while an object is collected: not fatal
                self._ignored_pending = True
                self._marker(FOLLOW_LINES)
            elif self._last_chain is not None and _CHAINED.match(msg):
                self._chain_pending = self._last_chain
                self._marker(FOLLOW_LINES)
            elif any(r.match(msg) for r in _OFFLINE_DONE):
                # a traceback after an offline benchmark printed its results is exit noise, not a failed start
                self.offline_done = True
            elif any(r.match(msg) for r in _OFFLINE_AGAIN):
                self.offline_done = False
        # exception text without a Traceback header, a bare CUDA runtime error, a startup failure
        fatal = fatal_of_line(msg)
        if fatal is not None:
            self.facts.set_fatal(fatal[0], rec.level + fatal[1], loc, rec.rank, None)
        return rec.rank, True

    def in_traceback(self):
        return self._tb is not None

    def on_frame(self, text):
        """A frame, source or caret line of the open traceback (indented or blank, no prefix)."""
        if text.strip():
            self._tb["last_frame"] = text.strip()

    def _marker(self, lines):
        self.scanner.follow = lines
        self._marker_left = lines + 1

    def _open(self, rank, loc):
        if self._tb is not None:
            self.close(None)
        self._tb_seq += 1
        chain = self._chain_pending if self._chain_pending is not None else self._tb_seq
        self._tb = {
            "rank": rank, "loc": loc, "last_frame": None, "interleaved": 0, "chain": chain,
            "harmless": self._ignored_pending or self.offline_done,
        }
        self._chain_pending = None
        self._ignored_pending = False
        self.scanner.sequential = True

    def close(self, exc_line, loc=None):
        tb, self._tb = self._tb, None
        self.scanner.sequential = False
        if tb is None:
            return
        self._last_chain = tb["chain"]
        self.scanner.follow = FOLLOW_LINES  # a chained traceback may follow
        if tb["harmless"]:
            return
        if exc_line is None:
            msg = "traceback cut before its exception line"
            if tb["last_frame"]:
                msg += " (last frame: %s)" % tb["last_frame"]
            self.facts.set_fatal("truncated_traceback", msg, tb["loc"], tb["rank"], tb["chain"])
        else:
            self.facts.set_fatal(classify_exception(exc_line), exc_line, loc, tb["rank"], tb["chain"])
