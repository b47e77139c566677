# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""accuracy_canary module: AnsibleModule against the lab's SGLang simulator, healthy and with degraded recall."""

import http.server
import json
import os
import pathlib
import subprocess
import sys

import pytest
from ansible.module_utils.testing import patch_module_args
from sim_harness import Sim, free_port  # tests/unit/sim_harness.py

from ansible_collections.llmops.sglang.plugins.modules import accuracy_canary

ROOT = pathlib.Path(__file__).resolve().parents[4]
KEY = "sk-canary-module-77aa"
# a 32K context (so the 64K needle is skipped), fast enough for many needles
SIM_ARGS = ["--context-length", "32768", "--sim-tokens-per-second", "400", "--sim-ttft-ms", "20"]
# Real output of sglang.test.run_eval for gsm8k (sgl-project/sglang PR #17041).
RUN_EVAL_OUTPUT = "100%|██████████| 1319/1319 [05:56<00:00,  3.70it/s]\nTotal latency: 357.066 s\nScore: 0.966\n"


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("canary-mod")
    servers = [Sim(tmp, SIM_ARGS, key=KEY), Sim(tmp, SIM_ARGS + ["--sim-fault", "degrade_recall", "--sim-recall-depth", "0.5"], key=KEY)]
    yield servers[0].url, servers[1].url
    for server in servers:
        server.stop()


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            accuracy_canary.main()
    return json.loads(capsys.readouterr().out)


NEEDLES = {"checks": ["needle"], "needle_contexts": [1024, 4096, 65536], "needle_depths": [0.2, 0.8], "api_key": KEY}


def test_passes_and_reports_no_drift_on_a_second_run(sims, capsys):
    res = run(dict(NEEDLES, url=sims[0]), capsys)
    assert not res.get("failed"), res.get("msg")
    assert res["passed"] is True and res["changed"] is False
    needle = res["checks"]["needle"]
    assert needle["correct"] == needle["total"] == 4  # 65536 is beyond the server's 32768 context: skipped
    assert res["caveats"] == ["needle context 65536 tokens skipped: the server's context length is 32768"]
    assert res["drift"]["compared"] is False and res["summary"] == "needle 4/4, first run"
    assert res["state"]["hash"] == res["hash"] and set(res["state"]["answers"]) == set(res["answers"])
    assert all("messages" not in it for it in needle["items"])
    again = run(dict(NEEDLES, url=sims[0], previous=res["state"]), capsys)
    assert again["passed"] and again["drift"]["compared"] and not again["drift"]["drift"] and again["hash"] == res["hash"]
    assert again["summary"] == "needle 4/4, no drift"


def test_fails_when_recall_degrades(sims, capsys):
    healthy = run(dict(NEEDLES, url=sims[0]), capsys)
    res = run(dict(NEEDLES, url=sims[1], previous=healthy["state"]), capsys)
    assert res["failed"] is True and res["passed"] is False
    assert res["msg"] == ("accuracy canary failed: needle 2/4 correct, need 100% (wrong: needle-1024-0.80, needle-4096-0.80)")
    assert res["drift"]["drift"] and res["drift"]["changed"] == ["needle-1024-0.80", "needle-4096-0.80"]
    assert res["summary"] == "needle 2/4 FAIL, drift: 2 changed"
    lenient = run(dict(NEEDLES, url=sims[1], needle_min_recall=0.5), capsys)
    assert not lenient.get("failed") and lenient["passed"] is True


def test_coding_questions_fail_against_a_fixed_text_answer(sims, capsys):
    res = run({"url": sims[0], "api_key": KEY, "checks": ["coding"], "fail_on_failure": False}, capsys)
    assert not res.get("failed") and res["passed"] is False
    coding = res["checks"]["coding"]
    assert coding["correct"] == 0 and coding["total"] == 8
    assert all(it["answer"].startswith("This is a deterministic answer") for it in coding["items"])
    zero = run({"url": sims[0], "api_key": KEY, "checks": ["coding"], "coding_min_score": 0.0}, capsys)
    assert zero["passed"] is True


def test_drift_can_fail_the_run(sims, capsys):
    first = run(dict(NEEDLES, url=sims[0]), capsys)
    tampered = dict(first["state"], answers=dict(first["state"]["answers"], **{"needle-1024-0.20": "The needle is OTHER."}))
    res = run(dict(NEEDLES, url=sims[0], previous=tampered, fail_on_drift=True), capsys)
    assert res["failed"] and "answers drifted from the last good run: needle-1024-0.20" in res["msg"]
    assert res["checks"]["needle"]["passed"] is True


def stand_in_python(tmp_path, run_eval_body, has_sglang=True):
    path = tmp_path / "python"
    path.write_text("#!%s\nimport json, os, sys\nif sys.argv[1] == '-c':\n    sys.exit(0 if %r else 3)\n"
                    "with open(%r, 'w') as f:\n    json.dump({'argv': sys.argv[1:], 'key': os.environ.get('OPENAI_API_KEY')}, f)\n%s\n"
                    % (sys.executable, has_sglang, str(tmp_path / "call.json"), run_eval_body))
    path.chmod(0o755)
    return path


