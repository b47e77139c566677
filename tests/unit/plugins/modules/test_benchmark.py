# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmark module: AnsibleModule against the lab's SGLang simulator (a real subprocess on 127.0.0.1)."""

import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from ansible.module_utils.testing import patch_module_args
from sim_harness import Sim, free_port  # tests/unit/sim_harness.py

from ansible_collections.llmops.sglang.plugins.modules import benchmark

ROOT = pathlib.Path(__file__).resolve().parents[4]
KEY = "sk-bench-module-5e1f"
# 100 tok/s for a request alone, 40 ms to the first token
SIM_RATE = ["--sim-tokens-per-second", "100", "--sim-ttft-ms", "40"]
# sglang 0.5.x bench_serving summary (real output, sgl-project/sglang PR #21405), printed by the stand-in below.
SUMMARY = """\
============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    inf
Max request concurrency:                 not set
Successful requests:                     500
Benchmark duration (s):                  113.18
Total input tokens:                      253168
Total generated tokens:                  131674
Request throughput (req/s):              4.42
Output token throughput (tok/s):         1163.42
Concurrency:                             267.13
---------------Time to First Token----------------
Mean TTFT (ms):                          47792.35
Median TTFT (ms):                        47176.86
P99 TTFT (ms):                           102048.78
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          49.13
Median TPOT (ms):                        49.81
P99 TPOT (ms):                           65.31
---------------Inter-Token Latency----------------
Mean ITL (ms):                           48.31
Median ITL (ms):                         35.71
P99 ITL (ms):                            158.38
==================================================
"""


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    server = Sim(tmp_path_factory.mktemp("bench-sim"), SIM_RATE, key=KEY)
    yield server.url
    server.stop()


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            benchmark.main()
    return json.loads(capsys.readouterr().out)


SMALL = {"concurrency": [1, 4], "input_tokens": 64, "output_tokens": 16, "rounds": 2, "warmup_requests": 1}


def test_measures_and_passes_a_met_baseline(sim, capsys):
    res = run(dict(SMALL, url=sim, api_key=KEY, baseline={"1": 50, "4": 150}), capsys)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["ok"] and res["model"] == "qwen3.5-397b"
    assert [lv["concurrency"] for lv in res["levels"]] == [1, 4]
    # 100 tok/s alone: a 16-token request takes 0.04 + 15/100 s, so about 84 tok/s in a closed loop
    c1 = res["levels"][0]
    # the lower bound leaves room for a loaded 2-core machine (69.7 seen while every CI lane ran)
    assert 60 < c1["aggregate_output_tok_s"] < 95 and c1["per_request_output_tok_s"]["mean"] == pytest.approx(100, rel=0.1)
    assert res["gate"]["passed"] and [c["passed"] for c in res["gate"]["checks"]] == [True, True]
    assert res["summary"].startswith("C=1 ") and res["summary"].endswith("; gate pass")
    assert KEY not in json.dumps(res)
    ET.fromstring(res["chart_svg"].split("\n", 1)[1])


def test_regression_fails_with_the_numbers(sim, capsys):
    res = run(dict(SMALL, url=sim, api_key=KEY, baseline={1: 172, 4: 2100}, concurrency=[1, 4]), capsys)
    assert res["failed"] is True and res["msg"].startswith("throughput regression: ")
    assert "C=4 " in res["msg"] and "of the baseline 2100.0" in res["msg"]
    assert res["gate"]["passed"] is False and res["levels"][1]["succeeded"] == 8
    report = run(dict(SMALL, url=sim, api_key=KEY, baseline={1: 172}, concurrency=[1], fail_on_regression=False), capsys)
    assert not report.get("failed") and report["gate"]["passed"] is False and report["summary"].endswith("gate FAIL")


