# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's chat client: one streamed ``POST /v1/chat/completions``, timed.

Output tokens come from the server's ``usage`` in the final chunk (``stream_options: {include_usage: true}``)
when present, else one token per content chunk. TTFT is measured from sending the request to the first content
chunk; inter-token latency (ITL) is the gap between consecutive content chunks (a chunk that carries several
tokens, as with speculative decoding, counts as one gap, like ``sglang.bench_serving``).

Transport, bounds and failure classes are ``_http``'s; this module reads the event stream.
"""

from __future__ import annotations

import json
import time

from ansible_collections.llmops.sglang.plugins.module_utils._http import FetchError, OptionError, check_api_key, open_url
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import ServerInfoError, fetch_endpoint, normalize_url

CHAT_PATH = "/v1/chat/completions"
MAX_SSE_LINE = 4 * 1024 * 1024
# One streamed answer: far more than max_tokens of any request sends (about 1 KB of events per token).
MAX_STREAM_BYTES = 256 * 1024 * 1024
ERROR_KINDS = ("bad_url", "refused", "unreachable", "tls", "timeout", "unauthorized", "loading", "not_found", "http_error",
               "malformed_chunk", "too_large", "server_error", "incomplete_stream", "empty", "disconnected")


def _err(kind, message):
    return {"kind": kind, "message": message}


def stream_chat(base, payload, api_key=None, timeout=600.0, tls=None, use_proxy=True, keep_text=False):
    """Send one streaming chat completion and time it. Never raises for a server or network failure.

    Returns a dict: ok, error ({kind, message} or None), ttft_s, itl_s (list), latency_s, decode_s,
    output_tokens, token_source (usage|chunks), chunks, prompt_tokens, finish_reason, text (keep_text).
    """
    url = base + CHAT_PATH
    res = {"ok": False, "error": None, "ttft_s": None, "itl_s": [], "latency_s": None, "decode_s": None, "output_tokens": 0,
           "token_source": None, "chunks": 0, "reasoning_chunks": 0, "prompt_tokens": None, "finish_reason": None,
           "text": "" if keep_text else None, "started": None, "finished": None}
    start = time.perf_counter()
    res["started"] = start
    answer = None
    texts = []
    usage_tokens = None
    done = False
    last = None
    try:
        answer = open_url(base, CHAT_PATH, "POST", payload, api_key, float(timeout), tls, use_proxy,
                          accept="text/event-stream")
        for raw in answer.lines(MAX_SSE_LINE, MAX_STREAM_BYTES):
            line = raw.strip()
            if not line or line.startswith(b":"):
                continue
            if not line.startswith(b"data:"):
                if line.split(b":", 1)[0] in (b"event", b"id", b"retry"):
                    continue
                raise FetchError("malformed_chunk", "%s sent a line that is not server-sent events: %r" % (url, _short(line)))
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            try:
                obj = json.loads(data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise FetchError("malformed_chunk", "%s sent a chunk that is not JSON: %r" % (url, _short(data)))
            if not isinstance(obj, dict):
                raise FetchError("malformed_chunk", "%s sent a chunk that is not a JSON object: %r" % (url, _short(data)))
            if obj.get("error") is not None:
                err = obj["error"]
                msg = err.get("message") if isinstance(err, dict) else err
                raise FetchError("server_error", "%s reported an error in the stream: %s" % (url, _short(str(msg))))
            choices = obj.get("choices")
            if choices is None:
                choices = []
            if not isinstance(choices, list):
                raise FetchError("malformed_chunk", "%s sent a chunk whose choices is not a list: %r" % (url, _short(data)))
            for choice in choices:
                if not isinstance(choice, dict):
                    raise FetchError("malformed_chunk", "%s sent a choice that is not an object: %r" % (url, _short(data)))
                delta = choice.get("delta") or {}
                if not isinstance(delta, dict):
                    raise FetchError("malformed_chunk", "%s sent a delta that is not an object: %r" % (url, _short(data)))
                content = delta.get("content") or ""
                # With a reasoning parser the model's thinking streams as reasoning_content: output all the same.
                reasoning = delta.get("reasoning_content") or ""
                if not isinstance(content, str) or not isinstance(reasoning, str):
                    raise FetchError("malformed_chunk", "%s sent non-text content: %r" % (url, _short(data)))
                if reasoning:
                    res["reasoning_chunks"] += 1
                if content or reasoning:
                    now = time.perf_counter()
                    if last is None:
                        res["ttft_s"] = now - start
                    else:
                        res["itl_s"].append(now - last)
                    last = now
                    res["chunks"] += 1
                    if keep_text and content:
                        texts.append(content)
                if choice.get("finish_reason"):
                    res["finish_reason"] = choice["finish_reason"]
            usage = obj.get("usage")
            if isinstance(usage, dict):
                if _is_int(usage.get("completion_tokens")):
                    usage_tokens = usage["completion_tokens"]
                if _is_int(usage.get("prompt_tokens")):
                    res["prompt_tokens"] = usage["prompt_tokens"]
        if not done:
            raise FetchError("incomplete_stream", "%s closed the stream before [DONE] after %d chunks: the server may have "
                                                  "crashed or a proxy cut the connection" % (url, res["chunks"]))
        if res["chunks"] == 0 and not usage_tokens:
            raise FetchError("empty", "%s finished without any output token (finish_reason %s)" % (url, res["finish_reason"]))
        res["ok"] = True
    except FetchError as exc:
        message = exc.message
        if exc.cls == "not_found":
            message = ("HTTP 404 from %s: this server has no OpenAI chat endpoint; point url at an SGLang server (not a "
                       "router without workers or another service)" % url)
        elif exc.cls == "disconnected":
            message += " after %d chunks" % res["chunks"]
        res["error"] = _err(exc.cls, message)
    finally:
        if answer is not None:
            answer.close()
    end = time.perf_counter()
    res["finished"] = end
    res["latency_s"] = end - start
    if usage_tokens is not None:
        res["output_tokens"], res["token_source"] = usage_tokens, "usage"
    else:
        res["output_tokens"], res["token_source"] = res["chunks"], "chunks"
    if res["ttft_s"] is not None and last is not None:
        res["decode_s"] = last - (start + res["ttft_s"])
    if keep_text:
        res["text"] = "".join(texts)
    return res


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _short(data, limit=160):
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    return text if len(text) <= limit else text[:limit] + "..."


class Client(object):
    """Connection settings shared by every request of a run."""

    def __init__(self, url, api_key=None, timeout=600.0, tls=None, use_proxy=True):
        self.base, self.host, self.port = normalize_url(url)
        try:
            check_api_key(api_key)
        except OptionError as exc:
            raise ServerInfoError(str(exc))
        self.api_key = api_key
        self.timeout = float(timeout)
        self.tls = tls
        self.use_proxy = use_proxy

    def chat(self, payload, keep_text=False, timeout=None):
        return stream_chat(self.base, payload, self.api_key, timeout or self.timeout, self.tls, self.use_proxy, keep_text)

    def endpoint(self, name, timeout=10.0):
        return fetch_endpoint(self.base, name, self.api_key, min(timeout, self.timeout), self.tls, self.use_proxy)


def discover(client):
    """(served model id or None, max_model_len or None, speculative algorithm or None, error or None)."""
    models = client.endpoint("models")
    if not models["ok"]:
        return None, None, None, models["error"]
    entries = (models.get("data") or {}).get("data") or []
    first = entries[0] if entries and isinstance(entries[0], dict) else {}
    model = first.get("id") if isinstance(first.get("id"), str) else None
    max_len = first.get("max_model_len") if _is_int(first.get("max_model_len")) else None
    info = client.endpoint("server_info")
    spec = None
    if info["ok"] and isinstance(info.get("data"), dict):
        algo = info["data"].get("speculative_algorithm")
        spec = algo if isinstance(algo, str) and algo else None
    return model, max_len, spec, None


def payload_for(messages, model, max_tokens, seed, extra_body=None, ignore_eos=True):
    body = {"model": model, "messages": messages, "max_tokens": int(max_tokens), "temperature": 0.0, "seed": seed,
            "stream": True, "stream_options": {"include_usage": True}}
    if ignore_eos:
        # SGLang's sampling option: generate exactly max_tokens, as bench_serving does.
        body["ignore_eos"] = True
    body.update(extra_body or {})
    return body