def test_run_eval_score_is_gated(sims, tmp_path, capsys):
    py = stand_in_python(tmp_path, "print(%r)" % RUN_EVAL_OUTPUT)
    res = run({"url": sims[0], "api_key": KEY, "checks": [], "run_eval": {"enabled": True, "python": str(py), "num_examples": 50}}, capsys)
    assert not res.get("failed"), res.get("msg")
    ev = res["checks"]["run_eval"]
    assert ev["available"] and ev["score"] == 0.966 and ev["passed"] and res["summary"] == "gsm8k 0.966, first run"
    call = json.loads((tmp_path / "call.json").read_text())
    assert call["key"] == KEY and KEY not in json.dumps(call["argv"])
    assert call["argv"][:2] == ["-m", "sglang.test.run_eval"] and "--num-examples" in call["argv"]
    high = run({"url": sims[0], "api_key": KEY, "checks": [], "run_eval": {"enabled": True, "python": str(py), "min_score": 0.97}},
               capsys)
    assert high["failed"] and "run_eval score 0.966 < 0.97" in high["msg"]


def test_run_eval_unavailable_is_skipped(sims, tmp_path, capsys):
    py = stand_in_python(tmp_path, "sys.exit(9)", has_sglang=False)
    res = run(dict(NEEDLES, url=sims[0], needle_contexts=[1024], run_eval={"enabled": True, "python": str(py)}), capsys)
    assert not res.get("failed") and res["passed"] is True
    assert res["checks"]["run_eval"]["available"] is False and res["checks"]["run_eval"]["passed"] is None
    assert any("SGLang is not importable" in c for c in res["caveats"])
    broken = stand_in_python(tmp_path, "sys.stderr.write('RuntimeError: sgl-eval failed\\n'); sys.exit(1)")
    bad = run({"url": sims[0], "api_key": KEY, "checks": [], "run_eval": {"enabled": True, "python": str(broken)}}, capsys)
    assert bad["failed"] and "exit code 1" in bad["msg"] and "sgl-eval failed" in bad["msg"]


def test_server_down_and_bad_options(capsys):
    res = run({"url": "http://127.0.0.1:%d" % free_port()}, capsys)
    assert res["failed"] and "connection refused" in res["msg"] and res["error"]["kind"] == "refused" and "exception" not in res
    for args, match in (({"checks": []}, "nothing to check"), ({"needle_min_recall": 1.5}, "between 0 and 1"),
                        ({"needle_depths": [2.0]}, "fractions between 0 and 1"), ({"parallel": 0}, "parallel must be >= 1")):
        out = run(args, capsys)
        assert out["failed"] and match in out["msg"], out["msg"]


class _ModelsButNoChat(http.server.BaseHTTPRequestHandler):
    """/v1/models answers as SGLang does; /v1/chat/completions is 404 (a router without workers, another service)."""

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "qwen3.5-397b", "max_model_len": 32768}]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(404, {"detail": "Not Found"})

    def log_message(self, *args):
        pass


@pytest.fixture
def no_chat(serve_http):
    return serve_http(_ModelsButNoChat).url


def test_chat_endpoint_404_is_an_error_never_a_wrong_answer_baseline(sims, no_chat, capsys):
    good = run(dict(NEEDLES, url=sims[0], needle_contexts=[1024]), capsys)
    assert good["passed"] and good["state"]["answers"]
    # even with the failure not failing the task and thresholds of zero, a 404 is not graded, compared or kept
    res = run(dict(NEEDLES, url=no_chat, needle_contexts=[1024], fail_on_failure=False, needle_min_recall=0.0,
                   previous=good["state"]), capsys)
    assert res["failed"] is True and res["passed"] is False
    assert res["error"]["kind"] == "not_found" and res["summary"] == "FAILED (not_found)"
    assert "the chat endpoint did not answer 2 of 2 questions (not_found: HTTP 404 from %s/v1/chat/completions" % no_chat in res["msg"]
    assert res["state"] == {} and res["answers"] == {} and res["hash"] is None and res["drift"] == {}


@pytest.mark.parametrize("args,match", [
    # a socket timer cannot hold 1e12 s: OverflowError from inside urllib
    ({"timeout": 1e12}, "timeout must be a number of seconds in (0, 604800], got 1000000000000.0"),
    ({"run_eval": {"enabled": True, "timeout": 1e308}}, "run_eval.timeout must be a number of seconds in (0, 604800]"),
    # a 10^9-token haystack would be built in memory (4 GB) before any request
    ({"needle_contexts": [10 ** 9]}, "needle context 1000000000 tokens makes a prompt of 4000000000 characters"),
    ({"chars_per_token": 1e308}, "chars_per_token must be a number in (0, 64], got 1e+308"),
    ({"parallel": 100000}, "parallel must be at most 256"),
])
def test_options_out_of_range_fail_before_any_request(args, match, capsys):
    out = run(dict(args, url="http://127.0.0.1:%d" % free_port()), capsys)
    assert out["failed"] and match in out["msg"], out["msg"]
    assert "error" not in out or out["error"] is None  # nothing was sent


def test_runs_as_a_standalone_module_process(sims, tmp_path):
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(NEEDLES, url=sims[0], needle_contexts=[1024])}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    proc = subprocess.run([sys.executable, str(ROOT / "plugins" / "modules" / "accuracy_canary.py"), str(args)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    res = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert res["passed"] and res["checks"]["needle"]["total"] == 2
    assert KEY not in proc.stdout
