# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The playbooks hand one role's facts to another in one way (playbooks/vars/server_wiring.yml).

Each playbook's first play is rendered by ansible-playbook as it is (its vars and vars_files), with its roles replaced
by a task that writes what the other roles would get: the URL must parse by the collection's URL rule for an IPv6
bind, the server's API key must reach the audit and the benchmark, the server's KV waiver the guard, the server's
GPUs and memory the preflight, the preflight's arch and toolkit the kernel build, in site.yml, audit.yml,
benchmark.yml and preflight.yml. audit.yml loads no wiring: the audit role's defaults (imported into the probe, as the play's roles
bring them) must give the same values, and an inventory's audit_* must win over them.
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
PLAYBOOKS = ["site.yml", "audit.yml", "benchmark.yml", "preflight.yml"]
WIRED = ["audit_unit", "audit_url", "audit_api_key", "audit_checkpoint", "benchmark_url", "benchmark_api_key", "benchmark_model",
         "audit_expected_kv_dtype", "audit_kv_waiver_reason", "gpu_preflight_gpu_count", "gpu_preflight_mem_fraction_static",
         "sgl_kernel_cuda_archs", "sgl_kernel_require_archs", "sgl_kernel_cuda_min_release", "gpu_preflight_sglang_release",
         "gpu_preflight_launch_args", "gpu_preflight_fp4_modules_prebuilt", "sglang_server_fp4_modules_prebuilt", "sglang_server_gpu",
         "sglang_server_cuda_toolkit", "sgl_kernel_fp4_launch_args", "fp4_kernels_sglang_release", "fp4_kernels_launch_args",
         "fp4_kernels_venv"]
# What audit.yml hands the audit role through the role's own defaults, not the wiring.
AUDIT_WIRED = [name for name in WIRED if name.startswith("audit_")]
KEY = "sk-wiring-test-2f8d"
# What the roles' defaults give in site.yml, where the server and preflight roles are imported (the probe has no roles).
ROLE_DEFAULTS = {"sglang_server_tp_size": 8, "sglang_server_mem_fraction_static": 0.85, "sglang_server_nodes_group": None,
                 "gpu_preflight_toolkit_archs": None, "gpu_preflight_cuda_toolkit_min": None,
                 "sglang_server_quantization": "modelopt_fp4", "sglang_server_fp4_gemm_backend": "flashinfer_cudnn",
                 "sglang_server_moe_runner_backend": "flashinfer_cutlass",
                 "sglang_runtime_packages": [{"name": "sglang-kernel", "version": "0.4.10"}, {"name": "sglang", "version": "0.5.23"}]}
REFERENCE_FP4 = ["--quantization", "modelopt_fp4", "--fp4-gemm-backend", "flashinfer_cudnn", "--moe-runner-backend", "flashinfer_cutlass"]
# The ipv6 host's FP4 launch as the wiring builds it: its own GEMM backend, its MoE backend unset (None), then its extra
# args, which set the MoE backend after all (the last one wins, as in the unit's ExecStart)
LAUNCH = REFERENCE_FP4[:3] + ["flashinfer_cutlass", "--moe-runner-backend", None, "--moe-runner-backend", "marlin"]


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
             "gpu_preflight_toolkit_archs": ["sm_90a"], "gpu_preflight_cuda_toolkit_min": "12.4",
             "sglang_fp4_modules_prebuilt": True,
             "sglang_server_fp4_gemm_backend": "flashinfer_cutlass", "sglang_server_moe_runner_backend": None,
             "sglang_server_extra_args": ["--moe-runner-backend", "marlin"], "sglang_runtime_venv": "/srv/venv"},
    "wildcard6": {"sglang_server_host": "::"},
    "wildcard4": {"sglang_server_host": "0.0.0.0", "sglang_server_api_key": KEY},
    "address": {"sglang_server_host": "10.0.0.11", "sglang_runtime_packages": [{"name": "packaging", "version": "25.0"}]},
    "unset": {},
}


