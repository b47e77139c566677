# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The builtin benchmark runner against the lab's SGLang simulator (a real subprocess) and small local HTTP servers:
rates as configured, levels bounded by count or time, failures classified, never raised."""

import json
import os
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _runner as br
from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import Client
from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError

from bench_servers import RATE, SLOWDOWN, TTFT_MS, chunk, sse  # tests/unit/bench_servers.py; fixtures: conftest.py
from sim_harness import Sim, free_port  # tests/unit/sim_harness.py


def expected_aggregate(c, tokens):
    """What the simulator is configured to do: c requests in parallel, each ttft + (tokens - 1) / slowed rate."""
    per_request = RATE / (1.0 + SLOWDOWN * (c - 1))
    return c * tokens / (TTFT_MS / 1000.0 + (tokens - 1) / per_request), per_request


@pytest.mark.parametrize("c,tokens,rounds", [(1, 40, 3), (32, 80, 1)])
def test_rates_match_the_simulator(sim, c, tokens, rounds):
    client = Client(sim.url, timeout=30)
    out = br.run_benchmark(client, [c], "random", input_tokens=200, output_tokens=tokens, rounds=rounds, warmup_requests=1)
    assert out["ok"] and out["error"] is None and out["model"] == "qwen3.5-397b"
    lv = out["levels"][0]
    agg, per = expected_aggregate(c, tokens)
    assert lv["succeeded"] == c * rounds and lv["failed"] == 0 and lv["output_tokens"] == c * rounds * tokens
    assert lv["token_count_source"] == "usage" and lv["prompt_tokens_mean"] == 200
    print("C=%d aggregate %.1f (configured %.1f, %+.1f%%), per-request %.1f (configured %.1f, %+.1f%%), TTFT p50 %.1f ms"
          % (c, lv["aggregate_output_tok_s"], agg, 100 * (lv["aggregate_output_tok_s"] / agg - 1),
             lv["per_request_output_tok_s"]["mean"], per, 100 * (lv["per_request_output_tok_s"]["mean"] / per - 1), lv["ttft_ms"]["p50"]))
    # Whatever the machine's load: the rate is the tokens over the measured time, and nothing beats the simulator's pace
    assert lv["aggregate_output_tok_s"] == pytest.approx(lv["output_tokens"] / lv["duration_s"], rel=0.01)
    assert lv["aggregate_output_tok_s"] <= agg * 1.10 and lv["per_request_output_tok_s"]["mean"] <= per * 1.10
    assert lv["ttft_ms"]["p50"] >= TTFT_MS
    if os.getloadavg()[0] >= (os.cpu_count() or 1):
        return   # a busy machine delays the simulator and the client alike: its pace is not the configured one
    assert lv["aggregate_output_tok_s"] == pytest.approx(agg, rel=0.10)
    assert lv["per_request_output_tok_s"]["mean"] == pytest.approx(per, rel=0.10)
    assert TTFT_MS <= lv["ttft_ms"]["p50"] <= TTFT_MS * 1.5
    assert lv["itl_ms"]["p50"] == pytest.approx(1000.0 / per, rel=0.15)


def test_time_bound_level(sim):
    client = Client(sim.url, timeout=30)
    out = br.run_benchmark(client, [2], "coding", input_tokens=500, output_tokens=8, duration=1.0, warmup_requests=0)
    lv = out["levels"][0]
    # each request takes about 0.08 + 7/76 s: two workers fit several in one second, and the last ones finish after it
    assert out["ok"] and lv["succeeded"] >= 6 and 1.0 <= lv["duration_s"] < 1.6


def test_server_down():
    client = Client("http://127.0.0.1:%d" % free_port(), timeout=5)
    out = br.run_benchmark(client, [1, 32], output_tokens=4)
    assert out["ok"] is False and out["error"]["kind"] == "refused" and out["levels"] == []
    assert "connection refused" in out["error"]["message"]
    res = client.chat({"messages": []})
    assert res["ok"] is False and res["error"]["kind"] == "refused"


def test_wrong_api_key(tmp_path):
    s = Sim(tmp_path, key="lab-secret-key")
    try:
        out = br.run_benchmark(Client(s.url, api_key="wrong", timeout=10), [1], output_tokens=4)
        assert out["error"]["kind"] == "unauthorized" and "rejected the API key" in out["error"]["message"]
        assert "lab-secret-key" not in json.dumps(out)
        ok = br.run_benchmark(Client(s.url, api_key="lab-secret-key", timeout=10), [1], input_tokens=50, output_tokens=4,
                              rounds=1, warmup_requests=0)
        assert ok["ok"] and ok["levels"][0]["succeeded"] == 1
        # the chat endpoint itself, when /v1/models is not the one refusing
        res = Client(s.url, api_key="nope").chat({"messages": [{"role": "user", "content": "x"}]})
        assert res["error"]["kind"] == "unauthorized"
    finally:
        s.stop()


def test_loading_server_503(canned):
    srv = canned(models_status=503)
    out = br.run_benchmark(Client(srv.url, timeout=5), [1], output_tokens=4)
    assert out["error"]["kind"] == "loading" and "still starting" in out["error"]["message"]

    def busy(h):
        h._json(503, {"object": "error", "message": "The server is not ready yet."})
    srv2 = canned(chat=busy)
    out2 = br.run_benchmark(Client(srv2.url, timeout=5), [4], output_tokens=4, warmup_requests=0, rounds=1)
    assert out2["ok"] is False and out2["levels"][0]["errors"] == {"loading": 4}
    assert "every request at concurrency 4 failed" in out2["error"]["message"]


def test_timeout_is_classified(canned):
    srv = canned(chat=lambda h: sse(h, [chunk("a")]), stall=3.0)
    t0 = time.time()
    out = br.run_benchmark(Client(srv.url, timeout=0.5), [1], output_tokens=4, warmup_requests=1)
    assert time.time() - t0 < 2.5
    assert out["error"]["kind"] == "timeout" and "warm-up at concurrency 1 failed" in out["error"]["message"]


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
    res = Client(srv.url, timeout=5).chat({"messages": []})
    assert res["ok"] is False and res["error"]["kind"] == kind and text in res["error"]["message"]
    out = br.run_benchmark(Client(srv.url, timeout=5), [2], output_tokens=4, warmup_requests=0, rounds=2)
    assert out["ok"] is False and out["levels"][0]["errors"] == {kind: 4}


def test_bad_options_raise_benchmark_error():
    client = Client("http://127.0.0.1:1")
    for kwargs, match in (({"concurrency": []}, "at least one level"), ({"concurrency": [0]}, "from 1 to 4096"),
                          ({"dataset": "sharegpt"}, "unknown dataset"), ({"output_tokens": 0}, "output_tokens"),
                          ({"duration": -1}, "duration"), ({"num_requests": 0}, "num_requests"),
                          # bounds: 10^6 threads, a 4 GB prompt built in memory, a deadline past the socket timer
                          ({"concurrency": [10 ** 6]}, "from 1 to 4096 \\(one thread each\\), got 1000000"),
                          ({"input_tokens": 10 ** 9}, "input_tokens 1000000000 makes prompts of 4000000000 characters"),
                          ({"chars_per_token": 1e308}, "chars_per_token must be a number in \\(0, 64\\]"),
                          ({"duration": 1e12}, "duration must be a number of seconds in \\(0, 604800\\]")):
        with pytest.raises(BenchmarkError, match=match):
            br.run_benchmark(client, **kwargs)
