# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""roles/sglang_server/files/launch_sglang.py: the API key reaches SGLang in memory, never a command line or output.

Run as the unit runs it: the key in the environment, the literal word ${SGLANG_API_KEY} on the command line. The
simulator stands in for the server (it parses SGLang's flags and logs ``api_key`` in clear, as SGLang does), and
SGLang 0.5.23's own argument parser is run through the launcher where the venv of tests/lab/bin/make-sglang-venv is.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from sim_harness import CKPT, SIM, free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "roles" / "sglang_server" / "files" / "launch_sglang.py"
KEY = "sk-lab-launcher-7Qm2ZbV9xN4pR8tW"
TOKEN = "hf_LabOnlyNotARealToken0123"
WORD = "${SGLANG_API_KEY}"
# Reports what the process itself sees, hex-encoded so the launcher's output masking cannot hide a leak.
PROBE = r"""
import json, os, subprocess, sys, logging
logging.basicConfig(level=logging.INFO, format="%(message)s")
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('SGLANG_API_KEY', ''))"],
                       capture_output=True, text=True).stdout.strip()
report = {"argv": sys.argv, "cmdline": open("/proc/self/cmdline", "rb").read().decode(),
          "env": os.environ.get("SGLANG_API_KEY"), "child_env": child, "hf_token": os.environ.get("HF_TOKEN")}
open(os.environ["PROBE_OUT"], "w").write(json.dumps(report).encode().hex())
logging.info("server_args={'api_key': %r}", sys.argv[-1])
print("launch_command: --api-key " + sys.argv[-1] + " token " + str(os.environ.get("HF_TOKEN")))
sys.exit(int(os.environ.get("PROBE_RC", "0")))
"""


def launch(args, tmp_path, env=None, python=sys.executable, timeout=120):
    full = dict(os.environ, SGLANG_API_KEY=KEY, HF_TOKEN=TOKEN, PROBE_OUT=str(tmp_path / "probe.hex"))
    full.update(env or {})
    return subprocess.run([python, str(LAUNCHER)] + args, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=timeout, check=False, text=True)


def probe(tmp_path):
    return json.loads(bytes.fromhex((tmp_path / "probe.hex").read_text()).decode())


def test_code_gets_the_key_in_argv_in_memory_only(tmp_path):
    proc = launch(["-c", PROBE, "--port", "30000", "--api-key", WORD], tmp_path, env={"PROBE_RC": "3"})
    assert proc.returncode == 3, proc.stderr  # the code's own exit status
    seen = probe(tmp_path)
    assert seen["argv"] == ["-c", "--port", "30000", "--api-key", KEY]
    assert KEY not in seen["cmdline"] and WORD in seen["cmdline"]
    # out of the environment for the process and everything it starts; the HF token stays for huggingface_hub
    assert seen["env"] is None and seen["child_env"] == "" and seen["hf_token"] == TOKEN
    out = proc.stdout + proc.stderr
    assert KEY not in out and TOKEN not in out
    assert "server_args={'api_key': '********'}" in proc.stderr and "--api-key ******** token ********" in proc.stdout


def test_module_runs_like_python_dash_m(tmp_path):
    (tmp_path / "fake_server.py").write_text(PROBE)
    proc = launch(["-m", "fake_server", "--api-key=" + WORD], tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    seen = probe(tmp_path)
    assert seen["argv"] == [str(tmp_path / "fake_server.py"), "--api-key=" + KEY] and KEY not in seen["cmdline"]


@pytest.mark.parametrize("args, env, words", [
    (["-c", "pass", "--api-key", KEY], {}, ["--api-key on the command line", "SGLANG_API_KEY", "EnvironmentFile"]),
    (["-c", "pass", "--admin-api-key=x"], {}, ["--admin-api-key on the command line"]),
    (["-c", "pass", "--api-key", WORD], {"SGLANG_API_KEY": ""}, ["no SGLANG_API_KEY", "sglang_server_api_key"]),
    ([], {}, ["usage: launch_sglang.py"]),
])
def test_refusals_name_the_fix(tmp_path, args, env, words):
    proc = launch(args, tmp_path, env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert [w for w in words if w not in proc.stderr] == [] and KEY not in proc.stderr


def test_simulator_serves_with_the_key_it_never_showed(tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(CKPT, ckpt)
    port, log, state = free_port(), tmp_path / "sim.log", tmp_path / "state.json"
    env = dict(os.environ, SGLANG_API_KEY=KEY, HF_TOKEN=TOKEN, SGLANG_SIM_STATE_FILE=str(state))
    argv = [sys.executable, str(LAUNCHER), str(SIM), "--model-path", str(ckpt), "--tp-size", "8", "--kv-cache-dtype", "bf16",
            "--host", "127.0.0.1", "--port", str(port), "--sim-load-seconds", "0.1", "--sim-warmup-seconds", "0.1",
            "--api-key", WORD]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = "http://127.0.0.1:%d/v1/models" % port
        status = {}
        end = time.time() + 30
        while time.time() < end and proc.poll() is None:
            try:
                for name, headers in (("key", {"Authorization": "Bearer " + KEY}), ("none", {})):
                    try:
                        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as resp:
                            status[name] = resp.status
                    except urllib.error.HTTPError as exc:
                        status[name] = exc.code
                if status.get("key") == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert status == {"key": 200, "none": 401}, log.read_text()[-2000:]
        cmdline = pathlib.Path("/proc/%d/cmdline" % proc.pid).read_bytes().decode()
        assert KEY not in cmdline and WORD in cmdline
        # the simulator parsed the key out of its (in-memory) argv
        assert json.loads(state.read_text())["argv"][-2:] == ["--api-key", KEY]
    finally:
        proc.terminate()
        proc.wait(10)
    text = log.read_text()
    # the dump as SGLang 0.5.16 (ServerArgs(api_key=...)) or 0.5.23 ({'api_key': ...}) writes it, key masked
    assert "server_args=" in text and ("api_key='********'" in text or "'api_key': '********'" in text)
    assert KEY not in text and TOKEN not in text


SGLANG_PARSE = r"""
import hashlib, sys
from sglang.srt.server_args import prepare_server_args
args = prepare_server_args(sys.argv[1:])
print("key sha256 " + hashlib.sha256(args.api_key.encode()).hexdigest())
print("launch_command: " + args.launch_command)
"""


def test_sglang_0_5_23_parser_gets_the_key_through_the_launcher(tmp_path, sglang_python):
    proc = launch(["-c", SGLANG_PARSE, "--model-path", "/models/Qwen3.5-397B-A17B-NVFP4", "--tp-size", "8", "--api-key", WORD],
                  tmp_path, python=sglang_python, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import hashlib  # pylint: disable=import-outside-toplevel

    assert "key sha256 " + hashlib.sha256(KEY.encode()).hexdigest() in proc.stdout
    # SGLang puts the key into launch_command (and logs it, and /server_info shows it); the launcher's output does not
    assert "launch_command: --model-path /models/Qwen3.5-397B-A17B-NVFP4 --tp-size 8 --api-key ********" in proc.stdout
    assert KEY not in proc.stdout + proc.stderr


# SGLang 0.5.23's own dump (entrypoints/engine.py: logger.info(f"server_args={_server_args_for_logging(server_args)}"),
# that function being redact_watermark_secrets(server_args.resolved_dict()); engine.py itself needs uvloop) and its
# /server_info body (Starlette's JSONResponse), printed by the server process the launcher runs.
SGLANG_DUMP = r"""
import hashlib, logging, sys
from sglang.srt.sampling.watermarking.core import redact_watermark_secrets
from sglang.srt.server_args import prepare_server_args
from starlette.responses import JSONResponse
logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s")
args = prepare_server_args(sys.argv[1:])
print("key sha256 " + hashlib.sha256(args.api_key.encode()).hexdigest())
logging.getLogger("sglang.srt.entrypoints.engine").info(f"server_args={redact_watermark_secrets(args.resolved_dict())}")
info = args.resolved_dict()
info["launch_command"] = args.launch_command
print(JSONResponse(info).body.decode())
print(repr(args.api_key), file=sys.stderr)
"""


@pytest.mark.parametrize("key", ["sk-lab-Tab\t7Qm2ZbV9xN", "sk-lab-Nbsp\u00a07Qm2ZbV9", "sk-lab-Zw\u200b7Qm2ZbV9xN"],
                         ids=["tab", "no-break space", "zero-width space"])
def test_sglang_0_5_23_prints_no_form_of_a_key_with_a_blank(tmp_path, sglang_python, key):
    proc = launch(["-c", SGLANG_DUMP, "--model-path", "/models/Qwen3.5-397B-A17B-NVFP4", "--api-key", WORD], tmp_path,
                  env={"SGLANG_API_KEY": key}, python=sglang_python, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import hashlib  # pylint: disable=import-outside-toplevel

    assert "key sha256 " + hashlib.sha256(key.encode()).hexdigest() in proc.stdout  # SGLang got the key
    out = proc.stdout + proc.stderr
    assert "server_args={" in proc.stderr and "'api_key': '********'" in proc.stderr and '"api_key":"********"' in proc.stdout
    forms = {key, repr(key)[1:-1], json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1]}
    assert [f for f in forms if f in out] == []
