# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kv_cache_guard module end to end: the lab's SGLang simulator, the log parser, a fake systemctl."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log import _log_audit
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import command_line
from ansible_collections.llmops.sglang.plugins.modules import kv_cache_guard

from sim_harness import free_port  # tests/unit/sim_harness.py

ROOT = pathlib.Path(__file__).resolve().parents[4]
SIM = ROOT / "tests" / "lab" / "sglang_sim" / "sglang_sim.py"
LAB = "qwen3.5-397b-a17b-nvfp4"
KEY = "sk-guard-test-5d1e"
GIB = 1 << 30


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            kv_cache_guard.main()
    return json.loads(capsys.readouterr().out)


def rows(res):
    return {s["name"]: s for s in res["signals"]}


@pytest.fixture
def lab(fixtures_dir):
    return str(fixtures_dir / "checkpoints" / LAB)


@pytest.fixture
def sim(tmp_path):
    """Start the simulator with the reference flags; yields (argv, url, log path) once it is ready."""
    procs = []

    def _start(ckpt, kv=None, mtp=False):
        port = free_port()
        argv = [sys.executable, str(SIM), "--model-path", ckpt, "--tp", "8", "--quantization", "modelopt_fp4",
                "--moe-runner-backend", "flashinfer_cutlass", "--attention-backend", "triton",
                "--mem-fraction-static", "0.85", "--host", "127.0.0.1", "--port", str(port), "--api-key", KEY]
        argv += ["--kv-cache-dtype", kv] if kv else []
        argv += ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", "4"] if mtp else []
        log = tmp_path / ("sglang-%d.log" % len(procs))
        env = dict(os.environ, SGLANG_SIM_LOAD_SECONDS="0.1", SGLANG_SIM_WARMUP_SECONDS="0.1")
        with open(log, "wb") as out:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env))
        end = time.time() + 30
        while b"ready to roll" not in log.read_bytes():
            assert procs[-1].poll() is None and time.time() < end, log.read_text()
            time.sleep(0.05)
        return argv, "http://127.0.0.1:%d" % port, log

    yield _start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_silent_fp8_on_a_live_server_fails_with_the_table(sim, lab, capsys):
    argv, url, log = sim(lab)  # no --kv-cache-dtype: auto
    facts = _log_audit.audit_path(str(log))["facts"]
    assert facts["fp8_scale_warning"] is False  # the target model never warns for auto
    res = run({"argv": argv, "checkpoint": lab, "url": url, "api_key": KEY, "log_facts": facts}, capsys)
    sig = rows(res)
    assert res["failed"] is True and res["verdict"] == "fp8" and res["passed"] is False
    # like SGLang 0.5.23, the simulator's /server_info says auto: only the checkpoint and the log show FP8
    assert sig["server"]["verdict"] == "unknown" and sig["log_dtype"]["verdict"] == "fp8"
    assert sig["pool_bytes"]["verdict"] == "fp8" and "1.000 bytes/element" in sig["pool_bytes"]["evidence"]
    assert sig["checkpoint"]["verdict"] == "fp8" and sig["checkpoint"]["counted"]
    assert sig["fp8_warning"]["verdict"] == "unknown" and res["available_signals"] == 3
    assert "signal      | verdict | counted | evidence" in res["msg"]
    assert "Fix: launch SGLang with --kv-cache-dtype bf16" in res["msg"] and "scale 1.0" in res["msg"]
    assert KEY not in json.dumps(res)
    assert res["argv"][res["argv"].index("--api-key") + 1] == "********"


def test_bf16_on_a_live_server_with_mtp_passes(sim, lab, capsys):
    argv, url, log = sim(lab, kv="bf16", mtp=True)
    facts = _log_audit.audit_path(str(log))["facts"]
    res = run({"argv": argv, "checkpoint": lab, "url": url, "api_key": KEY, "log_facts": facts}, capsys)
    assert not res.get("failed"), res.get("msg")
    assert res["verdict"] == "bf16" and res["available_signals"] == 4
    assert rows(res)["pool_bytes"]["verdict"] == "bf16" and "8 draft pool(s) ignored" in rows(res)["pool_bytes"]["evidence"]
    assert res["server"]["ok"] is True and res["msg"].startswith("KV cache guard passed")


