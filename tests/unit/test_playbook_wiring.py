# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The playbooks hand one role's facts to another in one way (playbooks/vars/server_wiring.yml).

Each playbook's first play is rendered by ansible-playbook as it is (its vars and vars_files), with its roles replaced
by a task that writes what the other roles would get: the URL must parse by the collection's URL rule for an IPv6
bind, the server's API key must reach the audit and the benchmark, the server's KV waiver the guard, the server's
GPUs and memory the preflight, the preflight's arch and toolkit the kernel build, in site.yml, audit.yml and
benchmark.yml.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.module_utils._http import parse_base_url

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOKS = ["site.yml", "audit.yml", "benchmark.yml"]
WIRED = ["audit_unit", "audit_url", "audit_api_key", "audit_checkpoint", "benchmark_url", "benchmark_api_key", "benchmark_model",
         "audit_expected_kv_dtype", "audit_kv_waiver_reason", "gpu_preflight_gpu_count", "gpu_preflight_mem_fraction_static",
         "sgl_kernel_cuda_archs", "sgl_kernel_require_archs", "sgl_kernel_cuda_min_release"]
KEY = "sk-wiring-test-2f8d"
# What the roles' defaults give in site.yml, where the server and preflight roles are imported (the probe has no roles).
ROLE_DEFAULTS = {"sglang_server_tp_size": 8, "sglang_server_mem_fraction_static": 0.85, "sglang_server_nodes_group": None,
                 "gpu_preflight_toolkit_archs": ["sm_120a"], "gpu_preflight_cuda_toolkit_min": "12.8"}


def _load(path):
    """YAML with Ansible's !unsafe tag read as a plain string."""
    loader = type("UnsafeLoader", (yaml.SafeLoader,), {})
    loader.add_constructor("!unsafe", lambda ld, node: ld.construct_scalar(node))
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=loader)  # noqa: S506 - SafeLoader subclass


# One host per case: the server's settings as an inventory gives them.
HOSTS = {
    "ipv6": {"sglang_server_host": "fd00::11", "sglang_server_port": 30001, "sglang_server_api_key": KEY,
             "sglang_server_unit": "sglang-a", "sglang_server_model_path": "/models/a", "sglang_server_served_model_name": "a",
             "sglang_server_kv_cache_dtype": "fp8_e4m3", "sglang_server_kv_cache_dtype_waiver": "capacity test OPS-1",
             "sglang_server_tp_size": 16, "sglang_server_nodes_group": "pair", "sglang_server_mem_fraction_static": 0.9,
             "gpu_preflight_toolkit_archs": ["sm_90a"], "gpu_preflight_cuda_toolkit_min": "12.4"},
    "wildcard6": {"sglang_server_host": "::"},
    "wildcard4": {"sglang_server_host": "0.0.0.0", "sglang_server_api_key": KEY},
    "address": {"sglang_server_host": "10.0.0.11"},
    "unset": {},
}


@pytest.fixture(scope="module", params=PLAYBOOKS)
def wired(request, tmp_path_factory):
    """What the audit and the benchmark get from the playbook's first play, per host: the play rendered by
    ansible-playbook with its own vars and vars_files, its roles and tasks replaced by one that writes the values."""
    tmp = tmp_path_factory.mktemp("wiring")
    play = _load(ROOT / "playbooks" / request.param)[0]
    values = "{%s}" % ", ".join("'%s': %s | default('unwired')" % (k, k) for k in WIRED)
    probe = {
        "hosts": play["hosts"],
        "gather_facts": False,
        "vars": play.get("vars") or {},
        "vars_files": [str(ROOT / "playbooks" / f) for f in play.get("vars_files") or []],
        "tasks": [{"ansible.builtin.copy": {"dest": str(tmp) + "/{{ inventory_hostname }}.json", "mode": "0600",
                                            "content": "{{ %s | to_json }}" % values}}],
    }
    (tmp / "play.yml").write_text(yaml.safe_dump([probe]))
    hosts = {h: dict(ROLE_DEFAULTS, **v, ansible_connection="local", ansible_python_interpreter=sys.executable)
             for h, v in HOSTS.items()}
    (tmp / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": hosts},
                                                                            "pair": {"hosts": {"ipv6": {}, "wildcard6": {}}}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp / "inventory.yml"),
                           str(tmp / "play.yml")], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {h: json.loads((tmp / ("%s.json" % h)).read_text()) for h in HOSTS}


def test_an_ipv6_bind_gives_a_url_that_parses(wired):
    assert wired["ipv6"]["audit_url"] == wired["ipv6"]["benchmark_url"] == "http://[fd00::11]:30001"
    assert parse_base_url(wired["ipv6"]["audit_url"]) == ("http://[fd00::11]:30001", "fd00::11", 30001)


def test_the_server_key_and_settings_reach_audit_and_benchmark(wired):
    assert wired["ipv6"] == {"audit_unit": "sglang-a", "audit_url": "http://[fd00::11]:30001", "audit_api_key": KEY,
                             "audit_checkpoint": "/models/a", "benchmark_url": "http://[fd00::11]:30001",
                             "benchmark_api_key": KEY, "benchmark_model": "a",
                             "audit_expected_kv_dtype": "fp8_e4m3", "audit_kv_waiver_reason": "capacity test OPS-1",
                             "gpu_preflight_gpu_count": 8, "gpu_preflight_mem_fraction_static": 0.9,
                             "sgl_kernel_cuda_archs": ["sm_90a"], "sgl_kernel_require_archs": ["sm_90a"],
                             "sgl_kernel_cuda_min_release": "12.4"}
    assert wired["wildcard4"]["audit_api_key"] == wired["wildcard4"]["benchmark_api_key"] == KEY
    assert wired["unset"]["audit_api_key"] is None and wired["unset"]["benchmark_api_key"] is None


