"""The test-only SGLang simulator on a loopback port, for tests of clients (benchmark, canary, server_info)."""

import json
import pathlib
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import ThreadingHTTPServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIM = ROOT / "tests" / "lab" / "sglang_sim" / "sglang_sim.py"
CKPT = ROOT / "tests" / "fixtures" / "checkpoints" / "qwen3.5-397b-a17b-nvfp4"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer(object):
    """An in-process HTTP server on a free loopback port that answers with ``handler`` (a BaseHTTPRequestHandler
    class); close() it. With ``tls`` (a server ssl.SSLContext) it speaks HTTPS, each handshake in the request's own
    thread (a client that never finishes one blocks no other)."""

    def __init__(self, handler, tls=None):
        class Httpd(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

            def handle_error(self, request, client_address):
                # a handshake the server refused (no client certificate, an untrusted one) is what a TLS test is about
                if tls is None or not isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
                    ThreadingHTTPServer.handle_error(self, request, client_address)

        self.httpd = Httpd(("127.0.0.1", 0), handler)
        scheme = "http"
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
            scheme = "https"
        self.url = "%s://127.0.0.1:%d" % (scheme, self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _Served(object):
    """A process that serves HTTP on loopback, started by a subclass; its log lies next to the test's files."""

    def _start(self, argv, log_path, ready_path, seconds, what):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.url = "http://127.0.0.1:%d" % self.port
        end = time.time() + seconds
        while time.time() < end:
            try:
                with urllib.request.urlopen(self.url + ready_path, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            assert self.proc.poll() is None, "%s exited early: %s" % (what, log_path.read_text()[-2000:])
            time.sleep(0.05)
        raise AssertionError("%s not ready after %d s" % (what, seconds))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


class Sim(_Served):
    """The simulator on a free loopback port, with a copy of the lab checkpoint."""

    def __init__(self, tmp, extra=(), key=None):
        self.port = free_port()
        ckpt = tmp / "ckpt"
        if not ckpt.exists():
            shutil.copytree(CKPT, ckpt)
        argv = [sys.executable, str(SIM), "--model-path", str(ckpt), "--served-model-name", "qwen3.5-397b", "--host", "127.0.0.1",
                "--port", str(self.port), "--tp-size", "8", "--kv-cache-dtype", "bf16", "--sim-load-seconds", "0.1",
                "--sim-warmup-seconds", "0.1"] + list(extra)
        if key:
            argv += ["--api-key", key]
        self._start(argv, tmp / ("sim-%d.log" % self.port), "/health", 20, "simulator")


class Router(_Served):
    """SGLang's real router (sglang-router, pinned in requirements.txt) on a free loopback port, in front of urls; its
    Prometheus counters at metrics_url."""

    def __init__(self, tmp, urls, key=None, extra=()):
        self.port = free_port()
        prometheus = free_port()
        self.metrics_url = "http://127.0.0.1:%d/metrics" % prometheus
        argv = ([sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(self.port),
                 "--worker-urls"] + list(urls)
                + ["--policy", "round_robin", "--prometheus-port", str(prometheus), "--log-level", "warn"] + list(extra))
        if key:
            argv += ["--api-key", key]
        self._start(argv, tmp / ("router-%d.log" % self.port), "/readiness", 60, "router")
        # /readiness answers 200 once one worker is healthy; the others register in the background: a test starts
        # from every worker listed and healthy
        end, seen = time.time() + 60, None
        while time.time() < end:
            with urllib.request.urlopen(self.url + "/readiness", timeout=5) as r:
                seen = json.loads(r.read())
            if seen.get("healthy_workers") == len(urls):
                return
            time.sleep(0.1)
        raise AssertionError("router not ready with %d healthy workers after 60 s: %s" % (len(urls), seen))


class RouterFleet(object):
    """``routers`` real routers in front of two simulators with metrics, all sharing ``key``; stop() them."""

    def __init__(self, tmp, key, routers=1, sim_extra=(), router_extra=()):
        self.sims = [Sim(tmp, key=key, extra=["--enable-metrics"] + list(sim_extra)) for _i in range(2)]
        self.routers = [Router(tmp, [s.url for s in self.sims], key=key, extra=router_extra) for _i in range(routers)]
        self.router = self.routers[0]

    def stop(self):
        for p in self.routers + self.sims:
            p.stop()
