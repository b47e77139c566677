# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one URL rule, the one HTTP client and the one HTTP error vocabulary of every module that talks to a server.

* ``parse_base_url`` says what a base URL option may be (http or https, a host, an optional port, nothing else)
  and never lets ``urllib``'s ``ValueError`` out: ``http://[::1`` or ``http://fd00::11:30000`` get a message
  that names the fix. ``host_url`` builds the URL of a host and port (IPv6 in brackets).
* ``describe_failure`` turns what a request raised (``HTTPError``, ``URLError``, a socket error, bad HTTP) into
  ``(class, message, HTTP status)``; the message says what to do.
* ``tls_settings`` checks a module's TLS options (``TLS_ARGUMENT_SPEC``: ``validate_certs``, ``ca_path``,
  ``client_cert``, ``client_key``) before any request: files that exist, a private key readable by its owner only
  (never by every user), no passphrase. Ansible's own URL layer (``ansible.module_utils.urls.make_context``) builds
  the TLS context from them, as it does for ``uri`` and ``get_url``; the transport stays this module's own, because
  ``urls.Request`` has no deadline for the whole request (a socket timeout restarts at every byte).
* ``open_url`` sends one request (API key as ``Authorization: Bearer``, no redirects, no proxy for loopback,
  a ``Tls``) and returns an ``Answer`` whose reads are bounded in bytes and time: ``read`` for a whole body,
  ``lines`` for a stream of server-sent events. ``request`` is both for a plain call. Every failure is a
  ``FetchError`` classified by ``describe_failure``. One deadline covers the whole request: connecting, the TLS
  handshake, sending, the status line, headers, chunked framing and the body each get only what is left of it (a
  socket timeout alone restarts at every byte received, so an answer trickled a byte at a time never timed out).

