# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the benchmark role decides around its modules: the baseline, the modules' options, the run's record."""

import json
import pathlib

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.benchmark_plan import FilterModule
from ansible_collections.llmops.sglang.plugins.plugin_utils import _benchmark_report as br
from ansible_collections.llmops.sglang.plugins.module_utils.bench._gate import evaluate_gate, summary_line
from ansible_collections.llmops.sglang.plugins.module_utils.bench._prompts import BenchmarkError
from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import summarize_level
from ansible_collections.llmops.sglang.plugins.modules import accuracy_canary, benchmark

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "benchmark"


def settings(tmp_path=None, **kw):
    out = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    if tmp_path is not None:
        out["benchmark_report_dir"] = str(tmp_path)
    out.update(("benchmark_" + k, v) for k, v in kw.items())
    return out


def module_spec(module):
    """The argument_spec main() gives AnsibleModule (doc fragments' options included)."""
    captured = {}

    class Capture(object):
        def __init__(self, **kwargs):
            captured.update(kwargs["argument_spec"])
            raise StopIteration

    real, module.AnsibleModule = module.AnsibleModule, Capture
    try:
        module.main()
    except StopIteration:
        pass
    finally:
        module.AnsibleModule = real
    return captured


def module_options_of(module):
    return set(module_spec(module))


