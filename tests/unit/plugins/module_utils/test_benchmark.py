# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark client against the lab's SGLang simulator (a real subprocess) and small local HTTP servers."""

import json
import sys
import threading
import time
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _benchmark as bm

from sim_harness import Sim, free_port  # tests/unit/sim_harness.py

# Real output of `python3 -m sglang.bench_serving --backend sglang --dataset-name random --num-prompts 500
# --random-input-len 1024 --random-output-len 512` (sgl-project/sglang PR #21405, 2026-04): the 0.5.x summary layout.
BENCH_SERVING_05X = """\
============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    inf
Max request concurrency:                 not set
Successful requests:                     500
Benchmark duration (s):                  113.18
Total input tokens:                      253168
Total input text tokens:                 253168
Total generated tokens:                  131674
Total generated tokens (retokenized):    129011
Request throughput (req/s):              4.42
Input token throughput (tok/s):          2236.90
Output token throughput (tok/s):         1163.42
Peak output token throughput (tok/s):    1811.00
Peak concurrent requests:                500
Total token throughput (tok/s):          3400.32
Concurrency:                             267.13
----------------End-to-End Latency----------------
Mean E2E Latency (ms):                   60465.83
Median E2E Latency (ms):                 60908.48
P90 E2E Latency (ms):                    103027.63
P99 E2E Latency (ms):                    111428.53
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
P95 ITL (ms):                            116.53
P99 ITL (ms):                            158.38
Max ITL (ms):                            1811.18
==================================================
"""

# Real output of an older bench_serving (request-rate runs, 2024): no P90 lines, "Total throughput".
BENCH_SERVING_OLD = """\
# request rate: 2

============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    2.0
Successful requests:                     996
Benchmark duration (s):                  264.25
Total input tokens:                      342460
Total generated tokens:                  218257
Total generated tokens (retokenized):    103837
Request throughput (req/s):              3.77
Input token throughput (tok/s):          1295.95
Output token throughput (tok/s):         825.94
Total throughput (tok/s):                2121.89
----------------End-to-End Latency----------------
Mean E2E Latency (ms):                   2098.07
Median E2E Latency (ms):                 606.86
---------------Time to First Token----------------
Mean TTFT (ms):                          2074.09
Median TTFT (ms):                        606.88
P99 TTFT (ms):                           15089.74
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          1.76
Median TPOT (ms):                        -0.00
P99 TPOT (ms):                           28.33
---------------Inter-token Latency----------------
Mean ITL (ms):                           0.00
Median ITL (ms):                         0.00
P99 ITL (ms):                            0.00
==================================================
"""

# A newer layout (2026-05 run of an sglang-oai backend): generic "Mean:" rows under section titles.
BENCH_SERVING_SECTIONED = """\
============ Serving Benchmark Result ============
Backend:                                 sglang-oai
Traffic request rate:                    9999.0
Max request concurrency:                 512
Successful requests:                     1536
Benchmark duration (s):                  1842.67
Total input tokens:                      783038
Total output tokens:                     6168083
Request throughput (req/s):              0.8336
Output token throughput (tok/s):         3347.36
Concurrency (mean / cap):                414.07 / 512

----------------- E2E Latency (ms) ---------------
Mean:                                    496741.94
Median:                                  503209.68
P90:                                     888829.65
P99:                                     1033207.60

--------------- Time to First Token --------------
Mean TTFT (ms):                          5056.69
Median TTFT (ms):                        294.63
P99 TTFT (ms):                           26297.83

----- Time per Output Token (excl. 1st) ----------
Mean TPOT (ms):                          125.63
Median TPOT (ms):                        126.55
==================================================
"""


# ---------------------------------------------------------------------------------------------
# Harness


# Simulator settings of the rate tests: 80 tok/s alone, 80 ms TTFT, 5% slower per extra running request.
RATE, TTFT_MS, SLOWDOWN = 80.0, 80.0, 0.05


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = Sim(tmp_path_factory.mktemp("sim"), ["--sim-tokens-per-second", str(RATE), "--sim-ttft-ms", str(TTFT_MS),
                                             "--sim-batch-slowdown", str(SLOWDOWN)])
    yield s
    s.stop()