Standard library and ``ansible.module_utils`` only, Python 3.9+.
"""

from __future__ import annotations

import collections
import functools
import http.client
import io
import ipaddress
import json
import os
import socket
import ssl
import time
from urllib import error as urlerror
from urllib import parse as urlparse
from urllib import request as urlrequest

from ansible.module_utils.urls import make_context
from ansible_collections.llmops.sglang.plugins.module_utils._files import NotRegularFile, open_regular
from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact_text

EXAMPLE_URL = "http://127.0.0.1:30000"
# A base URL longer than this is not one (and its text would flood the error message).
MAX_URL_CHARS = 2048
# Bytes of an error answer kept for the message (the rest is not read).
ERROR_BODY_BYTES = 4096
SNIPPET_CHARS = 200
REDACTED = "********"
DEFAULT_TIMEOUT = 10.0
# A whole answer read into memory (server_info, model_info, /metrics, a router's worker list).
MAX_BODY_BYTES = 16 * 1024 * 1024
READ_CHUNK = 64 * 1024
USER_AGENT = "llmops.sglang"
# A stream that stops in the middle of an answer: the server died or a proxy cut the connection.
DISCONNECTS = (http.client.IncompleteRead, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
# What http.client lets out for framing it cannot follow (a chunk size past 2**63 reaches BufferedReader.peek).
MALFORMED = (OverflowError, ValueError)
ERROR_CLASSES = ("bad_url", "refused", "unreachable", "tls", "timeout", "unauthorized", "loading", "not_found",
                 "http_error", "not_json", "too_large")


# Seconds: a week; a larger timeout overflows the socket timer (OverflowError from inside urllib).
MAX_SECONDS = 7 * 24 * 3600


class OptionError(ValueError):
    """An option a request cannot be made with; the message says how to write it."""


class UrlError(OptionError):
    """A URL option that cannot be used; the message says how to write it."""


class FetchError(Exception):
    """One classified failure of one request."""

    def __init__(self, cls, message, http_status=None):
        super(FetchError, self).__init__(message)
        self.cls = cls
        self.message = message
        self.http_status = http_status


# ---------------------------------------------------------------------------------------------
# URLs


def _shown(url):
    return url if len(url) <= 200 else url[:200] + "..."


def parse_base_url(url, what="url"):
    """(base URL without a trailing slash, host, port) of a server URL; UrlError naming the fix otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise UrlError("%s must be a non-empty string such as %s" % (what, EXAMPLE_URL))
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise UrlError("%s is %d characters long: a server's base URL is at most %d (for example %s)"
                       % (what, len(url), MAX_URL_CHARS, EXAMPLE_URL))
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in url):
        raise UrlError("%s %r contains spaces or control characters: write it as http://HOST:PORT" % (what, _shown(url)))
    if "://" not in url:
        raise UrlError("%s %r has no scheme: write it as http://HOST:PORT (for example %s)" % (what, _shown(url), EXAMPLE_URL))
    try:
        parts = urlparse.urlsplit(url)
        scheme = parts.scheme
        hostname = parts.hostname
        credentials = parts.username is not None or parts.password is not None
    except ValueError as exc:
        # urllib: "Invalid IPv6 URL" (an unclosed bracket), invalid characters under NFKC normalization
        raise UrlError("%s %r cannot be parsed (%s): write it as http://HOST:PORT, an IPv6 address in brackets "
                       "(http://[fd00::11]:30000)" % (what, _shown(url), exc))
    if scheme not in ("http", "https"):
        raise UrlError("%s scheme %r is not supported: use http:// or https://" % (what, scheme))
    if credentials:
        raise UrlError("%s must not carry credentials (user:password@): pass the key in api_key" % what)
    if not hostname:
        raise UrlError("%s %r has no host: write it as http://HOST:PORT" % (what, _shown(url)))
    if parts.netloc.count(":") > 1 and "[" not in parts.netloc:
        raise UrlError("%s %r: an IPv6 address goes in brackets, e.g. http://[fd00::11]:30000" % (what, _shown(url)))
    try:
        port = parts.port
    except ValueError:
        raise UrlError("%s %r has an invalid port: use a number between 1 and 65535" % (what, _shown(url)))
    if port == 0:
        raise UrlError("%s %r has port 0: use a number between 1 and 65535" % (what, _shown(url)))
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise UrlError("%s %r must not have a query or fragment: give only the server's base URL" % (what, _shown(url)))
    if port is None:
        port = 443 if scheme == "https" else 80
    base = urlparse.urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return base, hostname, port


def check_api_key(api_key, what="api_key"):
    """OptionError unless the key can travel in an Authorization header (http.client raised UnicodeEncodeError for a
    character outside latin-1 and ValueError for a line break); None and "" mean no key."""
    if api_key is None or api_key == "":
        return
    if not isinstance(api_key, str) or not all(33 <= ord(ch) <= 126 for ch in api_key):
        raise OptionError("%s must be printable ASCII without spaces: it is sent as 'Authorization: Bearer KEY' (check it "
                          "for a pasted line break or a typographic character)" % what)


def host_url(host, port, scheme="http"):
    """SCHEME://HOST:PORT, an IPv6 address in brackets (``fd00::11`` -> ``http://[fd00::11]:30000``)."""
    host = str(host)
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "%s://%s:%s" % (scheme, host, port)


# Bind addresses that say "every interface": where a server listens, not an address to reach it at.
WILDCARDS = ("", "0.0.0.0", "::", "[::]")


def _bare(host):
    host = "" if host is None else str(host).strip()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def is_loopback(host):
    """True when an address (bind or URL host) is reachable from its own host only: 127.0.0.0/8, ::1 (also
    IPv4-mapped), localhost. A wildcard, a name or any other address is not."""
    host = _bare(host)
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return bool(addr.is_loopback or (mapped is not None and mapped.is_loopback))


def local_url(bind, port, scheme="http"):
    """The URL a check on the server's own host uses for a server bound to ``bind``: a wildcard is probed on
    loopback of its family (``0.0.0.0`` -> 127.0.0.1, ``::`` -> [::1]), ``localhost`` on 127.0.0.1 (what the
    server bound), any other address as it is, IPv6 in brackets."""
    host = _bare(bind)
    if host in ("", "0.0.0.0") or host.lower() == "localhost":
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return host_url(host, port, scheme)


