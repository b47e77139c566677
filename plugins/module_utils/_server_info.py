# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Query a running SGLang server over HTTP and make sense of its answers.

Pure Python (stdlib ``urllib`` only, Python 3.9+), so it runs on managed hosts without
``requests``. Every failure is turned into a classified error (``refused``, ``timeout``,
``unauthorized``, ``loading``, ...) whose message says what to do; nothing here raises for a
bad server answer. The API key is sent as ``Authorization: Bearer`` and scrubbed from
everything returned.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import math
import re
import socket
import ssl
import time
from urllib import error as urlerror
from urllib import parse as urlparse
from urllib import request as urlrequest

from ansible_collections.llmops.sglang.plugins.module_utils import _redact
from ansible_collections.llmops.sglang.plugins.module_utils._http import UrlError, parse_base_url

DEFAULT_URL = "http://127.0.0.1:30000"
DEFAULT_TIMEOUT = 10.0
MAX_BODY_BYTES = 16 * 1024 * 1024
READ_CHUNK = 64 * 1024
SNIPPET_CHARS = 200
# Deeper JSON than this is cut (SGLang answers are a few levels deep).
MAX_DEPTH = 64
MAX_METRIC_SAMPLES = 20000
MAX_MALFORMED_KEPT = 5
METRIC_PREFIX = "sglang:"
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

_METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME_RE = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_LABEL_ESCAPES = {"\\": "\\", "\"": "\"", "n": "\n"}


class ServerInfoError(ValueError):
    """Bad options (not a bad server answer); the message says what to fix."""


class FetchError(Exception):
    """One classified failure of one request."""

    def __init__(self, cls, message, http_status=None):
        super(FetchError, self).__init__(message)
        self.cls = cls
        self.message = message
        self.http_status = http_status


# ---------------------------------------------------------------------------------------------
# URL and transport


def normalize_url(url):
    """(base URL without trailing slash, host, port); ServerInfoError when it cannot be used."""
    try:
        return parse_base_url(url)
    except UrlError as exc:
        raise ServerInfoError(str(exc))


