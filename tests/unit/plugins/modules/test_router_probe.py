# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""router_probe module: AnsibleModule against SGLang's real router (loopback) in front of two simulated servers."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import router_probe

from sim_harness import free_port

KEY = "sk-router-probe-module-41c2"


@pytest.fixture(scope="module")
def fleet(router_fleet):
    started = router_fleet(KEY)
    return started.router, started.sims, started.router.metrics_url


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            router_probe.main()
    out = capsys.readouterr().out
    assert KEY not in out
    return json.loads(out)


def test_passes_when_every_worker_serves(fleet, capsys):
    router, sims, metrics = fleet
    res = run({"url": router.url, "metrics_url": metrics, "api_key": KEY, "workers": [s.url for s in sims]}, capsys)
    assert not res.get("failed") and res["changed"] is False, res
    assert res["source"] == "router_metrics" and res["readiness"]["healthy_workers"] == 2
    assert "reached 2 worker(s)" in res["msg"]


def test_fails_naming_a_worker_that_is_not_healthy(fleet, capsys):
    router, sims, metrics = fleet
    absent = "http://127.0.0.1:%d" % free_port()
    args = {"url": router.url, "metrics_url": metrics, "api_key": KEY, "workers": [s.url for s in sims] + [absent],
            "ready_timeout": 0.5}
    res = run(args, capsys)
    # three workers configured, two registered: the router is never ready with all of them
    assert res["failed"] and "not ready with 3 healthy worker(s)" in res["msg"]
    res = run(dict(args, require_all_workers=False), capsys)
    assert not res.get("failed") and res["missing"] == [absent], res


@pytest.mark.parametrize("args, match", [
    ({"url": "http://fd00::11:30000"}, "IPv6 address goes in brackets"),
    ({"url": "http://127.0.0.1:1", "requests": 0}, "requests must be at least 1"),
    ({"url": "http://127.0.0.1:1", "ready_timeout": 0}, "ready_timeout must be a number of seconds > 0"),
])
def test_bad_options_name_the_fix(args, match, capsys):
    res = run(args, capsys)
    assert res["failed"] and match in res["msg"], res