def _render(tmp, playbook, names, inventory, check=False):
    """{host: {name: value}} as the playbook's first play resolves names for each host of the inventory: the play
    rendered by ansible-playbook with its own vars and vars_files, its roles replaced by their defaults (the audit
    role's tasks_from source, which only checks where the log is) and a task that writes the values."""
    play = _load(ROOT / "playbooks" / playbook)[0]
    values = "{%s}" % ", ".join("'%s': %s | default('unwired')" % (k, k) for k in names)
    roles = [{"ansible.builtin.import_role": {"name": "llmops.sglang.audit", "tasks_from": "source"}}
             for r in play.get("roles") or [] if (r.get("role") if isinstance(r, dict) else r) == "llmops.sglang.audit"]
    probe = {
        "hosts": play["hosts"],
        "gather_facts": False,
        "vars": play.get("vars") or {},
        "vars_files": [str(ROOT / "playbooks" / f) for f in play.get("vars_files") or []],
        "tasks": roles + [{"ansible.builtin.copy": {"dest": str(tmp) + "/{{ inventory_hostname }}.json", "mode": "0600",
                                                    "content": "{{ %s | to_json }}" % values},
                           "check_mode": False}],
    }
    (tmp / "play.yml").write_text(yaml.safe_dump([probe]))
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp / "inventory.yml"),
                           str(tmp / "play.yml")] + (["--check"] if check else []),
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    hosts = inventory["all"]["children"]["sglang_servers"]["hosts"]
    return {h: json.loads((tmp / ("%s.json" % h)).read_text()) for h in hosts}


def _local(hosts):
    return {h: dict(v, ansible_connection="local", ansible_python_interpreter=sys.executable) for h, v in hosts.items()}


@pytest.fixture(scope="module", params=PLAYBOOKS)
def wired(request, tmp_path_factory):
    """What the audit and the benchmark get from the playbook's first play, per host; only the names the playbook
    wires (audit.yml: the audit's)."""
    hosts = _local({h: dict(ROLE_DEFAULTS, **v) for h, v in HOSTS.items()})
    inventory = {"all": {"children": {"sglang_servers": {"hosts": hosts}, "pair": {"hosts": {"ipv6": {}, "wildcard6": {}}}}}}
    got = _render(tmp_path_factory.mktemp("wiring"), request.param, WIRED, inventory)
    names = AUDIT_WIRED if request.param == "audit.yml" else WIRED
    return _Wired({h: {k: v for k, v in values.items() if k in names} for h, values in got.items()}, names)


class _Wired(dict):
    """Per host values, and the names this playbook wires: an expectation is compared on those."""

    def __init__(self, values, names):
        super().__init__(values)
        self.names = names

    def only(self, expected):
        return {k: v for k, v in expected.items() if k in self.names}


def test_an_ipv6_bind_gives_a_url_that_parses(wired):
    assert wired["ipv6"]["audit_url"] == wired["ipv6"].get("benchmark_url", "http://[fd00::11]:30001") == "http://[fd00::11]:30001"
    assert parse_base_url(wired["ipv6"]["audit_url"]) == ("http://[fd00::11]:30001", "fd00::11", 30001)


def test_the_server_key_and_settings_reach_audit_and_benchmark(wired):
    expected = {"audit_unit": "sglang-a", "audit_url": "http://[fd00::11]:30001", "audit_api_key": KEY,
                "audit_checkpoint": "/models/a", "benchmark_url": "http://[fd00::11]:30001",
                "benchmark_api_key": KEY, "benchmark_model": "a",
                "audit_expected_kv_dtype": "fp8_e4m3", "audit_kv_waiver_reason": "capacity test OPS-1",
                "gpu_preflight_gpu_count": 8, "gpu_preflight_mem_fraction_static": 0.9,
                "sgl_kernel_cuda_archs": ["sm_90a"], "sgl_kernel_require_archs": ["sm_90a"],
                "sgl_kernel_cuda_min_release": "12.4", "gpu_preflight_sglang_release": "0.5.23",
                "gpu_preflight_launch_args": LAUNCH, "gpu_preflight_fp4_modules_prebuilt": True,
                "sglang_server_fp4_modules_prebuilt": True, "sglang_server_gpu": None, "sglang_server_cuda_toolkit": None,
                "sgl_kernel_fp4_launch_args": LAUNCH, "fp4_kernels_sglang_release": "0.5.23", "fp4_kernels_launch_args": LAUNCH,
                "fp4_kernels_venv": "/srv/venv"}
    assert wired["ipv6"] == wired.only(expected)
    assert wired["wildcard4"]["audit_api_key"] == wired["wildcard4"].get("benchmark_api_key", KEY) == KEY
    assert wired["unset"]["audit_api_key"] is None and wired["unset"].get("benchmark_api_key") is None