def worker_url(bind, port, fallback, scheme="http"):
    """The URL other hosts (routers) use for a server: its bind address, or ``fallback`` (ansible_host) for a
    wildcard bind."""
    host = _bare(bind)
    return host_url(str(fallback) if host in WILDCARDS else host, port, scheme)


# ---------------------------------------------------------------------------------------------
# TLS

# The TLS options of every module that talks to a server (doc fragment llmops.sglang.http_client).
TLS_ARGUMENT_SPEC = dict(
    validate_certs=dict(type="bool", default=True),
    ca_path=dict(type="path"),
    client_cert=dict(type="path"),
    client_key=dict(type="path", no_log=False),
)
# A PEM certificate or key file is a few KiB; a bundle of every public CA about 200 KiB.
MAX_PEM_BYTES = 1024 * 1024


class Tls(collections.namedtuple("Tls", "validate_certs ca_path client_cert client_key")):
    """How https:// requests verify the server (against ca_path, else the system's CAs) and which client certificate
    they present; build it with tls_settings."""


DEFAULT_TLS = Tls(True, None, None, None)


def _pem(path, what):
    """(the open file's stat, at most MAX_PEM_BYTES of it) of a regular file option; OptionError naming the fix."""
    try:
        with open_regular(path) as handle:
            return os.fstat(handle.fileno()), handle.read(MAX_PEM_BYTES + 1)
    except NotRegularFile as exc:
        raise OptionError("%s %s is %s: give the PEM file itself" % (what, path, exc.kind))
    except ValueError:  # a NUL byte
        raise OptionError("%s %r is not a path: give the PEM file's path" % (what, path))
    except OSError as exc:
        raise OptionError("%s %s cannot be read (%s): give a PEM file the user running the module can read"
                          % (what, path, _reason_text(exc)))


def _check_private_key(path, what):
    """OptionError unless the file at path holds an unencrypted private key that other users cannot read."""
    st, text = _pem(path, what)
    if b"PRIVATE KEY-----" not in text:
        if what == "client_cert":
            raise OptionError("client_cert %s holds no private key: set client_key to the key's file" % path)
        raise OptionError("client_key %s holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)" % path)
    if st.st_mode & 0o004:
        raise OptionError("%s %s is readable by every user (mode %04o): it holds a private key; chmod o-rwx it "
                          "(0600, or 0640 for a group)" % (what, path, st.st_mode & 0o7777))
    if b"ENCRYPTED" in text:
        raise OptionError("%s %s holds an encrypted private key: Ansible's URL layer takes no passphrase; give the key "
                          "unencrypted (openssl pkey -in KEY -out KEY.plain), readable by its owner only" % (what, path))


def tls_settings(validate_certs=True, ca_path=None, client_cert=None, client_key=None):
    """A Tls of a module's options, each file checked (never its contents shown): ca_path a readable file, client_key
    (or client_cert, when it also holds the key) not readable by every user and not encrypted; OptionError otherwise."""
    if client_key and not client_cert:
        raise OptionError("client_key is set without client_cert: set client_cert to the certificate the key belongs to")
    if ca_path:
        _pem(ca_path, "ca_path")
    if client_cert:
        _pem(client_cert, "client_cert")
        if client_key:
            _check_private_key(client_key, "client_key")
        else:
            _check_private_key(client_cert, "client_cert")
    return Tls(validate_certs is not False, ca_path or None, client_cert or None, client_key or None)


def tls_from_params(params):
    """tls_settings of a module's params (the keys of TLS_ARGUMENT_SPEC)."""
    return tls_settings(**dict((name, params.get(name)) for name in TLS_ARGUMENT_SPEC))


def _as_tls(tls):
    """A Tls of what callers pass: a Tls, or True/False/None for validate_certs alone."""
    if isinstance(tls, Tls):
        return tls
    return DEFAULT_TLS if tls is None or tls is True else DEFAULT_TLS._replace(validate_certs=False)


