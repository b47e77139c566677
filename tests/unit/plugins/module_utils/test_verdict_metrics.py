# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_verdict_metrics: the guard's, the preflight's and the canary's verdicts from real runs as textfile metrics, and the
atomic, idempotent write with its heartbeat."""

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _verdict_metrics as vm
from ansible_collections.llmops.sglang.plugins.module_utils._prometheus import parse_prometheus
from ansible_collections.llmops.sglang.plugins.plugin_utils import _audit_checks
from ansible_collections.llmops.sglang.plugins.plugin_utils._gpu_preflight_rules import evaluate

GUARD_SETTINGS = {"expected_kv_dtype": "bf16", "min_signals": 3}


@pytest.fixture(scope="module")
def real(fixtures_dir):
    def load(scenario):
        return json.loads((fixtures_dir / "real-sglang" / ("sglang-0.5.16-h200-%s.result.json" % scenario)).read_text())
    return load


def samples(text):
    out = parse_prometheus(text, prefix="llmops_sglang_")
    assert out["malformed_lines"] == 0
    return out["metrics"]


def value(metrics, name, **labels):
    found = [s["value"] for s in metrics[name] if all(s["labels"].get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, metrics.get(name))
    return found[0]


@pytest.mark.parametrize("scenario, ok, kv", [("trap-fp8", 0.0, "fp8"), ("trap-bf16", 1.0, "bf16")])
def test_kv_guard_of_the_real_h200_runs(real, scenario, ok, kv):
    guard = _audit_checks.guard_record(real(scenario)["clean"]["guard"], {}, GUARD_SETTINGS)
    m = samples(vm.text("kv_guard", guard, {"unit": "sglang-qwen"}))
    assert value(m, "llmops_sglang_kv_guard_ok", unit="sglang-qwen", kv_dtype=kv, expected_kv_dtype="bf16") == ok
    assert value(m, "llmops_sglang_kv_guard_signals_available") == guard["available_signals"] >= 3
    assert value(m, "llmops_sglang_kv_guard_waived") == 0.0
    signals = dict((s["labels"]["signal"], s["labels"]["verdict"]) for s in m["llmops_sglang_kv_guard_signal_info"])
    assert signals == dict((s["name"], s["verdict"]) for s in guard["signals"])


def test_a_guard_that_could_not_run_is_not_ok():
    m = samples(vm.text("kv_guard", _audit_checks.guard_record(None, {}, GUARD_SETTINGS), {"unit": "u"}))
    assert value(m, "llmops_sglang_kv_guard_ok", kv_dtype="error") == 0.0
    assert "llmops_sglang_kv_guard_signal_info" not in m


def test_preflight_of_the_real_h200(fixtures_dir):
    base = fixtures_dir / "gpu" / "h200x1"
    gpu, toolkit = (json.loads((base / name).read_text()) for name in ("gpu_info.json", "cuda_toolkit_info.json"))
    result = evaluate(gpu, toolkit)  # one H200 against the reference's 8 SM 12.0 GPUs: fails
    m = samples(vm.text("gpu_preflight", result))
    assert value(m, "llmops_sglang_gpu_preflight_ok") == 0.0
    failed = sorted(s["labels"]["rule"] for s in m["llmops_sglang_gpu_preflight_check_ok"] if s["value"] == 0.0)
    assert failed == sorted(["gpu_count", "compute_capability"])
    assert len(m["llmops_sglang_gpu_preflight_check_ok"]) == len(result["checks"])
    passing = evaluate(gpu, json.loads((base / "cuda_toolkit_info_archs.json").read_text()),
                       {"gpu_count": 1, "compute_capability": "9.0", "toolkit_archs": ["sm_90a"]})
    assert value(samples(vm.text("gpu_preflight", passing)), "llmops_sglang_gpu_preflight_ok") == 1.0


def test_canary_of_the_real_h200_run(real):
    canary = real("trap-bf16")["canary_drift"]
    m = samples(vm.text("canary", canary))
    assert value(m, "llmops_sglang_canary_ok") == 0.0
    assert m["llmops_sglang_canary_ok"][0]["labels"] == {"model": canary["model"]}
    assert value(m, "llmops_sglang_canary_score", check="needle") == canary["checks"]["needle"]["score"]
    assert value(m, "llmops_sglang_canary_threshold", check="coding") == 1.0
    assert value(m, "llmops_sglang_canary_drift") == 1.0
    first = samples(vm.text("canary", real("trap-bf16")["canary_first"]))
    assert "llmops_sglang_canary_drift" not in first  # nothing to compare on a first run


@pytest.mark.parametrize("source, result, labels, cause", [
    ("nope", {"a": 1}, {}, "source 'nope'"),
    ("kv_guard", {}, {}, "empty or not a dict"),
    ("kv_guard", {"passed": True}, {"bad-name": "x"}, "label name 'bad-name'"),
    ("kv_guard", {"passed": True}, {"unit": [3]}, "dict of strings or numbers"),
])
def test_bad_inputs_name_the_cause(source, result, labels, cause):
    with pytest.raises(vm.MetricsError, match=cause):
        vm.text(source, result, labels)


def test_write_is_atomic_idempotent_and_beats(tmp_path):
    text = vm.text("kv_guard", {"passed": False, "verdict": "fp8", "expected": "bf16"}, {"unit": 'we"ird\\unit'})
    first = vm.publish(str(tmp_path), "kv_guard", text, check_mode=False)
    path = tmp_path / "llmops_sglang_kv_guard.prom"
    assert first["changed"] and first["written"] and path.read_text() == text
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(tmp_path)) == ["llmops_sglang_kv_guard.prom"]  # no temporary file left
    os.utime(path, (1000, 1000))
    again = vm.publish(str(tmp_path), "kv_guard", text, check_mode=True)
    assert not again["changed"] and not again["heartbeat"] and path.stat().st_mtime == 1000
    again = vm.publish(str(tmp_path), "kv_guard", text, check_mode=False, now=5000)
    assert not again["changed"] and again["heartbeat"] and path.stat().st_mtime == 5000
    passed = text.replace("} 0\n", "} 1\n", 1)
    would = vm.publish(str(tmp_path), "kv_guard", passed, check_mode=True)
    assert would["changed"] and not would["written"] and path.read_text() == text and would["before"] == text
    os.chmod(path, 0o600)  # node_exporter could not read it
    assert vm.publish(str(tmp_path), "kv_guard", text, check_mode=False)["written"]
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_missing_directory_writes_nothing_and_says_why(tmp_path):
    out = vm.publish(str(tmp_path / "absent"), "canary", "x 1\n", check_mode=False)
    assert not out["changed"] and "install prometheus-node-exporter" in out["not_written"]
    assert not (tmp_path / "absent").exists()


def test_unwritable_directory_is_an_error_with_the_fix(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes to a read-only directory")
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(vm.MetricsError, match="become: true"):
            vm.publish(str(tmp_path), "canary", "x 1\n", check_mode=False)
    finally:
        tmp_path.chmod(0o700)


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian package prometheus; make host-packages) is absent")
def test_every_source_passes_promtool(real, fixtures_dir):
    guard = _audit_checks.guard_record(real("trap-fp8")["clean"]["guard"], {}, GUARD_SETTINGS)
    base = fixtures_dir / "gpu" / "h200x1"
    preflight = evaluate(*(json.loads((base / n).read_text()) for n in ("gpu_info.json", "cuda_toolkit_info.json")))
    for source, result in (("kv_guard", guard), ("gpu_preflight", preflight), ("canary", real("trap-bf16")["canary_drift"])):
        run = subprocess.run(["promtool", "check", "metrics"], input=vm.text(source, result, {"unit": "sglang-qwen"}).encode(),
                             capture_output=True, timeout=60, check=False)
        assert run.returncode == 0, (source, run.stdout + run.stderr)


@pytest.mark.parametrize("directory", [None, ""])
def test_no_directory_means_metrics_off(directory):
    out = vm.publish(directory, "kv_guard", "x 1\n", check_mode=False)
    assert not out["changed"] and not out["written"] and "metrics are off" in out["not_written"]


def test_a_null_label_is_left_out():
    """A server audited from a log file has no unit: its guard metrics carry no unit label, never unit="None"."""
    text = vm.text("kv_guard", {"passed": False, "verdict": "fp8", "expected_kv_dtype": "bf16"}, {"unit": None, "host": 7})
    samples = parse_prometheus(text, prefix="llmops_sglang_")["metrics"]
    assert samples and all(s["labels"].get("host") == "7" and "unit" not in s["labels"] for series in samples.values() for s in series)
