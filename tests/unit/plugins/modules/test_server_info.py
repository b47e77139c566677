# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""server_info module: AnsibleModule runs against a real HTTP server on 127.0.0.1."""

import json
import os
import pathlib
import subprocess
import sys
from http.server import BaseHTTPRequestHandler

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import server_info

from sim_harness import Sim, free_port  # tests/unit/sim_harness.py

ROOT = pathlib.Path(__file__).resolve().parents[4]

# SGLang 0.5.23 with --kv-cache-dtype bf16 (tests/fixtures/server-info): api_key and launch_command hold the key
INFO = json.loads((ROOT / "tests" / "fixtures" / "server-info" / "server-info-0.5.23-bf16.json").read_text(encoding="utf-8"))
KEY = INFO["api_key"]
MODELS = {"object": "list", "data": [{"id": "qwen3.5-397b", "object": "model", "owned_by": "sglang"}]}
METRICS = b'# TYPE sglang:token_usage gauge\nsglang:token_usage{model_name="qwen3.5-397b"} 0.25\n'


def sglang_handler(key=None, metrics=True, status=200):
    """A handler answering SGLang 0.5.23's endpoints with the fixture's answers."""
    routes = {"/server_info": INFO, "/model_info": {"model_path": INFO["model_path"], "is_generation": True},
              "/v1/models": MODELS}
    if metrics:
        routes["/metrics"] = METRICS

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args):
            return

        def do_GET(self):
            if key and self.headers.get("Authorization") != "Bearer " + key:
                code, body = 401, {"error": "Unauthorized"}
            elif self.path in routes:
                code, body = status, routes[self.path]
            else:
                code, body = 404, {"detail": "Not Found"}
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@pytest.fixture
def serve(serve_http):
    return lambda **kwargs: serve_http(sglang_handler(**kwargs))


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            server_info.main()
    return json.loads(capsys.readouterr().out)


def test_reads_every_endpoint(serve, capsys):
    srv = serve()
    res = run({"url": srv.url}, capsys)
    assert not res.get("failed") and res["changed"] is False
    kv = res["kv_cache_dtype"]
    assert (kv["flag"], kv["server_args"], kv["schedulers"], kv["running"], kv["release"]) == (
        "bf16", "bf16", ["bf16"], "bf16", "0.5.23")
    assert kv["flag_source"] == "/server_info launch_command: --kv-cache-dtype bf16"
    assert res["max_total_num_tokens"] == 1850000 and res["version"] == "0.5.23"
    assert res["served_model_names"] == ["qwen3.5-397b"]
    assert res["metrics"]["sglang:token_usage"][0]["value"] == 0.25
    assert all(ep["ok"] for ep in res["endpoints"].values())


def test_api_key_is_used_and_never_printed(serve, capsys):
    srv = serve(key=KEY)
    res = run({"url": srv.url, "api_key": KEY, "endpoints": ["server_info"]}, capsys)
    assert res["endpoints"]["server_info"]["ok"] is True
    assert res["server_info"]["api_key"] != KEY and "--api-key ********" in res["server_info"]["launch_command"]
    assert KEY not in json.dumps(res)


def test_the_simulator_answers_like_sglang_0_5_23(tmp_path, capsys):
    """The lab simulator's /server_info through the module: its launch_command secret never comes back."""
    sim = Sim(tmp_path, key="sk-sim-secret-7c4e")
    try:
        res = run({"url": sim.url, "api_key": "sk-sim-secret-7c4e", "endpoints": ["server_info"]}, capsys)
    finally:
        sim.stop()
    assert not res.get("failed"), res.get("msg")
    assert "sk-sim-secret-7c4e" not in json.dumps(res)
    assert "--api-key ********" in res["server_info"]["launch_command"]
    assert res["kv_cache_dtype"]["flag"] == "bf16" and res["kv_cache_dtype"]["running"] == "bf16"


def test_unauthorized_fails_with_the_fix(serve, capsys):
    srv = serve(key=KEY)
    res = run({"url": srv.url, "endpoints": ["server_info"]}, capsys)
    assert res["failed"] is True
    assert "server_info: HTTP 401" in res["msg"] and "set api_key" in res["msg"]
    assert res["endpoints"]["server_info"]["error"]["class"] == "unauthorized"


def test_refused_port_fails_without_traceback(capsys):
    res = run({"url": "http://127.0.0.1:%d" % free_port()}, capsys)
    assert res["failed"] is True and "exception" not in res
    assert "connection refused" in res["msg"] and "is the SGLang service running" in res["msg"]


def test_fail_on_error_false_reports_and_succeeds(serve, capsys):
    srv = serve(metrics=False)
    res = run({"url": srv.url, "fail_on_error": False}, capsys)
    assert not res.get("failed") and res["ok"] is False
    assert res["endpoints"]["metrics"]["error"]["class"] == "not_found"
    assert res["errors"] == ["metrics: " + res["endpoints"]["metrics"]["error"]["message"]]
    assert res["kv_cache_dtype"]["flag"] == "bf16"


def test_loading_server(serve, capsys):
    srv = serve(status=503)
    res = run({"url": srv.url, "endpoints": ["server_info"]}, capsys)
    assert res["failed"] and res["endpoints"]["server_info"]["error"]["class"] == "loading"


@pytest.mark.parametrize("args,match", [({"url": "127.0.0.1:30000"}, "no scheme"), ({"endpoints": []}, "endpoints is empty"),
                                        ({"endpoints": ["health"]}, "value of endpoints must be one or more of")])
def test_bad_options(args, match, capsys):
    res = run(args, capsys)
    assert res["failed"] is True and match in res["msg"]


def test_check_mode(serve, capsys):
    srv = serve()
    res = run({"url": srv.url, "endpoints": ["models"], "_ansible_check_mode": True}, capsys)
    assert not res.get("failed") and res["served_model_names"] == ["qwen3.5-397b"]


def test_runs_as_a_standalone_module_process(serve, tmp_path):
    """The way Ansible runs it: a Python process reading its arguments from a JSON file."""
    srv = serve(key=KEY)
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"url": srv.url, "api_key": KEY, "endpoints": ["server_info"]}}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    proc = subprocess.run([sys.executable, str(ROOT / "plugins" / "modules" / "server_info.py"), str(args)],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    res = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert res["kv_cache_dtype"]["running"] == "bf16"
    assert KEY not in proc.stdout and KEY not in proc.stderr


def test_ca_path_and_client_certificate_reach_a_server_that_requires_one(serve_http, tmp_path, capsys):
    """Mutual TLS through the module's options, against a CA and certificates made at test time."""
    from bench_servers import Pki  # tests/unit/bench_servers.py

    pki = Pki(tmp_path)
    srv = serve_http(sglang_handler(), tls=pki.server_context(require_client=True))
    args = {"url": srv.url, "endpoints": ["server_info"], "ca_path": pki.ca}
    res = run(dict(args, client_cert=pki.client_cert, client_key=pki.client_key), capsys)
    assert not res.get("failed"), res.get("msg")
    assert res["version"] == "0.5.23" and res["endpoints"]["server_info"]["ok"] is True
    res = run(args, capsys)
    assert res["failed"] is True and res["endpoints"]["server_info"]["error"]["class"] == "tls"
    assert "set client_cert and client_key" in res["msg"]
    os.chmod(pki.client_key, 0o604)
    res = run(dict(args, client_cert=pki.client_cert, client_key=pki.client_key), capsys)
    assert res["failed"] is True and "is readable by every user (mode 0604)" in res["msg"]
    assert "endpoints" not in res  # refused before any request
