# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang.bench_serving: its command line, its printed summary (real outputs under tests/fixtures/tool-outputs),
and the bounded runner of SGLang's tools."""

import pathlib
import sys

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _serving as bsv

TOOL_OUTPUTS = pathlib.Path(__file__).resolve().parents[4] / "fixtures" / "tool-outputs"
BENCH_SERVING_05X = (TOOL_OUTPUTS / "bench-serving-0.5x.txt").read_text()
BENCH_SERVING_OLD = (TOOL_OUTPUTS / "bench-serving-2024-request-rate.txt").read_text()
BENCH_SERVING_SECTIONED = (TOOL_OUTPUTS / "bench-serving-2026-05-sectioned.txt").read_text()


def test_parse_bench_serving_05x_layout():
    parsed = bsv.parse_bench_serving("benchmark_args=Namespace(...)\n" + BENCH_SERVING_05X)
    f, lat = parsed["fields"], parsed["latency"]
    assert f["output_throughput"] == 1163.42 and f["completed"] == 500 and f["total_output_tokens"] == 131674
    assert f["peak_output_throughput"] == 1811.0 and f["max_concurrency"] == "not set" and f["request_rate"] == "inf"
    assert lat["ttft"] == {"mean": 47792.35, "median": 47176.86, "p99": 102048.78}
    assert lat["itl"]["p95"] == 116.53 and lat["itl"]["max"] == 1811.18 and lat["e2e"]["p90"] == 103027.63
    lv = bsv.bench_serving_level(parsed, 32, 500)
    assert lv["aggregate_output_tok_s"] == 1163.42 and lv["succeeded"] == 500 and lv["failed"] == 0
    assert lv["per_request_output_tok_s"]["mean"] == round(1000 / 49.13, 2)
    assert lv["ttft_ms"] == {"mean": 47792.35, "p50": 47176.86, "p90": None, "p99": 102048.78}
    assert lv["itl_ms"]["p50"] == 35.71 and lv["prompt_tokens_mean"] == 506.3


def test_parse_bench_serving_older_and_sectioned_layouts():
    old = bsv.parse_bench_serving(BENCH_SERVING_OLD)
    assert old["fields"]["output_throughput"] == 825.94 and old["latency"]["tpot"]["median"] == -0.0
    lv = bsv.bench_serving_level(old, 8, 1000)
    assert lv["failed"] == 4 and lv["errors"] == {"failed": 4}
    sec = bsv.parse_bench_serving(BENCH_SERVING_SECTIONED)
    assert sec["fields"]["total_output_tokens"] == 6168083 and sec["fields"]["max_concurrency"] == 512
    assert sec["latency"]["e2e"] == {"mean": 496741.94, "median": 503209.68, "p90": 888829.65, "p99": 1033207.6}
    assert sec["latency"]["ttft"]["median"] == 294.63
    assert bsv.parse_bench_serving("Traceback (most recent call last):\nImportError: aiohttp") is None


def test_a_bench_serving_count_beyond_float_range_is_text():
    # "Total input tokens: 9999...9" (400 digits) made bench_serving_level divide an int too large for a float
    text = BENCH_SERVING_05X.replace("253168", "9" * 400, 1)
    parsed = bsv.parse_bench_serving(text)
    assert parsed["fields"]["total_input_tokens"] == "9" * 400
    assert bsv.bench_serving_level(parsed, 32, 500)["prompt_tokens_mean"] is None


def test_bench_serving_argv_is_complete():
    argv = bsv.bench_serving_argv("/opt/sglang/venv/bin/python", "sglang.bench_serving", "http://127.0.0.1:30000", "qwen", 32, 96,
                                  1024, 512, 0, 2, tokenizer="/models/q", output_file="/tmp/x.jsonl", extra_args=["--flush-cache"])
    joined = " ".join(argv)
    assert argv[:3] == ["/opt/sglang/venv/bin/python", "-m", "sglang.bench_serving"]
    for part in ("--backend sglang-oai-chat", "--base-url http://127.0.0.1:30000", "--max-concurrency 32", "--num-prompts 96",
                 "--random-input-len 1024", "--random-output-len 512", "--random-range-ratio 1.0", "--tokenizer /models/q",
                 "--warmup-requests 2", "--output-file /tmp/x.jsonl"):
        assert part in joined
    assert argv[-1] == "--flush-cache"


def test_run_process_reports_timeouts_and_missing_programs():
    ok = bsv.run_process([sys.executable, "-c", "print('hi')"], timeout=30)
    assert ok["rc"] == 0 and ok["stdout"].strip() == "hi"
    slow = bsv.run_process([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
    assert slow["timed_out"] and "did not finish within 0.5s" in slow["error"]
    gone = bsv.run_process(["/nonexistent/python3"], timeout=5)
    assert gone["rc"] is None and gone["error"] == "cannot run /nonexistent/python3: No such file or directory"
    flood = bsv.run_process([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"], timeout=60,
                            max_bytes=1 << 20)
    assert flood["rc"] is None and not flood["timed_out"] and len(flood["stdout"]) <= 1 << 20
    assert flood["error"].startswith("python") and "printed more than 1048576 bytes and was stopped" in flood["error"]
