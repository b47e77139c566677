# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""monitoring/: the alert rules pass promtool's checks and unit tests (a failing guard fires, a stale one too), and the
rules and the Grafana dashboard read only metrics that verdict_metrics writes (a renamed metric fails here)."""

import json
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.module_utils import _verdict_metrics as vm
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import parse_prometheus
from ansible_collections.llmops.sglang.plugins.plugin_utils import _audit_checks
from ansible_collections.llmops.sglang.plugins.plugin_utils._gpu_preflight_rules import evaluate

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "sglang-alerts.yml"
DASHBOARD = ROOT / "monitoring" / "sglang-dashboard.json"
RULE_TESTS = ROOT / "tests" / "unit" / "monitoring" / "sglang-alerts.test.yml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool is absent: apt-get install prometheus (make host-packages)")
# metric names, not the textfile names the staleness queries match (llmops_sglang_kv_guard\\.prom)
NAME_RE = re.compile(r"\bllmops_sglang_[a-z_]+\b(?!\\*\.prom)")


def promtool(*args):
    run = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False)
    return run.returncode, run.stdout + run.stderr


@needs_promtool
def test_rules_pass_promtool_check():
    rc, out = promtool("check", "rules", str(RULES))
    assert rc == 0 and "SUCCESS: 6 rules found" in out, out


@needs_promtool
def test_rule_unit_tests_pass_and_can_fail(tmp_path):
    rc, out = promtool("test", "rules", str(RULE_TESTS))
    assert rc == 0, out
    # the same tests against rules whose guard alert never fires: promtool must fail them
    broken = tmp_path / "monitoring"
    broken.mkdir()
    (broken / RULES.name).write_text(RULES.read_text().replace("llmops_sglang_kv_guard_ok == 0", "llmops_sglang_kv_guard_ok == 2"))
    nested = tmp_path / "tests" / "unit" / "monitoring"
    nested.mkdir(parents=True)
    (nested / RULE_TESTS.name).write_text(RULE_TESTS.read_text())
    rc, out = promtool("test", "rules", str(nested / RULE_TESTS.name))
    assert rc != 0 and "SGLangKVCacheGuardFailing" in out


@pytest.fixture(scope="module")
def written(fixtures_dir):
    """Every metric name verdict_metrics writes, from the real H200 run's verdicts."""
    real = json.loads((fixtures_dir / "real-sglang" / "sglang-0.5.16-h200-trap-bf16.result.json").read_text())
    base = fixtures_dir / "gpu" / "h200x1"
    preflight = evaluate(*(json.loads((base / n).read_text()) for n in ("gpu_info.json", "cuda_toolkit_info.json")))
    guard = _audit_checks.guard_record(real["clean"]["guard"], {}, {"expected_kv_dtype": "bf16", "min_signals": 3})
    names = set()
    for source, result in (("kv_guard", guard), ("gpu_preflight", preflight), ("canary", real["canary_drift"])):
        names |= set(parse_prometheus(vm.text(source, result, {"unit": "sglang-qwen"}), prefix="llmops_sglang_")["metrics"])
    return names


def test_rules_read_only_written_metrics_and_every_verdict_alerts(written):
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    read = set(NAME_RE.findall(" ".join(r["expr"] for r in rules)))
    assert read and read <= written, read - written
    # each verdict's failure has an alert: the guard, every preflight rule, the canary
    assert {"llmops_sglang_kv_guard_ok", "llmops_sglang_gpu_preflight_check_ok", "llmops_sglang_canary_ok"} <= read
    stale = next(r for r in rules if r["alert"] == "SGLangKVCacheGuardStale")
    assert vm.file_name("kv_guard").replace(".", "\\\\.") in stale["expr"]
    assert all(r["labels"]["severity"] in ("critical", "warning") and r["annotations"]["summary"] for r in rules)


def test_dashboard_reads_only_written_metrics(written):
    dash = json.loads(DASHBOARD.read_text())
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    read = set(NAME_RE.findall(" ".join(exprs)))
    assert read <= written, read - written
    assert {"llmops_sglang_kv_guard_ok", "llmops_sglang_gpu_preflight_ok", "llmops_sglang_canary_ok"} <= read
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert all(t["datasource"]["uid"] == "${datasource}" for p in panels for t in p["targets"])
    assert all("$instance" in e for e in exprs)


@needs_promtool
def test_dashboard_queries_parse(tmp_path):
    """Each dashboard query, with the variables replaced, is valid PromQL (promtool checks it in a recording rule)."""
    exprs = [t["expr"].replace("$instance", ".*") for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", [])]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": "dashboard:q%d" % i, "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    rc, out = promtool("check", "rules", str(path))
    assert rc == 0, out
