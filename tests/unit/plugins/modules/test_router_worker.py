# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""router_worker module: AnsibleModule against SGLang's real router (loopback) in front of two simulated servers."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import router_worker

from sim_harness import free_port

KEY = "sk-router-module-0c7a"


@pytest.fixture(scope="module")
def fleet(router_fleet):
    started = router_fleet(KEY, routers=2)
    return started.routers, started.sims


WARNED = []


@pytest.fixture(autouse=True)
def _record_warnings(monkeypatch):
    # Where module.warn ends up depends on what else the process imported (once a controller-side plugin is loaded,
    # Ansible sends warnings to its display instead of the result), so the test records them at the source.
    monkeypatch.setattr(router_worker.AnsibleModule, "warn", lambda _self, msg: WARNED.append(msg))


def run(args, capsys):
    del WARNED[:]
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            router_worker.main()
    out = capsys.readouterr().out
    assert KEY not in out and KEY not in json.dumps(WARNED)
    return dict(json.loads(out), warned=list(WARNED))


def warned(res):
    return json.dumps(res["warned"])


def test_out_of_every_router_and_back(fleet, capsys):
    routers, (_one, two) = fleet
    down = "http://127.0.0.1:%d" % free_port()
    urls = [r.url for r in routers] + [down]
    args = {"routers": urls, "worker_url": two.url, "api_key": KEY, "drain_url": two.url, "drain_timeout": 30}

    res = run(dict(args, _ansible_check_mode=True), capsys)
    assert res["changed"] is True and [r["action"] for r in res["routers"]] == ["removed", "removed", "down"]
    assert res["drain"] is None

    res = run(args, capsys)
    assert res["changed"] is True and [r["action"] for r in res["routers"]] == ["removed", "removed", "down"]
    assert res["drain"]["drained"] is True and res["drain"]["in_flight"] == 0
    assert "skipped router %s" % down in warned(res)
    assert "no other healthy worker" not in warned(res)

    res = run(args, capsys)
    assert res["changed"] is False and [r["action"] for r in res["routers"]] == ["absent", "absent", "down"]
    assert res["drain"] is None

    # Back in: a router that is down is skipped quietly (when it starts, its command line lists the server).
    res = run({"routers": urls, "worker_url": two.url, "api_key": KEY, "state": "present"}, capsys)
    assert res["changed"] is True and [r["action"] for r in res["routers"]] == ["added", "added", "down"]
    assert "skipped router" not in warned(res)
    res = run({"routers": urls, "worker_url": two.url, "api_key": KEY, "state": "present"}, capsys)
    assert res["changed"] is False and [r["action"] for r in res["routers"]] == ["present", "present", "down"]


def test_taking_out_the_last_worker_warns(fleet, capsys):
    routers, (one, two) = fleet
    base = {"routers": [routers[0].url], "api_key": KEY}
    try:
        run(dict(base, worker_url=one.url), capsys)
        res = run(dict(base, worker_url=two.url), capsys)
        assert res["routers"][0]["healthy_left"] == 0
        assert "no other healthy worker" in warned(res)
    finally:
        for sim in (one, two):
            run(dict(base, worker_url=sim.url, state="present"), capsys)


@pytest.mark.parametrize("args,msg", [
    ({"worker_url": "10.0.0.11:30000"}, "has no scheme"),
    ({"routers": ["ftp://r:1"]}, "scheme 'ftp' is not supported"),
    ({"timeout": -1}, "timeout must be a number of seconds >= 0"),
])
def test_bad_arguments_are_named(capsys, args, msg):
    base = {"routers": ["http://127.0.0.1:1"], "worker_url": "http://10.0.0.11:30000"}
    res = run(dict(base, **args), capsys)
    assert res["failed"] is True and msg in res["msg"]


def test_a_wrong_key_fails_with_the_fix(fleet, capsys):
    routers, (_one, two) = fleet
    res = run({"routers": [routers[0].url], "worker_url": two.url, "api_key": "sk-wrong"}, capsys)
    assert res["failed"] is True and "rejected the API key" in res["msg"] and "router_api_key" in res["msg"]