class Canned(object):
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

        class Httpd(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self.httpd = Httpd(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


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


@pytest.fixture
def canned():
    servers = []

    def _make(**kw):
        servers.append(Canned(**kw))
        return servers[-1]
    yield _make
    for s in servers:
        s.close()


# ---------------------------------------------------------------------------------------------
# Prompts


def test_prompts_are_deterministic_and_sized():
    a = bm.build_prompt("coding", 7, 3, 4000)
    assert a == bm.build_prompt("coding", 7, 3, 4000)
    assert a != bm.build_prompt("coding", 7, 4, 4000) and a != bm.build_prompt("coding", 8, 3, 4000)
    text = a[-1]["content"]
    assert 0.9 * 16000 <= len(text) + len(a[0]["content"]) <= 16000
    # real-looking code, and the task names a function or class that exists in it
    assert "def " in text and "# ---- file: " in text and "\n\nTask: " in text
    task = text.rsplit("Task: ", 1)[1]
    named, path = task.split("`")[1], task.split("`")[3]
    assert ("def %s(" % named) in text or ("class %s(" % named) in text
    assert ("# ---- file: %s ----" % path) in text
    r = bm.build_prompt("random", 7, 3, 1000)
    assert len(r) == 1 and 3900 <= len(r[0]["content"]) <= 4000 and r == bm.build_prompt("random", 7, 3, 1000)
    with pytest.raises(bm.BenchmarkError, match="unknown dataset"):
        bm.build_prompt("sharegpt", 0, 0, 10)


def test_synthetic_code_parses_as_python_and_has_no_needle():
    code, symbols = bm.synthetic_code("x", 200000)
    assert 0.9 * 200000 <= len(code) <= 200000
    for part in code.split("# ---- file: ")[1:-1]:
        compile(part.split("\n", 1)[1], "<generated>", "exec")  # each whole file is valid Python (the last may be cut)
    assert "needle" not in code.lower()
    kinds = set(kind for _p, _n, kind in symbols)
    assert kinds == {"function", "class"} and len(set(p for p, _n, _k in symbols)) > 50
    for path, name, kind in symbols:
        at = code.index("# ---- file: %s ----" % path)
        assert ("%s %s(" % ("def" if kind == "function" else "class", name)) in code[at:]


# ---------------------------------------------------------------------------------------------
# Statistics, gate, chart


def test_percentile_matches_linear_interpolation():
    assert bm.percentile([4, 1, 3, 2], 50) == 2.5
    assert bm.percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)
    assert bm.percentile([10], 99) == 10.0 and bm.percentile([], 50) is None


def fake_result(tokens, ttft, gaps, ok=True, kind=None, source="usage"):
    return {"ok": ok, "error": None if ok else {"kind": kind, "message": kind + " happened"}, "ttft_s": ttft, "itl_s": gaps,
            "latency_s": (ttft or 0.5) + sum(gaps), "decode_s": sum(gaps), "output_tokens": tokens, "token_source": source,
            "prompt_tokens": 100, "started": 0.0, "finished": (ttft or 0.5) + sum(gaps)}


def test_summarize_level_counts_only_measured_successes():
    res = [fake_result(11, 0.1, [0.01] * 10), fake_result(11, 0.3, [0.02] * 10), fake_result(0, None, [], ok=False, kind="timeout"),
           fake_result(0, None, [], ok=False, kind="timeout")]
    lv = bm.summarize_level(4, res, 2.0)
    assert (lv["requests"], lv["succeeded"], lv["failed"]) == (4, 2, 2)
    assert lv["aggregate_output_tok_s"] == 11.0  # 22 tokens / 2 s
    assert lv["per_request_output_tok_s"] == {"mean": 75.0, "p50": 75.0, "min": 50.0}  # 10 tokens in 0.1 s and 0.2 s
    assert lv["ttft_ms"]["p50"] == 200.0 and lv["itl_ms"]["p99"] == 20.0
    assert lv["errors"] == {"timeout": 2} and lv["error_examples"] == ["timeout happened"]
    assert lv["token_count_source"] == "usage"


def test_gate_passes_fails_and_explains():
    levels = [{"concurrency": 1, "aggregate_output_tok_s": 170.0}, {"concurrency": 32, "aggregate_output_tok_s": 1800.0}]
    gate = bm.evaluate_gate(levels, {"1": 172, 32: 2100}, 0.9)
    assert gate["enabled"] and not gate["passed"]
    assert [c["passed"] for c in gate["checks"]] == [True, False]
    assert "C=32 1800.0 tok/s is 86% of the baseline 2100.0" in gate["reason"]
    assert bm.evaluate_gate(levels, {1: 172, 32: 2100}, 0.85)["passed"] is True
    assert bm.evaluate_gate(levels, None)["enabled"] is False
    none = bm.evaluate_gate(levels, {8: 900})
    assert none["passed"] is False and "no measured concurrency level has a baseline" in none["reason"]
    with pytest.raises(bm.BenchmarkError, match="not a concurrency level"):
        bm.evaluate_gate(levels, {"C1": 3})
    with pytest.raises(bm.BenchmarkError, match="positive number"):
        bm.evaluate_gate(levels, {1: -3})


def test_chart_is_valid_svg_with_every_point():
    levels = [{"concurrency": 1, "aggregate_output_tok_s": 171.2, "per_request_output_tok_s": {"mean": 171.9},
               "ttft_ms": {"p50": 80.0, "p99": 95.0}, "itl_ms": {"p50": 5.8, "p99": 7.1}},
              {"concurrency": 32, "aggregate_output_tok_s": 2133.0, "per_request_output_tok_s": {"mean": 66.7},
               "ttft_ms": {"p50": 120.0, "p99": 300.0}, "itl_ms": {"p50": 15.0, "p99": 30.0}}]
    svg = bm.render_chart(levels, {1: 172, 32: 2100}, 0.9, "host <a&b>", "sub")
    root = ET.fromstring(svg.split("\n", 1)[1])
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(ns + "text")]
    assert "host <a&b>" in texts  # escaped in the file, intact once parsed
    # 2 measured points per panel x (2 throughput panels + 4 latency series)
    assert len(list(root.iter(ns + "circle"))) == 12
    assert "2133" in texts and "172" in texts and "gate: 90% of baseline" in texts
    assert bm.render_chart([], title="empty").count("no measured level") == 1


