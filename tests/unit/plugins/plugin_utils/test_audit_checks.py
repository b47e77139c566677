"""The accuracy audit's decisions on real inputs.

Two sets of facts: what the role registers on the molecule scenario's three lab hosts (tests/fixtures/audit,
the collection's modules against the lab simulator), and what real SGLang 0.5.16 wrote and answered on an H200
(tests/fixtures/real-sglang: the recorded module results, and the real log read with the role's own log rules).
The edge cases are those real facts with one input taken away or changed.
"""

import copy
import json
import pathlib

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.audit_plan import FilterModule
from ansible_collections.llmops.sglang.plugins.plugin_utils import _audit_checks
from ansible_collections.llmops.sglang.plugins.module_utils._kv_budget import plan
from ansible_collections.llmops.sglang.plugins.module_utils._redact import redact
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import audit_path

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "audit"
SCENARIO = ROOT / "extensions" / "molecule" / "audit" / "default" / "molecule.yml"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SETTINGS = dict((k, DEFAULTS["audit_" + k]) for k in _audit_checks.DEFAULTS if "audit_" + k in DEFAULTS and k != "report_dir")
SETTINGS["report_dir"] = "/srv/reports"
LAB_HOSTS = {"au-auto": "lab-auto", "au-fp8": "lab-fp8", "au-bf16": "lab-bf16"}
REAL = "sglang-0.5.16-h200-%s"
# The real checkpoints are a ModelOpt FP8 Qwen3 (trap) and an unquantized Qwen3-Next (hybrid).
TRAP = dict(SETTINGS, expected_quantization="modelopt_fp8", expected_quant_algo="FP8")


def by_id(result):
    return dict((c["id"], c) for c in result["checks"])


def statuses(result):
    return dict((c["id"], c["status"]) for c in result["checks"])


@pytest.fixture(scope="module")
def lab(fixtures_dir):
    def load(host):
        facts = json.loads((fixtures_dir / "audit" / (LAB_HOSTS[host] + ".json")).read_text())
        facts.update(host=host, model_dir="/models/qwen3.5-397b-a17b-nvfp4")
        return facts
    return load