def test_speculative_random_dataset_caveat(tmp_path, capsys):
    server = Sim(tmp_path, SIM_RATE + ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"], key=KEY)
    url = server.url
    try:
        res = run({"url": url, "api_key": KEY, "concurrency": [1], "output_tokens": 4, "rounds": 1, "warmup_requests": 0}, capsys)
        assert res["speculative_algorithm"] == "EAGLE"  # SGLang runs (and reports) NEXTN as EAGLE
        assert len(res["caveats"]) == 1 and "draft acceptance close to zero" in res["caveats"][0]
        coding = run({"url": url, "api_key": KEY, "concurrency": [1], "dataset": "coding", "input_tokens": 300, "output_tokens": 4,
                      "rounds": 1, "warmup_requests": 0}, capsys)
        assert coding["caveats"] == [] and coding["ok"]
    finally:
        server.stop()


def test_server_down_fails_without_traceback(capsys):
    res = run({"url": "http://127.0.0.1:%d" % free_port(), "concurrency": [1, 32]}, capsys)
    assert res["failed"] is True and "exception" not in res
    assert "connection refused" in res["msg"] and res["error"]["kind"] == "refused" and res["summary"] == "FAILED (refused)"


def test_wrong_key(sim, capsys):
    res = run(dict(SMALL, url=sim, api_key="wrong"), capsys)
    assert res["failed"] and res["error"]["kind"] == "unauthorized" and "rejected the API key" in res["msg"]


@pytest.mark.parametrize("args,match", [
    ({"concurrency": []}, "at least one level"),
    ({"concurrency": [1], "dataset": "coding", "engine": "sglang_bench_serving"}, "random dataset only"),
    ({"concurrency": [1], "duration": 30, "engine": "sglang_bench_serving"}, "not duration"),
    ({"min_fraction": 0}, "min_fraction must be > 0"),
    ({"baseline": {"one": 3}}, "not a concurrency level"),
    ({"url": "127.0.0.1:30000"}, "no scheme"),
    ({"timeout": 0}, "timeout must be"),
    # a socket timer cannot hold 1e12 s: this was an OverflowError from inside urllib
    ({"timeout": 1e12}, "timeout must be a number of seconds in (0, 604800], got 1000000000000.0"),
])
def test_bad_options(args, match, capsys):
    res = run(args, capsys)
    assert res["failed"] is True and match in res["msg"]


def stand_in_python(tmp_path, body):
    """An executable that plays `python -m sglang.bench_serving`: records its argv and environment, then runs body."""
    path = tmp_path / "python"
    path.write_text("#!%s\nimport json, os, sys\nwith open(%r, 'a') as f:\n    f.write(json.dumps({'argv': sys.argv[1:], "
                    "'key': os.environ.get('OPENAI_API_KEY')}) + '\\n')\n%s\n" % (sys.executable, str(tmp_path / "calls.jsonl"), body))
    path.chmod(0o755)
    return path


def test_sglang_bench_serving_engine(sim, tmp_path, capsys):
    py = stand_in_python(tmp_path, "print('benchmark_args=...')\nprint(%r)" % SUMMARY)
    res = run({"url": sim, "api_key": KEY, "engine": "sglang_bench_serving", "python": str(py), "concurrency": [1, 32],
               "tokenizer": "/models/qwen", "baseline": {1: 1000, 32: 1100}}, capsys)
    assert not res.get("failed"), res.get("msg")
    assert res["engine"] == "sglang_bench_serving" and [lv["concurrency"] for lv in res["levels"]] == [1, 32]
    assert res["levels"][0]["aggregate_output_tok_s"] == 1163.42 and res["levels"][0]["ttft_ms"]["p50"] == 47176.86
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c["key"] for c in calls] == [KEY, KEY]  # in the environment, never on the command line
    argv = calls[1]["argv"]
    assert argv[:2] == ["-m", "sglang.bench_serving"] and "--max-concurrency" in argv and argv[argv.index("--max-concurrency") + 1] == "32"
    assert argv[argv.index("--num-prompts") + 1] == "96" and argv[argv.index("--model") + 1] == "qwen3.5-397b"
    assert argv[argv.index("--tokenizer") + 1] == "/models/qwen" and KEY not in json.dumps(res["commands"])
    assert res["gate"]["passed"] is True


def test_sglang_bench_serving_failure_is_explained(sim, tmp_path, capsys):
    py = stand_in_python(tmp_path, "sys.stderr.write('Traceback (most recent call last):\\nModuleNotFoundError: No module named "
                                   "\\'aiohttp\\'\\n')\nsys.exit(1)")
    res = run({"url": sim, "api_key": KEY, "engine": "sglang_bench_serving", "python": str(py), "concurrency": [1]}, capsys)
    assert res["failed"] and res["error"]["kind"] == "bench_serving_failed"
    assert "exit code 1" in res["msg"] and "No module named 'aiohttp'" in res["msg"]


def test_check_mode_measures(sim, capsys):
    res = run(dict(SMALL, url=sim, api_key=KEY, concurrency=[2], _ansible_check_mode=True), capsys)
    assert not res.get("failed") and res["levels"][0]["succeeded"] == 4


def test_runs_as_a_standalone_module_process(sim, tmp_path):
    """The way Ansible runs it: a Python process reading its arguments from a JSON file."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(SMALL, url=sim, api_key=KEY, concurrency=[1], chart=False)}))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    proc = subprocess.run([sys.executable, str(ROOT / "plugins" / "modules" / "benchmark.py"), str(args)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    res = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert res["levels"][0]["succeeded"] == 2 and "chart_svg" not in res
    assert KEY not in proc.stdout and KEY not in proc.stderr