def measured_result(tok_s, baseline, fail=False):
    """A benchmark result as the module returns it, made by the statistics and gate code from one level."""
    res = {"ok": True, "error": None, "ttft_s": 0.08, "itl_s": [0.01] * 15, "latency_s": 0.23, "decode_s": 0.15, "output_tokens": 16,
           "token_source": "usage", "prompt_tokens": 256, "started": 0.0, "finished": 0.23}
    level = summarize_level(1, [res] * 4, 64.0 / tok_s)
    gate = evaluate_gate([level], baseline, 0.9)
    return {"changed": False, "failed": fail, "invocation": {"module_args": {"api_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}},
            "model": "qwen3.5-397b", "levels": [level], "gate": gate, "error": None, "summary": summary_line([level], gate),
            "chart_svg": "<svg/>"}


# ---------------------------------------------------------------------------------------------
# Baseline


def test_the_bundled_profile_is_the_baseline_of_its_dataset():
    profiles = yaml.safe_load((ROLE / "files" / "baselines.yml").read_text())
    choose = br.choose_baseline
    assert choose(settings(), profiles) == {"ok": True, "baseline": {1: 172, 32: 2100}, "note": "", "error": ""}
    coding = choose(settings(dataset="coding"), profiles)
    assert coding["baseline"] == {} and coding["ok"] and coding["error"] == ""
    assert coding["note"] == "gate off: profile rtxpro6000x8-qwen3.5-397b-nvfp4 was measured with the random dataset"
    given = choose(settings(baseline={"1": 50}, dataset="coding"), None)
    assert given == {"ok": True, "baseline": {"1": 50}, "note": "", "error": ""}  # benchmark_baseline wins, the file is not read
    missing = choose(settings(profile="h200x8"), profiles)
    assert missing["ok"] is False
    assert missing["error"] == ("benchmark_profile h200x8 is not in the baseline file (profiles: rtxpro6000x8-qwen3.5-397b-nvfp4): "
                                "add it to benchmark_baseline_file or set benchmark_baseline")
    assert "(profiles: )" in choose(settings(), {"profiles": None})["error"]
    with pytest.raises(br.BenchmarkError, match="settings must map"):
        choose(None, profiles)
    # the role's one filter: phase plan chooses the same baseline from the results it is handed
    plan = FilterModule().filters()["benchmark_plan"]
    assert plan(settings(dataset="coding"), "plan", {"_benchmark_profiles": profiles}, "h")["baseline"] == coding
    with pytest.raises(AnsibleFilterError, match="benchmark_plan: the role hands over its settings and results as mappings"):
        plan(None, "plan", {}, "h")
    with pytest.raises(AnsibleFilterError, match="benchmark_plan: settings missing: benchmark_url"):
        plan({}, "plan", {}, "h")


# ---------------------------------------------------------------------------------------------
# Module options


def test_every_option_is_the_modules_and_every_setting_the_roles():
    defaults = settings()
    for table, module in ((br.BENCHMARK_OPTIONS, benchmark), (br.CANARY_OPTIONS, accuracy_canary)):
        for option, name in table:
            assert option in module_options_of(module), (module.__name__, option)
            assert "benchmark_" + (name or option) in defaults, name or option
    run_eval = module_spec(accuracy_canary)["run_eval"]["options"]
    for option, name in br.RUN_EVAL_OPTIONS:
        assert option in run_eval and "benchmark_" + name in defaults


def test_options_of_the_defaults(tmp_path):
    opts = FilterModule().filters()["benchmark_plan"](settings(tmp_path, baseline={1: 172}), "plan", {}, "gpu-07")["options"]
    bench, canary = opts["benchmark"], opts["accuracy_canary"]
    assert set(bench) <= module_options_of(benchmark) and set(canary) <= module_options_of(accuracy_canary)
    # empty optional settings are left out, as default(omit, true) did
    for absent in ("api_key", "model", "num_requests", "duration", "tokenizer"):
        assert absent not in bench
    assert "api_key" not in canary and "previous" not in canary
    assert bench["timeout"] == 600 and bench["concurrency"] == [1, 32] and bench["baseline"] == {1: 172}
    assert bench["chart_title"] == "SGLang benchmark: gpu-07" and bench["fail_on_regression"] is False
    assert canary["timeout"] == 900 and canary["checks"] == ["needle", "coding"] and canary["fail_on_failure"] is False
    assert canary["run_eval"] == {"enabled": False, "python": "/opt/sglang/venv/bin/python", "num_examples": 200, "min_score": 0.95}
    keyed = br.module_options(settings(tmp_path, api_key="sk-lab", num_requests=0, duration=30), "gpu-07")
    assert keyed["benchmark"]["api_key"] == keyed["accuracy_canary"]["api_key"] == "sk-lab"
    assert "num_requests" not in keyed["benchmark"] and keyed["benchmark"]["duration"] == 30 and keyed["benchmark"]["baseline"] == {}


def test_the_last_good_canary_answers_are_the_previous_state(tmp_path):
    state = {"version": 1, "hash": "ab12", "answers": {"needle-4096-0.1": "K7QX-4M2D-9PLA"}}
    (tmp_path / "gpu-07").mkdir()
    (tmp_path / "gpu-07" / "canary-state.json").write_text(json.dumps(state, indent=4))
    assert br.module_options(settings(tmp_path), "gpu-07")["accuracy_canary"]["previous"] == state
    (tmp_path / "gpu-07" / "canary-state.json").write_text("{\"version\": 1, \"answers\"")
    with pytest.raises(BenchmarkError, match="canary-state.json is not the canary's JSON state: delete it"):
        br.module_options(settings(tmp_path), "gpu-07")


def test_controller_files_are_read_bounded(tmp_path, monkeypatch):
    big = tmp_path / "history.jsonl"
    big.write_text("x" * 2000)
    monkeypatch.setattr(br, "MAX_FILE_BYTES", 1000)
    with pytest.raises(BenchmarkError, match="history.jsonl is larger than 1000 bytes: move old content out of it"):
        br.read_text(str(big))
    assert br.read_text(str(tmp_path / "absent")) is None


# ---------------------------------------------------------------------------------------------
# The run's record


def test_record_of_a_passing_run_with_the_canary(tmp_path):
    (tmp_path / "gpu-07").mkdir()
    old = [{"time": "2026-11-%02dT00:00:00Z" % d, "output_tok_s": {"1": 170.0}} for d in range(1, 13)]
    (tmp_path / "gpu-07" / "history.jsonl").write_text("\n".join(json.dumps(r) for r in old) + "\n\n")
    result = measured_result(171.0, {1: 172})
    canary = {"changed": False, "invocation": {}, "passed": True, "summary": "needle 6/6, coding 8/8", "hash": "ab12", "state": {}}
    rec = FilterModule().filters()["benchmark_plan"](settings(tmp_path), "record", {"_benchmark_result": result, "_benchmark_canary": canary},
                                                     "gpu-07")
    entry = rec["entry"]
    assert entry["host"] == "gpu-07" and entry["url"] == "http://127.0.0.1:30000" and entry["model"] == "qwen3.5-397b"
    assert entry["output_tok_s"] == {"1": 171.0} and entry["failed_requests"] == 0 and entry["gate"] is True
    assert entry["canary"] == "needle 6/6, coding 8/8" and entry["canary_passed"] is True and entry["canary_hash"] == "ab12"
    assert entry["ttft_p50_ms"] == {"1": 80.0} and entry["time"].endswith("Z") and entry["error"] is None
    assert rec["history"] == old[-10:]  # benchmark_trend_runs
    assert rec["summary"] == "C=1 171 tok/s (99%); gate pass | canary: needle 6/6, coding 8/8" and rec["stats"] == {"gpu-07": rec["summary"]}
    report = rec["report"]
    assert "chart_svg" not in report["benchmark"] and "invocation" not in report["benchmark"] and "invocation" not in report["canary"]
    assert report["trend"] == rec["history"] and report["run"] == entry and report["canary"]["hash"] == "ab12"
    assert rec["chart"] == "<svg/>" and rec["png"] is True
    assert rec["benchmark"] == {"judged": True, "passed": True, "msg": "Benchmark of gpu-07: " + result["summary"]}
    assert rec["canary"] == {"judged": True, "passed": True, "msg": "Accuracy canary of gpu-07: needle 6/6, coding 8/8"}


def test_record_of_failures(tmp_path):
    slow = measured_result(100.0, {1: 172})
    rec = br.run_record(settings(tmp_path, render_png=False), slow, None, "gpu-07", now="2026-12-01T00:00:00Z")
    assert rec["entry"]["gate"] is False and rec["entry"]["canary"] is None and rec["history"] == []
    assert rec["benchmark"]["passed"] is False and rec["benchmark"]["msg"].startswith("Benchmark of gpu-07 failed: C=1 100 tok/s")
    assert rec["canary"]["judged"] is False and rec["report"]["canary"] == {} and rec["png"] is False
    # the module failed before measuring: its message, no levels
    broken = {"failed": True, "msg": "baseline key 'C1' is not a concurrency level (an integer)", "changed": False}
    canary = {"failed": True, "msg": "connection refused at 127.0.0.1:30000", "passed": False}
    rec = br.run_record(settings(tmp_path, fail=False), broken, canary, "gpu-07")
    assert rec["summary"] == ("FAILED: baseline key 'C1' is not a concurrency level (an integer) | canary: FAILED: connection refused "
                              "at 127.0.0.1:30000")
    assert rec["benchmark"] == {"judged": False, "passed": False,
                                "msg": "Benchmark of gpu-07 failed: baseline key 'C1' is not a concurrency level (an integer)"}
    assert rec["canary"]["msg"] == "Accuracy canary of gpu-07 failed: connection refused at 127.0.0.1:30000"
    assert rec["chart"] is None and rec["entry"]["output_tok_s"] == {}
    # benchmark_canary off: a canary result left from elsewhere is not this run's
    assert br.run_record(settings(tmp_path, canary=False), broken, canary, "gpu-07")["entry"]["canary"] is None


def test_a_history_line_that_is_not_json_is_named(tmp_path):
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "history.jsonl").write_text('{"time": "t"}\n{"time": \n')
    with pytest.raises(AnsibleFilterError, match="history.jsonl line 2 is not JSON: repair or delete that line"):
        FilterModule().filters()["benchmark_plan"](settings(tmp_path), "record", {"_benchmark_result": {"changed": False}}, "h")