@functools.lru_cache(maxsize=8)
def ssl_context(tls):
    """Ansible's TLS context for a Tls, made once per module run (it reads the system's CA bundle); FetchError tls
    naming the option when a file does not load."""
    try:
        return make_context(cafile=tls.ca_path, validate_certs=tls.validate_certs, client_cert=tls.client_cert,
                            client_key=tls.client_key)
    except (ssl.SSLError, OSError, ValueError) as exc:
        files = ", ".join("%s %s" % (name, getattr(tls, name)) for name in TLS_ARGUMENT_SPEC if name != "validate_certs"
                          and getattr(tls, name))
        raise FetchError("tls", "%s cannot be loaded as TLS settings (%s): ca_path must hold the PEM certificate of the CA "
                                "that signed the server's, client_cert a PEM certificate and client_key its unencrypted key"
                         % (files or "the system's CA certificates", _reason_text(exc)))


# ---------------------------------------------------------------------------------------------
# Failures


def snippet(body, api_key=None):
    """A short one-line excerpt of an answer, the API key masked."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    text = " ".join(text.split())
    text = redact_text(text, [api_key] if api_key else ())
    return text[:SNIPPET_CHARS]


def seconds_text(value):
    """A timeout as written in messages: 10, 2.5."""
    return ("%g" % value) if isinstance(value, float) else str(value)


def _reason_text(reason):
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def status_failure(code, url, body=b"", api_key=None):
    """(class, message, status) of a non-2xx answer."""
    if code in (401, 403):
        if api_key:
            msg = ("HTTP %d from %s: the server rejected the API key: set api_key to the value of the server's --api-key"
                   % (code, url))
        else:
            msg = "HTTP %d from %s: the server requires an API key (--api-key): set api_key" % (code, url)
        return "unauthorized", msg, code
    if code == 503:
        return ("loading", "HTTP 503 from %s: the server is still starting (loading weights, capturing CUDA graphs, warming "
                           "up) or shutting down: wait until GET /health_generate answers 200 and retry" % url, code)
    if code == 404:
        return "not_found", "HTTP 404 from %s: the server has no such endpoint; check that url points at SGLang" % url, code
    if 300 <= code < 400:
        return ("http_error", "HTTP %d redirect from %s: redirects are not followed (they would carry the API key "
                              "elsewhere); point url at the SGLang server itself" % (code, url), code)
    text = snippet(body, api_key)
    return "http_error", "HTTP %d from %s%s" % (code, url, (": " + text) if text else ""), code


# OpenSSL's reason codes of a server that wants a client certificate and got none, and of one that refused ours.
CERT_REQUIRED_REASONS = ("TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_HANDSHAKE_FAILURE", "PEER_DID_NOT_RETURN_A_CERTIFICATE")
CERT_REFUSED_REASONS = ("TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_BAD_CERTIFICATE", "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
                        "TLSV1_ALERT_ACCESS_DENIED", "SSLV3_ALERT_CERTIFICATE_EXPIRED")


def tls_failure(reason, where):
    """The message of a TLS failure (an ssl.SSLError) talking to HOST:PORT, naming the option that fixes it."""
    text = getattr(reason, "verify_message", None) or _reason_text(reason)
    code = getattr(reason, "reason", None) or ""
    if isinstance(reason, ssl.SSLCertVerificationError):
        if "mismatch" in text:
            return ("the certificate of %s does not name that host (%s): put the name or address the certificate was "
                    "issued for in url" % (where, text))
        if "expired" in text or "not yet valid" in text:
            return "the certificate of %s is not valid now (%s): renew the server's certificate" % (where, text)
        return ("the certificate of %s is not trusted (%s): set ca_path to the PEM file of the CA that signed it (a "
                "private CA is not among the system's), or validate_certs to false for a server trusted otherwise"
                % (where, text))
    if code in CERT_REQUIRED_REASONS:
        return ("%s requires a client certificate (TLS alert %s): set client_cert and client_key to a certificate "
                "signed by a CA the server trusts, and its key" % (where, code.lower()))
    if code in CERT_REFUSED_REASONS:
        return ("%s refused the client certificate (TLS alert %s): set client_cert and client_key to a certificate "
                "signed by a CA the server trusts (its --ssl-ca-certs), valid now" % (where, code.lower()))
    if isinstance(reason, ssl.SSLEOFError):
        # TLS 1.3 checks the client certificate after the client's handshake ended: the refusal may arrive as a bare EOF
        return ("%s closed the TLS connection without an answer (%s): a server that requires a client certificate does "
                "this when it gets none, or one signed by a CA it does not trust: set client_cert and client_key to a "
                "certificate it trusts (its --ssl-ca-certs); else check the scheme and port in url" % (where, text))
    if code == "WRONG_VERSION_NUMBER":
        return "%s does not speak TLS (%s): use http:// in url" % (where, text)
    return ("TLS error talking to %s (%s): use the scheme the server speaks (http or https), set ca_path to the CA "
            "of its certificate, or set validate_certs to false for a self-signed certificate" % (where, text))


def connection_failure(exc, url, host, port, timeout):
    """(class, message, None) of a transport exception (possibly wrapped in URLError)."""
    reason = exc.reason if isinstance(exc, urlerror.URLError) else exc
    where = "%s:%s" % (host, port)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return ("timeout", "no answer from %s within %ss: the server may be busy (long prefill, CUDA graph capture) or "
                           "hung; raise timeout or check the service" % (url, seconds_text(timeout)), None)
    if isinstance(reason, ConnectionRefusedError):
        return ("refused", "connection refused at %s: is the SGLang service running and listening on this host and port "
                           "(--host/--port)? During startup the HTTP port opens only after the weights are loaded" % where,
                None)
    if isinstance(reason, ssl.SSLError):
        return "tls", tls_failure(reason, where), None
    if isinstance(reason, socket.gaierror):
        return "unreachable", "cannot resolve host %r (%s): fix the host name in url" % (host, _reason_text(reason)), None
    return ("unreachable", "cannot reach %s (%s): check the host, the port, routing and firewalls"
            % (where, _reason_text(reason)), None)


def describe_failure(exc, url, host, port, timeout, api_key=None):
    """(class, message, HTTP status or None) of anything a request raised; None for an exception it does not know."""
    if isinstance(exc, urlerror.HTTPError):
        try:
            body = exc.read(ERROR_BODY_BYTES)
        except (OSError, http.client.HTTPException, AttributeError):
            body = b""
        finally:
            exc.close()
        return status_failure(exc.code, url, body, api_key)
    if isinstance(exc, (urlerror.URLError, OSError)):
        return connection_failure(exc, url, host, port, timeout)
    if isinstance(exc, http.client.HTTPException):
        return ("http_error", "%s did not answer with valid HTTP (%s): check that url points at the SGLang HTTP port and "
                              "uses the right scheme" % (url, type(exc).__name__), None)
    return None


# ---------------------------------------------------------------------------------------------
# The client


def _seconds_left(deadline):
    """What is left of a request's deadline, as a socket timeout; socket.timeout (a timeout failure) once it passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