def test_a_server_started_by_hand_is_judged_on_its_log_file_and_its_answer(sim, lab, capsys):
    """No unit, no argv: the launch command is the live server's (/server_info launch_command); the file it writes
    counts once. The file of an earlier start (FP8) next to the live bf16 server counts for nothing and disagrees."""
    _argv, url, log = sim(lab, kv="bf16")
    facts = _log_audit.audit_path(str(log))["facts"]
    res = run({"url": url, "api_key": KEY, "log_facts": facts, "log_source": "file"}, capsys)
    assert not res.get("failed"), res.get("msg")
    assert [s["name"] for s in res["signals"] if s["counted"]] == ["argv", "server", "log_dtype"]
    assert rows(res)["argv"]["source"].startswith("/server_info launch_command")
    _argv, _url, earlier = sim(lab, kv="fp8_e4m3")
    stale = _log_audit.audit_path(str(earlier))["facts"]
    res = run({"url": url, "api_key": KEY, "log_facts": stale, "log_source": "file"}, capsys)
    assert res["failed"] is True and res["verdict"] == "mixed"
    assert [s["name"] for s in res["signals"] if s["counted"]] == ["argv", "server"]
    assert any("is not the live server's" in note for note in res["notes"])
    assert KEY not in json.dumps(res)


def test_wrong_api_key_leaves_the_server_unknown(sim, lab, capsys):
    argv, url, log = sim(lab, kv="bf16")
    res = run({"argv": argv, "checkpoint": lab, "url": url, "api_key": "wrong",
               "log_facts": _log_audit.audit_path(str(log))["facts"]}, capsys)
    # /server_info refused the key: the server row falls back to the log's dump, a dict, so SGLang's resolved
    # server args (0.5.19 and newer); with argv, log_dtype and pool_bytes that is still four signals
    assert not res.get("failed") and res["available_signals"] == 4
    assert res["server"]["ok"] is False and "unauthorized" in str(res["server"]).lower()
    assert rows(res)["server"]["verdict"] == "bf16" and rows(res)["server"]["evidence"].startswith("log server_args dump")


# --- a log with two starts, parsed by the real log parser ------------------------------------


def invocation(ts, kv_flag, effective, bytes_per_element, tokens):
    """One SGLang start at TP8 in the real line formats (dump, TP0 dtype line, pools, ready)."""
    k = tokens * 15 * 256 * bytes_per_element / GIB
    draft = tokens * 256 * bytes_per_element / GIB
    lines = ["[%s] server_args=ServerArgs(model_path='/models/Qwen3.5-397B-A17B-NVFP4', tokenizer_path="
             "'/models/Qwen3.5-397B-A17B-NVFP4', tokenizer_mode='auto', kv_cache_dtype='%s', quantization=None, "
             "tp_size=8, speculative_algorithm='EAGLE', api_key='%s')" % (ts, kv_flag, KEY)]
    lines += ["[%s TP%d] Load weight end. elapsed=181.20 s, type=Qwen3_5MoeForConditionalGeneration, quant=modelopt_fp4, "
              "quant_algo=NVFP4, avail mem=64.49 GB, mem usage=29.90 GB." % (ts, r) for r in range(8)]
    lines.append("[%s TP0] Using KV cache dtype: %s" % (ts, effective))
    lines += ["[%s TP%d] KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB" % (ts, r, tokens, k, k)
              for r in range(8)]
    lines += ["[%s TP%d] KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB" % (ts, r, tokens, draft, draft)
              for r in range(8)]
    lines.append("[%s TP0] max_total_num_tokens=%d, chunked_prefill_size=2048, max_prefill_tokens=16384, "
                 "max_running_requests=48, context_len=262144, available_gpu_mem=4.10 GB" % (ts, tokens))
    lines.append("[%s] The server is fired up and ready to roll!" % ts)
    return lines


