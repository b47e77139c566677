# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_server_info against a real HTTP server on 127.0.0.1 answering like SGLang (and failing like it)."""

import json
import pathlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _http
from ansible_collections.llmops.sglang.plugins.module_utils import _server_info as si

KEY = "sk-test-7f3a9c1e"
MODEL = "Qwen3.5-397B-A17B-NVFP4"

SERVER_INFO_DIR = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "server-info"
# the lab string in those answers' api_key and launch_command
FIXTURE_KEY = "sk-fixture-5ecret"


def real_answer(name):
    """A /server_info answer of tests/fixtures/server-info (see its MANIFEST), e.g. 0.5.23-bf16."""
    return json.loads((SERVER_INFO_DIR / ("server-info-%s.json" % name)).read_text(encoding="utf-8"))


# SGLang 0.5.23 with --kv-cache-dtype auto on a checkpoint whose KV metadata says FP8
SERVER_INFO = real_answer("0.5.23-auto-fp8-checkpoint")
MODEL_INFO = {"model_path": "/models/Qwen3.5-397B-A17B-NVFP4", "tokenizer_path": "/models/Qwen3.5-397B-A17B-NVFP4",
              "is_generation": True, "preferred_sampling_params": None, "weight_version": "default"}
MODELS = {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 1764000000, "owned_by": "sglang",
                                      "root": MODEL, "max_model_len": 262144}]}
METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="%(m)s"} 3.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="%(m)s"} 0.12
sglang:gen_throughput{model_name="%(m)s"} 93.6
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="%(m)s"} 2.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="%(m)s"} 5.0
sglang:time_to_first_token_seconds_sum{model_name="%(m)s"} 1.7
sglang:time_to_first_token_seconds_count{model_name="%(m)s"} 5.0
sglang:prompt_tokens_total{model_name="%(m)s"} 1234.0
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 4321.0
process_start_time_seconds 1.7e+09
""" % {"m": MODEL}


class FakeSGLang(object):
    """Routes path -> (status, body, content type, delay before answering)."""

    def __init__(self):
        self.routes = {}
        self.key = None
        self.seen = []
        self.trickle = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args):
                return

            def do_GET(self):
                fake.seen.append((self.path, self.headers.get("Authorization")))
                if fake.key and self.headers.get("Authorization") != "Bearer " + fake.key:
                    return self._send(401, json.dumps({"error": "Unauthorized"}).encode(), "application/json")
                if self.path in fake.trickle:
                    return self._trickle(*fake.trickle[self.path])
                status, body, ctype, delay, headers = fake.routes.get(
                    self.path, (404, b'{"detail":"Not Found"}', "application/json", 0, ()))
                if delay:
                    time.sleep(delay)
                self._send(status, body, ctype, headers)

            def _send(self, status, body, ctype, extra=()):
                if not isinstance(body, bytes):
                    body = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in extra:
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _trickle(self, pieces, pause):
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(sum(len(p) for p in pieces)))
                    self.end_headers()
                    for piece in pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                        time.sleep(pause)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def route(self, path, body, status=200, ctype="application/json", delay=0.0, headers=()):
        self.routes[path] = (status, body, ctype, delay, headers)

    def sglang(self, old_names=False):
        """The four endpoints; old_names serves the pre-rename paths only."""
        self.route("/get_server_info" if old_names else "/server_info", SERVER_INFO)
        self.route("/get_model_info" if old_names else "/model_info", MODEL_INFO)
        self.route("/v1/models", MODELS)
        self.route("/metrics", METRICS.encode(), ctype="text/plain; version=0.0.4")
        return self

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake():
    server = FakeSGLang()
    yield server
    server.close()


def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


# --- the happy path ----------------------------------------------------------------------------


def test_gather_reads_all_four_endpoints(fake):
    fake.sglang()
    res = si.gather(fake.url, timeout=5)
    assert res["ok"] is True and res["errors"] == []
    assert {n: e["ok"] for n, e in res["endpoints"].items()} == dict.fromkeys(si.ENDPOINT_NAMES, True)
    assert res["endpoints"]["server_info"]["path"] == "/server_info"
    # model info is asked for under its old name first, then the new one
    assert res["endpoints"]["model_info"]["path"] == "/model_info"
    assert [seen[0] for seen in fake.seen][:3] == ["/server_info", "/get_model_info", "/model_info"]
    # 0.5.23 reports auto everywhere: the flag (from launch_command) is known, the running KV dtype is not
    assert res["kv_cache_dtype"]["flag"] == "auto" and res["kv_cache_dtype"]["running"] is None
    assert res["kv_cache_dtype"]["release"] == "0.5.23"
    assert res["max_total_num_tokens"] == 3700000 and res["version"] == "0.5.23"
    assert res["served_model_names"] == [MODEL]
    assert res["model_info"]["is_generation"] is True
    m = res["metrics"]
    assert m["sglang:token_usage"] == [{"labels": {"model_name": MODEL}, "value": 0.12}]
    assert {s["labels"]["le"] for s in m["sglang:time_to_first_token_seconds_bucket"]} == {"0.1", "+Inf"}
    assert "python_gc_objects_collected_total" not in m and "process_start_time_seconds" not in m
    assert res["metrics_stats"]["samples"] == 10 and res["metrics_stats"]["kept"] == 8
    json.dumps(res, allow_nan=False)


def test_old_server_names_are_used_after_a_404(fake):
    fake.sglang(old_names=True)
    res = si.gather(fake.url, timeout=5)
    assert res["ok"] is True
    assert res["endpoints"]["server_info"]["path"] == "/get_server_info"
    assert res["endpoints"]["model_info"]["path"] == "/get_model_info"
    assert ("/model_info", None) not in fake.seen  # no fallback once the first name answered


def test_only_requested_endpoints_are_fetched(fake):
    fake.sglang()
    res = si.gather(fake.url + "/", endpoints=["metrics", "server_info"], timeout=5)
    assert list(res["endpoints"]) == ["server_info", "metrics"]
    assert sorted(seen[0] for seen in fake.seen) == ["/metrics", "/server_info"]
    assert res["model_info"] is None and res["models"] is None


# --- API key -------------------------------------------------------------------------------------


def test_missing_api_key_is_unauthorized(fake):
    fake.sglang().key = KEY
    res = si.gather(fake.url, endpoints=["server_info"], timeout=5)
    err = res["endpoints"]["server_info"]["error"]
    assert err["class"] == "unauthorized" and "set api_key" in err["message"]
    assert res["endpoints"]["server_info"]["http_status"] == 401


def test_wrong_api_key_is_rejected(fake):
    fake.sglang().key = KEY
    res = si.gather(fake.url, api_key="wrong", endpoints=["server_info"], timeout=5)
    assert res["endpoints"]["server_info"]["error"]["class"] == "unauthorized"
    assert "rejected the API key" in res["endpoints"]["server_info"]["error"]["message"]


def test_api_key_is_sent_as_bearer_and_never_returned(fake):
    fake.sglang().key = KEY
    # a server that echoes the key back in its own answer
    fake.route("/server_info", dict(SERVER_INFO, api_key=KEY, admin_api_key=KEY, note="started with --api-key " + KEY))
    fake.route("/v1/models", b"echo: Bearer " + KEY.encode(), status=500, ctype="text/plain")
    res = si.gather(fake.url, api_key=KEY, timeout=5)
    assert ("/server_info", "Bearer " + KEY) in fake.seen
    assert res["server_info"]["api_key"] == si.REDACTED and res["server_info"]["admin_api_key"] == si.REDACTED
    assert res["endpoints"]["models"]["error"]["class"] == "http_error"
    assert "HTTP 500" in res["endpoints"]["models"]["error"]["message"]
    assert KEY not in json.dumps(res)


def test_secrets_in_a_real_answer_are_redacted(fake):
    # SGLang 0.5.23 serves the API key in clear, in api_key and in launch_command
    assert SERVER_INFO["api_key"] == FIXTURE_KEY and "--api-key " + FIXTURE_KEY in SERVER_INFO["launch_command"]
    fake.route("/server_info", SERVER_INFO)
    res = si.gather(fake.url, endpoints=["server_info"], timeout=5)
    assert FIXTURE_KEY not in json.dumps(res)
    assert res["server_info"]["api_key"] == si.REDACTED
    assert "--api-key " + si.REDACTED in res["server_info"]["launch_command"]
    assert res["server_info"]["internal_states"][0]["api_key"] == si.REDACTED
    assert res["kv_cache_dtype"]["flag"] == "auto"


# --- what each release reports about the KV cache -------------------------------------------------


@pytest.mark.parametrize("name,flag,server_args,schedulers,running,release", [
    # 0.5.23: the top-level value is the server args after resolution; launch_command has the flag as typed
    ("0.5.23-bf16", "bf16", "bf16", ["bf16"], "bf16", "0.5.23"),
    ("0.5.23-fp8-e4m3", "fp8_e4m3", "fp8_e4m3", ["fp8_e4m3"], "fp8_e4m3", "0.5.23"),
    # auto with an FP8 checkpoint: nothing in the answer shows the FP8 KV cache
    ("0.5.23-auto-fp8-checkpoint", "auto", "auto", ["auto"], None, "0.5.23"),
    # tokenspeed_mla turned the typed bf16 into fp8_e4m3
    ("0.5.23-tokenspeed-mla-bf16", "bf16", "fp8_e4m3", ["fp8_e4m3"], "fp8_e4m3", "0.5.23"),
    # 0.5.16: the top-level value is the flag; each scheduler records what auto resolved to
    ("0.5.16-auto-fp8-checkpoint", "auto", "auto", ["fp8_e4m3"], "fp8_e4m3", "0.5.16"),
    ("0.5.16-bf16", "bf16", "bf16", ["bf16"], "bf16", "0.5.16"),
])
def test_kv_report_follows_the_release(name, flag, server_args, schedulers, running, release):
    got = si.kv_report(si.kv_summary(si.clean(real_answer(name))))
    assert (got["flag"], got["server_args"], got["schedulers"], got["running"], got["release"]) == (
        flag, server_args, schedulers, running, release)
    assert got["release_source"] == "/server_info version %s" % release


def test_the_version_decides_which_value_tells_the_kv_cache():
    # the same 0.5.16 answer read with 0.5.23's rules loses the schedulers' record (and the other way round)
    old = real_answer("0.5.16-auto-fp8-checkpoint")
    assert si.kv_summary(old)["server_kv"] == ["fp8_e4m3"]
    assert si.kv_summary(dict(old, version="0.5.23"))["server_kv"] == ["auto"]
    new = real_answer("0.5.23-tokenspeed-mla-bf16")
    assert si.kv_summary(new)["flag"] == "bf16"
    assert si.kv_summary(dict(new, version="0.5.16"))["flag"] == "fp8_e4m3"


@pytest.mark.parametrize("version,dump,release", [
    ("0.5.16", None, "0.5.16"), ("0.5.15.post1", "dict", "0.5.16"), ("0.5.17", None, "0.5.23"),
    ("v0.5.23", "repr", "0.5.23"), ("0.6.0rc1", None, "0.5.23"),
    (None, "repr", "0.5.16"), (None, "dict", "0.5.23"), (None, None, "0.5.23"), ("garbage", "repr", "0.5.16"),
])
def test_kv_release(version, dump, release):
    assert si.kv_release(version, dump)[0] == release


def test_launch_command_abbreviation_is_a_problem():
    odd = dict(real_answer("0.5.23-bf16"), launch_command="--model-path /m --kv-cache-dt bf16")
    assert si.kv_summary(odd)["flag"] is None and "abbreviates" in si.kv_summary(odd)["launch_problem"]


# --- failures --------------------------------------------------------------------------------------


def test_refused_port_is_classified_and_not_retried(fake):
    url = "http://127.0.0.1:%d" % closed_port()
    start = time.monotonic()
    res = si.gather(url, timeout=5)
    assert time.monotonic() - start < 3
    errs = {n: e["error"]["class"] for n, e in res["endpoints"].items()}
    assert errs == dict.fromkeys(si.ENDPOINT_NAMES, "refused")
    msg = res["endpoints"]["server_info"]["error"]["message"]
    assert "connection refused" in msg and "is the SGLang service running" in msg
    assert res["endpoints"]["metrics"]["error"]["message"].startswith("not tried: ")
    assert res["ok"] is False and len(res["errors"]) == 4


def test_503_while_loading(fake):
    fake.route("/server_info", b"", status=503, ctype="text/plain")
    res = si.gather(fake.url, endpoints=["server_info"], timeout=5)
    err = res["endpoints"]["server_info"]["error"]
    assert err["class"] == "loading" and "/health_generate" in err["message"]


def test_body_that_is_not_json(fake):
    fake.route("/server_info", b"<html><body>nginx welcome</body></html>", ctype="text/html")
    fake.route("/v1/models", [MODELS])  # JSON, but an array
    res = si.gather(fake.url, endpoints=["server_info", "models"], timeout=5)
    assert res["endpoints"]["server_info"]["error"]["class"] == "not_json"
    assert "nginx welcome" in res["endpoints"]["server_info"]["error"]["message"]
    assert res["endpoints"]["models"]["error"]["class"] == "not_json"
    assert res["server_info"] is None
    assert res["kv_cache_dtype"]["flag"] is None and res["kv_cache_dtype"]["running"] is None


def test_slow_answer_times_out(fake):
    fake.route("/server_info", SERVER_INFO, delay=2.0)
    start = time.monotonic()
    res = si.gather(fake.url, endpoints=["server_info"], timeout=0.4)
    assert time.monotonic() - start < 1.5
    err = res["endpoints"]["server_info"]["error"]
    assert err["class"] == "timeout" and "raise timeout" in err["message"]


def test_trickling_answer_hits_the_overall_deadline(fake):
    body = json.dumps(SERVER_INFO).encode()
    fake.trickle["/server_info"] = ([body[i:i + 40] for i in range(0, len(body), 40)], 0.15)
    start = time.monotonic()
    res = si.gather(fake.url, endpoints=["server_info"], timeout=0.5)
    # each chunk arrives well within the socket timeout; only the overall deadline stops it
    assert res["endpoints"]["server_info"]["error"]["class"] == "timeout"
    assert time.monotonic() - start < 1.5


def test_metrics_disabled_says_enable_metrics(fake):
    fake.route("/server_info", SERVER_INFO)
    res = si.gather(fake.url, endpoints=["server_info", "metrics"], timeout=5)
    assert res["endpoints"]["server_info"]["ok"] is True
    err = res["endpoints"]["metrics"]["error"]
    assert err["class"] == "not_found" and "--enable-metrics" in err["message"]
    assert res["ok"] is False and res["errors"] == ["metrics: " + err["message"]]


def test_server_info_missing_on_both_paths(fake):
    res = si.gather(fake.url, endpoints=["server_info"], timeout=5)
    err = res["endpoints"]["server_info"]["error"]
    assert err["class"] == "not_found"
    assert "/server_info" in err["message"] and "/get_server_info" in err["message"]


def test_malformed_prometheus_text_is_counted_not_raised(fake):
    text = (METRICS + 'sglang:broken{model_name="x" 1\nsglang:novalue{a="b"}\n{only="labels"} 2\n'
            'sglang:bad_value 12abc\nsglang:ok_after_bad 7 1700000000000\n')
    fake.route("/metrics", text.encode(), ctype="text/plain")
    res = si.gather(fake.url, endpoints=["metrics"], timeout=5)
    assert res["endpoints"]["metrics"]["ok"] is True
    assert res["metrics_stats"]["malformed_lines"] == 4
    assert res["metrics"]["sglang:ok_after_bad"] == [{"labels": {}, "value": 7.0}]
    assert "sglang:broken" not in res["metrics"]


def test_redirect_is_not_followed(fake):
    other = FakeSGLang()
    try:
        other.sglang()
        fake.route("/server_info", b"", status=307, headers=[("Location", other.url + "/server_info")])
        res = si.gather(fake.url, api_key=KEY, endpoints=["server_info"], timeout=5)
        assert res["endpoints"]["server_info"]["error"]["class"] == "http_error"
        assert "redirect" in res["endpoints"]["server_info"]["error"]["message"]
        assert other.seen == []
    finally:
        other.close()


def test_invalid_http_answer(fake):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)

    def answer():
        conn = sock.accept()[0]
        conn.recv(4096)
        conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
        conn.close()
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        res = si.gather("http://127.0.0.1:%d" % sock.getsockname()[1], endpoints=["server_info"], timeout=5)
    finally:
        sock.close()
    err = res["endpoints"]["server_info"]["error"]
    assert err["class"] == "http_error" and "valid HTTP" in err["message"]


def test_too_large_body(fake):
    fake.route("/server_info", b"x" * 5000)
    with pytest.raises(_http.FetchError) as exc:
        _http.request(fake.url, "/server_info", max_bytes=1000, timeout=5)
    assert exc.value.cls == "too_large"


def test_unresolvable_host():
    res = si.gather("http://no-such-host.invalid:30000", endpoints=["server_info", "metrics"], timeout=5)
    assert res["endpoints"]["server_info"]["error"]["class"] == "unreachable"
    assert res["endpoints"]["metrics"]["error"]["message"].startswith("not tried")


@pytest.mark.parametrize("url,match", [
    ("127.0.0.1:30000", "no scheme"), ("ftp://host:21", "not supported"), ("http://u:p@host:1", "credentials"),
    ("http://host:99999", "invalid port"), ("http://host:1/?a=b", "query"), ("", "non-empty"), (None, "non-empty"),
])
def test_bad_urls_are_refused_before_any_request(url, match):
    with pytest.raises(si.ServerInfoError, match=match):
        si.gather(url)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "5", True])
def test_bad_timeout(bad):
    with pytest.raises(si.ServerInfoError, match="timeout"):
        si.gather(si.DEFAULT_URL, timeout=bad)


def test_unknown_endpoint():
    with pytest.raises(si.ServerInfoError, match="unknown endpoint 'health'"):
        si.gather(si.DEFAULT_URL, endpoints=["health"])


def test_loopback_detection():
    assert _http.is_loopback("127.0.0.1") and _http.is_loopback("::1") and _http.is_loopback("localhost")
    assert not _http.is_loopback("10.0.0.1") and not _http.is_loopback("sglang.example.org")


def test_loopback_ignores_proxy_environment(fake, monkeypatch):
    fake.sglang()
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:%d" % closed_port())
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert si.gather(fake.url, endpoints=["server_info"], timeout=5)["ok"] is True


# --- parsers -----------------------------------------------------------------------------------------


def test_kv_summary_of_odd_answers():
    assert si.kv_summary(None)["schedulers"] == [] and si.kv_summary(None)["server_kv"] == []
    odd = {"kv_cache_dtype": 5, "internal_states": [None, {"kv_cache_dtype": "bf16"}, {"kv_cache_dtype": 1}],
           "max_total_num_tokens": True, "version": 0.5, "launch_command": ["--kv-cache-dtype", "bf16"]}
    got = si.kv_summary(odd)
    assert got["flag"] is None and got["schedulers"] == ["bf16"] and got["server_kv"] == []
    assert got["max_total_num_tokens"] is None and got["version"] is None and got["launch_command"] is None


def test_clean_bounds_depth_and_non_finite_values():
    deep = cur = {}
    for _depth in range(200):
        cur["n"] = {}
        cur = cur["n"]
    out = si.clean({"deep": deep, "f": float("inf"), "password": "x", "hf_token": None})
    json.dumps(out, allow_nan=False)
    assert out["f"] == "+Inf" and out["password"] == si.REDACTED and out["hf_token"] is None
    assert "<nested too deeply>" in json.dumps(out)


# --- fuzz ------------------------------------------------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                    max_leaves=20)
SERVER_KEYS = st.sampled_from(["kv_cache_dtype", "internal_states", "max_total_num_tokens", "version", "tp_size",
                               "model_path", "status", "api_key", "launch_command"])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()))
def test_json_bodies_raise_only_classified_errors(body):
    try:
        data = si.parse_json_object(body, "http://x/server_info")
    except si.FetchError as exc:
        assert exc.cls == "not_json"
    else:
        json.dumps(si.clean(data), allow_nan=False)
        si.kv_summary(data)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(SERVER_KEYS, JSON, max_size=8))
def test_kv_summary_never_raises(info):
    got = si.kv_summary(info)
    assert all(isinstance(r, str) for r in got["schedulers"] + got["server_kv"])
    assert got["release"] in si.RELEASES
    json.dumps(si.kv_report(got))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=st.binary(max_size=200) | st.dictionaries(SERVER_KEYS, JSON, max_size=6).map(lambda v: json.dumps(v).encode()),
       status=st.sampled_from([200, 200, 400, 401, 404, 500, 503]))
def test_live_server_with_random_answers_never_raises(fake, body, status):
    fake.route("/server_info", body, status=status)
    fake.route("/metrics", body, status=status, ctype="text/plain")
    res = si.gather(fake.url, endpoints=["server_info", "metrics"], timeout=5)
    for name, ep in res["endpoints"].items():
        assert ep["ok"] or ep["error"]["class"] in si.ERROR_CLASSES
    json.dumps(res, allow_nan=False)


def test_a_real_sglang_0_5_16_answer(fixtures_dir):
    """What SGLang 0.5.16 answered on a real H200 (tests/fixtures/real-sglang): read by 0.5.16's rules."""
    real = json.loads((fixtures_dir / "real-sglang" / "sglang-0.5.16-h200-trap-bf16.server_info.json").read_text())
    got = si.kv_report(si.kv_summary(si.clean(real)))
    assert (got["flag"], got["running"], got["release"]) == ("bf16", "bf16", "0.5.16")
    assert got["running_source"] == "/server_info internal_states[*].kv_cache_dtype"
    # the constructed 0.5.16 answers of tests/fixtures/server-info have the real answer's keys
    assert set(real_answer("0.5.16-bf16")) == set(real) and "launch_command" not in real
