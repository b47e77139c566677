# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_router_workers: URL matching on a real GET /workers answer, and every change against SGLang's real router
(sglang-router 0.3.2 on loopback) in front of two simulated servers."""

import http.server
import json
import pathlib
import sys
import threading
import time

import pytest
import requests

from ansible_collections.llmops.sglang.plugins.module_utils import _router_workers as rw
from ansible_collections.llmops.sglang.plugins.module_utils._http import FetchError
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import parse_prometheus
from ansible_collections.llmops.sglang.plugins.module_utils._server_info import ServerInfoError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from sim_harness import Router, Sim, free_port  # noqa: E402

KEY = "sk-router-test-5d1e"
# GET /workers of sglang-router 0.3.2 in front of two simulated servers, the first of which had just died
# (health checks every second): captured, not written by hand.
LISTING = json.loads((pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "router" / "workers-0.3.2.json").read_text())


def test_matching_on_the_real_listing():
    dead, alive = LISTING["workers"]
    assert not dead["is_healthy"] and alive["is_healthy"]
    assert rw.matching(rw.workers_of(LISTING, "r"), alive["url"]) == [alive]
    # The same worker spelled otherwise: upper-case host, trailing slash.
    host_port = alive["url"].split("://")[1]
    assert rw.matching(LISTING["workers"], "http://%s/" % host_port.replace("127.0.0.1", "LOCALHOST")) == []
    assert rw.matching(LISTING["workers"], "HTTP://%s/" % host_port) == [alive]
    assert rw.matching(LISTING["workers"], "http://127.0.0.1:1") == []
    assert rw.matching(LISTING["workers"], "https://" + alive["url"].split("://")[1]) == []


@pytest.mark.parametrize("answer", [{}, {"workers": {}}, {"workers": [{"url": "http://x:1"}]}, ["http://x:1"]])
def test_a_listing_that_is_not_the_router_s_is_refused(answer):
    with pytest.raises(rw.RouterError, match="sglang-router 0.3"):
        rw.workers_of(answer, "http://r:1")


def test_bad_worker_url_is_named():
    with pytest.raises(ServerInfoError, match="no scheme"):
        rw.url_key("10.0.0.11:30000")


@pytest.mark.parametrize("body,match", [
    (b"[" * 100000, "nested too deeply"),  # json.loads raised RecursionError through the module
    (b"<html>502</html>", "not JSON"),
    (b'"workers"', "instead of an object"),
])
def test_a_router_answer_that_is_not_a_json_object_is_a_clear_error(body, match):
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with pytest.raises(FetchError, match=match) as info:
            rw.Router("http://127.0.0.1:%d" % httpd.server_address[1]).workers()
        assert info.value.cls == "not_json"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_in_flight_sums_running_and_queued_over_ranks():
    text = ('# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="m",dp_rank="0"} 3.0\n'
            'sglang:num_running_reqs{model_name="m",dp_rank="1"} 1.0\nsglang:num_queue_reqs{model_name="m"} 2.0\n')
    assert rw.in_flight(parse_prometheus(text)["metrics"]) == 6
    assert rw.in_flight(parse_prometheus("sglang:token_usage 0.1\n")["metrics"]) is None


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("router")
    sims = [Sim(tmp, key=KEY, extra=["--enable-metrics", "--sim-tokens-per-second", "100"]) for _i in range(2)]
    router = Router(tmp, [s.url for s in sims], key=KEY)
    yield router, sims
    router.stop()
    for s in sims:
        s.stop()


def listed(router):
    return {w["url"]: w["is_healthy"] for w in rw.Router(router.url, KEY).workers()}


def test_leave_then_join_on_the_real_router(fleet):
    router, (one, two) = fleet
    api = rw.Router(router.url, KEY)
    assert listed(router) == {one.url: True, two.url: True}

    # Check mode reads only.
    res = rw.leave(api, two.url, check_mode=True)
    assert res["action"] == "removed" and res["healthy_left"] == 1 and two.url in listed(router)

    res = rw.leave(api, two.url)
    assert res["action"] == "removed" and len(res["worker_ids"]) == 1
    assert listed(router) == {one.url: True}
    # The router now sends everything to the other server.
    before = requests.get(two.url + "/metrics").text
    for _i in range(4):
        r = requests.post(router.url + "/v1/completions", headers={"Authorization": "Bearer " + KEY},
                          json={"model": "qwen3.5-397b", "prompt": "x", "max_tokens": 2}, timeout=30)
        assert r.status_code == 200
    assert _served(two) == _served_from(before)
    assert rw.leave(api, two.url)["action"] == "absent"

    assert rw.join(api, two.url, KEY, check_mode=True)["action"] == "added" and two.url not in listed(router)
    res = rw.join(api, two.url, KEY)
    assert res["action"] == "added" and len(res["worker_ids"]) == 1
    assert listed(router) == {one.url: True, two.url: True}
    assert rw.join(api, two.url, KEY)["action"] == "present"


def running(sim, n):
    """Wait until n requests run on sim (the threads that send them may not have reached it yet)."""
    for _i in range(100):
        if rw.in_flight(parse_prometheus(requests.get(sim.url + "/metrics").text)["metrics"]) >= n:
            return
        time.sleep(0.05)
    raise AssertionError("the requests did not reach %s" % sim.url)


def _served_from(metrics_text):
    return sum(s["value"] for s in parse_prometheus(metrics_text)["metrics"].get("sglang:num_requests_total", []))


def _served(sim):
    return _served_from(requests.get(sim.url + "/metrics").text)


def test_drain_waits_for_the_requests_already_sent(fleet):
    router, (one, two) = fleet
    api = rw.Router(router.url, KEY)
    codes = []

    def ask():
        # 300 tokens at 100 tok/s: about 3 s on the server.
        r = requests.post(two.url + "/generate", headers={"Authorization": "Bearer " + KEY},
                          json={"text": "x", "sampling_params": {"max_new_tokens": 300}}, timeout=60)
        codes.append(r.status_code)
    threads = [threading.Thread(target=ask) for _i in range(3)]
    for t in threads:
        t.start()
    try:
        running(two, 3)
        assert rw.leave(api, two.url)["action"] == "removed"
        res = rw.drain(two.url, KEY, timeout=60, interval=0.2)
        assert res["in_flight_before"] >= 1 and res["in_flight"] == 0 and res["drained"] and res["waited_s"] >= 1
    finally:
        for t in threads:
            t.join(60)
        rw.join(api, two.url, KEY)
    assert codes == [200, 200, 200]


def test_drain_gives_up_after_its_timeout(fleet):
    _router, (_one, two) = fleet
    t = threading.Thread(target=lambda: requests.post(two.url + "/generate", headers={"Authorization": "Bearer " + KEY},
                                                      json={"text": "x", "sampling_params": {"max_new_tokens": 400}}, timeout=60))
    t.start()
    try:
        running(two, 1)
        res = rw.drain(two.url, KEY, timeout=0.5, interval=0.1)
        assert res["in_flight"] >= 1 and res["drained"] is False
    finally:
        t.join(60)


def test_a_router_that_does_not_answer_is_skipped():
    api = rw.Router("http://127.0.0.1:%d" % free_port(), KEY)
    assert rw.leave(api, "http://127.0.0.1:1")["action"] == "down"
    res = rw.join(api, "http://127.0.0.1:1", KEY)
    assert res["action"] == "down" and "connection refused" in res["message"]


@pytest.mark.parametrize("key,fix", [("sk-wrong", "rejected the API key"), (None, "requires an API key")])
def test_a_wrong_key_is_named(fleet, key, fix):
    router, (_one, two) = fleet
    with pytest.raises(FetchError) as exc:
        rw.leave(rw.Router(router.url, key), two.url)
    assert fix in exc.value.message and "router_api_key" in exc.value.message
    assert "sk-wrong" not in exc.value.message
    assert two.url in listed(router)


def test_the_tested_router_is_the_one_the_role_installs():
    root = pathlib.Path(__file__).resolve().parents[4]
    pins = dict(line.split("==") for line in (root / "requirements.txt").read_text().split() if "==" in line)
    defaults = (root / "roles" / "router" / "defaults" / "main.yml").read_text()
    assert 'router_version: "%s"' % pins["sglang-router"] in defaults
