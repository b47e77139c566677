# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Query a running SGLang server over HTTP and make sense of its answers.

Pure Python (stdlib only, Python 3.9+), so it runs on managed hosts without ``requests``; requests go
through ``_http``'s client. Every failure is turned into a classified error (``refused``, ``timeout``,
``unauthorized``, ``loading``, ...) whose message says what to do; nothing here raises for a
bad server answer. The API key is sent as ``Authorization: Bearer`` and scrubbed from
everything returned.
"""

from __future__ import annotations

import json
import math
import re
import time

from ansible_collections.llmops.sglang.plugins.module_utils import _redact
from ansible_collections.llmops.sglang.plugins.module_utils._coerce import whole_number
from ansible_collections.llmops.sglang.plugins.module_utils._launch_args import KV_FLAG, launch_kv_flag
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import parse_prometheus
from ansible_collections.llmops.sglang.plugins.module_utils._http import (
    DEFAULT_TIMEOUT, MAX_SECONDS, FetchError, OptionError, UrlError, check_api_key, parse_base_url, request, snippet)

DEFAULT_URL = "http://127.0.0.1:30000"

# Deeper JSON than this is cut (SGLang answers are a few levels deep).
MAX_DEPTH = 64
REDACTED = "********"

# Endpoint name -> paths tried in order (the next one only after a 404).
ENDPOINTS = (
    ("server_info", ("/server_info", "/get_server_info")),
    ("model_info", ("/get_model_info", "/model_info")),
    ("models", ("/v1/models",)),
    ("metrics", ("/metrics",)),
)
ENDPOINT_NAMES = tuple(name for name, _paths in ENDPOINTS)
ERROR_CLASSES = ("bad_url", "refused", "unreachable", "tls", "timeout", "unauthorized", "loading", "not_found",
                 "http_error", "not_json", "too_large")
# Connection-level failures: the other endpoints of the same server would fail the same way.
SHARED_FAILURES = ("bad_url", "refused", "unreachable", "tls")


class ServerInfoError(ValueError):
    """Bad options (not a bad server answer); the message says what to fix."""


# ---------------------------------------------------------------------------------------------
# URL


def normalize_url(url):
    """(base URL without trailing slash, host, port); ServerInfoError when it cannot be used."""
    try:
        return parse_base_url(url)
    except UrlError as exc:
        raise ServerInfoError(str(exc))


# ---------------------------------------------------------------------------------------------
# Answers


def parse_json_object(body, url, api_key=None):
    """The JSON object in body, or FetchError(not_json)."""
    try:
        data = json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)
    except UnicodeDecodeError:
        raise FetchError("not_json", "%s answered with a body that is not UTF-8 text: the port may belong to another "
                                     "service; check url" % url)
    except RecursionError:
        raise FetchError("not_json", "%s answered with JSON nested too deeply to be an SGLang answer; check url" % url)
    except ValueError:
        raise FetchError("not_json", "%s answered with a body that is not JSON (%r): the port may belong to another "
                                     "service or a proxy answered; check url" % (url, snippet(body, api_key)))
    if not isinstance(data, dict):
        raise FetchError("not_json", "%s answered with JSON %s instead of an object: this is not an SGLang answer; "
                                     "check url" % (url, type(data).__name__))
    return data


def _secret_key(key):
    return _redact.is_secret_name(key)


def clean(value, secret=None, depth=0):
    """A JSON-safe copy: credentials redacted, non-finite floats as strings, depth bounded."""
    if depth > MAX_DEPTH:
        return "<nested too deeply>"
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            key = str(key)
            if _secret_key(key) and item not in (None, "", False):
                out[key] = REDACTED
            else:
                out[key] = clean(item, secret, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [clean(item, secret, depth + 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    if isinstance(value, str):
        return _redact.redact_text(value, [secret] if secret else ())
    return value


def _str_or_none(value):
    return value if isinstance(value, str) else None


# How SGLang releases report the KV cache dtype, read from each release's source (paths under sglang/srt/):
# * Every release: the top-level kv_cache_dtype of /server_info (and of the log's server_args= dump) is the
#   server args after SGLang's argument processing: the flag as given, or what a backend or architecture rule
#   set (arg_groups/). Never what `auto` resolves to from the checkpoint: the model runner does that at load.
# * Through 0.5.16 each scheduler records that resolution in its own server args
#   (model_executor/model_runner.py _record_kv_cache_dtype), so internal_states[*].kv_cache_dtype says
#   fp8_e4m3 for `auto` with an FP8 checkpoint. From 0.5.17 the runner keeps it to itself
#   (kv_cache_dtype_str) and internal_states repeat the server args: `auto` stays `auto`.
# * From 0.5.19 the server_args= dump is a dict of resolved values (entrypoints/engine.py); before, a ServerArgs repr.
# * From 0.5.20 /server_info carries launch_command, the command line as typed (utils/common.py build_server_info).
RELEASES = ("0.5.16", "0.5.23")
SCHEDULERS_RECORD_AUTO_UNTIL = (0, 5, 16)
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def parse_version(text):
    """(major, minor, patch) of an SGLang version string such as 0.5.23 or 0.5.15.post1, else None."""
    m = _VERSION_RE.match(text.strip()) if isinstance(text, str) else None
    return tuple(int(g) for g in m.groups()) if m else None


def kv_release(version=None, dump_format=None):
    """(release, why): whose KV reporting an answer follows, "0.5.16" or "0.5.23" (see RELEASES above).

    The server's own version decides; without one the log's server_args dump ("dict" since 0.5.19, "repr"
    before); without either, 0.5.23 is assumed.
    """
    parsed = parse_version(version)
    if parsed is not None:
        release = "0.5.16" if parsed <= SCHEDULERS_RECORD_AUTO_UNTIL else "0.5.23"
        return release, "/server_info version %s" % version
    if dump_format == "repr":
        return "0.5.16", "the log's server_args dump is a ServerArgs repr (SGLang 0.5.18 or older)"
    if dump_format == "dict":
        return "0.5.23", "the log's server_args dump is a dict (SGLang 0.5.19 or newer)"
    return "0.5.23", "SGLang version unknown: 0.5.23 assumed"


def kv_summary(info, dump_format=None):
    """KV-cache facts of a /server_info answer, read with the reporting rules of the release that gave it.

    ``top_level``: the top-level ``kv_cache_dtype`` (server args after argument processing, see above);
    ``schedulers``: ``internal_states[*].kv_cache_dtype``; ``launch_flag``: ``--kv-cache-dtype`` of
    ``launch_command`` (``auto`` when it has none; null without a launch_command).
    ``flag``: the flag as typed (0.5.23: ``launch_flag``; 0.5.16: ``top_level``, where no launch_command exists);
    ``server_kv``: the values that tell the running KV dtype (0.5.23: ``[top_level]``; 0.5.16: ``schedulers``).
    dump_format (``dict``/``repr``, from the log) decides the release when the answer has no version.
    """
    out = {"release": None, "release_from": None, "top_level": None, "schedulers": [], "launch_command": None,
           "launch_flag": None, "launch_form": None, "launch_problem": None, "flag": None, "flag_from": None,
           "server_kv": [], "server_kv_from": None, "max_total_num_tokens": None, "version": None, "tp_size": None,
           "model_path": None, "status": None}
    out["release"], out["release_from"] = kv_release(None, dump_format)
    if not isinstance(info, dict):
        return out
    out["version"] = _str_or_none(info.get("version"))
    out["release"], out["release_from"] = kv_release(out["version"], dump_format)
    out["top_level"] = _str_or_none(info.get("kv_cache_dtype"))
    states = info.get("internal_states")
    if isinstance(states, list):
        out["schedulers"] = [s["kv_cache_dtype"] for s in states
                             if isinstance(s, dict) and isinstance(s.get("kv_cache_dtype"), str)]
    command = _str_or_none(info.get("launch_command"))
    if command is not None:
        out["launch_command"] = command
        value, form, problem = launch_kv_flag(command.split())
        out["launch_flag"] = None if problem else (value if value is not None else "auto")
        out["launch_form"] = form
        out["launch_problem"] = problem
    if out["release"] == "0.5.16":
        out["flag"], out["flag_from"] = out["top_level"], "/server_info kv_cache_dtype"
        out["server_kv"], out["server_kv_from"] = out["schedulers"], "/server_info internal_states[*].kv_cache_dtype"
    else:
        if out["launch_flag"] is not None:
            out["flag"] = out["launch_flag"]
            out["flag_from"] = "/server_info launch_command: %s" % (form or "no " + KV_FLAG)
        out["server_kv"] = [out["top_level"]] if out["top_level"] is not None else []
        out["server_kv_from"] = "/server_info kv_cache_dtype (after SGLang's argument resolution)"
    out["max_total_num_tokens"] = whole_number(info.get("max_total_num_tokens"))
    out["tp_size"] = whole_number(info.get("tp_size"))
    out["model_path"] = _str_or_none(info.get("model_path"))
    out["status"] = _str_or_none(info.get("status"))
    return out


def kv_report(summary):
    """The server_info module's kv_cache_dtype result: what the answer says about the KV cache, and where."""
    shown = [v for v in summary["server_kv"] if v.strip().lower() != "auto"]
    return {
        "flag": summary["flag"],
        "flag_source": summary["flag_from"],
        "server_args": summary["top_level"],
        "schedulers": summary["schedulers"],
        # auto in every place means the checkpoint decides at load: the answer cannot tell
        "running": shown[0] if shown else None,
        "running_source": summary["server_kv_from"] if shown else None,
        "release": summary["release"],
        "release_source": summary["release_from"],
    }