def test_host_switched_from_fp8_to_bf16_passes_on_its_current_invocation(lab, tmp_path, capsys):
    # one file holding both starts: after the first start was ready, a client could have written the second one's
    # lines, so they are findings and the facts stay the first start's (the journal is read per invocation)
    both = tmp_path / "both.log"
    both.write_text("\n".join(invocation("2026-11-30 09:00:00", "auto", "torch.float8_e4m3fn", 1, 3700000)
                              + invocation("2026-11-30 11:00:00", "bf16", "torch.bfloat16", 2, 1850000)) + "\n")
    whole = _log_audit.audit_path(str(both))
    assert whole["facts"]["kv_cache_dtype_configured"] == "auto"
    assert "startup_record_after_ready" in [f["rule"] for f in whole["findings"]]
    # the current invocation, as the journal reader hands it over
    log = tmp_path / "journal.log"
    log.write_text("\n".join(invocation("2026-11-30 11:00:00", "bf16", "torch.bfloat16", 2, 1850000)) + "\n")
    facts = _log_audit.audit_path(str(log))["facts"]
    assert facts["kv_cache_dtype_configured"] == "bf16"
    res = run({"checkpoint": lab, "url": "", "log_facts": facts}, capsys)
    assert not res.get("failed"), res.get("msg")
    sig = rows(res)
    assert "log ServerArgs dump" in sig["argv"]["evidence"] and sig["argv"]["verdict"] == "bf16"
    assert [s["name"] for s in res["signals"] if s["counted"]] == ["argv", "log_dtype", "pool_bytes"]
    assert res["server"] is None

    # the first start alone is the silent FP8 server
    first = tmp_path / "first.log"
    first.write_text("\n".join(invocation("2026-11-30 09:00:00", "auto", "torch.float8_e4m3fn", 1, 3700000)) + "\n")
    res = run({"checkpoint": lab, "url": "", "log_facts": _log_audit.audit_path(str(first))["facts"]}, capsys)
    assert res["failed"] and res["verdict"] == "fp8" and res["available_signals"] == 3


# --- the unit's ExecStart through systemctl -----------------------------------------------------