def test_the_server_s_kv_waiver_is_the_guard_s_and_its_gpus_the_preflight_s(wired):
    """A server told to run FP8 with a waiver is not rolled back by its own guard; without one the guard wants bf16.
    The preflight asks each host for --tp-size over the model's nodes GPUs, with the server's memory fraction free."""
    assert (wired["ipv6"]["audit_expected_kv_dtype"], wired["ipv6"]["audit_kv_waiver_reason"]) == ("fp8_e4m3", "capacity test OPS-1")
    assert (wired["unset"]["audit_expected_kv_dtype"], wired["unset"]["audit_kv_waiver_reason"]) == ("bf16", None)
    if "gpu_preflight_gpu_count" not in wired.names:
        return
    assert wired["ipv6"]["gpu_preflight_gpu_count"] == 16 // 2 and wired["unset"]["gpu_preflight_gpu_count"] == 8
    assert wired["unset"]["gpu_preflight_mem_fraction_static"] == 0.85
    # null: each role resolves the one SM 12.0 target (_fp4_kernels.SM120_TARGET)
    assert wired["unset"]["sgl_kernel_cuda_archs"] is wired["unset"]["sgl_kernel_require_archs"] is None
    assert wired["unset"]["sgl_kernel_cuda_min_release"] is None


def test_the_planned_fp4_launch_reaches_the_preflight_and_the_server_check(wired):
    """The preflight checks the server's FP4 backends for the pinned SGLang; both roles hear whether the FP4 modules
    were built ahead of time (default no)."""
    if "gpu_preflight_launch_args" not in wired.names:
        pytest.skip("audit.yml wires no FP4 launch (its play runs neither the preflight nor the server role)")
    unset = wired["unset"]
    assert (unset["gpu_preflight_sglang_release"], unset["gpu_preflight_launch_args"]) == ("0.5.23", REFERENCE_FP4)
    # the same backends decide whether the sgl-kernel wheel SGLang pins serves
    assert unset["sgl_kernel_fp4_launch_args"] == REFERENCE_FP4
    assert unset["gpu_preflight_fp4_modules_prebuilt"] is unset["sglang_server_fp4_modules_prebuilt"] is False
    # a stack without an sglang pin (the lab's stand-in package): no release, no FP4 check
    assert wired["address"]["gpu_preflight_sglang_release"] is None
    # the probe play runs no preflight: the server role then checks no GPU and no nvcc
    assert unset["sglang_server_gpu"] is unset["sglang_server_cuda_toolkit"] is None


def test_the_server_s_fp4_backends_decide_the_fp4_modules(wired):
    """fp4_kernels builds the FlashInfer modules of the backends the server's unit runs, into the runtime's venv."""
    if "fp4_kernels_venv" not in wired.names:
        pytest.skip("audit.yml wires nothing for fp4_kernels (its play does not run it)")
    unset = dict((k, v) for k, v in wired["unset"].items() if k.startswith("fp4_kernels_"))
    assert unset == {"fp4_kernels_sglang_release": "0.5.23", "fp4_kernels_launch_args": REFERENCE_FP4, "fp4_kernels_venv": "/opt/sglang/venv"}
    # the runtime's pin decides the FlashInfer the modules are built from; no pin, no release (the role names it)
    assert wired["address"]["fp4_kernels_sglang_release"] is None
    # the same words the preflight and sgl_kernel get, the unit's extra args last
    assert wired["ipv6"]["fp4_kernels_launch_args"] == wired["ipv6"]["gpu_preflight_launch_args"] == LAUNCH


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
    assert wired[host]["audit_url"] == wired[host].get("benchmark_url", url) == url
    parse_base_url(url)


