# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab's SGLang simulator against what a real SGLang 0.5.16 printed on an H200 (the six logs of the
harness's run at b2f32da, tests/fixtures/real-sglang).

The simulator (tests/unit/sim_harness.py: the lab checkpoint, TP 8) runs with bf16 and with fp8_e4m3, answers
one chat request and is stopped with SIGTERM. Every line of its ``SGLANG_LOG`` table that it printed and that
0.5.16 also printed (the same line of SGLang's: the format's words before its first value) must have the
shape of each real line: the simulator's format as a regex (``sim_line``, as in test_sglang_sim.py) matches
the real message. So must the ``[ts ranks]`` prefix and uvicorn's lines (numbers free).

The simulator speaks SGLang 0.5.23 (checked against its source in test_sglang_sim.py). Lines that differ
between 0.5.16 and 0.5.23 are skipped here, each checked to differ exactly so:

- ``server_args``: 0.5.16 logs ``server_args=ServerArgs(...)`` (``f"{server_args=}"``, a repr of the arguments
  as typed, through 0.5.18); 0.5.23 logs ``server_args={...}`` (``resolved_dict()``, since 0.5.19);
- ``fp8_no_scales``: 0.5.16 ends ``... Defaulting to scaling factors of 1.0. This may lead to less accurate
  results!``; 0.5.23 ends after ``1.0.``;
- ``linear_backend``: 0.5.16 prints ``Linear attention kernel backend: decode=triton, prefill=triton``; 0.5.19
  and 0.5.23 add ``, verify=...``.

Not in these logs, so not compared: ``nvfp4`` (the trap checkpoint is FP8: 0.5.16 printed ``Detected ModelOpt FP8
checkpoint...``), ``graph_begin``/``graph_end`` (the run used ``--disable-cuda-graph``), ``deprecated_backend``,
``tokenspeed_fp8``, ``scheduler_exception``, ``sigquit`` (engine.py's line; the real stop printed
tokenizer_manager's ``SIGQUIT received. ...``, another line), uvicorn's shutdown lines (0.5.16 kills its process
tree at SIGTERM). ``SGLANG_LOG_MS=1`` timestamps (``[... 15:52:38.378]``) are SGLang's, which the simulator does
not implement: it prints whole seconds only.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import urllib.request

import pytest

import sim_harness  # tests/unit/sim_harness.py

ROOT = pathlib.Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real-sglang"
_spec = importlib.util.spec_from_file_location("sglang_sim", str(sim_harness.SIM))
sim_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sim_module)

# SGLang's line shape ([ts{.ms}{ rank tags}] message), as test_sglang_sim.py reads it, milliseconds allowed
LINE_RE = re.compile(r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?P<ms>\.\d{3})?"
                     r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (?P<msg>.*)$")
_PLACEHOLDER_RE = re.compile(r"%(?:\.\d+)?[sdf]")
# the same line in both releases, the same shape
SAME = {"load_begin", "load_end", "mamba_pool", "kv_pool", "pool_end", "hybrid_gdn", "max_tokens", "ready",
        "prefill_batch", "decode_batch"}
# the same line, 0.5.16's shape (see the docstring)
DIFFERENT = {
    "server_args": re.compile(r"^server_args=ServerArgs\(model_path='[^']+', .*\)$"),
    "fp8_no_scales": re.compile(r"^Using FP8 KV cache but no scaling factors provided\. Defaulting to scaling factors of 1\.0\. "
                                r"This may lead to less accurate results!$"),
    "linear_backend": re.compile(r"^Linear attention kernel backend: decode=\w+, prefill=\w+$"),
}
# what the simulator prints instead (its own format but where the format has a value that can be anything)
SIM_DICT_DUMP = re.compile(r"^server_args=\{'model_path': .*\}$")
UVICORN_SAME = {"Started server process [N]", "Waiting for application startup.", "Application startup complete.",
                "Uvicorn running on http://127.0.0.1:N (Press CTRL+C to quit)"}
ACCESS_RE = re.compile(r'^\d+\.\d+\.\d+\.\d+:\d+ - "(?P<method>GET|POST) (?P<path>\S+) HTTP/1\.1" (?P<code>\d{3}) [A-Z][A-Za-z ]*$')


def sim_line(name):
    """A regex for the simulator's SGLANG_LOG line name (its placeholders: digits for %d/%f, anything for %s)."""
    fmt = sim_module.SGLANG_LOG[name][0]
    out, pos = [], 0
    for m in _PLACEHOLDER_RE.finditer(fmt):
        out.append(re.escape(fmt[pos:m.start()]))
        out.append({"d": r"-?\d+", "f": r"-?\d+\.\d+"}.get(m.group(0)[-1], r".*?"))
        pos = m.end()
    return re.compile("^" + "".join(out) + re.escape(fmt[pos:]) + "$")