class _DeadlineReader(io.RawIOBase):
    """An answer's bytes, each socket read allowed only what is left of the request's deadline."""

    def __init__(self, inner, sock, deadline):
        io.RawIOBase.__init__(self)
        self._inner, self._sock, self._deadline = inner, sock, deadline

    def readable(self):
        return True

    def readinto(self, buf):
        self._sock.settimeout(_seconds_left(self._deadline))
        return self._inner.readinto1(buf)

    def fileno(self):
        return self._inner.fileno()

    def close(self):
        if not self.closed:
            self._inner.close()
        io.RawIOBase.close(self)


class _DeadlineResponse(http.client.HTTPResponse):
    """http.client's response, its status line, headers, chunk framing and body read by the request's deadline."""

    def __init__(self, sock, *args, **kwargs):
        deadline = kwargs.pop("deadline")
        http.client.HTTPResponse.__init__(self, sock, *args, **kwargs)
        self.fp = io.BufferedReader(_DeadlineReader(self.fp, sock, deadline))


class _DeadlineConnection(object):
    """Connecting (TLS handshake included), sending and the answer share one deadline (set by ``bind``)."""

    def bind(self, deadline):
        self._deadline = deadline
        self._create_connection = self._connect_by_deadline
        self.response_class = functools.partial(_DeadlineResponse, deadline=deadline)
        return self

    def _connect_by_deadline(self, address, timeout=None, source_address=None, *args, **kwargs):
        sock = socket.create_connection(address, _seconds_left(self._deadline), source_address)
        try:
            sock.settimeout(_seconds_left(self._deadline))  # what is left is the TLS handshake's
        except OSError:
            sock.close()
            raise
        return sock

    def send(self, data):
        if self.sock is None and self.auto_open:
            self.connect()
        if self.sock is not None:
            self.sock.settimeout(_seconds_left(self._deadline))
        super(_DeadlineConnection, self).send(data)