# ---------------------------------------------------------------------------------------------
# bench_serving summary


def test_parse_bench_serving_05x_layout():
    parsed = bm.parse_bench_serving("benchmark_args=Namespace(...)\n" + BENCH_SERVING_05X)
    f, lat = parsed["fields"], parsed["latency"]
    assert f["output_throughput"] == 1163.42 and f["completed"] == 500 and f["total_output_tokens"] == 131674
    assert f["peak_output_throughput"] == 1811.0 and f["max_concurrency"] == "not set" and f["request_rate"] == "inf"
    assert lat["ttft"] == {"mean": 47792.35, "median": 47176.86, "p99": 102048.78}
    assert lat["itl"]["p95"] == 116.53 and lat["itl"]["max"] == 1811.18 and lat["e2e"]["p90"] == 103027.63
    lv = bm.bench_serving_level(parsed, 32, 500)
    assert lv["aggregate_output_tok_s"] == 1163.42 and lv["succeeded"] == 500 and lv["failed"] == 0
    assert lv["per_request_output_tok_s"]["mean"] == round(1000 / 49.13, 2)
    assert lv["ttft_ms"] == {"mean": 47792.35, "p50": 47176.86, "p90": None, "p99": 102048.78}
    assert lv["itl_ms"]["p50"] == 35.71 and lv["prompt_tokens_mean"] == 506.3


def test_parse_bench_serving_older_and_sectioned_layouts():
    old = bm.parse_bench_serving(BENCH_SERVING_OLD)
    assert old["fields"]["output_throughput"] == 825.94 and old["latency"]["tpot"]["median"] == -0.0
    lv = bm.bench_serving_level(old, 8, 1000)
    assert lv["failed"] == 4 and lv["errors"] == {"failed": 4}
    sec = bm.parse_bench_serving(BENCH_SERVING_SECTIONED)
    assert sec["fields"]["total_output_tokens"] == 6168083 and sec["fields"]["max_concurrency"] == 512
    assert sec["latency"]["e2e"] == {"mean": 496741.94, "median": 503209.68, "p90": 888829.65, "p99": 1033207.6}
    assert sec["latency"]["ttft"]["median"] == 294.63
    assert bm.parse_bench_serving("Traceback (most recent call last):\nImportError: aiohttp") is None


def test_a_bench_serving_count_beyond_float_range_is_text():
    # "Total input tokens: 9999...9" (400 digits) made bench_serving_level divide an int too large for a float
    text = BENCH_SERVING_05X.replace("253168", "9" * 400, 1)
    parsed = bm.parse_bench_serving(text)
    assert parsed["fields"]["total_input_tokens"] == "9" * 400
    assert bm.bench_serving_level(parsed, 32, 500)["prompt_tokens_mean"] is None