# ---------------------------------------------------------------------------------------------
# Endpoints


def _not_found_message(name, base, paths):
    tried = " and ".join(base + p for p in paths)
    if name == "metrics":
        return ("HTTP 404 from %s: metrics are disabled: start the server with --enable-metrics" % tried)
    return "HTTP 404 from %s: this server does not serve %s; check that url points at SGLang" % (tried, name)


def fetch_endpoint(base, name, api_key=None, timeout=DEFAULT_TIMEOUT, tls=None, use_proxy=True):
    """One endpoint with its fallback paths: {ok, path, http_status, error, elapsed_s, data}."""
    paths = dict(ENDPOINTS).get(name)
    if paths is None:
        raise ServerInfoError("unknown endpoint %r: choose from %s" % (name, ", ".join(ENDPOINT_NAMES)))
    result = {"ok": False, "path": paths[0], "http_status": None, "error": None, "elapsed_s": None, "data": None}
    start = time.monotonic()
    try:
        for i, path in enumerate(paths):
            result["path"] = path
            try:
                status, body, _ctype = request(normalize_url(base)[0], path, "GET", None, api_key, timeout, tls,
                                               use_proxy, accept="text/plain" if name == "metrics" else "application/json")
            except FetchError as exc:
                result["http_status"] = exc.http_status
                if exc.cls == "not_found" and i + 1 < len(paths):
                    continue
                if exc.cls == "not_found":
                    exc.message = _not_found_message(name, normalize_url(base)[0], paths)
                raise
            result["http_status"] = status
            if name == "metrics":
                result["data"] = parse_prometheus(body)
            else:
                result["data"] = parse_json_object(body, normalize_url(base)[0] + path, api_key)
            result["ok"] = True
            break
    except FetchError as exc:
        result["error"] = {"class": exc.cls, "message": exc.message}
    result["elapsed_s"] = round(time.monotonic() - start, 3)
    return result


