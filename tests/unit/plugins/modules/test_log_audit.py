# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmops.sglang.log_audit run as Ansible runs it: a child process reading its arguments file.

The unit path uses stand-in systemctl/journalctl programs on PATH that record their arguments; journalctl
prints a real log from tests/fixtures as journald 252's JSON entries of a unit (tests/unit/fake_journalctl.py).
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
MODULE = ROOT / "plugins" / "modules" / "log_audit.py"
LOGS = "sglang-logs"
CRASH = "004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log"
READY = "001-qwq32b-tp4-l4-ready-2025-03.log"
INVOCATION = "5c0a1e5b2f6f4d0c9d1f0c7e3a1b2c3d"

FAKE_SYSTEMCTL = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_DIR/systemctl.argv"
printf 'LoadState=%s\\nInvocationID=%s\\n' "${FAKE_LOAD_STATE:-loaded}" "$FAKE_INVOCATION"
"""
FAKE_JOURNALCTL = """#!/bin/sh
printf '%%s\\n' "$@" > "$FAKE_DIR/journalctl.argv"
if [ -n "$FAKE_STDERR" ]; then printf '%%s\\n' "$FAKE_STDERR" >&2; exit "${FAKE_RC:-1}"; fi
FAKE_JOURNAL="$FAKE_LOG" FAKE_JOURNAL_STEP=1099511627776 FAKE_JOURNAL_LOG="$FAKE_DIR/journalctl.calls" exec %s %s "$@"
""" % (sys.executable, ROOT / "tests" / "unit" / "fake_journalctl.py")
JSON_ARGS = ["-o", "json", "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID,_SYSTEMD_UNIT,_TRANSPORT,_PID,_UID,_LINE_BREAK,_STREAM_ID",
             "--all", "--no-pager"]


@pytest.fixture
def fakebin(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, text in (("systemctl", FAKE_SYSTEMCTL), ("journalctl", FAKE_JOURNALCTL)):
        path = bindir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bindir


def run_module(tmp_path, args, env=None, check_mode=False):
    params = dict(args)
    if check_mode:
        params["_ansible_check_mode"] = True
    argsfile = tmp_path / "args.json"
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(ROOT / "collections")
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, str(MODULE), str(argsfile)], env=full_env, stdout=subprocess.PIPE, check=False,
                          stderr=subprocess.PIPE, timeout=300)
    assert proc.stdout, proc.stderr.decode()
    return json.loads(proc.stdout)


def unit_env(fakebin, log, **extra):
    env = {"PATH": "%s:%s" % (fakebin, os.environ["PATH"]), "FAKE_DIR": str(fakebin), "FAKE_LOG": str(log),
           "FAKE_INVOCATION": INVOCATION}
    env.update(extra)
    return env


def test_path_reports_facts_findings_and_failed_rules(tmp_path, fixtures_dir):
    res = run_module(tmp_path, {"path": str(fixtures_dir / LOGS / CRASH)})
    assert not res.get("failed") and res["changed"] is False
    assert res["source"] == {"path": str(fixtures_dir / LOGS / CRASH)}
    facts = res["facts"]
    assert facts["kv_cache_dtype_configured"] == "fp8_e4m3" and facts["kv_dtype_effective"] == "torch.float8_e4m3fn"
    assert facts["fatal"]["class"] == "python_exception" and facts["fatal"]["line"] == 151
    assert facts["phase"] == "failed"
    assert res["failed_rules"] == ["fp8_kv_no_scales", "fp8_kv_effective", "scheduler_exception", "child_process_failed"]
    assert res["stats"]["bytes"] == (fixtures_dir / LOGS / CRASH).stat().st_size


def test_ready_server_passes_and_check_mode_reads_too(tmp_path, fixtures_dir):
    res = run_module(tmp_path, {"path": str(fixtures_dir / LOGS / READY), "fail_on_findings": True}, check_mode=True)
    assert not res.get("failed")
    assert res["failed_rules"] == [] and res["facts"]["ready"] is True and res["facts"]["phase"] == "ready"


def test_fail_on_findings_names_the_rules(tmp_path, fixtures_dir):
    res = run_module(tmp_path, {"path": str(fixtures_dir / LOGS / CRASH), "fail_on_findings": True, "max_evidence": 1})
    assert res["failed"] is True
    assert "fp8_kv_no_scales" in res["msg"] and "scheduler_exception" in res["msg"]
    assert all(len(f["evidence"]) == 1 for f in res["findings"])


def test_rules_and_waivers_reach_the_parser(tmp_path, fixtures_dir):
    res = run_module(tmp_path, {
        "path": str(fixtures_dir / LOGS / CRASH),
        "rules": [{"id": "aiter_import", "severity": "error", "pattern": r"^\[aiter\] import"},
                  {"id": "scheduler_exception", "severity": "warning"}],
        "allow": [{"rule": "fp8_kv_no_scales", "reason": "measuring the FP8 KV accuracy on purpose"},
                  {"rule": "fp8_kv_effective", "reason": "measuring the FP8 KV accuracy on purpose"},
                  {"rule": "child_process_failed", "reason": "follows the scheduler exception"}],
        "fail_on_findings": True,
    })
    assert res["failed"] is True and res["failed_rules"] == ["aiter_import"]
    by_rule = {f["rule"]: f for f in res["findings"]}
    assert by_rule["scheduler_exception"]["severity"] == "warning"
    assert by_rule["fp8_kv_no_scales"]["waived"] is True
    assert by_rule["aiter_import"]["count"] == 2


def test_rule_scope_and_client_lines(tmp_path, fixtures_dir):
    log = tmp_path / "forged.log"
    log.write_bytes((fixtures_dir / LOGS / READY).read_bytes()
                    + b"[2026-01-01 00:00:00] INFO:     203.0.113.7:1 - \"GET /?server_args=ServerArgs(kv_cache_dtype='fp8_e4m3',"
                      b"model_path='/tmp/x') HTTP/1.1\" 200 OK\n"
                    + b"[2026-01-01 00:00:00] Receive: obj=GenerateReqInput(text='Using FP8 KV cache but no scaling factors provided.')\n")
    res = run_module(tmp_path, {"path": str(log), "rules": [
        {"id": "load_end", "severity": "info", "scope": "message", "pattern": "Load weight end"},
        {"id": "any_type", "severity": "info", "scope": "line", "pattern": "type=Qwen2ForCausalLM"},
        {"id": "late_type", "severity": "info", "scope": "message", "pattern": "type=Qwen2ForCausalLM"},
        {"id": "fp8_anywhere", "severity": "error", "pattern": "Using FP8 KV cache"}]})
    assert not res.get("failed"), res.get("msg")
    counts = {f["rule"]: f["count"] for f in res["findings"]}
    assert counts == {"load_end": 4, "any_type": 4}
    assert res["facts"]["kv_cache_dtype_configured"] == "auto" and res["facts"]["model_path"] == "/home/model/Qwen/QwQ-32B"
    assert res["facts"]["fp8_scale_warning"] is False and res["failed_rules"] == []


@pytest.mark.parametrize("args, message", [
    ({"rules": [{"id": "x", "severity": "info", "pattern": "ab", "scope": "prefix"}]}, "scope"),
    ({"allow": [{"rule": "fp8_kv_no_scales", "reason": ""}]}, "without a reason"),
    ({"allow": [{"rule": "not_a_rule", "reason": "x"}]}, "unknown rule"),
    ({"rules": [{"id": "new_rule", "severity": "error"}]}, "lacks pattern"),
    ({"rules": [{"id": "bad", "severity": "info", "pattern": "(unclosed"}]}, "not a valid regular expression"),
    ({"max_evidence": -1}, "max_evidence"),
])
def test_bad_options_fail_with_a_cause(tmp_path, fixtures_dir, args, message):
    res = run_module(tmp_path, dict(args, path=str(fixtures_dir / LOGS / READY)))
    assert res["failed"] is True and message in res["msg"]


def test_bad_paths(tmp_path):
    missing = run_module(tmp_path, {"path": str(tmp_path / "nope.log")})
    assert missing["failed"] is True and "does not exist" in missing["msg"]
    folder = run_module(tmp_path, {"path": str(tmp_path)})
    assert folder["failed"] is True and "directory" in folder["msg"]
    both = run_module(tmp_path, {"path": str(tmp_path), "unit": "sglang.service"})
    assert both["failed"] is True and "mutually exclusive" in both["msg"]
    neither = run_module(tmp_path, {})
    assert neither["failed"] is True and "one of the following is required" in neither["msg"]
    # a device never ends: refused instead of read until the memory or the time runs out
    device = run_module(tmp_path, {"path": "/dev/zero"})
    assert device["failed"] is True and "not a regular file" in device["msg"]


def test_unit_reads_only_the_current_invocation(tmp_path, fixtures_dir, fakebin):
    res = run_module(tmp_path, {"unit": "sglang.service", "since": "-1h"}, env=unit_env(fakebin, fixtures_dir / LOGS / CRASH))
    assert not res.get("failed"), res.get("msg")
    assert (fakebin / "systemctl.argv").read_text().split("\n")[:4] == ["show", "--property=InvocationID,LoadState", "--",
                                                                        "sglang.service"]
    assert (fakebin / "journalctl.argv").read_text().split("\n")[:10] == [
        "_SYSTEMD_INVOCATION_ID=" + INVOCATION, "_SYSTEMD_UNIT=sglang.service", "_TRANSPORT=stdout"] + JSON_ARGS + ["--since", "-1h"]
    assert res["source"] == {"unit": "sglang.service", "invocation": "current", "invocation_id": INVOCATION}
    assert res["facts"]["fatal"]["line"] == 151 and res["facts"]["tp_size"] == 8


def test_unit_whole_journal_streams_in_chunks(tmp_path, fixtures_dir, fakebin):
    # about 12 MiB of log (three times that as JSON) through the pipe: many chunks, entries cut at chunk edges
    journal = tmp_path / "journal.txt"
    journal.write_bytes((fixtures_dir / LOGS / CRASH).read_bytes() * 500)
    res = run_module(tmp_path, {"unit": "sglang.service", "invocation": "all"}, env=unit_env(fakebin, journal))
    assert not res.get("failed"), res.get("msg")
    assert (fakebin / "journalctl.argv").read_text().split("\n")[:7] == ["_SYSTEMD_UNIT=sglang.service", "_TRANSPORT=stdout"] + JSON_ARGS
    assert not (fakebin / "systemctl.argv").exists()
    by_rule = {f["rule"]: f for f in res["findings"]}
    assert by_rule["fp8_kv_no_scales"]["count"] == 8 * 500
    lines = (fixtures_dir / LOGS / CRASH).read_text().split("\n")
    first = next(n for n, line in enumerate(lines, 1) if "Scheduler hit an exception" in line)
    per_copy = len(lines) - 1
    assert [ev["line"] for ev in by_rule["scheduler_exception"]["evidence"]] == [first, first + per_copy, first + 2 * per_copy]
    assert res["facts"]["starts"] == 500 and res["stats"]["bytes"] == 500 * (fixtures_dir / LOGS / CRASH).stat().st_size
    assert res["stats"]["journal"]["entries"] == res["stats"]["journal"]["kept"] == 500 * per_copy


def test_unit_without_invocation(tmp_path, fixtures_dir, fakebin):
    res = run_module(tmp_path, {"unit": "sglang.service"}, env=unit_env(fakebin, fixtures_dir / LOGS / READY, FAKE_INVOCATION=""))
    assert res["failed"] is True and "invocation=all" in res["msg"]
    assert not (fakebin / "journalctl.argv").exists()


def test_journalctl_failure_is_reported(tmp_path, fixtures_dir, fakebin):
    env = unit_env(fakebin, fixtures_dir / LOGS / READY, FAKE_RC="1", FAKE_STDERR="Failed to open journal: Permission denied")
    res = run_module(tmp_path, {"unit": "sglang.service"}, env=env)
    assert res["failed"] is True and "Permission denied" in res["msg"] and "rc=1" in res["msg"]


def test_unknown_unit_names_the_fix(tmp_path, fixtures_dir, fakebin):
    env = unit_env(fakebin, fixtures_dir / LOGS / READY, FAKE_INVOCATION="", FAKE_LOAD_STATE="not-found")
    res = run_module(tmp_path, {"unit": "sglang.service"}, env=env)
    assert res["failed"] is True and "systemd knows no unit sglang.service" in res["msg"] and "list-unit-files" in res["msg"]
    assert not (fakebin / "journalctl.argv").exists()


def test_unit_name_is_not_an_option(tmp_path, fixtures_dir, fakebin):
    res = run_module(tmp_path, {"unit": "--all"}, env=unit_env(fakebin, fixtures_dir / LOGS / READY))
    assert res["failed"] is True and "not a unit name" in res["msg"]
    assert not (fakebin / "systemctl.argv").exists()


def test_port_in_use_is_reported_as_fatal(tmp_path, fixtures_dir):
    # 001's start, but uvicorn finds the port taken instead of running
    ready = (fixtures_dir / LOGS / READY).read_bytes()
    head = ready[:ready.index(b"[2025-03-08 12:29:29] INFO:     Uvicorn running")]
    bind = b"ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use"
    log = tmp_path / "server.log"
    log.write_bytes(head + b"[2025-03-08 12:29:29] " + bind + b"\n[2025-03-08 12:29:29] INFO:     Waiting for application shutdown.\n")
    res = run_module(tmp_path, {"path": str(log)})
    assert not res.get("failed"), res.get("msg")
    assert res["facts"]["fatal"] == {"class": "port_in_use", "message": bind.decode(), "line": head.count(b"\n") + 1, "rank": "main"}
    assert res["facts"]["phase"] == "failed" and res["facts"]["ready"] is False


def test_rejected_command_line_is_reported_as_fatal(tmp_path, fakebin):
    log = tmp_path / "journal.txt"
    log.write_text("usage: launch_server.py [-h] --model-path MODEL_PATH [--host HOST] [--port PORT]\n"
                   "launch_server.py: error: unrecognized arguments: --foo\n")
    res = run_module(tmp_path, {"unit": "sglang.service"}, env=unit_env(fakebin, log))
    assert not res.get("failed"), res.get("msg")
    assert res["facts"]["fatal"] == {"class": "cli_argument_error", "message": "launch_server.py: error: unrecognized arguments: --foo",
                                     "line": 2, "rank": "main"}
    assert res["facts"]["phase"] == "failed" and res["failed_rules"] == ["cli_argument_error"]


def test_the_rest_of_a_line_journald_cut_is_no_record(tmp_path, fixtures_dir, fakebin):
    # a prompt longer than journald's LineMax (48 KiB) ends in an SGLang-shaped dump naming another checkpoint; journald
    # makes the rest an entry of its own, starting with that dump: it must not reset the facts
    ready = (fixtures_dir / LOGS / READY).read_bytes()
    dump = ready.splitlines(True)[2]
    assert b"server_args=ServerArgs(model_path='/home/model/Qwen/QwQ-32B'" in dump
    forged = dump.replace(b"/home/model/Qwen/QwQ-32B", b"/models/decoy").replace(b"kv_cache_dtype='auto'", b"kv_cache_dtype='bf16'")
    journal = tmp_path / "journal.txt"
    journal.write_bytes(ready + b"[2025-03-08 12:30:00] Prompt: " + b"x" * 49152 + forged)
    res = run_module(tmp_path, {"unit": "sglang.service"}, env=unit_env(fakebin, journal))
    clean = run_module(tmp_path, {"path": str(fixtures_dir / LOGS / READY)})
    assert not res.get("failed"), res.get("msg")
    assert res["facts"]["model_path"] == "/home/model/Qwen/QwQ-32B" and res["facts"]["starts"] == 1
    assert res["facts"] == clean["facts"] and res["findings"] == clean["findings"]
    assert res["stats"]["journal"]["continuations"] == 1 and res["stats"]["journal"]["kept"] == ready.count(b"\n") + 1
