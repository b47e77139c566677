# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_http: the one URL rule (every urllib ValueError becomes a message naming the fix) and the failure vocabulary,
on real exceptions from real sockets on loopback."""

import http.server
import socket
import time
from urllib import request as urlrequest

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _http
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import ServerInfoError, normalize_url

from sim_harness import LocalServer, free_port  # tests/unit/sim_harness.py


@pytest.mark.parametrize("url,base,host,port", [
    ("http://127.0.0.1:30000", "http://127.0.0.1:30000", "127.0.0.1", 30000),
    (" http://GPU-01:30000/ ", "http://GPU-01:30000", "gpu-01", 30000),
    ("https://sglang.example", "https://sglang.example", "sglang.example", 443),
    ("http://[fd00::11]:30000", "http://[fd00::11]:30000", "fd00::11", 30000),
    ("http://[::1]", "http://[::1]", "::1", 80),
    ("http://10.0.0.5:30000/v1/", "http://10.0.0.5:30000/v1", "10.0.0.5", 30000),
])
def test_good_urls(url, base, host, port):
    assert _http.parse_base_url(url) == (base, host, port)


@pytest.mark.parametrize("url,match", [
    ("http://[::1", "cannot be parsed .*Invalid IPv6 URL.*in brackets"),
    ("http://[::1]:30000]", "invalid port"),
    ("http://fd00::11:30000", "IPv6 address goes in brackets, e.g. http://\\[fd00::11\\]:30000"),
    ("http://\uff03host", "cannot be parsed .*NFKC"),
    ("http://host:99999", "invalid port"),
    ("http://host:0", "port 0"),
    ("http://host:x", "invalid port"),
    ("http://host name:1", "spaces or control characters"),
    ("http://host:1\n", None),  # stripped: fine
    ("127.0.0.1:30000", "no scheme"),
    ("ftp://host", "not supported"),
    ("http://u:p@host:1", "credentials"),
    ("http://:30000", "no host"),
    ("http://host:1/?a=b", "query or fragment"),
    ("http://host:1/#top", "query or fragment"),
    ("http://" + "a" * 3000, "characters long"),
    ("", "non-empty"),
    (None, "non-empty"),
    (30000, "non-empty"),
])
def test_bad_urls_name_the_fix(url, match):
    if match is None:
        assert _http.parse_base_url(url)[2] == 1
        return
    with pytest.raises(_http.UrlError, match=match):
        _http.parse_base_url(url)


def test_server_info_takes_the_same_rule():
    # the crash of a URL with an unclosed bracket is a ServerInfoError for every module that uses _server_info
    with pytest.raises(ServerInfoError, match="Invalid IPv6 URL"):
        normalize_url("http://[::1")


@pytest.mark.parametrize("host,port,url", [
    ("10.0.0.11", 30000, "http://10.0.0.11:30000"), ("fd00::11", 30000, "http://[fd00::11]:30000"),
    ("[fd00::11]", 1, "http://[fd00::11]:1"), ("gpu-01", 8000, "http://gpu-01:8000"),
])
def test_host_url_brackets_ipv6(host, port, url):
    assert _http.host_url(host, port) == url
    assert _http.parse_base_url(url)[2] == port


@pytest.mark.parametrize("bind,port,fallback,url", [
    ("0.0.0.0", 30000, "10.0.0.11", "http://10.0.0.11:30000"),
    ("[::]", 30002, "gpu-01", "http://gpu-01:30002"),
    ("::", 30001, "fd00::11", "http://[fd00::11]:30001"),
    ("", 30000, "gpu-01", "http://gpu-01:30000"),
    (None, 30000, "gpu-01", "http://gpu-01:30000"),
    ("10.0.0.12", 8000, "gpu-01", "http://10.0.0.12:8000"),
    ("fd00::12", 8000, "gpu-01", "http://[fd00::12]:8000"),
])
def test_worker_url_is_where_routers_reach_the_server(bind, port, fallback, url):
    assert _http.worker_url(bind, port, fallback) == url


@pytest.mark.parametrize("bind,url", [
    ("127.0.0.1", "http://127.0.0.1:30000"), ("0.0.0.0", "http://127.0.0.1:30000"), ("", "http://127.0.0.1:30000"),
    (None, "http://127.0.0.1:30000"), ("localhost", "http://127.0.0.1:30000"), ("::", "http://[::1]:30000"),
    ("[::]", "http://[::1]:30000"), ("::1", "http://[::1]:30000"),
    # an IPv6 bind is bracketed: "http://fd00::11:30000" is a URL with an invalid port
    ("fd00::11", "http://[fd00::11]:30000"), ("[fd00::11]", "http://[fd00::11]:30000"),
    ("10.0.0.11", "http://10.0.0.11:30000"), ("gpu-01", "http://gpu-01:30000"),
])
def test_local_url_is_what_a_check_on_the_host_reaches(bind, url):
    assert _http.local_url(bind, 30000) == url
    assert _http.parse_base_url(url)[2] == 30000


@pytest.mark.parametrize("host,loopback", [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LocalHost.", True), ("::ffff:127.0.0.1", True),
    ("0.0.0.0", False), ("::", False), ("", False), (None, False), ("10.0.0.11", False), ("fd00::11", False),
    ("127.example.org", False), ("localhost.example.org", False), ("gpu-01", False),
])
def test_is_loopback(host, loopback):
    assert _http.is_loopback(host) is loopback


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        code = int(self.path.strip("/"))
        body = b"no such route sk-test-key-1" if code == 404 else b'{"error": "boom sk-test-key-1"}'
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    answering = LocalServer(_Answer)
    yield answering.url
    answering.close()


def _raised(url, timeout=5):
    try:
        urlrequest.build_opener(urlrequest.ProxyHandler({})).open(url, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 (the test wants whatever urllib raises)
        return exc
    raise AssertionError("no exception from %s" % url)


@pytest.mark.parametrize("code,cls", [(404, "not_found"), (401, "unauthorized"), (503, "loading"), (500, "http_error")])
def test_status_answers(server, code, cls):
    url = "%s/%d" % (server, code)
    got = _http.describe_failure(_raised(url), url, "127.0.0.1", 1, 5, api_key="sk-test-key-1")
    assert got[0] == cls and got[2] == code
    assert "sk-test-key-1" not in got[1]
    if code == 500:
        assert "boom ********" in got[1]


def test_connection_failures():
    port = free_port()
    url = "http://127.0.0.1:%d/" % port
    cls, msg, status = _http.describe_failure(_raised(url), url, "127.0.0.1", port, 5)
    assert (cls, status) == ("refused", None) and "is the SGLang service running" in msg
    # a listener that never answers: the read times out
    with socket.socket() as quiet:
        quiet.bind(("127.0.0.1", 0))
        quiet.listen(1)
        url = "http://127.0.0.1:%d/" % quiet.getsockname()[1]
        cls, msg, _status = _http.describe_failure(_raised(url, timeout=0.3), url, "127.0.0.1", 1, 0.3)
    assert cls == "timeout" and "within 0.3s" in msg
    assert _http.describe_failure(KeyError("x"), url, "h", 1, 1) is None


# ---------------------------------------------------------------------------------------------
# The client: the same classes and messages as describe_failure, whoever calls it


@pytest.mark.parametrize("code,cls", [(404, "not_found"), (401, "unauthorized"), (503, "loading"), (500, "http_error")])
def test_the_client_classifies_through_describe_failure(server, code, cls):
    with pytest.raises(_http.FetchError) as exc:
        _http.request(server, "/%d" % code, api_key="sk-test-key-1", timeout=5)
    url = "%s/%d" % (server, code)
    expected = _http.describe_failure(_raised(url), url, "127.0.0.1", 1, 5, api_key="sk-test-key-1")
    assert (exc.value.cls, exc.value.message, exc.value.http_status) == expected
    assert "sk-test-key-1" not in exc.value.message


def test_the_client_bounds_bodies_and_streams(server):
    status, body, _ctype = _http.request(server, "/200", timeout=5)
    assert status == 200 and body == b'{"error": "boom sk-test-key-1"}'
    with pytest.raises(_http.FetchError, match="answered more than 10 bytes") as exc:
        _http.request(server, "/200", timeout=5, max_bytes=10)
    assert exc.value.cls == "too_large"
    with _http.open_url(server, "/200", timeout=5) as answer:
        with pytest.raises(_http.FetchError, match="streamed more than 8 bytes") as exc:
            list(answer.lines(4096, 8))
    assert exc.value.cls == "too_large"
    with _http.open_url(server, "/200", timeout=5) as answer:
        with pytest.raises(_http.FetchError, match="an event line longer than 4 bytes") as exc:
            list(answer.lines(4, 1 << 20))
    assert exc.value.cls == "malformed_chunk"
    with pytest.raises(_http.UrlError, match="no scheme"):
        _http.request("127.0.0.1:1", "/")


# ---------------------------------------------------------------------------------------------
# One deadline for the whole request: a server that trickles a byte at a time never lets a socket timeout fire


@pytest.mark.parametrize("part", ["headers", "chunk_size", "event"])
@pytest.mark.parametrize("how", ["read", "lines"])
def test_a_trickled_answer_times_out_by_the_request_deadline(part, how):
    from bench_servers import trickled  # tests/unit/bench_servers.py

    server = trickled(part)  # 20 s of answer, a byte every 50 ms
    try:
        start = time.monotonic()
        with pytest.raises(_http.FetchError) as exc:
            if how == "read":
                _http.request(server.url, "/", timeout=0.5)
            else:
                with _http.open_url(server.url, "/", timeout=0.5, accept="text/event-stream") as answer:
                    list(answer.lines(1 << 20, 1 << 24))
        took = time.monotonic() - start
    finally:
        server.close()
    assert exc.value.cls == "timeout" and "0.5s" in exc.value.message
    assert 0.4 < took < 2.5, "the request took %.2f s for a 0.5 s timeout" % took


def test_a_slow_answer_within_the_deadline_is_read_whole():
    from bench_servers import Trickle  # tests/unit/bench_servers.py

    server = Trickle(b"", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", gap=0.005)
    try:
        assert _http.request(server.url, "/", timeout=5)[:2] == (200, b"{}")
    finally:
        server.close()


def test_a_chunk_size_past_what_python_can_hold_is_bad_http_not_an_overflow():
    from bench_servers import Trickle  # tests/unit/bench_servers.py

    # http.client hands a chunk size of 2**84 - 1 to BufferedReader.peek, which raised OverflowError past the client
    server = Trickle(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 21 + b"\r\ndata: {}\n\n", b"", 0)
    try:
        with _http.open_url(server.url, "/", timeout=5) as answer:
            with pytest.raises(_http.FetchError, match="did not answer with valid HTTP .*OverflowError") as exc:
                list(answer.lines(4096, 1 << 20))
    finally:
        server.close()
    assert exc.value.cls == "http_error"


@pytest.mark.parametrize("part", ["headers", "chunk_size", "event"])
def test_a_trickled_answer_over_tls_times_out_by_the_request_deadline(part, tmp_path):
    from bench_servers import tls_context, trickled  # tests/unit/bench_servers.py

    server = trickled(part, tls=tls_context(tmp_path))
    try:
        start = time.monotonic()
        with pytest.raises(_http.FetchError) as exc:
            with _http.open_url(server.url, "/", timeout=0.5, tls=False) as answer:
                list(answer.lines(1 << 20, 1 << 24))
        took = time.monotonic() - start
        # an honest answer over the same TLS: the deadline handler speaks TLS
        server.head, server.tail, server.gap = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", b"", 0
        assert _http.request(server.url, "/", timeout=5, tls=False)[:2] == (200, b"{}")
    finally:
        server.close()
    assert exc.value.cls == "timeout" and 0.4 < took < 2.5, (exc.value.message, took)
