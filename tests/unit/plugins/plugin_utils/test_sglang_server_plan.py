"""The sglang_server role's plan (_sglang_server_plan.plan): equal to what the role's Jinja derived before it moved to
Python (tests/fixtures/sglang_server_plan, rendered by ansible-core for six inventories), and checked against SGLang's
own parser and environment settings."""

import inspect
import json
import pathlib
import subprocess

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

from ansible_collections.llmops.sglang.plugins.filter.sglang_server_plan import sglang_server_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils import _sglang_server_plan as srv
from ansible_collections.llmops.sglang.plugins.module_utils._redact import is_secret_name
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import quote

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "sglang_server"
FIXTURES = ROOT / "tests" / "fixtures" / "sglang_server_plan"
HOSTS = sorted(p.stem for p in (FIXTURES / "rendered").glob("*.json"))
# Each former assert of validate.yml (rendered as a verdict) and the start of the message plan() gives for it.
CHECKS = {"kv_cache_dtype": "sglang_server_kv_cache_dtype is ", "api_key": "sglang_server_host is ",
          "secrets_format": "sglang_server_api_key and sglang_server_hf_token", "extra_args": "sglang_server_extra_args sets",
          "environment": "sglang_server_environment must", "multinode": "sglang_server_nodes_group "}


@pytest.fixture(scope="module")
def inventory():
    """Settings per host as the role sees them (defaults under the fixture inventory, templated), groups, hostvars."""
    loader = DataLoader()
    inv = InventoryManager(loader=loader, sources=[str(FIXTURES / "inventory" / "hosts.yml")])
    manager = VariableManager(loader=loader, inventory=inv)
    # ansible-core 2.19 templates only strings marked trusted; 2.18 (make units-oldest) has no such mark and no keyword.
    trust = {"trusted_as_template": True} if "trusted_as_template" in inspect.signature(loader.load_from_file).parameters else {}
    defaults = loader.load_from_file(str(ROLE / "defaults" / "main.yml"), **trust)
    hostvars = {h.name: manager.get_vars(host=h, include_hostvars=False) for h in inv.get_hosts()}
    groups = {name: [h.name for h in group.get_hosts()] for name, group in inv.groups.items()}
    settings = {}
    for name, own in hostvars.items():
        merged = dict(defaults, **{k: v for k, v in own.items() if not k.startswith("ansible_") or k == "ansible_host"})
        merged.setdefault("sglang_runtime_environment", None)
        templar = Templar(loader=loader, variables=merged)
        settings[name] = {k: _resolve(templar, merged[k]) for k in srv.SETTINGS}
    return settings, groups, hostvars