def test_every_play_with_the_audit_or_the_benchmark_is_wired():
    """A play that runs the audit or benchmark role loads the one wiring (so none is left without the key); audit.yml
    alone leaves it to the audit role's defaults, so that an inventory's audit_* wins there."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in _load(path) or []:
            text = json.dumps(play)
            if path.name == "audit.yml":
                assert not play.get("vars_files") and not set(WIRED) & set(play.get("vars") or {}), path.name
            elif "llmops.sglang.audit" in text or "llmops.sglang.benchmark" in text:
                assert "vars/server_wiring.yml" in (play.get("vars_files") or []), path.name
                assert not set(WIRED) & set(play.get("vars") or {}), "%s wires the server a second time" % path.name


# Servers the collection did not deploy, as an operator's inventory names them; the server's own settings are there
# too (a fleet partly deployed by site.yml), and the inventory's audit_* win over what the role derives from them.
EXISTING = {
    "by-unit": {"sglang_server_unit": "sglang-a", "sglang_server_port": 30001, "audit_unit": "vllm-compat-sglang",
                "audit_url": "http://127.0.0.1:8000"},
    "by-file": {"audit_log_file": "/var/log/sglang/server.log", "audit_url": "http://127.0.0.1:8001"},
    "by-group": {"sglang_server_unit": "sglang-b"},
    "deployed": {"sglang_server_unit": "sglang-c", "sglang_server_host": "0.0.0.0", "sglang_server_port": 30002},
}


def test_in_audit_yml_the_inventory_s_values_win(tmp_path):
    """ansible-playbook in check mode on a tiny inventory: host vars and group vars (all's, the lowest an inventory
    has) win over the role's defaults; a host with a log file and a URL has no unit; a host without audit_* gets the
    server's settings; in site.yml the wiring still wins over the same inventory."""
    hosts = _local({h: dict(v) for h, v in EXISTING.items()})
    inventory = {"all": {"vars": {}, "children": {"sglang_servers": {"hosts": hosts},
                                                  "hand_started": {"hosts": {"by-group": {}},
                                                                   "vars": {"audit_unit": "sglang-by-hand"}}}}}
    names = ["audit_unit", "audit_url", "audit_log_file"]
    got = _render(tmp_path, "audit.yml", names, inventory, check=True)
    assert got["by-unit"] == {"audit_unit": "vllm-compat-sglang", "audit_url": "http://127.0.0.1:8000", "audit_log_file": None}
    assert got["by-file"] == {"audit_unit": None, "audit_url": "http://127.0.0.1:8001",
                              "audit_log_file": "/var/log/sglang/server.log"}
    assert got["by-group"]["audit_unit"] == "sglang-by-hand"
    assert got["deployed"] == {"audit_unit": "sglang-c", "audit_url": "http://127.0.0.1:30002", "audit_log_file": None}
    inventory["all"]["vars"] = {"audit_unit": "sglang-everywhere"}
    got = _render(tmp_path, "audit.yml", names, inventory, check=True)
    assert got["deployed"]["audit_unit"] == "sglang-everywhere" and got["by-unit"]["audit_unit"] == "vllm-compat-sglang"
    site = _render(tmp_path, "site.yml", names, inventory, check=True)
    assert site["by-unit"] == {"audit_unit": "sglang-a", "audit_url": "http://127.0.0.1:30001", "audit_log_file": None}


def test_an_audit_without_a_unit_or_a_log_file_stops_naming_both(tmp_path):
    inventory = {"all": {"children": {"sglang_servers": {"hosts": _local({"nowhere": {"audit_unit": ""}})}}}}
    with pytest.raises(AssertionError, match="set audit_unit .* or audit_log_file"):
        _render(tmp_path, "audit.yml", ["audit_unit"], inventory)


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


def test_the_preflight_alone_takes_the_server_s_defaults(tmp_path):
    """preflight.yml does not run the server's role, whose defaults site.yml has: the wiring's own defaults are the
    role's, so a host without server settings is preflighted for what site.yml would deploy on it."""
    server = _load(ROOT / "roles" / "sglang_server" / "defaults" / "main.yml")
    inventory = {"all": {"children": {"sglang_servers": {"hosts": _local({"unset": {}})}}}}
    unset = _render(tmp_path, "preflight.yml", WIRED, inventory)["unset"]
    assert unset["gpu_preflight_gpu_count"] == server["sglang_server_tp_size"]
    assert unset["gpu_preflight_mem_fraction_static"] == server["sglang_server_mem_fraction_static"]
    assert unset["gpu_preflight_launch_args"] == ["--quantization", server["sglang_server_quantization"],
                                                  "--fp4-gemm-backend", server["sglang_server_fp4_gemm_backend"],
                                                  "--moe-runner-backend", server["sglang_server_moe_runner_backend"]]
