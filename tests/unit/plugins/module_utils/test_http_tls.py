# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_http over real TLS on loopback: a CA, a server and client certificates made at test time (bench_servers.Pki), a
server that requires a client certificate, and the client's TLS options (ca_path, client_cert, client_key) through
Ansible's own URL layer, its reads still bounded."""

import json
import ssl
import time
from http.server import BaseHTTPRequestHandler

import pytest
from ansible.module_utils import urls

from ansible_collections.llmops.sglang.plugins.module_utils import _http

from bench_servers import Pki, trickled  # tests/unit/bench_servers.py


def peer_handler(body_bytes=0):
    """Answers with the common name of the client certificate the server verified (and body_bytes of padding)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args):
            return

        def do_GET(self):
            cert = getattr(self.connection, "getpeercert", dict)() or {}
            names = [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
            raw = json.dumps({"client": names, "pad": "x" * body_bytes}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path)


@pytest.fixture
def mtls(pki, serve_http):
    """An HTTPS server on loopback that requires a client certificate signed by the test CA."""
    return serve_http(peer_handler(), tls=pki.server_context(require_client=True))


def test_ca_path_and_client_certificate_reach_a_server_that_requires_one(pki, mtls):
    tls = _http.tls_settings(True, pki.ca, pki.client_cert, pki.client_key)
    status, body, _ctype = _http.request(mtls.url, "/server_info", tls=tls)
    assert status == 200 and json.loads(body)["client"] == ["llmops-client"]


def test_the_context_is_ansibles_own(pki, monkeypatch):
    """The context comes from ansible.module_utils.urls.make_context, with the options as Ansible's uri module passes them."""
    seen = []

    def spy(**kwargs):
        seen.append(kwargs)
        return urls.make_context(**kwargs)

    monkeypatch.setattr(_http, "make_context", spy)
    _http.ssl_context.cache_clear()
    tls = _http.tls_settings(True, pki.ca, pki.client_cert, pki.client_key)
    assert isinstance(_http.ssl_context(tls), ssl.SSLContext)
    assert _http.ssl_context(tls) is _http.ssl_context(tls)  # made once per module run
    assert seen == [dict(cafile=pki.ca, validate_certs=True, client_cert=pki.client_cert, client_key=pki.client_key)]


def test_without_ca_path_a_private_ca_is_not_trusted_and_the_message_names_ca_path(pki, mtls):
    tls = _http.tls_settings(True, None, pki.client_cert, pki.client_key)
    with pytest.raises(_http.FetchError) as exc:
        _http.request(mtls.url, "/", tls=tls)
    assert exc.value.cls == "tls"
    assert "is not trusted" in exc.value.message and "set ca_path to the PEM file of the CA" in exc.value.message


def test_validate_certs_false_skips_the_server_check_but_still_presents_the_certificate(pki, mtls):
    tls = _http.tls_settings(False, None, pki.client_cert, pki.client_key)
    assert json.loads(_http.request(mtls.url, "/", tls=tls)[1])["client"] == ["llmops-client"]


# TLS 1.2 refuses a client certificate inside the handshake, with an alert the client always reads. TLS 1.3 checks it
# after the client's handshake ended: the alert, or a bare EOF when the server's close beats it, both name the fix.
REFUSALS = {
    ("none", ssl.TLSVersion.TLSv1_2): ("requires a client certificate (TLS alert sslv3_alert_handshake_failure)",),
    ("stranger", ssl.TLSVersion.TLSv1_2): ("refused the client certificate (TLS alert tlsv1_alert_unknown_ca)",),
    ("none", ssl.TLSVersion.TLSv1_3): ("requires a client certificate (TLS alert tlsv13_alert_certificate_required)",
                                       "closed the TLS connection without an answer"),
    ("stranger", ssl.TLSVersion.TLSv1_3): ("refused the client certificate (TLS alert tlsv1_alert_unknown_ca)",
                                           "closed the TLS connection without an answer"),
}


@pytest.mark.parametrize("client,version", sorted(REFUSALS, key=str))
def test_a_missing_or_untrusted_client_certificate_fails_naming_the_fix(pki, serve_http, client, version):
    server = serve_http(peer_handler(), tls=pki.server_context(require_client=True, version=version))
    certs = (pki.stranger_cert, pki.stranger_key) if client == "stranger" else ()
    with pytest.raises(_http.FetchError) as exc:
        _http.request(server.url, "/", tls=_http.tls_settings(True, pki.ca, *certs))
    assert exc.value.cls == "tls"
    assert any(text in exc.value.message for text in REFUSALS[client, version]), exc.value.message
    assert "set client_cert and client_key to a certificate" in exc.value.message


def test_a_host_the_certificate_does_not_name_is_named(pki, serve_http):
    server = serve_http(peer_handler(), tls=pki.server_context(require_client=False))
    with pytest.raises(_http.FetchError) as exc:
        _http.request(server.url.replace("127.0.0.1", "localhost"), "/", tls=_http.tls_settings(True, pki.ca))
    assert exc.value.cls == "tls" and "does not name that host" in exc.value.message


