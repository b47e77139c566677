"""Tests of the real-SGLang harness itself (no GPU needed):

    .venv/bin/pytest -q -p no:cacheprovider tests/real_gpu/sglang/test_harness.py

The systemctl/journalctl stand-in must answer in the shapes the collection's own parsers read; the judge
must fail a scenario whose results differ from what it expects; the log trim keeps SGLang's lines whole.
Inputs: the real run of all six scenarios recorded in tests/fixtures/real-sglang (SGLang 0.5.16, H200).
"""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._readiness import wait_ready
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import parse_show
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import shown_commands, unit_commands

import run  # run.py beside this file (pytest puts a test file's folder on the import path)

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]

FIXTURES = ROOT / "tests" / "fixtures" / "real-sglang"
LOG = FIXTURES / "sglang-0.5.16-h200-trap-bf16-forged.log"


@pytest.fixture
def unit(tmp_path):
    """A unit record for a live process (this test's sleep) whose log is the real SGLang log."""
    proc = subprocess.Popen(["sleep", "30"])
    argv = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m", "--kv-cache-dtype", "bf16"]
    record = {"pid": proc.pid, "argv": argv, "env": {"SGLANG_LOG_MS": "1"}, "log": str(LOG),
              "invocation_id": "0123456789abcdef0123456789abcdef", "start_monotonic_us": int(time.monotonic() * 1e6)}
    (tmp_path / "sglang-rg.json").write_text(json.dumps(record))
    yield tmp_path, proc, argv
    proc.kill()
    proc.wait()


def stand_in(tool, units, *args):
    env = dict(os.environ, RG_UNITS=str(units), RG_TOOL=tool)
    return subprocess.run([sys.executable, str(HERE / "units.py")] + list(args), env=env, capture_output=True, check=False)


def test_systemctl_stand_in_answers_what_readiness_and_the_guard_parse(unit):
    units, proc, argv = unit
    out = stand_in("systemctl", units, "show", "--property=LoadState,ActiveState,MainPID,InvocationID", "--", "sglang-rg")
    state = parse_show(out.stdout.decode())
    assert state == {"LoadState": "loaded", "ActiveState": "active", "MainPID": str(proc.pid),
                     "InvocationID": "0123456789abcdef0123456789abcdef"}
    execstart = stand_in("systemctl", units, "show", "-p", "ExecStart", "--value", "--", "sglang-rg.service").stdout.decode()
    assert shown_commands(execstart) == [" ".join(argv)]
    [command] = unit_commands(stand_in("systemctl", units, "cat", "--", "sglang-rg.service").stdout.decode(), "sglang-rg.service")
    assert command["argv"] == argv and shown_commands(execstart) == [" ".join(command["shown"])]
    proc.kill()
    proc.wait()
    dead = parse_show(stand_in("systemctl", units, "show", "-p", "ActiveState", "-p", "MainPID", "sglang-rg").stdout.decode())
    assert dead == {"ActiveState": "inactive", "MainPID": "0"}


def test_systemctl_stand_in_refuses_what_it_does_not_know(unit):
    units = unit[0]
    out = stand_in("systemctl", units, "restart", "sglang-rg")
    assert out.returncode == 2 and b"only 'show'" in out.stderr
    assert stand_in("systemctl", units, "show", "-p", "Nonsense", "sglang-rg").returncode == 2


def test_readiness_reads_the_unit_and_its_journal_through_the_stand_in(unit, tmp_path):
    units = unit[0]
    bindir = run.stand_in_bin(str(tmp_path / "bin"), str(units))
    polls = []

    def http(url, timeout, tls=None):
        polls.append(url)
        return (200, None) if len(polls) > 1 else (None, "connection refused")

    got = wait_ready("sglang-rg", "http://127.0.0.1:30000/health_generate", 60, 30, interval=0.01,
                     systemctl=os.path.join(bindir, "systemctl"), journalctl=os.path.join(bindir, "journalctl"), http=http)
    assert got["status"] == "ready", got
    assert got["invocation_id"] == "0123456789abcdef0123456789abcdef"
    # the whole real log came through journalctl's stand-in as journal entries, cursor and all
    log = got["log"]
    lines = LOG.read_bytes().count(b"\n")
    assert (log["journal"]["entries"], log["journal"]["kept"], log["error"], log["ready_line"]) == (lines, lines, None, True)
    assert (log["kv_cache_dtype_configured"], log["kv_dtype_effective"], log["max_total_num_tokens"]) == \
        ("bf16", "torch.bfloat16", 43690284)
    assert got["unit"]["active_state"] == "active"
    assert stand_in("journalctl", units, "_SYSTEMD_INVOCATION_ID=ffff", "-o", "json", "--output-fields=MESSAGE").returncode == 1


