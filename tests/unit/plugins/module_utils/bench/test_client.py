# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark's streaming chat client against small local HTTP servers and the simulator: timing, token counts,
and every failure classified, never raised."""

import json
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _client as bcl

from bench_servers import chunk, sse, trickled  # tests/unit/bench_servers.py; fixtures sim and canned: conftest.py


def test_counts_chunks_without_usage(canned):
    srv = canned(chat=lambda h: sse(h, [chunk("a"), chunk(" b"), chunk(" c")]))
    res = bcl.Client(srv.url).chat({"messages": []}, keep_text=True)
    assert res["ok"] and res["token_source"] == "chunks" and res["output_tokens"] == 3 and res["text"] == "a b c"
    assert len(res["itl_s"]) == 2 and res["ttft_s"] is not None


def test_reasoning_content_counts_as_output(canned):
    srv = canned(chat=lambda h: sse(h, [{"choices": [{"delta": {"reasoning_content": "think"}}]}, chunk("x"),
                                        {"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": 3}}]))
    res = bcl.Client(srv.url).chat({}, keep_text=True)
    assert res["ok"] and res["output_tokens"] == 7 and res["token_source"] == "usage" and res["reasoning_chunks"] == 1
    assert res["text"] == "x" and res["prompt_tokens"] == 3


@pytest.mark.parametrize("part", ["headers", "chunk_size", "event"])
def test_a_stream_trickled_a_byte_at_a_time_hits_the_deadline(part):
    # every byte arrives within any socket timeout: only the request's one deadline ends the stream
    server = trickled(part)
    try:
        res = bcl.Client(server.url, timeout=0.5).chat({})
    finally:
        server.close()
    assert res["error"]["kind"] == "timeout" and res["latency_s"] < 2.5, res


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
    res = bcl.Client(srv.url, timeout=0.5).chat({})
    assert res["error"]["kind"] == "timeout" and res["chunks"] >= 2 and res["latency_s"] < 1.5


def test_chat_endpoint_404_says_what_answered(canned):
    # /v1/models answers but the chat endpoint does not: e.g. a router without workers or another service
    srv = canned(chat=lambda h: h._json(404, {"detail": "Not Found"}))
    res = bcl.Client(srv.url, timeout=5).chat({"messages": []})
    assert res["error"]["kind"] == "not_found"
    assert res["error"]["message"].startswith("HTTP 404 from %s/v1/chat/completions: this server has no OpenAI chat endpoint" % srv.url)


def test_stream_reads_are_bounded(canned, monkeypatch):
    long_line = b"data: " + b"x" * (bcl.MAX_SSE_LINE + 10) + b"\n\n"
    srv = canned(chat=lambda h: sse(h, [chunk("a"), long_line]))
    res = bcl.Client(srv.url, timeout=10).chat({"messages": []})
    assert res["error"]["kind"] == "malformed_chunk" and "longer than %d bytes" % bcl.MAX_SSE_LINE in res["error"]["message"]
    monkeypatch.setattr(bcl, "MAX_STREAM_BYTES", 4096)
    srv2 = canned(chat=lambda h: sse(h, [chunk("token %d" % i) for i in range(200)]))
    res2 = bcl.Client(srv2.url, timeout=10).chat({"messages": []})
    assert res2["error"]["kind"] == "too_large" and "more than 4096 bytes" in res2["error"]["message"]
    assert 40 < res2["chunks"] < 200


def test_no_proxy_for_loopback(sim, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    res = bcl.Client(sim.url, timeout=10).chat({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True})
    assert res["ok"], res["error"]