def fake_systemctl(tmp_path, monkeypatch, output, rc=0, err="", cat=None):
    """A systemctl that answers show with output (and err, rc) and cat with cat (default: output)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (tmp_path / "out.txt").write_text(output)
    (tmp_path / "cat.txt").write_text(output if cat is None else cat)
    (tmp_path / "err.txt").write_text(err)
    script = bindir / "systemctl"
    script.write_text("#!/bin/sh\necho \"$@\" >> %s/args.txt\nif [ \"$1\" = cat ]; then cat %s/cat.txt; else cat %s/out.txt; fi\n"
                      "cat %s/err.txt >&2\nexit %d\n" % (tmp_path, tmp_path, tmp_path, tmp_path, rc))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))


# a unit file as systemctl cat shows it (the lab checkpoint's path has a space, as systemd keeps it one word) and the
# shape of tests/fixtures/tool-outputs/systemctl-show/show-execstart.txt for it (argv[] joined by spaces)
def unit_files(model, flag):
    words = ["/opt/sglang/.venv/bin/python", "-m", "sglang.launch_server", "--model-path", model, "--tp", "8"] + \
        (["--kv-cache-dtype", flag] if flag else []) + ["--api-key", KEY]
    cat = "# /etc/systemd/system/sglang.service\n[Service]\nExecStart=%s\n" % command_line(words, breaks={3, 5, 7})
    show = ("ExecStart={ path=%s ; argv[]=%s ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; "
            "code=(null) ; status=0/0 }\nMainPID=0\nLoadState=loaded\n" % (words[0], " ".join(words)))
    return show, cat


def spaced(lab, tmp_path):
    """The lab checkpoint under a directory name with a space."""
    path = tmp_path / "models dir" / "ckpt"
    path.parent.mkdir()
    shutil.copytree(lab, path)
    return str(path)


SHOW = "tool-outputs/systemctl-show/"


def test_unit_execstart_is_read_as_systemd_splits_it(lab, tmp_path, monkeypatch, capsys):
    model = spaced(lab, tmp_path)
    show, cat = unit_files(model, "bf16")
    fake_systemctl(tmp_path, monkeypatch, show, cat=cat)
    res = run({"unit": "sglang.service", "url": "", "min_signals": 1}, capsys)
    calls = (tmp_path / "args.txt").read_text().splitlines()
    assert calls == ["show --property=ExecStart,MainPID,LoadState -- sglang.service", "cat -- sglang.service"]
    assert not res.get("failed"), res["msg"]
    assert rows(res)["argv"]["verdict"] == "bf16" and "unit sglang.service ExecStart: --kv-cache-dtype bf16" in rows(res)["argv"]["evidence"]
    # the checkpoint judged is the unit's --model-path, one word with its space, not a checkpoint option
    assert res["model"]["checkpoint"] == model and res["model"]["source"] == "argv"
    assert rows(res)["checkpoint"]["verdict"] == "bf16" and model in res["argv"]
    assert KEY not in json.dumps(res)


@pytest.fixture
def process(lab):
    """A running process with SGLang-like flags (its /proc/PID/cmdline is the argv below)."""
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "--model-path", lab, "--kv-cache-dtype", "bf16"]
    proc = subprocess.Popen(argv)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(open("/proc/%d/cmdline" % proc.pid, "rb").read().split(b"\x00")) < len(argv):
        time.sleep(0.05)
    yield proc, argv
    proc.kill()
    proc.wait()


def unit_for(words, pid):
    cat = "# /etc/systemd/system/sglang.service\n[Service]\nExecStart=%s\n" % command_line(words, breaks={3})
    show = ("ExecStart={ path=%s ; argv[]=%s ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=%d ; "
            "code=(null) ; status=0/0 }\nMainPID=%d\nLoadState=loaded\n" % (words[0], " ".join(words), pid, pid))
    return show, cat


def test_the_unit_is_checked_against_the_running_process(lab, process, tmp_path, monkeypatch, capsys):
    proc, argv = process
    show, cat = unit_for(argv, proc.pid)
    fake_systemctl(tmp_path, monkeypatch, show, cat=cat)
    res = run({"unit": "sglang.service", "url": "", "min_signals": 1}, capsys)
    assert rows(res)["argv"]["verdict"] == "bf16" and res["notes"] == [] and res["argv"] == argv

    # the unit (loaded: systemctl show says the same) asks for another KV dtype than the process was started with
    show, cat = unit_for([w.replace("bf16", "fp8_e4m3") for w in argv], proc.pid)
    fake_systemctl(tmp_path, monkeypatch, show, cat=cat)
    res = run({"unit": "sglang.service", "url": "", "min_signals": 1}, capsys)
    assert rows(res)["argv"]["verdict"] == "unknown" and "the unit changed after the start; restart it" in rows(res)["argv"]["evidence"]


def test_a_unit_variable_takes_the_running_process_value(lab, process, tmp_path, monkeypatch, capsys):
    proc, argv = process
    # --model-path ${MODEL}: written $${MODEL} would be literal, so the unit file is written by hand here
    show, cat = unit_for(argv, proc.pid)
    quoted = command_line([lab])
    cat, show = cat.replace(quoted, "${MODEL}"), show.replace(" " + lab + " ", " ${MODEL} ")
    fake_systemctl(tmp_path, monkeypatch, show, cat=cat)
    res = run({"unit": "sglang.service", "url": "", "min_signals": 1}, capsys)
    assert res["argv"] == argv and res["model"]["checkpoint"] == lab and not res.get("failed"), res["msg"]


def test_unit_with_auto_and_fp8_checkpoint(lab, tmp_path, monkeypatch, capsys):
    show, cat = unit_files(lab, None)
    fake_systemctl(tmp_path, monkeypatch, show, cat=cat)
    res = run({"unit": "sglang.service", "url": "", "min_signals": 1}, capsys)
    assert res["failed"] and res["verdict"] == "fp8"
    assert rows(res)["checkpoint"]["counted"] and rows(res)["argv"]["verdict"] == "unknown"


def test_a_unit_file_systemd_has_not_loaded_is_not_the_argv(lab, tmp_path, monkeypatch, capsys):
    show, cat = unit_files(lab, "bf16")
    fake_systemctl(tmp_path, monkeypatch, show, cat=cat.replace("bf16", "fp8_e4m3"))
    res = run({"unit": "sglang.service", "url": "", "min_signals": 1}, capsys)
    assert rows(res)["argv"]["verdict"] == "unknown" and "daemon-reload" in rows(res)["argv"]["evidence"]


def test_a_unit_line_systemd_would_refuse_is_named(lab, tmp_path, monkeypatch, capsys):
    show, _cat = unit_files(lab, "bf16")
    fake_systemctl(tmp_path, monkeypatch, show, cat='[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server "open\n')
    res = run({"unit": "sglang.service", "url": "", "min_signals": 1}, capsys)
    assert "unbalanced \" quote: close it; or pass argv instead of unit" in rows(res)["argv"]["evidence"]


def test_a_checkpoint_option_that_is_not_the_one_served_fails(lab, tmp_path, monkeypatch, capsys):
    show, cat = unit_files("/models/served", "bf16")
    fake_systemctl(tmp_path, monkeypatch, show, cat=cat)
    res = run({"unit": "sglang.service", "checkpoint": lab, "url": "", "min_signals": 1}, capsys)
    assert res["failed"] and "the checkpoint given is %s but the server runs /models/served (argv)" % lab in res["msg"]


@pytest.mark.parametrize("output,err,rc,why", [
    ("LoadState=loaded\n", None, 0, "has no ExecStart"),
    (SHOW + "show-execstart-not-found.txt", None, 0, "systemd knows no unit sglang.service (LoadState=not-found)"),
    ("", SHOW + "show-no-systemd.err", 1, "failed (rc=1): System has not been booted with systemd"),
])
def test_unit_that_cannot_be_read(lab, tmp_path, monkeypatch, capsys, fixtures_dir, output, err, rc, why):
    def sample(text):
        return (fixtures_dir / text).read_text() if text and text.startswith(SHOW) else (text or "")
    fake_systemctl(tmp_path, monkeypatch, sample(output), rc, sample(err))
    res = run({"unit": "sglang.service", "checkpoint": lab, "url": ""}, capsys)
    assert res["failed"] and res["verdict"] == "insufficient"
    assert why in rows(res)["argv"]["evidence"]


# --- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,match", [
    ({"expected": "fp8_e4m3"}, "waiver_reason"),
    ({"min_signals": 7}, "min_signals must be an integer from 1 to 4"),
    ({"argv": ["a"], "unit": "b"}, "mutually exclusive"),
    ({"url": "localhost:30000"}, "no scheme"),
    ({"tp_size": 0}, "tp_size must be >= 1"),
])
def test_bad_options(args, match, capsys):
    res = run(dict({"url": ""}, **args), capsys)
    assert res["failed"] is True and match in res["msg"]


def test_unreadable_checkpoint_is_an_unknown_signal(tmp_path, capsys):
    res = run({"checkpoint": str(tmp_path / "missing"), "url": "", "argv": ["sglang", "serve", "--model-path", "/m"]},
              capsys)
    assert res["failed"] and "does not exist" in rows(res)["checkpoint"]["evidence"]


def test_refused_server_is_an_unknown_signal(lab, capsys):
    res = run({"checkpoint": lab, "url": "http://127.0.0.1:%d" % free_port(), "timeout": 2}, capsys)
    assert res["server"]["error"]["class"] == "refused"
    assert "connection refused" in rows(res)["server"]["evidence"]


@pytest.mark.parametrize("kind", ["fifo", "socket", "dev_zero"])
def test_a_checkpoint_file_that_is_not_a_regular_file_is_an_unknown_signal_without_blocking(lab, tmp_path, kind, capsys):
    import shutil

    from odd_files import make_odd, within  # tests/unit/odd_files.py

    copy = tmp_path / LAB
    shutil.copytree(lab, copy)
    make_odd(copy / "hf_quant_config.json", kind)
    res, error = within(20, run, {"checkpoint": str(copy), "url": "", "argv": ["sglang", "serve", "--model-path", "/m"]},
                        capsys)
    assert error is None and res["failed"], (res, error)
    assert "hf_quant_config.json at %s is a" % (copy / "hf_quant_config.json") in rows(res)["checkpoint"]["evidence"]