def test_the_server_s_kv_waiver_is_the_guard_s_and_its_gpus_the_preflight_s(wired):
    """A server told to run FP8 with a waiver is not rolled back by its own guard; without one the guard wants bf16.
    The preflight asks each host for --tp-size over the model's nodes GPUs, with the server's memory fraction free."""
    assert (wired["ipv6"]["audit_expected_kv_dtype"], wired["ipv6"]["audit_kv_waiver_reason"]) == ("fp8_e4m3", "capacity test OPS-1")
    assert (wired["unset"]["audit_expected_kv_dtype"], wired["unset"]["audit_kv_waiver_reason"]) == ("bf16", None)
    assert wired["ipv6"]["gpu_preflight_gpu_count"] == 16 // 2 and wired["unset"]["gpu_preflight_gpu_count"] == 8
    assert wired["unset"]["gpu_preflight_mem_fraction_static"] == 0.85
    assert wired["unset"]["sgl_kernel_cuda_archs"] == wired["unset"]["sgl_kernel_require_archs"] == ["sm_120a"]
    assert wired["unset"]["sgl_kernel_cuda_min_release"] == "12.8"


def test_no_inventory_sets_a_wired_variable():
    """The wiring's values win over an inventory's (play vars_files): an inventory that set one would be ignored."""
    wiring = set(_load(ROOT / "playbooks" / "vars" / "server_wiring.yml"))
    assert set(WIRED) <= wiring
    for path in sorted(ROOT.glob("inventories/**/*.yml")):
        text = path.read_text()
        assert not [name for name in wiring if re.search(r"^\s*%s:" % name, text, re.M)], path


@pytest.mark.parametrize("host, url", [("unset", "http://127.0.0.1:30000"), ("wildcard4", "http://127.0.0.1:30000"),
                                       ("wildcard6", "http://[::1]:30000"), ("address", "http://10.0.0.11:30000")])
def test_the_url_is_the_server_s_on_its_own_host(wired, host, url):
    assert wired[host]["audit_url"] == wired[host]["benchmark_url"] == url
    parse_base_url(url)


def test_every_play_with_the_audit_or_the_benchmark_is_wired():
    """A play that runs the audit or benchmark role loads the one wiring (so none is left without the key)."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in _load(path) or []:
            text = json.dumps(play)
            if "llmops.sglang.audit" in text or "llmops.sglang.benchmark" in text:
                assert "vars/server_wiring.yml" in (play.get("vars_files") or []), path.name
                assert not set(WIRED) & set(play.get("vars") or {}), "%s wires the server a second time" % path.name


RUNTIME_TASKS = ROOT / "roles" / "sglang_runtime" / "tasks"


def _runtime_tasks(name):
    return _load(RUNTIME_TASKS / name)


def test_the_runtime_role_sets_owner_and_mode_only_on_directories_it_creates():
    """A checkpoint path that exists (/tmp, an operator's /models) keeps its owner and mode: every directory task is
    conditioned on the plan's decision, and the decision is fed the stat and the find of what is on the host."""
    results = _load(RUNTIME_TASKS.parent / "vars" / "main.yml")["_sglang_runtime_result_names"]
    checkpoint = _runtime_tasks("checkpoint.yml")
    names = [t["name"] for t in checkpoint]
    stat = next(t for t in checkpoint if "ansible.builtin.stat" in t)
    assert stat["ansible.builtin.stat"]["path"] == "{{ sglang_runtime_checkpoint_path }}" and "when" not in stat
    decide = next(t for t in checkpoint if t["name"] == "Decide whether the checkpoint must be staged")
    assert stat["register"] in results and "'checkpoint', _sglang_runtime_results)" in decide["ansible.builtin.set_fact"]["_sglang_runtime_checkpoint"]
    assert names.index(stat["name"]) < names.index(decide["name"]) < names.index(
        "Copy the checkpoint from the controller or download it from the hub")
    for staging in ("checkpoint_controller.yml", "checkpoint_hf.yml"):
        tasks = _runtime_tasks(staging)
        touching = [t for t in tasks if any(m in t for m in ("ansible.builtin.file", "file"))]
        assert touching, staging
        for task in touching:
            args = task.get("ansible.builtin.file") or task["file"]
            assert args.get("state") == "directory" and not {"owner", "group", "recurse"} & set(args), task["name"]
            if args["path"] == "{{ sglang_runtime_checkpoint_path }}":
                assert task.get("when") == "_sglang_runtime_checkpoint.create_dir", task["name"]
            else:
                assert (args["path"], task.get("loop")) == ("{{ item }}", "{{ _sglang_runtime_copy.dirs }}"), task["name"]
    controller = _runtime_tasks("checkpoint_controller.yml")
    host_find = next(t for t in controller if t.get("register") == "_sglang_runtime_dest")
    assert host_find["ansible.builtin.find"]["file_type"] == "any"  # directories listed: runtime_copy leaves them out
    plan = next(t for t in controller if "_sglang_runtime_copy" in (t.get("ansible.builtin.set_fact") or {}))
    assert host_find["register"] in results and "_sglang_runtime_src" in results
    assert "sglang_runtime_plan('copy', _sglang_runtime_results)" in plan["ansible.builtin.set_fact"]["_sglang_runtime_copy"]