def test_bench_serving_argv_is_complete():
    argv = bm.bench_serving_argv("/opt/sglang/venv/bin/python", "sglang.bench_serving", "http://127.0.0.1:30000", "qwen", 32, 96,
                                 1024, 512, 0, 2, tokenizer="/models/q", output_file="/tmp/x.jsonl", extra_args=["--flush-cache"])
    joined = " ".join(argv)
    assert argv[:3] == ["/opt/sglang/venv/bin/python", "-m", "sglang.bench_serving"]
    for part in ("--backend sglang-oai-chat", "--base-url http://127.0.0.1:30000", "--max-concurrency 32", "--num-prompts 96",
                 "--random-input-len 1024", "--random-output-len 512", "--random-range-ratio 1.0", "--tokenizer /models/q",
                 "--warmup-requests 2", "--output-file /tmp/x.jsonl"):
        assert part in joined
    assert argv[-1] == "--flush-cache"


def test_run_process_reports_timeouts_and_missing_programs():
    ok = bm.run_process([sys.executable, "-c", "print('hi')"], timeout=30)
    assert ok["rc"] == 0 and ok["stdout"].strip() == "hi"
    slow = bm.run_process([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
    assert slow["timed_out"] and "did not finish within 0.5s" in slow["error"]
    gone = bm.run_process(["/nonexistent/python3"], timeout=5)
    assert gone["rc"] is None and gone["error"] == "cannot run /nonexistent/python3: No such file or directory"
    flood = bm.run_process([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"], timeout=60,
                           max_bytes=1 << 20)
    assert flood["rc"] is None and not flood["timed_out"] and len(flood["stdout"]) <= 1 << 20
    assert flood["error"].startswith("python") and "printed more than 1048576 bytes and was stopped" in flood["error"]


# ---------------------------------------------------------------------------------------------
# Against the simulator


def expected_aggregate(c, tokens):
    """What the simulator is configured to do: c requests in parallel, each ttft + (tokens - 1) / slowed rate."""
    per_request = RATE / (1.0 + SLOWDOWN * (c - 1))
    return c * tokens / (TTFT_MS / 1000.0 + (tokens - 1) / per_request), per_request


@pytest.mark.parametrize("c,tokens,rounds", [(1, 40, 3), (32, 80, 1)])
def test_rates_match_the_simulator(sim, c, tokens, rounds):
    client = bm.Client(sim.url, timeout=30)
    out = bm.run_benchmark(client, [c], "random", input_tokens=200, output_tokens=tokens, rounds=rounds, warmup_requests=1)
    assert out["ok"] and out["error"] is None and out["model"] == "qwen3.5-397b"
    lv = out["levels"][0]
    agg, per = expected_aggregate(c, tokens)
    assert lv["succeeded"] == c * rounds and lv["failed"] == 0 and lv["output_tokens"] == c * rounds * tokens
    assert lv["token_count_source"] == "usage" and lv["prompt_tokens_mean"] == 200
    print("C=%d aggregate %.1f (configured %.1f, %+.1f%%), per-request %.1f (configured %.1f, %+.1f%%), TTFT p50 %.1f ms"
          % (c, lv["aggregate_output_tok_s"], agg, 100 * (lv["aggregate_output_tok_s"] / agg - 1),
             lv["per_request_output_tok_s"]["mean"], per, 100 * (lv["per_request_output_tok_s"]["mean"] / per - 1), lv["ttft_ms"]["p50"]))
    assert lv["aggregate_output_tok_s"] == pytest.approx(agg, rel=0.10)
    assert lv["per_request_output_tok_s"]["mean"] == pytest.approx(per, rel=0.10)
    assert TTFT_MS <= lv["ttft_ms"]["p50"] <= TTFT_MS * 1.5
    assert lv["itl_ms"]["p50"] == pytest.approx(1000.0 / per, rel=0.15)


def test_time_bound_level(sim):
    client = bm.Client(sim.url, timeout=30)
    out = bm.run_benchmark(client, [2], "coding", input_tokens=500, output_tokens=8, duration=1.0, warmup_requests=0)
    lv = out["levels"][0]
    # each request takes about 0.08 + 7/76 s: two workers fit several in one second, and the last ones finish after it
    assert out["ok"] and lv["succeeded"] >= 6 and 1.0 <= lv["duration_s"] < 1.6


def test_counts_chunks_without_usage(canned):
    srv = canned(chat=lambda h: sse(h, [chunk("a"), chunk(" b"), chunk(" c")]))
    res = bm.Client(srv.url).chat({"messages": []}, keep_text=True)
    assert res["ok"] and res["token_source"] == "chunks" and res["output_tokens"] == 3 and res["text"] == "a b c"
    assert len(res["itl_s"]) == 2 and res["ttft_s"] is not None


def test_reasoning_content_counts_as_output(canned):
    srv = canned(chat=lambda h: sse(h, [{"choices": [{"delta": {"reasoning_content": "think"}}]}, chunk("x"),
                                        {"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": 3}}]))
    res = bm.Client(srv.url).chat({}, keep_text=True)
    assert res["ok"] and res["output_tokens"] == 7 and res["token_source"] == "usage" and res["reasoning_chunks"] == 1
    assert res["text"] == "x" and res["prompt_tokens"] == 3


# ---------------------------------------------------------------------------------------------
# Failures: classified, never raised


def test_server_down():
    client = bm.Client("http://127.0.0.1:%d" % free_port(), timeout=5)
    out = bm.run_benchmark(client, [1, 32], output_tokens=4)
    assert out["ok"] is False and out["error"]["kind"] == "refused" and out["levels"] == []
    assert "connection refused" in out["error"]["message"]
    res = client.chat({"messages": []})
    assert res["ok"] is False and res["error"]["kind"] == "refused"


def test_wrong_api_key(tmp_path):
    s = Sim(tmp_path, key="lab-secret-key")
    try:
        out = bm.run_benchmark(bm.Client(s.url, api_key="wrong", timeout=10), [1], output_tokens=4)
        assert out["error"]["kind"] == "unauthorized" and "rejected the API key" in out["error"]["message"]
        assert "lab-secret-key" not in json.dumps(out)
        ok = bm.run_benchmark(bm.Client(s.url, api_key="lab-secret-key", timeout=10), [1], input_tokens=50, output_tokens=4,
                              rounds=1, warmup_requests=0)
        assert ok["ok"] and ok["levels"][0]["succeeded"] == 1
        # the chat endpoint itself, when /v1/models is not the one refusing
        res = bm.Client(s.url, api_key="nope").chat({"messages": [{"role": "user", "content": "x"}]})
        assert res["error"]["kind"] == "unauthorized"
    finally:
        s.stop()


def test_loading_server_503(canned):
    srv = canned(models_status=503)
    out = bm.run_benchmark(bm.Client(srv.url, timeout=5), [1], output_tokens=4)
    assert out["error"]["kind"] == "loading" and "still starting" in out["error"]["message"]

    def busy(h):
        h._json(503, {"object": "error", "message": "The server is not ready yet."})
    srv2 = canned(chat=busy)
    out2 = bm.run_benchmark(bm.Client(srv2.url, timeout=5), [4], output_tokens=4, warmup_requests=0, rounds=1)
    assert out2["ok"] is False and out2["levels"][0]["errors"] == {"loading": 4}
    assert "every request at concurrency 4 failed" in out2["error"]["message"]


def test_timeout_is_classified(canned):
    srv = canned(chat=lambda h: sse(h, [chunk("a")]), stall=3.0)
    t0 = time.time()
    out = bm.run_benchmark(bm.Client(srv.url, timeout=0.5), [1], output_tokens=4, warmup_requests=1)
    assert time.time() - t0 < 2.5
    assert out["error"]["kind"] == "timeout" and "warm-up at concurrency 1 failed" in out["error"]["message"]


def test_trickling_stream_hits_the_deadline(canned):
    def trickle(h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        for i in range(20):
            h.wfile.write(("data: %s\n\n" % json.dumps(chunk(str(i)))).encode())
            h.wfile.flush()
            time.sleep(0.1)
    srv = canned(chat=trickle)
    res = bm.Client(srv.url, timeout=0.5).chat({})
    assert res["error"]["kind"] == "timeout" and res["chunks"] >= 2 and res["latency_s"] < 1.5


@pytest.mark.parametrize("lines,done,kind,text", [
    ([chunk("a"), b"data: {\"choices\": [{\"delta\": \n\n"], True, "malformed_chunk", "not JSON"),
    ([b"data: [1, 2]\n\n"], True, "malformed_chunk", "not a JSON object"),
    ([{"choices": {"delta": "x"}}], True, "malformed_chunk", "choices is not a list"),
    ([{"choices": [{"delta": {"content": 5}}]}], True, "malformed_chunk", "non-text content"),
    ([b"<html>502 Bad Gateway</html>\n"], True, "malformed_chunk", "not server-sent events"),
    ([chunk("a"), {"error": {"message": "CUDA error: an illegal memory access"}}], True, "server_error", "illegal memory access"),
    ([chunk("a"), chunk("b")], False, "incomplete_stream", "before [DONE] after 2 chunks"),
    ([{"choices": [{"delta": {}, "finish_reason": "stop"}]}], True, "empty", "without any output token"),
])
def test_malformed_streams(canned, lines, done, kind, text):
    srv = canned(chat=lambda h: sse(h, lines, done=done))
    res = bm.Client(srv.url, timeout=5).chat({"messages": []})
    assert res["ok"] is False and res["error"]["kind"] == kind and text in res["error"]["message"]
    out = bm.run_benchmark(bm.Client(srv.url, timeout=5), [2], output_tokens=4, warmup_requests=0, rounds=2)
    assert out["ok"] is False and out["levels"][0]["errors"] == {kind: 4}


@pytest.mark.parametrize("value", [10 ** 400, float("inf"), "1e999", -1, 0, "x", None, True])
def test_a_baseline_that_is_not_a_finite_positive_number_is_named(value):
    # 10**400 raised OverflowError ("int too large to convert to float") from float()
    with pytest.raises(bm.BenchmarkError, match="baseline for concurrency 8 must be a positive number of tok/s"):
        bm.normalize_baseline({"8": value})


def test_chat_endpoint_404_says_what_answered(canned):
    # /v1/models answers but the chat endpoint does not: e.g. a router without workers or another service
    srv = canned(chat=lambda h: h._json(404, {"detail": "Not Found"}))
    res = bm.Client(srv.url, timeout=5).chat({"messages": []})
    assert res["error"]["kind"] == "not_found"
    assert res["error"]["message"].startswith("HTTP 404 from %s/v1/chat/completions: this server has no OpenAI chat endpoint" % srv.url)


def test_stream_reads_are_bounded(canned, monkeypatch):
    long_line = b"data: " + b"x" * (bm.MAX_SSE_LINE + 10) + b"\n\n"
    srv = canned(chat=lambda h: sse(h, [chunk("a"), long_line]))
    res = bm.Client(srv.url, timeout=10).chat({"messages": []})
    assert res["error"]["kind"] == "malformed_chunk" and "longer than %d bytes" % bm.MAX_SSE_LINE in res["error"]["message"]
    monkeypatch.setattr(bm, "MAX_STREAM_BYTES", 4096)
    srv2 = canned(chat=lambda h: sse(h, [chunk("token %d" % i) for i in range(200)]))
    res2 = bm.Client(srv2.url, timeout=10).chat({"messages": []})
    assert res2["error"]["kind"] == "too_large" and "more than 4096 bytes" in res2["error"]["message"]
    assert 40 < res2["chunks"] < 200


def test_bad_options_raise_benchmark_error():
    client = bm.Client("http://127.0.0.1:1")
    for kwargs, match in (({"concurrency": []}, "at least one level"), ({"concurrency": [0]}, "from 1 to 4096"),
                          ({"dataset": "sharegpt"}, "unknown dataset"), ({"output_tokens": 0}, "output_tokens"),
                          ({"duration": -1}, "duration"), ({"num_requests": 0}, "num_requests"),
                          # bounds: 10^6 threads, a 4 GB prompt built in memory, a deadline past the socket timer
                          ({"concurrency": [10 ** 6]}, "from 1 to 4096 \\(one thread each\\), got 1000000"),
                          ({"input_tokens": 10 ** 9}, "input_tokens 1000000000 makes prompts of 4000000000 characters"),
                          ({"chars_per_token": 1e308}, "chars_per_token must be a number in \\(0, 64\\]"),
                          ({"duration": 1e12}, "duration must be a number of seconds in \\(0, 604800\\]")):
        with pytest.raises(bm.BenchmarkError, match=match):
            bm.run_benchmark(client, **kwargs)


def test_no_proxy_for_loopback(sim, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    res = bm.Client(sim.url, timeout=10).chat({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True})
    assert res["ok"], res["error"]
