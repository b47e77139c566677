# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_router_probe against SGLang's real router (sglang-router 0.3.2 on loopback, cache-aware policy) in front of two
simulated servers: readiness, the per-worker counts from the router's own counters and from the workers', and the
verdict."""

import pathlib
import sys

import pytest
import requests

from ansible_collections.llmops.sglang.plugins.module_utils import _router_probe as probe_mod
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import parse_prometheus

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from sim_harness import Router, Sim, free_port  # noqa: E402

KEY = "sk-router-probe-3b9e"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("router-probe")
    sims = [Sim(tmp, key=KEY, extra=["--enable-metrics"]) for _i in range(2)]
    prometheus = free_port()
    router = Router(tmp, [s.url for s in sims], key=KEY, extra=["--policy", "cache_aware", "--prometheus-port", str(prometheus)])
    yield router, sims, "http://127.0.0.1:%d/metrics" % prometheus
    router.stop()
    for s in sims:
        s.stop()


def test_the_router_exports_the_counter_the_probe_reads(fleet):
    router, sims, metrics = fleet
    requests.post(router.url + "/v1/completions", headers={"Authorization": "Bearer " + KEY},
                  json={"model": "qwen3.5-397b", "prompt": "x", "max_tokens": 2}, timeout=30).raise_for_status()
    samples = parse_prometheus(requests.get(metrics, timeout=10).text, prefix=probe_mod.ROUTER_COUNTER)["metrics"]
    assert {s["labels"]["worker"] for s in samples[probe_mod.ROUTER_COUNTER]} <= {s.url for s in sims}


@pytest.mark.parametrize("by_router", [True, False], ids=["router_metrics", "worker_metrics"])
def test_every_healthy_worker_serves_a_burst(fleet, by_router):
    router, sims, metrics = fleet
    assert probe_mod.wait_ready(router.url, 2, 30)["healthy_workers"] == 2
    res = probe_mod.probe(router.url, [s.url for s in sims], metrics if by_router else None, KEY, requests=8)
    assert res["source"] == ("router_metrics" if by_router else "worker_metrics")
    assert res["ok"] and res["failures"] == [] and res["idle"] == [] and res["missing"] == []
    assert sorted(res["per_worker"]) == sorted(s.url for s in sims) and min(res["per_worker"].values()) > 0
    assert sum(res["per_worker"].values()) == res["requests"]
    passed, msg = probe_mod.verdict(res)
    assert passed and "reached 2 worker(s)" in msg


def test_a_worker_the_router_does_not_list_is_named(fleet):
    router, sims, metrics = fleet
    absent = "http://127.0.0.1:%d" % free_port()
    res = probe_mod.probe(router.url, [s.url for s in sims] + [absent], metrics, KEY)
    assert res["ok"] and res["missing"] == [absent]
    passed, msg = probe_mod.verdict(res, require_all_workers=True)
    assert not passed and "not healthy or not registered ['%s']" % absent in msg
    assert probe_mod.verdict(res, require_all_workers=False)[0]


def test_readiness_gives_up_naming_what_it_waited_for(fleet):
    router, _sims, _metrics = fleet
    with pytest.raises(probe_mod.ProbeError, match="not ready with 3 healthy worker.*healthy_workers 2 of total_workers 2"):
        probe_mod.wait_ready(router.url, 3, 0.3, interval=0.1)
    with pytest.raises(probe_mod.ProbeError, match="connection refused"):
        probe_mod.wait_ready("http://127.0.0.1:%d" % free_port(), 1, 0.2, interval=0.1)


@pytest.mark.parametrize("key, fix", [("sk-wrong-9", "rejected the API key"), (None, "requires an API key")])
def test_a_wrong_key_is_named_not_shown(fleet, key, fix):
    router, sims, metrics = fleet
    with pytest.raises(probe_mod.ProbeError) as exc:
        probe_mod.probe(router.url, [s.url for s in sims], metrics, key)
    assert fix in str(exc.value) and "sk-wrong-9" not in str(exc.value)


def test_failed_requests_fail_the_verdict():
    res = {"ok": False, "requests": 8, "rounds": 1, "per_worker": {"http://a:1": 0}, "source": "worker_metrics",
           "healthy": ["http://a:1"], "missing": [], "failures": ["HTTP 500 from x", "HTTP 500 from x"]}
    passed, msg = probe_mod.verdict(res)
    assert not passed and "failed requests ['HTTP 500 from x']" in msg