def gather(url=DEFAULT_URL, api_key=None, endpoints=ENDPOINT_NAMES, timeout=DEFAULT_TIMEOUT, tls=None, use_proxy=True):
    """Fetch the requested endpoints of one server; everything server_info returns.

    Raises ServerInfoError only for bad arguments (url, endpoint names, timeout).
    """
    base, _host, _port = normalize_url(url)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or not 0 < timeout <= MAX_SECONDS:
        raise ServerInfoError("timeout must be a number of seconds in (0, %d], got %r" % (MAX_SECONDS, timeout))
    try:
        check_api_key(api_key)
    except OptionError as exc:
        raise ServerInfoError(str(exc))
    names = list(endpoints) if endpoints is not None else list(ENDPOINT_NAMES)
    for name in names:
        if name not in ENDPOINT_NAMES:
            raise ServerInfoError("unknown endpoint %r: choose from %s" % (name, ", ".join(ENDPOINT_NAMES)))
    names = [n for n in ENDPOINT_NAMES if n in names]  # fixed order, no duplicates
    statuses, shared = {}, None
    data = {}
    for name in names:
        if shared is not None:
            res = {"ok": False, "path": dict(ENDPOINTS)[name][0], "http_status": None, "elapsed_s": 0.0, "data": None,
                   "error": {"class": shared["class"], "message": "not tried: " + shared["message"]}}
        else:
            res = fetch_endpoint(base, name, api_key, timeout, tls, use_proxy)
            if res["error"] and res["error"]["class"] in SHARED_FAILURES:
                shared = res["error"]
        data[name] = res.pop("data")
        statuses[name] = res
    info = clean(data.get("server_info"), api_key) if data.get("server_info") is not None else None
    models = data.get("models")
    model_list = None
    if isinstance(models, dict):
        entries = models.get("data")
        model_list = clean([m for m in entries if isinstance(m, dict)], api_key) if isinstance(entries, list) else []
    metrics = data.get("metrics")
    summary = kv_summary(info)
    errors = ["%s: %s" % (name, st["error"]["message"]) for name, st in statuses.items() if st["error"]]
    return {
        "url": base,
        "endpoints": statuses,
        "ok": not errors,
        "errors": errors,
        "server_info": info,
        "model_info": clean(data.get("model_info"), api_key) if data.get("model_info") is not None else None,
        "models": model_list,
        "served_model_names": [m["id"] for m in model_list or [] if isinstance(m.get("id"), str)],
        "metrics": clean(metrics["metrics"], api_key) if metrics else None,
        "metrics_stats": clean({k: v for k, v in metrics.items() if k != "metrics"}, api_key) if metrics else None,
        "kv_cache_dtype": kv_report(summary),
        "max_total_num_tokens": summary["max_total_num_tokens"],
        "version": summary["version"],
    }
