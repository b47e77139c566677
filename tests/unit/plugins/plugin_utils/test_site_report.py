# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_site_report: site.yml's per-host report and end-of-play table."""

import base64
import json

import pytest
from ansible.plugins.filter.core import get_hash, to_json

from ansible_collections.llmops.sglang.plugins.plugin_utils import _site_report as sr
from ansible_collections.llmops.sglang.plugins.module_utils._host_state import gather

ARGS = ["--model-path", "/models/Qwen3.5-397B-A17B-NVFP4", "--tp-size", "8", "--kv-cache-dtype", "bf16", "--port", "30000"]


def slurped(record):
    """The launch record's content as host_state reads it (base64 of the server role's to_nice_json, sorted keys)."""
    text = json.dumps(record, indent=4, sort_keys=True) + "\n"
    return base64.b64encode(text.encode()).decode()


def read_back(tmp_path, content=None, active="active"):
    """The report's real host_state run: the record file (when there is one) and `systemctl show`'s answer (echo)."""
    record = tmp_path / "sglang-qwen.argv.json"
    if content is not None:
        record.write_bytes(base64.b64decode(content) if content != "@@" else b"@@")
    return gather(read=[str(record)], commands=[{"name": "unit", "argv": ["/bin/echo", active] if active else ["/bin/false"]}])


def test_the_report_of_a_deployed_host(tmp_path):
    report = sr.host_report(read_back(tmp_path, slurped({"args": ARGS, "binary": "/opt/sglang/venv/bin/python"})), {"changed": True})
    assert report == {"outcome": "deployed", "state": "active", "config": report["config"], "kv_cache_dtype": "bf16"}
    # the digest hosts compare is the one Ansible's to_json | hash('sha1') gave, so mixed reports agree
    assert report["config"] == get_hash(to_json(ARGS), "sha1")[:10]
    other = sr.host_report(read_back(tmp_path, slurped({"args": ARGS[:-1] + ["30001"]})), {})
    assert other["config"] != report["config"]


@pytest.mark.parametrize("content", [None, "bm90IGpzb24=", "@@", slurped(["not", "a", "record"]), slurped({"args": "--port 1"})])
def test_a_missing_or_unreadable_record_says_none(tmp_path, content):
    expected = {"outcome": "unchanged", "state": "unknown", "config": "none", "kv_cache_dtype": "n/a"}
    assert sr.host_report(read_back(tmp_path, content, active=None), None) == expected
    assert sr.host_report({"failed": True, "msg": "module failed"}, None) == expected


@pytest.mark.parametrize("state, outcome", [
    ({"rolled_back": True, "failed": True}, "rolled back"),
    ({"failed": "True"}, "failed"),
    ({"guard_passed": False, "changed": True}, "failed"),
    ({"guard_passed": "false"}, "failed"),
    ({"guard_passed": True, "changed": "true"}, "deployed"),
    ({}, "unchanged"),
])
def test_the_outcome(state, outcome):
    assert sr.outcome(**state) == outcome


def test_the_table():
    hostvars = {
        "gpu1": {"gpu_preflight_result": {"passed": True}, "audit_guard": {"verdict": "bf16"},
                 "sglang_server_info": {"ready": True, "restarted": True, "ready_after": 93.456, "nnodes": 2, "node_rank": 0},
                 "sglang_site_report": {"config": "d05fd34001", "outcome": "deployed"}, "benchmark_summary": "1200 tok/s"},
        "gpu2": {"gpu_preflight_result": {"passed": False, "failed": [{"rule": "gpu_count"}, {"rule": "mig"}]},
                 "audit_guard": {}, "sglang_server_info": {"ready": False, "restarted": False}},
        "gpu3": {},
    }
    assert sr.summary_lines(["gpu1", "gpu2", "gpu3"], hostvars) == [
        "host                     preflight kv       service                            runs                     benchmark",
        "gpu1                     passed    bf16     ready after 93.5s, restarted, node 0/2 d05fd34001 (deployed)    1200 tok/s",
        "gpu2                     FAILED:gpu_count,mig ?        NOT READY                          n/a                      n/a",
        "gpu3                     n/a       n/a      n/a                                n/a                      n/a",
    ]