def stem(name):
    """The words a format starts with before its first value: what names the same SGLang line in any release."""
    fmt = sim_module.SGLANG_LOG[name][0]
    head = _PLACEHOLDER_RE.split(fmt)[0]
    return " ".join(head.split(" ")[:3])


def messages(lines):
    out = []
    for line in lines:
        m = LINE_RE.match(line)
        if m:
            out.append(m)
    return out


def uvicorn_kind(msg):
    """uvicorn's message with numbers as N, or None for an access line or another kind of line."""
    if not msg.startswith("INFO:     ") or ACCESS_RE.match(msg[10:]):
        return None
    return re.sub(r"\d+", "N", msg[10:]).replace("N.N.N.N", "127.0.0.1")


@pytest.fixture(scope="module")
def real():
    lines = []
    for path in sorted(REAL.glob("sglang-0.5.16-h200-*.log")):
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """Every line the simulator printed in two runs (bf16, fp8_e4m3): start, one chat request, SIGTERM."""
    lines = []
    for kv in ("bf16", "fp8_e4m3"):
        tmp = tmp_path_factory.mktemp("sim-" + kv)
        sim = sim_harness.Sim(tmp, extra=["--kv-cache-dtype", kv, "--sim-tokens-per-second", "5000", "--sim-ttft-ms", "1"])
        try:
            body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 45}).encode()
            req = urllib.request.Request(sim.url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert resp.status == 200
        finally:
            sim.stop()
        lines += (tmp / ("sim-%d.log" % sim.port)).read_text(encoding="utf-8").splitlines()
    return lines


def test_each_sglang_line_the_simulator_prints_has_the_shape_0_5_16_printed(real, printed):
    real_msgs = [m.group("msg") for m in messages(real)]
    sim_msgs = [m.group("msg") for m in messages(printed)]
    compared = set()
    for name in sim_module.SGLANG_LOG:
        ours = [msg for msg in sim_msgs if sim_line(name).match(msg)]
        theirs = [msg for msg in real_msgs if msg.startswith(stem(name))]
        if not (ours and theirs):
            continue
        compared.add(name)
        if name in DIFFERENT:
            assert all(DIFFERENT[name].match(msg) for msg in theirs), (name, theirs[:2])
            strict = SIM_DICT_DUMP if name == "server_args" else sim_line(name)
            assert not any(strict.match(msg) for msg in theirs), "%s: 0.5.16 prints 0.5.23's shape now: drop it from DIFFERENT" % name
            assert all(strict.match(msg) for msg in ours)
        else:
            wrong = [msg for msg in theirs if not sim_line(name).match(msg)]
            assert not wrong, "the simulator's %r (%s) does not match SGLang 0.5.16's: %s" % (
                name, sim_module.SGLANG_LOG[name][0], wrong[:2])
    assert compared == SAME | set(DIFFERENT)


def test_the_line_prefix_is_sglangs(real, printed):
    """[ts ranks] on both sides; 0.5.16 with TP 1 prints no rank tag, the simulator at TP 8 TP0 ... TP7."""
    real_records = [line for line in real if line.startswith("[20")]
    assert len(messages(real_records)) == len(real_records)
    sim_records = messages(printed)
    assert len(sim_records) == len(printed) and not any(m.group("ms") for m in sim_records)
    assert {m.group("ranks") for m in messages(real_records)} == {""}
    assert {m.group("ranks") for m in sim_records} >= {"", " TP0", " TP7"}
    # milliseconds come only from SGLANG_LOG_MS=1, and only on SGLang's own records (uvicorn's keep whole seconds)
    for path in sorted(REAL.glob("sglang-0.5.16-h200-*.log")):
        with_ms = [m for m in messages(path.read_text(encoding="utf-8").splitlines()) if m.group("ms")]
        assert bool(with_ms) == path.name.endswith("-logms.log"), path.name
        assert not any(m.group("msg").startswith("INFO:     ") for m in with_ms)


def test_uvicorns_lines_have_0_5_16s_shape(real, printed):
    real_msgs = [m.group("msg") for m in messages(real)]
    sim_msgs = [m.group("msg") for m in messages(printed)]
    ours = {uvicorn_kind(msg) for msg in sim_msgs} - {None}
    theirs = {uvicorn_kind(msg) for msg in real_msgs} - {None}
    assert ours & theirs == UVICORN_SAME
    # access lines: one shape on both sides, and a request both made looks alike
    access = [[ACCESS_RE.match(msg[10:]) for msg in side if msg.startswith("INFO:     ") and ACCESS_RE.match(msg[10:])]
              for side in (sim_msgs, real_msgs)]
    assert all(access) and {(m["method"], m["path"], m["code"]) for m in access[0]} & \
        {(m["method"], m["path"], m["code"]) for m in access[1]} >= {("POST", "/v1/chat/completions", "200")}