def is_loopback(host):
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirect(urlrequest.HTTPRedirectHandler):
    """SGLang never redirects; following one would hand the bearer token to another URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _opener(base, validate_certs, use_proxy):
    handlers = [_NoRedirect()]
    host = urlparse.urlsplit(base).hostname or ""
    # A proxy cannot reach the managed host's loopback, so never send loopback through one.
    if not use_proxy or is_loopback(host):
        handlers.append(urlrequest.ProxyHandler({}))
    if base.startswith("https://"):
        ctx = ssl.create_default_context()
        if not validate_certs:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        handlers.append(urlrequest.HTTPSHandler(context=ctx))
    return urlrequest.build_opener(*handlers)


def _reason_text(reason):
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def _classify_os_error(exc, url, host, port, timeout):
    """Map a transport exception (possibly wrapped in URLError) to a FetchError."""
    reason = exc.reason if isinstance(exc, urlerror.URLError) else exc
    where = "%s:%s" % (host, port)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return FetchError("timeout", "no answer from %s within %ss: the server may be busy (long prefill, CUDA graph "
                                     "capture) or hung; raise timeout or check the service" % (url, _num(timeout)))
    if isinstance(reason, ConnectionRefusedError):
        return FetchError("refused", "connection refused at %s: is the SGLang service running and listening on this "
                                     "host and port (--host/--port)? During startup the HTTP port opens only after the "
                                     "weights are loaded" % where)
    if isinstance(reason, ssl.SSLError):
        return FetchError("tls", "TLS error talking to %s (%s): use the scheme the server speaks (http or https), fix "
                                 "its certificate, or set validate_certs to false for a self-signed certificate"
                          % (where, _reason_text(reason)))
    if isinstance(reason, socket.gaierror):
        return FetchError("unreachable", "cannot resolve host %r (%s): fix the host name in url" % (host, _reason_text(reason)))
    return FetchError("unreachable", "cannot reach %s (%s): check the host, the port, routing and firewalls"
                      % (where, _reason_text(reason)))


def _num(value):
    return ("%g" % value) if isinstance(value, float) else str(value)


def _read_body(resp, deadline, max_bytes, url, timeout):
    # read1 returns what has arrived, so a slowly trickling answer meets the deadline check
    read = getattr(resp, "read1", resp.read)
    chunks, size = [], 0
    while True:
        if time.monotonic() > deadline:
            raise FetchError("timeout", "%s did not finish its answer within %ss: raise timeout or check the service"
                             % (url, _num(timeout)))
        chunk = read(READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise FetchError("too_large", "%s answered more than %d bytes: this is not an SGLang answer; check url"
                             % (url, max_bytes))
        chunks.append(chunk)


def http_get(base, path, api_key=None, timeout=DEFAULT_TIMEOUT, validate_certs=True, use_proxy=True,
             max_bytes=MAX_BODY_BYTES, accept="application/json"):
    """GET base+path: (status, body bytes, content type); FetchError for anything but a 2xx answer.

    The error of a non-2xx answer carries the status; its body is not returned.
    """
    return http_call(base, path, "GET", None, api_key, timeout, validate_certs, use_proxy, max_bytes, accept)


def http_call(base, path, method, payload=None, api_key=None, timeout=DEFAULT_TIMEOUT, validate_certs=True, use_proxy=True,
              max_bytes=MAX_BODY_BYTES, accept="application/json"):
    """http_get for any method; payload (JSON-serialisable, or None) is sent as a JSON body."""
    base, host, port = normalize_url(base)
    url = base + path
    headers = {"Accept": accept, "User-Agent": "llmops.sglang"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    data = None
    if payload is not None:
        data = json.dumps(payload).encode("utf-8")
        headers["Content-Type"] = "application/json"
    req = urlrequest.Request(url, data=data, headers=headers, method=method)
    deadline = time.monotonic() + float(timeout)
    try:
        resp = _opener(base, validate_certs, use_proxy).open(req, timeout=float(timeout))
        try:
            body = _read_body(resp, deadline, max_bytes, url, timeout)
            status = resp.status
            ctype = resp.headers.get("Content-Type", "") or ""
        finally:
            resp.close()
    except urlerror.HTTPError as exc:
        try:
            snippet = exc.read(4096)
        except (OSError, http.client.HTTPException):
            snippet = b""
        finally:
            exc.close()
        raise _http_status_error(exc.code, url, snippet, api_key)
    except FetchError:
        raise
    except urlerror.URLError as exc:
        raise _classify_os_error(exc, url, host, port, timeout)
    except (socket.timeout, TimeoutError) as exc:
        raise _classify_os_error(exc, url, host, port, timeout)
    except http.client.HTTPException as exc:
        raise FetchError("http_error", "%s did not answer with valid HTTP (%s): check that url points at the SGLang "
                                       "HTTP port and uses the right scheme" % (url, type(exc).__name__))
    except OSError as exc:
        raise _classify_os_error(exc, url, host, port, timeout)
    return status, body, ctype


def _snippet(body, api_key=None):
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    text = " ".join(text.split())
    text = _redact.redact_text(text, [api_key] if api_key else ())
    return text[:SNIPPET_CHARS]


def _http_status_error(code, url, body, api_key):
    if code in (401, 403):
        if api_key:
            msg = ("HTTP %d from %s: the server rejected the API key: set api_key to the value of the server's --api-key"
                   % (code, url))
        else:
            msg = "HTTP %d from %s: the server requires an API key (--api-key): set api_key" % (code, url)
        return FetchError("unauthorized", msg, code)
    if code == 503:
        return FetchError("loading", "HTTP 503 from %s: the server is still starting (loading weights, capturing CUDA "
                                     "graphs, warming up) or shutting down: wait until GET /health_generate answers "
                                     "200 and retry" % url, code)
    if code == 404:
        return FetchError("not_found", "HTTP 404 from %s" % url, code)
    if 300 <= code < 400:
        return FetchError("http_error", "HTTP %d redirect from %s: redirects are not followed (they would carry the API "
                                        "key elsewhere); point url at the SGLang server itself" % (code, url), code)
    snippet = _snippet(body, api_key)
    return FetchError("http_error", "HTTP %d from %s%s" % (code, url, (": " + snippet) if snippet else ""), code)


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
                                     "service or a proxy answered; check url" % (url, _snippet(body, api_key)))
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


def _int_or_none(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _str_or_none(value):
    return value if isinstance(value, str) else None


def kv_summary(info):
    """KV-cache facts of a /server_info answer.

    ``flag`` is the top-level ``kv_cache_dtype`` (the command-line value, held by the main
    process); ``resolved`` lists ``internal_states[*].kv_cache_dtype`` (each scheduler's copy,
    which SGLang rewrites to ``fp8_e4m3`` when ``auto`` resolves to FP8).
    """
    out = {"flag": None, "resolved": [], "max_total_num_tokens": None, "version": None, "tp_size": None,
           "model_path": None, "status": None}
    if not isinstance(info, dict):
        return out
    out["flag"] = _str_or_none(info.get("kv_cache_dtype"))
    states = info.get("internal_states")
    if isinstance(states, list):
        out["resolved"] = [s["kv_cache_dtype"] for s in states
                           if isinstance(s, dict) and isinstance(s.get("kv_cache_dtype"), str)]
    out["max_total_num_tokens"] = _int_or_none(info.get("max_total_num_tokens"))
    out["version"] = _str_or_none(info.get("version"))
    out["tp_size"] = _int_or_none(info.get("tp_size"))
    out["model_path"] = _str_or_none(info.get("model_path"))
    out["status"] = _str_or_none(info.get("status"))
    return out


# Prometheus text exposition format 0.0.4


def _parse_labels(text, pos):
    """Labels starting after '{' at pos: (dict, position after '}'); ValueError when malformed."""
    labels = {}
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        m = _LABEL_NAME_RE.match(text, pos)
        if not m:
            raise ValueError("bad label name")
        pos = m.end()
        chars = []
        while True:
            if pos >= len(text):
                raise ValueError("unterminated label value")
            ch = text[pos]
            if ch == "\\":
                if pos + 1 >= len(text):
                    raise ValueError("dangling escape")
                chars.append(_LABEL_ESCAPES.get(text[pos + 1], "\\" + text[pos + 1]))
                pos += 2
                continue
            if ch == "\"":
                pos += 1
                break
            chars.append(ch)
            pos += 1
        labels[m.group(1)] = "".join(chars)
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        else:
            raise ValueError("expected ',' or '}' after a label")


def _metric_value(token):
    value = float(token)  # accepts NaN, +Inf, -Inf and exponents, like the format
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def parse_sample(line):
    """(name, labels, value) of one sample line; ValueError when malformed."""
    m = _METRIC_NAME_RE.match(line)
    if not m:
        raise ValueError("no metric name")
    name, pos = m.group(0), m.end()
    labels = {}
    if pos < len(line) and line[pos] == "{":
        labels, pos = _parse_labels(line, pos + 1)
    rest = line[pos:].split()
    if not rest or len(rest) > 2 or (pos < len(line) and line[pos] not in " \t"):
        raise ValueError("expected a value (and optional timestamp) after the name")
    value = _metric_value(rest[0])
    if len(rest) == 2:
        int(rest[1])  # the timestamp must be an integer (milliseconds); not kept
    return name, labels, value


def parse_prometheus(text, prefix=METRIC_PREFIX, max_samples=MAX_METRIC_SAMPLES):
    """Samples of the Prometheus text format as {name: [{labels, value}]}, kept for names with prefix.

    Comment lines are skipped; malformed sample lines are counted and a few kept, never raised.
    Non-finite values are the strings ``NaN``, ``+Inf`` and ``-Inf``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    metrics, malformed, bad_lines = {}, 0, []
    samples, kept, truncated = 0, 0, False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, labels, value = parse_sample(line)
        except ValueError:
            malformed += 1
            if len(bad_lines) < MAX_MALFORMED_KEPT:
                bad_lines.append(line[:SNIPPET_CHARS])
            continue
        samples += 1
        if prefix and not name.startswith(prefix):
            continue
        if kept >= max_samples:
            truncated = True
            continue
        kept += 1
        metrics.setdefault(name, []).append({"labels": labels, "value": value})
    return {"metrics": metrics, "samples": samples, "kept": kept, "malformed_lines": malformed,
            "malformed_examples": bad_lines, "truncated": truncated}