def test_reads_stay_bounded_in_bytes_over_tls(pki, serve_http):
    server = serve_http(peer_handler(body_bytes=2 << 20), tls=pki.server_context())
    tls = _http.tls_settings(True, pki.ca, pki.client_cert, pki.client_key)
    assert len(_http.request(server.url, "/", tls=tls)[1]) > 2 << 20
    with pytest.raises(_http.FetchError) as exc:
        _http.request(server.url, "/", tls=tls, max_bytes=1 << 20)
    assert exc.value.cls == "too_large" and "more than 1048576 bytes" in exc.value.message


def test_reads_stay_bounded_in_time_over_tls_with_a_ca(pki):
    """A server trickling its headers a byte at a time, behind a certificate the CA signed: the request's deadline."""
    server = trickled("headers", tls=pki.server_context(require_client=False))
    try:
        start = time.monotonic()
        with pytest.raises(_http.FetchError) as exc:
            _http.request(server.url, "/", timeout=0.5, tls=_http.tls_settings(True, pki.ca))
        took = time.monotonic() - start
    finally:
        server.close()
    assert exc.value.cls == "timeout" and 0.4 < took < 2.5, (exc.value.message, took)


def test_a_world_readable_key_is_refused_before_any_request_and_its_contents_never_shown(pki):
    import os

    os.chmod(pki.client_key, 0o644)
    with pytest.raises(_http.OptionError) as exc:
        _http.tls_settings(True, pki.ca, pki.client_cert, pki.client_key)
    message = str(exc.value)
    assert "readable by every user (mode 0644)" in message and "chmod o-rwx" in message
    with open(pki.client_key) as handle:
        body = handle.read().split("-----")[2].strip()
    assert body[:16] not in message
    os.chmod(pki.client_key, 0o640)  # a group may read it
    assert _http.tls_settings(True, pki.ca, pki.client_cert, pki.client_key).client_key == pki.client_key


def test_a_certificate_file_that_holds_the_key_is_held_to_the_same_rule(pki, mtls, tmp_path):
    import os

    both = tmp_path / "both.pem"
    both.write_bytes(open(pki.client_cert, "rb").read() + open(pki.client_key, "rb").read())
    both.chmod(0o604)
    with pytest.raises(_http.OptionError, match="client_cert .* is readable by every user"):
        _http.tls_settings(True, pki.ca, str(both))
    both.chmod(0o600)
    tls = _http.tls_settings(True, pki.ca, str(both))
    assert json.loads(_http.request(mtls.url, "/", tls=tls)[1])["client"] == ["llmops-client"]
    with pytest.raises(_http.OptionError, match="holds no private key: set client_key"):
        _http.tls_settings(True, pki.ca, pki.client_cert)


def test_an_encrypted_key_is_refused_naming_the_fix(pki, tmp_path):
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(open(pki.client_key, "rb").read(), None)
    locked = tmp_path / "locked.key"
    locked.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"passphrase")))
    locked.chmod(0o600)
    with pytest.raises(_http.OptionError, match="encrypted private key: .*takes no passphrase"):
        _http.tls_settings(True, pki.ca, pki.client_cert, str(locked))


@pytest.mark.parametrize("options,message", [
    (dict(client_key="KEY"), "client_key is set without client_cert"),
    (dict(ca_path="MISSING"), "ca_path .*missing.pem cannot be read \\(No such file or directory\\)"),
    (dict(ca_path="DIR"), "ca_path .* is a directory: give the PEM file itself"),
    (dict(ca_path="NUL"), "ca_path 'a\\\\x00b' is not a path"),
])
def test_option_errors_name_the_fix(pki, tmp_path, options, message):
    paths = {"KEY": pki.client_key, "MISSING": str(tmp_path / "missing.pem"), "DIR": str(tmp_path), "NUL": "a\x00b"}
    with pytest.raises(_http.OptionError, match=message):
        _http.tls_settings(**dict((k, paths[v]) for k, v in options.items()))


def test_a_ca_path_that_is_no_certificate_fails_as_tls_naming_the_option(pki, serve_http, tmp_path):
    server = serve_http(peer_handler(), tls=pki.server_context(require_client=False))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(_http.FetchError) as exc:
        _http.request(server.url, "/", tls=_http.tls_settings(True, str(junk)))
    assert exc.value.cls == "tls" and "ca_path %s cannot be loaded" % junk in exc.value.message


def test_plain_http_never_builds_a_tls_context(serve_http, pki):
    """An http:// URL with TLS options set: no context made, the request goes through."""
    server = serve_http(peer_handler())
    _http.ssl_context.cache_clear()
    assert _http.request(server.url, "/", tls=_http.tls_settings(True, pki.ca))[0] == 200
    assert _http.ssl_context.cache_info().currsize == 0