@pytest.fixture(scope="module")
def real(fixtures_dir):
    """A real scenario's facts: the recorded module results, the real log read with the role's rules."""
    rules = [dict(r, scope=None) for r in yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_audit_log_rules"]]
    cache = {}

    def load(scenario, log_name=None):
        if scenario not in cache:
            base = fixtures_dir / "real-sglang"
            recorded = json.loads((base / ((REAL % scenario) + ".result.json")).read_text())
            log_path = base / ((REAL % (log_name or scenario)) + ".log")
            log = redact(audit_path(str(log_path), rules=rules, allow=[], max_evidence=3))
            log["source"] = {"path": str(log_path)}
            cache[scenario] = {"host": scenario, "guard": recorded["clean"]["guard"], "log": log,
                               "server": recorded["server_info"], "checkpoint": recorded["checkpoint_info"],
                               "unit_show": None, "model_dir": recorded["clean"]["audit_model_dir"]}
        return copy.deepcopy(cache[scenario])
    return load


# --- the molecule scenario's three hosts: the verdicts its verify.yml checks ---

@pytest.mark.parametrize("host", sorted(LAB_HOSTS))
def test_lab_hosts_get_the_verdicts_the_molecule_scenario_expects(lab, host):
    expect = yaml.safe_load(SCENARIO.read_text())["provisioner"]["inventory"]["host_vars"][host]["audit_test_expect"]
    result = _audit_checks.audit(lab(host), SETTINGS)
    assert (result["verdict"], result["guard"]["verdict"], statuses(result)) == (expect["verdict"], expect["kv"], expect["checks"])
    assert result["guard"]["passed"] == (expect["kv"] == "bf16")
    assert result["report"]["deployment"]["checkpoint"] == "/models/qwen3.5-397b-a17b-nvfp4"


def test_lab_auto_summary_line_is_the_documented_one(lab):
    """docs/audit.md shows this host's line; the filter writes it byte for byte."""
    result = _audit_checks.audit(lab("au-auto"), SETTINGS)
    assert result["summary"]["line"] == (
        "FAIL  kv=fp8     weights=modelopt_fp4/NVFP4  ssm=bfloat16  spec=off         ctx/pool=262144/3691767   "
        "32K:112 128K:28      issues=kv_cache_dtype,log_findings,mamba_ssm_dtype")
    assert result["stats"] == {
        "verdict": "FAIL", "kv": "fp8", "passed": False, "signals": "3 of 3",
        "issues": ["kv_cache_dtype", "log_findings", "mamba_ssm_dtype"],
        "checks": {"kv_cache_dtype": "fail", "weight_quantization": "ok", "log_findings": "warning",
                   "speculative_decoding": "n/a", "context_capacity": "ok", "mamba_ssm_dtype": "note", "kv_capacity": "info"},
        "source": {"unit": SETTINGS["unit"], "log_file": None, "url": SETTINGS["url"]},
        "line": result["summary"]["line"]}
    assert result["summary"]["report"] == "/srv/reports/au-auto/audit.json"
    assert result["summary"]["issues"] == ["kv_cache_dtype", "log_findings", "mamba_ssm_dtype"]


def test_lab_auto_mamba_pool_reveals_the_16_bit_state(lab):
    """--mamba-ssm-dtype bfloat16 reaches /server_info; 22.94 GB over 2088 slots is 2 bytes per element."""
    check = by_id(_audit_checks.audit(lab("au-auto"), SETTINGS))["mamba_ssm_dtype"]
    assert check["status"] == "note" and check["short"] == "bfloat16"
    assert check["summary"] == ("SSM state bfloat16 (--mamba-ssm-dtype, read from /server_info), "
                                "pool 2.00 bytes/element (16-bit); float32 expected")
    assert "Mamba pool (TP0): 2088 slots, ssm_state 22.94 GB -> 2.00 bytes/element" in check["evidence"]
    assert "45 linear-attention layers is kept in bfloat16" in check["fix"]


def test_lab_fp8_capacity_also_says_what_bf16_would_hold(lab):
    facts = lab("au-fp8")
    result = _audit_checks.audit(facts, SETTINGS)
    arch = facts["checkpoint"]["architecture"]
    fp8 = plan(arch, 8, "fp8_e4m3")["kv_bytes_per_token_per_gpu"]
    bf16 = plan(arch, 8, "bf16")["kv_bytes_per_token_per_gpu"]
    tokens = facts["server"]["server_info"]["max_total_num_tokens"]
    row = result["capacity"][0]
    assert (row["label"], row["kv_dtype"], row["kv_tokens"]) == ("32K", "fp8_e4m3", tokens)
    assert row["kv_limited_requests"] == tokens // 32768
    assert row["mamba_limited_requests"] == facts["log"]["facts"]["mamba_pool"]["max_mamba_cache_size"] // 3
    assert row["bf16_kv_limited_requests"] == tokens * fp8 // bf16 // 32768
    assert row["kv_gib_per_request"] == round(fp8 * 32768 / 2 ** 30, 3)
    assert row["concurrent_requests"] == min(row["kv_limited_requests"], row["mamba_limited_requests"])


def test_lab_bf16_low_acceptance_is_a_warning_with_its_fix(lab):
    check = by_id(_audit_checks.audit(lab("au-bf16"), SETTINGS))["speculative_decoding"]
    assert (check["status"], check["short"]) == ("warning", "accept 1.0")
    # SGLang reports NEXTN as EAGLE in /server_info
    assert check["summary"] == "EAGLE on, average accept length 1.0 (2.0 or more expected)"
    assert check["fix"].startswith("Few draft tokens are accepted")


# --- real SGLang 0.5.16 on an H200 ---

@pytest.mark.parametrize("scenario,log_name,settings,verdict,checks", [
    ("trap-auto", None, TRAP, "FAIL", {"kv_cache_dtype": "fail", "log_findings": "warning", "mamba_ssm_dtype": "n/a"}),
    ("trap-fp8", None, TRAP, "FAIL", {"kv_cache_dtype": "fail", "log_findings": "warning", "mamba_ssm_dtype": "n/a"}),
    ("trap-bf16", "trap-bf16-forged", TRAP, "OK", {"kv_cache_dtype": "ok", "log_findings": "ok", "mamba_ssm_dtype": "n/a"}),
    ("trap-bf16-logms", None, TRAP, "OK", {"kv_cache_dtype": "ok", "log_findings": "ok", "mamba_ssm_dtype": "n/a"}),
    ("hybrid-bf16", None, SETTINGS, "WARN",
     {"kv_cache_dtype": "ok", "weight_quantization": "warning", "mamba_ssm_dtype": "ok"}),
    ("hybrid-fp8", None, SETTINGS, "FAIL",
     {"kv_cache_dtype": "fail", "weight_quantization": "warning", "log_findings": "warning", "mamba_ssm_dtype": "ok"}),
])
def test_real_sglang_scenarios(real, scenario, log_name, settings, verdict, checks):
    result = _audit_checks.audit(real(scenario, log_name), settings)
    assert result["verdict"] == verdict
    got = statuses(result)
    assert dict((k, got[k]) for k in checks) == checks
    # 8192 tokens of context (/server_info) fit many times in every real pool; no speculative decoding ran
    assert (got["context_capacity"], got["speculative_decoding"], got["kv_capacity"]) == ("ok", "n/a", "info")


def test_real_trap_auto_reads_the_weight_line_and_the_pool(real):
    facts = real("trap-auto")
    result = _audit_checks.audit(facts, TRAP)
    weights = by_id(result)["weight_quantization"]
    assert weights["evidence"][0] == "log (Load weight end): quant=modelopt_fp8, quant_algo=FP8"
    assert weights["summary"].startswith("modelopt_fp8/FP8 as expected (log, checkpoint")
    assert by_id(result)["log_findings"]["summary"] == "1 finding(s) in the current invocation's log: fp8_kv_effective x1"
    assert [f["rule"] for f in by_id(result)["log_findings"]["findings"]] == ["fp8_kv_effective"]
    assert result["capacity"][0]["kv_limited_requests"] == 87380569 // 32768
    assert result["capacity"][0]["bf16_kv_limited_requests"] == 87380569 // 2 // 32768
    assert result["report"]["deployment"]["kv_cache_dtype_flag"] == "auto"
    assert result["report"]["deployment"]["sglang_version"] == "0.5.16"


def test_real_unquantized_weights_differ_from_the_nvfp4_expectation(real):
    """SGLang 0.5.16 logs no quant= (and no dtype=) for unquantized weights: only the checkpoint tells."""
    weights = by_id(_audit_checks.audit(real("hybrid-bf16"), SETTINGS))["weight_quantization"]
    assert (weights["short"], weights["status"]) == ("mismatch", "warning")
    assert weights["evidence"] == ["checkpoint None: method None, quant_algo None"]
    assert "--quantization modelopt_fp4" in weights["fix"]


def test_real_hybrid_float32_pool_matches_the_default(real):
    check = by_id(_audit_checks.audit(real("hybrid-bf16"), SETTINGS))["mamba_ssm_dtype"]
    assert check["summary"].startswith("SSM state float32 (")
    assert ", pool 4.00 bytes/element (float32)" in check["summary"]


# --- edge cases the role must survive ---

def test_nothing_readable_is_unknown_not_a_crash(real):
    facts = {"host": "h", "guard": {"failed": True, "msg": "waiver_reason is required"},
             "log": {"failed": True, "msg": "no journal for sglang-qwen"}, "server": {"skipped": True},
             "checkpoint": {"skipped": True}, "unit_show": {"rc": 1, "stdout": ""}, "model_dir": None}
    result = _audit_checks.audit(facts, SETTINGS)
    assert result["verdict"] == "FAIL"
    assert result["guard"]["verdict"] == "error" and result["guard"]["message"] == "waiver_reason is required"
    assert result["guard"]["fix"] == "waiver_reason is required"
    assert set(statuses(result).values()) == {"fail", "unknown"}
    assert by_id(result)["log_findings"]["summary"] == "the log could not be read: no journal for sglang-qwen"
    assert by_id(result)["kv_capacity"]["short"] == "32K:? 128K:?"
    deployment = result["report"]["deployment"]
    assert (deployment["unit_state"], deployment["checkpoint_error"], deployment["server_reachable"]) == \
        ("unknown", "not inspected", False)
    assert _audit_checks.audit({}, {})["guard"]["message"] == "the guard did not run"


def test_guard_alone_has_every_documented_key(real):
    guard = _audit_checks.audit({"guard": real("trap-fp8")["guard"], "log": real("trap-fp8")["log"]}, SETTINGS)["guard"]
    assert sorted(guard) == sorted(["passed", "verdict", "expected", "waived", "waiver_reason", "available_signals",
                                    "min_signals", "signals", "table", "fix", "notes", "message", "log_error"])
    assert (guard["passed"], guard["verdict"], guard["log_error"]) == (False, "fp8", None)


def test_unknown_ssm_dtype_alias_is_reported_as_written(lab):
    facts = lab("au-fp8")
    facts["unit_show"] = {"stdout": 'ActiveState=activating\nEnvironment="SGLANG_MAMBA_SSM_DTYPE=weird16" A=1'}
    result = _audit_checks.audit(facts, SETTINGS)
    check = by_id(result)["mamba_ssm_dtype"]
    assert (check["status"], check["short"]) == ("note", "weird16")
    assert check["evidence"][0] == "unit Environment SGLANG_MAMBA_SSM_DTYPE: weird16"
    assert result["report"]["deployment"]["unit_state"] == "activating"


@pytest.mark.parametrize("alias", ["fp16", "half", "torch.float16", "float16"])
def test_16_bit_pool_agrees_with_a_16_bit_expectation(lab, alias):
    facts = lab("au-auto")
    facts["unit_show"] = {"stdout": "Environment=SGLANG_MAMBA_SSM_DTYPE=%s" % alias}
    check = by_id(_audit_checks.audit(facts, dict(SETTINGS, expected_mamba_ssm_dtype="float16")))["mamba_ssm_dtype"]
    assert (check["status"], check["short"]) == ("ok", alias)


def test_zero_pool_bytes_and_zero_tokens(lab):
    facts = lab("au-auto")
    facts["log"]["facts"]["mamba_pool"]["ssm_state_gb"] = 0.0
    facts["log"]["facts"]["max_total_num_tokens"] = 0
    facts["server"]["server_info"]["max_total_num_tokens"] = 0
    result = _audit_checks.audit(facts, dict(SETTINGS, context_lengths=[1000, 65536]))
    checks = by_id(result)
    assert not any("Mamba pool" in e for e in checks["mamba_ssm_dtype"]["evidence"])
    assert checks["context_capacity"]["status"] == "unknown"
    assert checks["kv_capacity"]["short"] == "1000:696 64K:696"  # Mamba slots alone: 2088 // 3
    assert checks["kv_capacity"]["status"] == "unknown"
    facts["log"]["facts"]["mamba_pool"]["ssm_state_gb"] = None  # a pool line without the size
    assert by_id(_audit_checks.audit(facts, SETTINGS))["mamba_ssm_dtype"]["status"] == "note"


def test_context_beyond_the_native_length_and_beyond_the_pool(lab):
    facts = lab("au-bf16")
    facts["server"]["server_info"]["context_length"] = 300000
    check = by_id(_audit_checks.audit(facts, SETTINGS))["context_capacity"]
    assert check["status"] == "note" and "beyond the native 262144 (RoPE scaling)" in check["summary"]
    assert "quality past 262144 tokens" in check["fix"]
    facts["server"]["server_info"]["context_length"] = 10 ** 8
    check = by_id(_audit_checks.audit(facts, SETTINGS))["context_capacity"]
    assert check["status"] == "warning" and check["fix"].startswith("A request at the full context length does not fit")


def test_waived_fp8_is_a_note(lab):
    facts = lab("au-fp8")
    facts["guard"].update(passed=True, waived=True, waiver_reason="capacity ticket 7")
    result = _audit_checks.audit(facts, dict(SETTINGS, expected_kv_dtype="fp8_e4m3"))
    kv = by_id(result)["kv_cache_dtype"]
    assert (kv["status"], kv["fix"]) == ("note", None)
    assert kv["summary"].endswith("; FP8 accepted: capacity ticket 7")
    assert result["verdict"] == "WARN"  # the log's FP8 findings still warn


def test_speculative_decoding_edge_cases(lab):
    facts = lab("au-bf16")
    si = facts["server"]["server_info"]
    si["internal_states"] = [{"avg_spec_accept_length": 3.2}, {"avg_spec_accept_length": 2.7}, {"other": 1}]
    check = by_id(_audit_checks.audit(facts, SETTINGS))["speculative_decoding"]
    assert (check["status"], check["short"], check["fix"]) == ("ok", "accept 2.7", None)
    si["internal_states"] = None
    check = by_id(_audit_checks.audit(facts, SETTINGS))["speculative_decoding"]
    assert (check["status"], check["short"]) == ("unknown", "accept ?")


def test_flag_quantization_is_a_third_source(lab):
    facts = lab("au-bf16")
    facts["server"]["server_info"]["quantization"] = "fp8"
    check = by_id(_audit_checks.audit(facts, SETTINGS))["weight_quantization"]
    assert check["short"] == "mismatch"
    assert check["summary"] == ("expected modelopt_fp4/NVFP4, found /server_info quantization=fp8 "
                                "(the --quantization flag)")


def test_waived_log_findings_are_counted_not_warned(lab):
    facts = lab("au-fp8")
    for finding in facts["log"]["findings"]:
        finding["waived"] = True
    check = by_id(_audit_checks.audit(facts, SETTINGS))["log_findings"]
    assert check["status"] == "ok"
    assert check["summary"] == "no precision warning or error in the current invocation's log (2 waived)"


def test_budget_the_estimator_refuses_leaves_the_sizes_unknown(lab):
    facts = lab("au-fp8")
    facts["checkpoint"]["architecture"]["attention"] = "mla"
    result = _audit_checks.audit(facts, SETTINGS)
    assert result["capacity"][0]["kv_gib_per_request"] is None
    assert result["capacity"][0]["kv_limited_requests"] == 3691875 // 32768


@pytest.mark.parametrize("settings,words", [
    ({"context_length": [1]}, "unknown settings context_length"),
    ({"context_lengths": 32768}, "audit_context_lengths must be a list"),
    ({"context_lengths": [0]}, "audit_context_lengths"),
    ({"mamba_slots_per_request": 0}, "audit_mamba_slots_per_request"),
    ({"spec_min_accept_length": "high"}, "audit_spec_min_accept_length must be a number"),
])
def test_bad_settings_name_the_setting(lab, settings, words):
    with pytest.raises(_audit_checks.AuditError, match=words):
        _audit_checks.audit(lab("au-fp8"), dict(SETTINGS, **settings))
    if set(settings) <= set(_audit_checks.DEFAULTS):  # the role hands over only its own names
        with pytest.raises(AnsibleFilterError, match="llmops.sglang.audit_plan: .*" + words):
            _role_filter(lab("au-fp8"), dict(SETTINGS, **settings))


def _role_filter(facts, settings):
    """The role's one filter as the role calls it: its settings by audit_ name, its results by name, the host."""
    results = dict((name, facts.get(key)) for key, name in _audit_checks.RESULTS)
    named = dict(("audit_" + k, v) for k, v in dict(_audit_checks.DEFAULTS, **settings).items())
    return FilterModule().filters()["audit_plan"](named, "checks", results, facts.get("host"))


def test_the_filter_returns_what_the_function_does(lab):
    assert _role_filter(lab("au-bf16"), SETTINGS) == _audit_checks.audit(lab("au-bf16"), SETTINGS)
    with pytest.raises(AnsibleFilterError, match="settings missing: audit_unit"):
        FilterModule().filters()["audit_plan"]({}, "checks", {}, "h")


def test_the_role_rules_are_the_ones_the_checks_read():
    rules = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_audit_log_rules"]
    assert tuple(r["id"] for r in rules) == _audit_checks.INTERNAL_RULES
    assert all(r["severity"] == "info" for r in rules)


def test_a_check_that_could_not_run_makes_the_host_warn(lab):
    """au-bf16 with the server unreachable: the guard passes, nothing warns, but speculative decoding is unknown."""
    facts = lab("au-bf16")
    facts["server"] = {"changed": False, "errors": ["server_info: connection refused"], "server_info": None}
    result = _audit_checks.audit(facts, SETTINGS)
    assert [s for s in statuses(result).values() if s not in ("ok", "n/a", "info")] == ["unknown"]
    assert result["verdict"] == "WARN"
    assert result["report"]["deployment"]["server_errors"] == ["server_info: connection refused"]
    # the context length falls back to the checkpoint's, the pool size to the log's
    assert by_id(result)["context_capacity"]["short"] == "262144/1730566"


def test_what_set_stats_publishes_for_awx_passes_redaction(real):
    """AWX keeps set_stats with the job: the verdict summary holds no evidence, and a secret that reached a value it does
    hold (here a weight format the log names, and an URL with a password) is masked by _redact, the one rule."""
    facts = real("trap-bf16", "trap-bf16-forged")
    clean = _audit_checks.audit(facts, TRAP)["stats"]
    assert clean == redact(clean) and clean["verdict"] in ("OK", "NOTE", "WARN") and clean["kv"] == "bf16"
    assert clean["source"] == {"unit": TRAP["unit"], "log_file": None, "url": TRAP["url"]}
    token = "hf_" + "Q" * 34
    facts["server"]["server_info"]["quantization"] = token
    leaky = _audit_checks.audit(facts, dict(TRAP, url="http://ops:api_key=%s@127.0.0.1:30000" % token))
    # the modules mask what they return; the stats are masked again, whatever reached the facts
    assert token in leaky["summary"]["line"] + json.dumps(leaky["report"])
    assert token not in json.dumps(leaky["stats"]) and leaky["stats"] == redact(leaky["stats"])