# ---------------------------------------------------------------------------------------------
# Endpoints


def _not_found_message(name, base, paths):
    tried = " and ".join(base + p for p in paths)
    if name == "metrics":
        return ("HTTP 404 from %s: metrics are disabled: start the server with --enable-metrics" % tried)
    return "HTTP 404 from %s: this server does not serve %s; check that url points at SGLang" % (tried, name)


def fetch_endpoint(base, name, api_key=None, timeout=DEFAULT_TIMEOUT, validate_certs=True, use_proxy=True):
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
                status, body, _ctype = http_get(base, path, api_key, timeout, validate_certs, use_proxy,
                                                accept="text/plain" if name == "metrics" else "application/json")
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


def gather(url=DEFAULT_URL, api_key=None, endpoints=ENDPOINT_NAMES, timeout=DEFAULT_TIMEOUT, validate_certs=True,
           use_proxy=True):
    """Fetch the requested endpoints of one server; everything server_info returns.

    Raises ServerInfoError only for bad arguments (url, endpoint names, timeout).
    """
    base, _host, _port = normalize_url(url)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ServerInfoError("timeout must be a number of seconds > 0, got %r" % (timeout,))
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
            res = fetch_endpoint(base, name, api_key, timeout, validate_certs, use_proxy)
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
        "kv_cache_dtype": {"flag": summary["flag"], "resolved": summary["resolved"]},
        "max_total_num_tokens": summary["max_total_num_tokens"],
        "version": summary["version"],
    }
