# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Servers the benchmark client tests talk to: the lab's SGLang simulator (a real subprocess), small local HTTP
servers answering what a test scripts (``CannedServers.make``) and a raw loopback server that trickles its answer
(``Trickle``)."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler

from sim_harness import LocalServer, Sim  # tests/unit/sim_harness.py

# Simulator settings of the rate tests: 80 tok/s alone, 80 ms TTFT, 5% slower per extra running request.
RATE, TTFT_MS, SLOWDOWN = 80.0, 80.0, 0.05


def rate_sim(directory):
    """The simulator of the rate tests (stop() it)."""
    return Sim(directory, ["--sim-tokens-per-second", str(RATE), "--sim-ttft-ms", str(TTFT_MS),
                           "--sim-batch-slowdown", str(SLOWDOWN)])


class Canned(LocalServer):
    """A local HTTP server answering /v1/models and /v1/chat/completions with what a test scripts."""

    def __init__(self, chat=None, models_status=200, stall=0.0):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a):
                return

            def _json(self, code, obj):
                raw = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                if self.path == "/v1/models":
                    self._json(models_status, {"object": "list", "data": [{"id": "canned", "max_model_len": 32768}]}
                               if models_status == 200 else {"message": "not ready"})
                else:
                    self._json(404, {"detail": "Not Found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if stall:
                    time.sleep(stall)
                try:
                    chat(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        LocalServer.__init__(self, Handler)


def sse(handler, lines, done=True):
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for line in lines:
        handler.wfile.write(line if isinstance(line, bytes) else ("data: %s\n\n" % json.dumps(line)).encode())
        handler.wfile.flush()
    if done:
        handler.wfile.write(b"data: [DONE]\n\n")
    handler.close_connection = True


def chunk(text):
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


class CannedServers(object):
    """Canned servers made by one test, closed together."""

    def __init__(self):
        self.servers = []

    def make(self, **kw):
        self.servers.append(Canned(**kw))
        return self.servers[-1]

    def close(self):
        for s in self.servers:
            s.close()


class Trickle(object):
    """A loopback server that answers every request with ``head`` at once and then ``tail`` one byte every ``gap``
    seconds (at once for gap 0): each byte arrives well within any socket timeout, so only a deadline on the whole
    request ends it. head, tail and gap may be changed between requests; with ``tls`` (a server ssl.SSLContext) it
    speaks HTTPS."""

    def __init__(self, head, tail, gap=0.05, tls=None):
        self.head, self.tail, self.gap, self.tls = head, tail, gap, tls
        self.stopping = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.url = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.sock.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _addr = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            try:
                conn.settimeout(5)
                if self.tls:  # an ssl.SSLContext: the answer goes over TLS
                    conn = self.tls.wrap_socket(conn, server_side=True)
                request = b""
                while b"\r\n\r\n" not in request:
                    got = conn.recv(65536)
                    if not got:
                        return
                    request += got
                head, tail, gap = self.head, self.tail, self.gap
                headers, _sep, body = request.partition(b"\r\n\r\n")
                length = [int(line.split(b":", 1)[1]) for line in headers.lower().split(b"\r\n") if line.startswith(b"content-length:")]
                while length and len(body) < length[0]:  # read the whole request: a close with unread bytes is a reset
                    got = conn.recv(65536)
                    if not got:
                        return
                    body += got
                conn.sendall(head)
                if not gap:
                    conn.sendall(tail)
                    return
                for i in range(len(tail)):
                    if self.stopping.wait(gap):
                        return
                    conn.sendall(tail[i:i + 1])
            except OSError:
                return  # the client gave up: what the tests want

    def close(self):
        self.stopping.set()
        self.sock.close()


def tls_context(directory):
    """A server ssl.SSLContext with a fresh self-signed certificate for 127.0.0.1 (made with cryptography, which
    ansible-core requires), its files written under directory."""
    import datetime
    import ipaddress
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(directory / "cert.pem"), str(directory / "key.pem"))
    return context


class Pki(object):
    """A private CA made at test time (cryptography) and what it signed, as PEM files under ``directory``: ``ca``
    (its certificate), ``server_cert``/``server_key`` (for 127.0.0.1), ``client_cert``/``client_key`` (CN
    ``llmops-client``), and ``stranger_cert``/``stranger_key``, a client certificate signed by another CA. Private
    keys are written 0600. ``server_context(require_client, version)``: the server's ssl.SSLContext, trusting the CA
    for client certificates and requiring one when asked, speaking only that TLS version when given."""

    def __init__(self, directory):
        self.directory = directory
        ca_key, ca_name = self._key(), self._name("llmops test CA")
        self.ca = self._write("ca.pem", self._cert(ca_name, ca_key, ca_name, ca_key, ca=True))
        other_key, other_name = self._key(), self._name("another CA")
        self.server_cert, self.server_key = self._pair("server", "127.0.0.1", ca_name, ca_key, server=True)
        self.client_cert, self.client_key = self._pair("client", "llmops-client", ca_name, ca_key)
        self.stranger_cert, self.stranger_key = self._pair("stranger", "llmops-client", other_name, other_key)

    @staticmethod
    def _key():
        from cryptography.hazmat.primitives.asymmetric import ec

        return ec.generate_private_key(ec.SECP256R1())

    @staticmethod
    def _name(common_name):
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    @staticmethod
    def _cert(subject, key, issuer, issuer_key, ca=False, server=False):
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes

        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                            critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def _write(self, name, data, mode=0o644):
        from cryptography.hazmat.primitives import serialization

        if hasattr(data, "public_bytes"):
            data = data.public_bytes(serialization.Encoding.PEM)
        path = self.directory / name
        path.write_bytes(data)
        path.chmod(mode)
        return str(path)

    def _pair(self, stem, common_name, issuer, issuer_key, server=False):
        from cryptography.hazmat.primitives import serialization

        key = self._key()
        cert = self._cert(self._name(common_name), key, issuer, issuer_key, server=server)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        return self._write(stem + ".pem", cert), self._write(stem + ".key", pem, 0o600)

    def server_context(self, require_client=True, version=None):
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if version is not None:
            context.minimum_version = context.maximum_version = version
        context.load_cert_chain(self.server_cert, self.server_key)
        context.load_verify_locations(self.ca)
        context.verify_mode = ssl.CERT_REQUIRED if require_client else ssl.CERT_NONE
        return context


def trickled(part, gap=0.05, seconds=20.0, tls=None):
    """A Trickle server whose answer trickles from ``part`` on, for ``seconds`` at ``gap`` a byte: ``headers`` (the
    status line on), ``chunk_size`` (a chunk-size line of a chunked answer), ``event`` (a server-sent event line)."""
    pad = b"x" * int(seconds / gap)
    if part == "headers":
        return Trickle(b"", b"HTTP/1.1 200 OK\r\nX-Pad: " + pad + b"\r\nContent-Length: 2\r\n\r\n{}", gap, tls)
    if part == "chunk_size":
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"
        return Trickle(head, b"1;" + pad + b"\r\n}\r\n0\r\n\r\n", gap, tls)
    if part == "event":
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                + ("data: %s\n\n" % json.dumps(chunk("a"))).encode())
        return Trickle(head, b"data: " + pad + b"\n\ndata: [DONE]\n\n", gap, tls)
    raise ValueError(part)