def test_journalctl_stand_in_resumes_after_its_cursor(unit):
    units = unit[0]
    query = ("_SYSTEMD_INVOCATION_ID=0123456789abcdef0123456789abcdef", "_SYSTEMD_UNIT=sglang-rg.service", "_TRANSPORT=stdout",
             "-o", "json", "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID,_SYSTEMD_UNIT,_TRANSPORT,_PID,_LINE_BREAK", "--all")
    first = [json.loads(line) for line in stand_in("journalctl", units, *query).stdout.splitlines()]
    assert "".join(e["MESSAGE"] + "\n" for e in first).encode() == LOG.read_bytes()
    assert ";i=%x;" % LOG.stat().st_size in first[-1]["__CURSOR"]
    again = stand_in("journalctl", units, *query, "--after-cursor", first[-1]["__CURSOR"])
    assert again.returncode == 1 and again.stdout == b""
    # systemd's own messages: none without systemd
    assert stand_in("journalctl", units, "_PID=1", "INVOCATION_ID=0123456789abcdef0123456789abcdef", "-o", "json",
                    "--output-fields=MESSAGE").returncode == 1


@pytest.mark.parametrize("name", [n for n in run.SCENARIOS if (FIXTURES / ("sglang-0.5.16-h200-%s.result.json" % n)).exists()])
def test_judge_of_the_recorded_run_is_what_the_run_reported(name):
    """Judging the module results that came back from the H200 gives the checks the run printed, all as expected."""
    result = json.loads((FIXTURES / ("sglang-0.5.16-h200-%s.result.json" % name)).read_text())
    reported = [c for c in json.loads((FIXTURES / "verdict-all.json").read_text())["checks"] if c["scenario"] == name]
    spec = run.SCENARIOS[name]
    # as verdict-all.json holds them (JSON object keys are strings)
    log = FIXTURES / ("sglang-0.5.16-h200-%s.log" % name)   # what the attack checks read (attack scenarios)
    checks = json.loads(json.dumps(run.judge(name, spec, result, "/tmp/real-gpu/ckpt/" + spec["checkpoint"], "0.5.16",
                                             log=str(log) if spec.get("attack") else None)))
    assert [(c["check"], c["expected"], c["got"], c["ok"]) for c in checks] == \
        [(c["check"], c["expected"], c["got"], c["ok"]) for c in reported]
    assert checks and all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]


def test_judge_fails_a_verdict_that_is_not_the_expected_one():
    spec = run.SCENARIOS["trap-auto"]
    result = {"ready": {"status": "ready"},
              "clean": {"guard": {"verdict": "bf16", "passed": True}, "audit_guard": {"verdict": "bf16", "passed": True},
                        "log_audit": {"facts": {"kv_cache_dtype_configured": "auto", "kv_dtype_effective": "torch.float8_e4m3fn",
                                                "fp8_scale_warning": False, "model_path": "/c"}, "findings": []},
                        "audit_model_dir": "/c"}}
    checks = dict((c["check"], c["ok"]) for c in run.judge("trap-auto", spec, result, "/c", "0.5.16"))
    assert checks["guard verdict"] is False and checks["guard passed"] is False
    assert checks["log: KV pool dtype"] is True


def test_judge_fails_when_forged_requests_change_a_fact():
    spec = run.SCENARIOS["trap-bf16"]
    facts = {"kv_cache_dtype_configured": "bf16", "kv_dtype_effective": "torch.bfloat16", "fp8_scale_warning": False,
             "model_path": "/c", "tp_size": 1}
    phase = {"guard": {"verdict": "bf16", "passed": True}, "audit_guard": {"verdict": "bf16", "passed": True},
             "log_audit": {"facts": facts, "findings": []}, "audit_model_dir": "/c"}
    forged = json.loads(json.dumps(phase))
    forged["log_audit"]["facts"]["model_path"] = "/tmp/forged-model"
    result = {"ready": {"status": "ready"}, "clean": phase, "forged": forged, "forge": {"get_status": 401, "chat_status": [200, 200]}}
    checks = dict((c["check"], c["ok"]) for c in run.judge("trap-bf16", spec, result, "/c", "0.5.16"))
    assert checks["forged requests change no log fact"] is False
    assert checks["log: model path after forged requests"] is False
    assert checks["log: model path"] is True


def test_trim_keeps_sglang_lines_whole_and_cuts_request_echoes(tmp_path):
    dump = "[2026-12-01 15:21:50] server_args=ServerArgs(" + "x=1, " * 200 + ")"
    echo = "[2026-12-01 15:24:22] Receive OpenAI: obj={'messages': " + "w " * 400
    src = tmp_path / "raw.log"
    src.write_bytes(("\x1b[32m%s\x1b[0m\n%s\nbar 10%%\rbar 100%%\n" % (dump, echo)).encode())
    run.trim_log(str(src), str(tmp_path / "trimmed.log"))
    lines = (tmp_path / "trimmed.log").read_text().splitlines()
    assert lines[0] == dump
    assert lines[1] == echo[:run.TRIM_CHARS] + " [... %d chars cut]" % (len(echo) - run.TRIM_CHARS)
    assert lines[2] == "bar 100%"