def _resolve(templar, value):
    """Templates a value as the role's vars lookup does, containers included."""
    if isinstance(value, dict):
        return {k: _resolve(templar, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(templar, v) for v in value]
    return templar.template(value)


def _plan(inventory, host):
    settings, groups, hostvars = inventory
    return srv.plan(settings[host], host, groups, hostvars, play_batch=HOSTS)


@pytest.mark.parametrize("host", HOSTS)
def test_the_plan_equals_what_the_roles_jinja_derived(inventory, host):
    before = json.loads((FIXTURES / "rendered" / (host + ".json")).read_text())
    plan = _plan(inventory, host)
    # Since then, variables with a secret's name go to the EnvironmentFile instead of the unit (wild6 has two).
    moved = sorted(n for n in before["env"] if is_secret_name(n))
    assert plan["secret_env"] == moved and (host != "wild6" or moved == ["HUGGING_FACE_HUB_TOKEN", "MY_API_KEY"])
    before["env"] = before["argv_record"]["environment"] = {k: v for k, v in before["env"].items() if k not in moved}
    before["argv_record"]["secrets"] += moved
    before["unit_text"] = "".join(line for line in before["unit_text"].splitlines(True)
                                  if not any(line.startswith('Environment="%s=' % n) for n in moved))
    for key in ("service", "unit_file", "env_file", "argv_file", "prev_files", "exec", "nodes", "nnodes", "node_rank",
                "node0", "dist_init_addr", "argv", "env", "extra_managed", "host_is_loopback", "local_url", "health_url",
                "worker_url", "router_urls", "verify_command"):
        assert plan[key] == before[key], key
    assert plan["record"] == before["argv_record"]
    # The unit's ExecStart and Environment= lines, as the template wrote them.
    unit = before["unit_text"]
    assert "\nExecStart=%s\n" % plan["exec_start"] in unit
    assert [line for line in unit.splitlines() if line.startswith("Environment=")] == plan["environment_lines"]
    # Every refused setting, and only those.
    for check, prefix in CHECKS.items():
        assert any(p.startswith(prefix) for p in plan["problems"]) is not before["checks"][check], check


def test_the_inventories_cover_the_cases(inventory):
    """Single node, two nodes, IPv6 bind, wildcard binds, API key and none, extra args with managed abbreviations."""
    plans = {host: _plan(inventory, host) for host in HOSTS}
    assert plans["n2"]["argv"][6:12] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.11:50000"]
    assert plans["six"]["local_url"] == plans["six"]["worker_url"] == "http://[fd00::11]:30000"
    assert plans["six"]["dist_init_addr"] == "[fd00::11]:50000"
    assert plans["wild6"]["local_url"] == "http://[::1]:30000"
    assert plans["n1"]["worker_url"] == "http://10.0.0.11:30000"
    assert plans["wild6"]["extra_managed"] == ["--api-k", "--tp", "--p", "--model"]
    assert plans["one"]["problems"] == []
    assert "--api-key" not in plans["one"]["argv"]


@pytest.mark.parametrize("host", HOSTS)
def test_no_secret_reaches_the_plan(inventory, host):
    settings = inventory[0][host]
    text = json.dumps(_plan(inventory, host))
    for name in ("sglang_server_api_key", "sglang_server_hf_token"):
        if settings[name]:
            assert settings[name] not in text
    if settings["sglang_server_api_key"]:
        assert srv.API_KEY_REF in _plan(inventory, host)["argv"]


def test_a_wildcard_or_loopback_rendezvous_is_refused(inventory):
    settings, groups, hostvars = inventory
    for target in ("::", "127.0.0.2", "[::1]", "localhost", "0.0.0.0"):
        s = dict(settings["n1"], sglang_server_dist_init_host=target)
        assert any(p.startswith("sglang_server_nodes_group pair") for p in srv.plan(s, "n1", groups, hostvars, HOSTS)["problems"])
    assert srv.plan(settings["n1"], "n1", groups, hostvars, ["n1"])["problems"][0].count("missing: n2;") == 1


def test_an_empty_node_group_is_a_verdict_not_a_traceback(inventory):
    settings, groups, hostvars = inventory
    s = dict(settings["n1"], sglang_server_nodes_group="nosuchgroup")
    plan = srv.plan(s, "n1", groups, hostvars, HOSTS)
    assert plan["node_rank"] == -1
    assert "the group is empty or missing" in plan["problems"][0]


def test_systemd_words_are_quoted_and_escaped():
    # the one quoting of ExecStart= words (_systemd_exec; its tests check it against real systemd)
    assert quote("--port") == "--port"
    assert quote("${SGLANG_API_KEY}") == '"$${SGLANG_API_KEY}"'
    assert quote('a "b" 5%') == '"a \\"b\\" 5%%"'
    assert srv.exec_start(["/p", "x"], ["--a", "1", "-v", "--b"]) == "/p x \\\n    --a 1 -v \\\n    --b"


def test_a_missing_setting_is_a_clear_filter_error(inventory):
    settings = dict(inventory[0]["one"])
    del settings["sglang_server_port"]
    with pytest.raises(AnsibleFilterError, match="settings missing: sglang_server_port"):
        sglang_server_plan(settings, "plan", "one", {}, {})


def test_the_outcome_is_a_phase_of_the_same_filter(inventory):
    settings = inventory[0]["one"]
    plan = sglang_server_plan(settings, "plan", "one", {"all": ["one"]}, {"one": {}}, ["one"])
    assert sglang_server_plan(settings, "outcome", _results(), plan) == srv.outcome(_results(), plan)
    with pytest.raises(AnsibleFilterError, match="unknown phase 'info': use one of plan, outcome"):
        sglang_server_plan(settings, "info", _results(), plan)


def test_vars_hand_over_exactly_the_settings_and_results_python_reads():
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    names = role_vars["_sglang_server_setting_names"]
    assert tuple(names) == srv.SETTINGS
    assert tuple(role_vars["_sglang_server_result_names"]) == srv.RESULTS
    # Every result is registered or set by the role's tasks (or derived in its vars).
    tasks = "".join(p.read_text() for p in (ROLE / "tasks").glob("*.yml")) + "".join(role_vars)
    assert [n for n in srv.RESULTS if "register: %s\n" % n not in tasks and "    %s:" % n not in tasks and n not in role_vars] == []
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert [n for n in names if n.startswith("sglang_server_") and n not in specs] == []


@pytest.fixture(scope="module")
def sglang_facts(sglang_python):
    """What SGLang 0.5.23 itself says, from one start of its interpreter (each costs seconds of torch imports): its
    server's options with their choices, and the names of its environment settings."""
    code = ("import argparse, json\nimport sglang.srt.environ as e\nfrom sglang.srt.server_args import ServerArgs\n"
            "p = argparse.ArgumentParser(); ServerArgs.add_cli_args(p)\n"
            "print(json.dumps({'options': {o: a.choices and list(a.choices) for a in p._actions for o in a.option_strings},\n"
            "                  'environ': [n for n in dir(e.Envs) if n.isupper()]}))")
    out = subprocess.run([sglang_python, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_flags_are_sglangs_own(sglang_facts, inventory):
    """Every flag the plan writes and every managed flag (or the abbreviation argparse resolves) is SGLang 0.5.23's."""
    real = sglang_facts["options"]
    plans = [_plan(inventory, host) for host in HOSTS]
    # The flags the role writes (the extra args are the user's).
    plan_flags = {w for p in plans for w in p["argv"][:len(p["argv"]) - len(inventory[0][p["nodes"][0]]["sglang_server_extra_args"])]
                  if w.startswith("--")}
    assert {"--nnodes", "--dist-init-addr", "--speculative-num-steps", "--mamba-radix-cache-strategy", "--api-key"} <= plan_flags
    assert sorted(f for f in plan_flags if f.split("=")[0] not in real) == []
    assert sorted(f for f in srv.MANAGED_FLAGS if not any(o.startswith(f) for o in real)) == []
    assert set(srv.MAMBA_STRATEGIES) <= set(real["--mamba-radix-cache-strategy"])


def test_every_sglang_setting_reaches_the_server_and_the_secret_ones_privately(sglang_facts, inventory):
    names = sglang_facts["environ"]
    assert len(names) > 100
    settings, groups, hostvars = inventory
    plan = srv.plan(dict(settings["one"], sglang_server_environment=dict((n, "1") for n in names)), "one", groups, hostvars,
                    play_batch=HOSTS)
    # none is refused; those _redact calls secret (EXA_API_KEY; SGLANG_LOG_DECODE_GRAPH_KEY, which it only suspects)
    # go to the root-only EnvironmentFile, every other one into the unit
    assert plan["problems"] == []
    assert "EXA_API_KEY" in plan["secret_env"] and "SGLANG_LOG_DECODE_GRAPH_KEY" in plan["secret_env"]
    assert sorted(plan["secret_env"] + list(plan["env"])) == sorted(names)
    assert plan["secret_env"] == sorted((n for n in names if is_secret_name(n)), key=str.lower)


SECURITY = ROOT / "tests" / "fixtures" / "tool-outputs" / "systemd-analyze-security-252-sglang-qwen%s.txt"


def test_the_exposure_is_read_from_systemd_analyze_and_judged():
    hardened = srv.exposure(pathlib.Path(str(SECURITY) % "").read_text(), 4.0, "sglang-qwen.service")
    assert (hardened["exposure"], hardened["rating"], hardened["failure"]) == (1.7, "OK", None)
    assert hardened["message"] == ("systemd-analyze security sglang-qwen.service: exposure 1.7 OK (0 = fully confined, "
                                   "10 = unprotected; accepted up to 4.0)")
    loose = srv.exposure(pathlib.Path(str(SECURITY) % "-unhardened").read_text(), 4.0, "sglang-qwen.service")
    assert loose["exposure"] == 5.4 and loose["failure"].startswith("sglang-qwen.service has a systemd-analyze security exposure of 5.4, above 4.0")
    assert srv.exposure(pathlib.Path(str(SECURITY) % "-unhardened").read_text(), None, "u")["failure"] is None
    assert srv.exposure("", 4.0, "u")["failure"] is not None


def _results(**found):
    names = dict(("_sglang_server_" + k, v) for k, v in found.items())
    return dict((name, names.get(name, {})) for name in srv.RESULTS)


def test_the_outcome_publishes_the_info_and_verdict(inventory):
    plan = _plan(inventory, "one")
    security = {"stdout": pathlib.Path(str(SECURITY) % "").read_text(), "rc": 0}
    wait = {"ready": True, "elapsed": 41.6, "invocation_id": "c0ffee", "status": "ready", "phase": "ready",
            "phases": [{"phase": "ready", "at": 41.5}], "health": {"status": 200, "error": None}}
    out = srv.outcome(_results(changing=True, start={"changed": True}, node_start={"skipped": True, "changed": False},
                               wait=wait, phases=[{"phase": "loading_weights", "at": 3.0}], security_raw=security,
                               after={"status": {"InvocationID": "c0ffee", "ExecMainStartTimestamp": "Tue 2026-12-01"}},
                               args={"valid": True, "sglang_version": "0.5.23"}), plan)
    info = out["info"]
    assert (info["changed"], info["restarted"], info["ready"], info["ready_after"], info["invocation_id"]) == (
        True, True, True, 41.6, "c0ffee")
    assert info["args"] == plan["argv"] and info["args_check"] == {"sglang_version": "0.5.23", "valid": True}
    assert info["security"] == {"exposure": 1.7, "rating": "OK"} and out["verdict"] == "ready, exposure 1.7"
    assert [p["phase"] for p in out["phases"]] == ["loading_weights", "ready"]
    assert out["rollback"] == ("Rolled back sglang-qwen.service to the previous unit (/etc/systemd/system/"
                               "sglang-qwen.service.prev): it is ready again after 41.6 s (invocation c0ffee).")
    assert srv.outcome(_results(changing=False, wait=wait), plan)["rollback"].startswith("Restarted sglang-qwen.service (its files")
    nothing = srv.outcome(_results(), plan)
    assert (nothing["verdict"], nothing["info"]["security"], nothing["info"]["changed"], nothing["drained"]) == (
        "not checked", None, False, None)


def test_a_follower_node_is_ready_only_with_node_0_and_its_own_invocation(inventory):
    plan = _plan(inventory, "n2")
    running = {"status": {"ActiveState": "active", "SubState": "running", "InvocationID": "b2", "NRestarts": "0"}}
    assert srv.node_verdict({"status": "ready"}, plan, running, running) is None
    assert srv.node_verdict({}, plan, running, running) == (
        "node 1 of 2 (pair): node 0 (n1) is not ready: it failed before its readiness wait")
    restarted = {"status": dict(running["status"], InvocationID="b3", NRestarts="1")}
    assert srv.node_verdict({"status": "ready"}, plan, restarted, running) == (
        "node 1 of 2 (pair): sglang-qwen.service here is active/running (NRestarts 1); see journalctl -u sglang-qwen.service")


def test_the_drain_and_join_lines(inventory):
    plan = _plan(inventory, "n1")
    leave = {"worker_url": plan["worker_url"], "routers": [{"router": "http://10.0.0.5:30010", "action": "removed"},
                                                           {"router": "http://10.0.0.7:30000", "action": "absent"}],
             "drain": {"in_flight_before": 2, "in_flight": 0, "waited_s": 4.1}}
    out = srv.outcome(_results(router_leave=leave, serves={"status": -1}), plan)
    assert out["drained"] == ("http://10.0.0.11:30000 left http://10.0.0.5:30010; 2 request(s) running or queued, "
                              "0 left after 4.1 s")
    assert srv.drain_text(dict(leave, drain=None)).endswith("; not drained (check mode)")
    assert out["stays_out"].startswith("http://10.0.0.11:30000 stays out of http://10.0.0.5:30010, http://[fd00::5]:30000, "
                                       "http://10.0.0.7:30000: http://127.0.0.1:30000/health_generate answered -1, not 200.")


SECRET_ENV = {"AWS_SECRET_ACCESS_KEY": "aws-lab-secret-4b7c", "ACCESS_TOKEN": "tok-lab-9e2f1a", "HF_HUB_OFFLINE": "1"}


def test_secret_named_variables_go_to_the_environment_file_not_the_unit(inventory):
    import ansible.template  # pylint: disable=import-outside-toplevel

    # 2.19 templates only text marked trusted; 2.18 (make units-oldest) templates any text and has no such mark
    trust_as_template = getattr(ansible.template, "trust_as_template", str)

    settings, groups, hostvars = inventory
    s = dict(settings["one"], sglang_server_environment=SECRET_ENV, sglang_server_api_key="sk-lab-env-1",
             sglang_runtime_environment={"S3_SECRET": "s3-lab-secret-77", "PATH": "/opt/x"})
    plan = srv.plan(s, "one", groups, hostvars, play_batch=HOSTS)
    assert plan["problems"] == []
    # _redact's name rule decides (HF_HUB_OFFLINE and PATH are not secret)
    assert plan["secret_env"] == ["ACCESS_TOKEN", "AWS_SECRET_ACCESS_KEY", "S3_SECRET"]
    assert sorted(plan["env"]) == ["HF_HUB_OFFLINE", "PATH"] and plan["record"]["environment"] == plan["env"]
    assert plan["record"]["secrets"] == ["SGLANG_API_KEY", "ACCESS_TOKEN", "AWS_SECRET_ACCESS_KEY", "S3_SECRET"]
    published = json.dumps(plan)  # the plan is a fact: no value of a secret in it, the unit's lines included
    assert [v for v in ("aws-lab-secret-4b7c", "tok-lab-9e2f1a", "s3-lab-secret-77", "sk-lab-env-1") if v in published] == []
    # the role's EnvironmentFile template writes them single-quoted, next to the key
    templar = Templar(loader=DataLoader(), variables=dict(s, _sglang_server_settings=s, _sglang_server_plan=plan,
                                                          ansible_managed="managed", sglang_server_hf_token=None))
    text = templar.template(trust_as_template((ROLE / "templates" / "sglang.env.j2").read_text()))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == ["SGLANG_API_KEY='sk-lab-env-1'", "ACCESS_TOKEN='tok-lab-9e2f1a'",
                     "AWS_SECRET_ACCESS_KEY='aws-lab-secret-4b7c'", "S3_SECRET='s3-lab-secret-77'"]


@pytest.mark.parametrize("env, words", [
    ({"SGLANG_API_KEY": "x"}, "must not set the variables the role writes from its own settings (SGLANG_API_KEY (set "
                              "sglang_server_api_key))"),
    ({"HF_TOKEN": "x"}, "(HF_TOKEN (set sglang_server_hf_token))"),
    ({"AWS_SECRET_ACCESS_KEY": "a'b"}, "sglang_server_environment: AWS_SECRET_ACCESS_KEY hold a secret by name and are "
                                       "written single-quoted into the root-only /etc/sglang/"),
])
def test_environment_refusals_name_the_variable_not_the_value(inventory, env, words):
    settings, groups, hostvars = inventory
    problems = srv.plan(dict(settings["one"], sglang_server_environment=env), "one", groups, hostvars, HOSTS)["problems"]
    assert [p for p in problems if words in p] and not any("a'b" in p for p in problems), problems


@pytest.mark.parametrize("key", ["sk-lab-Tab\t7Qm2", "sk-lab-Nbsp\u00a07Qm2", "sk-lab-Zw\u200b7Qm2", "sk-lab-é7Qm2", "sk lab"])
@pytest.mark.parametrize("name", ["api_key", "hf_token"])
def test_a_key_that_cannot_travel_as_a_bearer_header_is_refused(inventory, key, name):
    settings, groups, hostvars = inventory
    problems = srv.plan(dict(settings["one"], **{"sglang_server_" + name: key}), "one", groups, hostvars, HOSTS)["problems"]
    assert [p for p in problems if p.startswith("sglang_server_%s must be printable ASCII without spaces (no tab, no-break or "
                                                "zero-width space" % name)], problems
    assert not any(key in p or "sk-lab" in p for p in problems)


def test_the_fp4_check_takes_the_gpus_and_nvcc_the_preflight_found(inventory):
    """The preflight's real gpu_info and cuda_toolkit_info results (one H200, nvcc 13.0) become the args check's FP4
    options; without them (no preflight) nothing is checked, and a host without nvcc is told apart from an unknown one."""
    base = ROOT / "tests" / "fixtures" / "gpu" / "h200x1"
    gpu, toolkit = (json.loads((base / name).read_text()) for name in ("gpu_info.json", "cuda_toolkit_info.json"))
    settings, groups, hostvars = inventory
    assert _plan(inventory, "one")["fp4"] == {"gpu": None, "nvcc": None, "prebuilt": False}
    found = srv.plan(dict(settings["one"], sglang_server_gpu=gpu, sglang_server_cuda_toolkit=toolkit), "one", groups, hostvars, HOSTS)
    assert found["fp4"] == {"gpu": "9.0", "nvcc": "13.0", "prebuilt": False}
    sm120 = dict(gpu, gpus=[dict(g, compute_capability="12.0") for g in gpu["gpus"] * 8])
    none = srv.plan(dict(settings["one"], sglang_server_gpu=sm120, sglang_server_cuda_toolkit={"installed": False, "release": None},
                         sglang_server_fp4_modules_prebuilt="true"), "one", groups, hostvars, HOSTS)
    assert none["fp4"] == {"gpu": "12.0", "nvcc": "none", "prebuilt": True}
    # the role passes them to the args check, which runs before the unit is installed
    task = yaml.safe_load((ROLE / "tasks" / "args_check.yml").read_text())[0]["llmops.sglang.sglang_args_check"]
    assert {k: task[k] for k in ("gpu_capability", "nvcc", "fp4_modules_prebuilt")} == {
        "gpu_capability": "{{ _sglang_server_plan.fp4.gpu }}", "nvcc": "{{ _sglang_server_plan.fp4.nvcc }}",
        "fp4_modules_prebuilt": "{{ _sglang_server_plan.fp4.prebuilt }}"}
    main = [t["ansible.builtin.import_tasks"] for t in yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())]
    assert main.index("args_check.yml") < main.index("install.yml") < main.index("service.yml")