class _DeadlineHTTPConnection(_DeadlineConnection, http.client.HTTPConnection):
    pass


class _DeadlineHTTPSConnection(_DeadlineConnection, http.client.HTTPSConnection):
    pass


def _deadline_connection(deadline, http_class, host, **kwargs):
    cls = _DeadlineHTTPSConnection if issubclass(http_class, http.client.HTTPSConnection) else _DeadlineHTTPConnection
    return cls(host, **kwargs).bind(deadline)


class _DeadlineHTTPHandler(urlrequest.HTTPHandler):
    def __init__(self, deadline):
        urlrequest.HTTPHandler.__init__(self)
        self._deadline = deadline

    def do_open(self, http_class, req, **kwargs):
        return urlrequest.HTTPHandler.do_open(self, functools.partial(_deadline_connection, self._deadline, http_class),
                                              req, **kwargs)


class _DeadlineHTTPSHandler(urlrequest.HTTPSHandler):
    def __init__(self, deadline, context):
        urlrequest.HTTPSHandler.__init__(self, context=context)
        self._deadline = deadline

    def do_open(self, http_class, req, **kwargs):
        return urlrequest.HTTPSHandler.do_open(self, functools.partial(_deadline_connection, self._deadline, http_class),
                                               req, **kwargs)


class _NoRedirect(urlrequest.HTTPRedirectHandler):
    """SGLang never redirects; following one would hand the bearer token to another URL."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def opener(base, tls=None, use_proxy=True, deadline=None):
    """urllib's opener for one request to base; with a deadline (time.monotonic()) the whole request must end by it.
    tls: a Tls (tls_settings), or True/False/None for validate_certs alone."""
    handlers = [_NoRedirect()]
    if deadline is not None:
        handlers.append(_DeadlineHTTPHandler(deadline))
    host = urlparse.urlsplit(base).hostname or ""
    # A proxy cannot reach the managed host's loopback, so never send loopback through one.
    if not use_proxy or is_loopback(host):
        handlers.append(urlrequest.ProxyHandler({}))
    if base.startswith("https://"):
        ctx = ssl_context(_as_tls(tls))
        handlers.append(urlrequest.HTTPSHandler(context=ctx) if deadline is None else _DeadlineHTTPSHandler(deadline, ctx))
    return urlrequest.build_opener(*handlers)


class Answer(object):
    """The open response of one request; every read is bounded in bytes and by the request's deadline."""

    def __init__(self, resp, url, host, port, timeout, api_key, deadline):
        self.resp, self.url, self.host, self.port = resp, url, host, port
        self.timeout, self.api_key, self.deadline = timeout, api_key, deadline
        self.status = resp.status
        self.content_type = resp.headers.get("Content-Type", "") or ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.resp.close()
        except (OSError, http.client.HTTPException):
            pass

    def _failure(self, exc):
        if isinstance(exc, MALFORMED):
            return FetchError("http_error", "%s did not answer with valid HTTP (framing that cannot be followed, %s): check "
                                            "that url points at the SGLang HTTP port" % (self.url, type(exc).__name__))
        kind, msg, status = describe_failure(exc, self.url, self.host, self.port, self.timeout, self.api_key)
        return FetchError(kind, msg, status)

    def read(self, max_bytes=MAX_BODY_BYTES):
        """The whole body; FetchError too_large past max_bytes, timeout past the deadline."""
        # read1 returns what has arrived, so a slowly trickling answer meets the deadline check
        read = getattr(self.resp, "read1", self.resp.read)
        chunks, size = [], 0
        try:
            while True:
                if time.monotonic() > self.deadline:
                    raise FetchError("timeout", "%s did not finish its answer within %ss: raise timeout or check the service"
                                     % (self.url, seconds_text(self.timeout)))
                chunk = read(READ_CHUNK)
                if not chunk:
                    return b"".join(chunks)
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError("too_large", "%s answered more than %d bytes: this is not an SGLang answer; check url"
                                     % (self.url, max_bytes))
                chunks.append(chunk)
        except (urlerror.URLError, OSError, http.client.HTTPException) + MALFORMED as exc:
            raise self._failure(exc)

    def lines(self, max_line, max_bytes):
        """Each raw line of a streamed answer (server-sent events) until the server closes it.

        FetchError: malformed_chunk for a line longer than max_line, too_large past max_bytes in all, timeout past
        the deadline, disconnected when the connection drops mid-answer.
        """
        received = 0
        while True:
            if time.monotonic() > self.deadline:
                raise FetchError("timeout", "%s did not finish streaming within %ss: raise the request timeout or check "
                                            "the server" % (self.url, seconds_text(self.timeout)))
            try:
                raw = self.resp.readline(max_line)
            except DISCONNECTS as exc:
                raise FetchError("disconnected", "%s dropped the connection mid-answer (%s)" % (self.url, type(exc).__name__))
            except (urlerror.URLError, OSError, http.client.HTTPException) + MALFORMED as exc:
                raise self._failure(exc)
            if not raw:
                return
            received += len(raw)
            if received > max_bytes:
                raise FetchError("too_large", "%s streamed more than %d bytes for one answer: this is not an SGLang chat "
                                              "stream; check url" % (self.url, max_bytes))
            if len(raw) == max_line and not raw.endswith(b"\n"):
                raise FetchError("malformed_chunk", "%s sent an event line longer than %d bytes: this is not an SGLang "
                                                    "chat stream; check url" % (self.url, max_line))
            yield raw


