# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every module that takes a URL, given URLs urllib cannot parse or an API key that cannot be an HTTP header: a failed
task whose message names the fix, never a traceback (urllib raised ValueError "Invalid IPv6 URL" through every one of
them; http.client raised UnicodeEncodeError for a key with a character outside latin-1)."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import (
    accuracy_canary,
    benchmark,
    kv_cache_guard,
    router_worker,
    server_info,
    sglang_wait_ready,
)

BAD_URLS = {
    "http://[::1": "Invalid IPv6 URL",
    "http://fd00::11:30000": "IPv6 address goes in brackets",
    "http://\uff03host:30000": "NFKC normalization",
}
WORKER = "http://127.0.0.1:1"
CASES = [
    (server_info, {}, "url"),
    (benchmark, {}, "url"),
    (accuracy_canary, {}, "url"),
    (kv_cache_guard, {"argv": ["python3", "-m", "sglang.launch_server", "--model-path", "/m"]}, "url"),
    (router_worker, {"worker_url": WORKER}, "routers"),
    (router_worker, {"routers": [WORKER]}, "worker_url"),
    (router_worker, {"routers": [WORKER], "worker_url": WORKER}, "drain_url"),
]


def run(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("url,match", sorted(BAD_URLS.items()))
@pytest.mark.parametrize("module,args,option", CASES)
def test_a_url_urllib_cannot_parse_is_a_clear_failure(module, args, option, url, match, capsys):
    args = dict(args)
    args[option] = [url] if option == "routers" else url
    res = run(module, args, capsys)
    assert res["failed"] is True and match in res["msg"], res["msg"]
    assert "Traceback" not in json.dumps(res) and "exception" not in res


@pytest.mark.parametrize("url", ["http://[::1/health_generate", "http://\uff03host:30000/health_generate"])
def test_sglang_wait_ready_url(url, capsys):
    res = run(sglang_wait_ready, {"unit": "sglang-qwen.service", "budget": 2, "url": url}, capsys)
    assert res["failed"] is True and "Traceback" not in json.dumps(res)


KEY_CASES = [
    (benchmark, {"url": WORKER}),
    (accuracy_canary, {"url": WORKER}),
    (router_worker, {"routers": [WORKER], "worker_url": WORKER}),
]


@pytest.mark.parametrize("key", ["sk-\u2028pasted", "sk-1\r\nX-Injected: 1", "sk 1"])
@pytest.mark.parametrize("module,args", KEY_CASES)
def test_an_api_key_that_cannot_be_a_header_is_a_clear_failure(module, args, key, capsys):
    res = run(module, dict(args, api_key=key), capsys)
    assert res["failed"] is True and "api_key must be printable ASCII without spaces" in res["msg"], res["msg"]


@pytest.mark.parametrize("key", ["sk-\u2028pasted", "sk-1\r\nX-Injected: 1"])
@pytest.mark.parametrize("module", [server_info, kv_cache_guard])
def test_server_info_api_key_outside_latin1(module, key, capsys):
    args = {"url": WORKER, "api_key": key}
    if module is kv_cache_guard:
        args["argv"] = ["python3", "-m", "sglang.launch_server", "--model-path", "/m"]
    res = run(module, args, capsys)
    assert res["failed"] is True and "api_key must be printable ASCII" in json.dumps(res), res["msg"]