def open_url(base, path, method="GET", payload=None, api_key=None, timeout=DEFAULT_TIMEOUT, tls=None,
             use_proxy=True, accept="application/json"):
    """Send one request to base+path (payload, JSON-serialisable or None, as a JSON body): an open Answer.

    FetchError, classified by describe_failure, for anything but a 2xx answer (the error of a non-2xx answer
    carries its status); UrlError for a base URL that is not one.
    """
    base, host, port = parse_base_url(base)
    url = base + path
    headers = {"Accept": accept, "User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    data = None
    if payload is not None:
        data = json.dumps(payload).encode("utf-8")
        headers["Content-Type"] = "application/json"
    req = urlrequest.Request(url, data=data, headers=headers, method=method)
    deadline = time.monotonic() + float(timeout)
    try:
        resp = opener(base, tls, use_proxy, deadline).open(req, timeout=float(timeout))
    except (urlerror.URLError, OSError, http.client.HTTPException) as exc:  # HTTPError is a URLError
        kind, msg, status = describe_failure(exc, url, host, port, timeout, api_key)
        raise FetchError(kind, msg, status)
    return Answer(resp, url, host, port, timeout, api_key, deadline)


def request(base, path, method="GET", payload=None, api_key=None, timeout=DEFAULT_TIMEOUT, tls=None,
            use_proxy=True, max_bytes=MAX_BODY_BYTES, accept="application/json"):
    """One whole call: (status, body bytes, content type); FetchError for anything but a 2xx answer."""
    with open_url(base, path, method, payload, api_key, timeout, tls, use_proxy, accept) as answer:
        return answer.status, answer.read(max_bytes), answer.content_type
