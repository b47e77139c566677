# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang_wait_ready and sglang_service_stop as Ansible runs them, over a scripted systemd."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import sys
import tracemalloc

import fake_journalctl
import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils import _readiness, _service_stop
from ansible_collections.llmops.sglang.plugins.modules import sglang_service_stop, sglang_wait_ready


class Scripted(object):
    """systemctl/journalctl answers: one state per `systemctl show`, a journal shown whole."""

    def __init__(self, states, journal=b"", pid1=b"", health=(503, None)):
        self.states, self.journal, self.pid1, self.health = states, journal, pid1, health
        self.shows = 0
        self.now = 500.0
        self.commands = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def run(self, argv, timeout=None):
        self.commands.append(argv[1])
        if argv[1] == "show":
            self.shows += 1
            state = self.states[min(self.shows, len(self.states)) - 1]
            return 0, "".join("%s=%s\n" % kv for kv in state.items()).encode(), ""
        if argv[1] == "stop":
            return 0, b"", ""
        matches, fields, start = fake_journalctl.parse_argv(argv)
        if argv[1].startswith("_SYSTEMD_INVOCATION_ID="):
            return 0, fake_journalctl.to_json(self.journal[start:], start, fields, fake_journalctl.known_fields(matches)), ""
        return 0, fake_journalctl.pid1_json(self.pid1, matches["INVOCATION_ID"], fields), ""


def state(**kw):
    base = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "Result": "success", "NRestarts": "0",
            "InvocationID": "c" * 32, "MainPID": "77", "ExecMainCode": "0", "ExecMainStatus": "0",
            "ExecMainStartTimestampMonotonic": "499000000", "ControlGroup": "/system.slice/sglang-qwen.service", "TimeoutStopUSec": "3s"}
    base.update(kw)
    return base


def run_module(module, params, capsys, monkeypatch, scripted, check_mode=False):
    if module is sglang_wait_ready:
        fake = functools.partial(_readiness.wait_ready, run=scripted.run, http=lambda url, timeout, tls: scripted.health,
                                 clock=scripted.clock, sleep=scripted.sleep, proc_root="/nonexistent-proc")
        monkeypatch.setattr(module, "wait_ready", fake)
    else:
        fake = functools.partial(_service_stop.stop_unit, run=scripted.run, clock=scripted.clock, sleep=scripted.sleep,
                                 proc_root=scripted.proc_root)
        monkeypatch.setattr(module, "stop_unit", fake)
    if check_mode:
        params = dict(params, _ansible_check_mode=True)
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_ready(capsys, monkeypatch):
    out = run_module(sglang_wait_ready, {"unit": "sglang-qwen.service", "budget": 30}, capsys, monkeypatch,
                     Scripted([state()], health=(200, None)))
    assert not out.get("failed") and out["changed"] is False
    assert out["status"] == "ready" and out["msg"].startswith("sglang-qwen.service is ready after ")


def test_fatal_log_fails_with_the_named_cause(capsys, monkeypatch):
    journal = (b"[2026-11-30 12:00:01 TP0] Load weight begin. avail mem=94.39 GB\n"
               b"[2026-11-30 12:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
               b'  File "/sglang/srt/managers/scheduler.py", line 3096, in run_scheduler_process\n'
               b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    dead = state(ActiveState="failed", SubState="failed", Result="exit-code", ExecMainCode="1", ExecMainStatus="1")
    out = run_module(sglang_wait_ready, {"unit": "sglang-qwen.service"}, capsys, monkeypatch, Scripted([dead], journal))
    assert out["failed"] is True
    assert out["msg"].startswith("sglang-qwen.service is not ready: cuda_oom: torch.OutOfMemoryError: CUDA out of memory.")
    assert out["cause"]["source"] == "journal" and out["status"] == "failed"


def test_waiting_returns_the_phase(capsys, monkeypatch):
    journal = b"[2026-11-30 12:00:01 TP0] Load weight begin. avail mem=94.39 GB\n"
    out = run_module(sglang_wait_ready, {"unit": "sglang-qwen.service", "budget": 2700, "timeout": 2}, capsys, monkeypatch,
                     Scripted([state()], journal))
    assert not out.get("failed")
    assert out["status"] == "waiting" and out["phase"] == "loading_weights"
    assert out["msg"].startswith("sglang-qwen.service is not ready yet: phase loading_weights after ")


@pytest.mark.parametrize("params, words", [
    ({"unit": "-x"}, "is not a unit name"),
    ({"unit": "sglang-qwen.service", "budget": 0}, "must be positive"),
    ({"unit": "sglang-qwen.service", "url": "127.0.0.1:30000/health"}, "has no scheme: write it as http://HOST:PORT"),
])
def test_bad_parameters(params, words, capsys, monkeypatch):
    scripted = Scripted([state()])
    out = run_module(sglang_wait_ready, params, capsys, monkeypatch, scripted)
    assert out["failed"] is True and words in out["msg"]
    assert scripted.commands == []


def _proc(tmp_path, pids):
    for pid in pids:
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "cgroup").write_text("0::/system.slice/sglang-qwen.service\n")
        (d / "cmdline").write_bytes(b"python3\0-c\0pass\0sglang::scheduler_TP0\0")
        (d / "stat").write_text("%d (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n" % (pid, 9000 + pid))
    return str(tmp_path)


PID1_KILL = b"sglang-qwen.service: State 'final-sigterm' timed out. Killing.\nsglang-qwen.service: Killing process 91 (python3) with signal SIGKILL.\n"


@pytest.mark.parametrize("fail_on_kill", [False, True])
def test_stop_with_a_killed_child(fail_on_kill, tmp_path, capsys, monkeypatch):
    scripted = Scripted([state(), state(ActiveState="failed", SubState="failed", Result="timeout")], pid1=PID1_KILL)
    scripted.proc_root = _proc(tmp_path, [91])
    # the child is gone once systemctl stop returns
    orig = scripted.run

    def run(argv, timeout=None):
        answer = orig(argv, timeout)
        if argv[1] == "stop":
            for name in ("cgroup", "stat", "cmdline"):
                (tmp_path / "91" / name).unlink()
        return answer
    scripted.run = run
    out = run_module(sglang_service_stop, {"unit": "sglang-qwen.service", "fail_on_kill": fail_on_kill}, capsys, monkeypatch, scripted)
    assert bool(out.get("failed")) is fail_on_kill
    assert [p["pid"] for p in out["killed"]] == [91]
    text = out["msg"]
    assert "surviving child: pid 91 (python3 -c pass sglang::scheduler_TP0) ignored SIGTERM" in text
    assert "TimeoutStopSec=3 s" in text


def test_stop_fails_when_a_process_survives(tmp_path, capsys, monkeypatch):
    scripted = Scripted([state(), state(ActiveState="failed", SubState="failed", Result="timeout")])
    scripted.proc_root = _proc(tmp_path, [92])
    out = run_module(sglang_service_stop, {"unit": "sglang-qwen.service"}, capsys, monkeypatch, scripted)
    assert out["failed"] is True
    assert "still running after the stop: pid 92" in out["msg"]


def test_stop_rejects_an_option_as_unit(tmp_path, capsys, monkeypatch):
    scripted = Scripted([state()])
    scripted.proc_root = _proc(tmp_path, [])
    out = run_module(sglang_service_stop, {"unit": "--all"}, capsys, monkeypatch, scripted)
    assert out["failed"] is True and out["msg"] == "unit '--all' is not a unit name; give a name like sglang-qwen.service"
    assert scripted.commands == []


def test_stop_check_mode_does_not_stop(tmp_path, capsys, monkeypatch):
    scripted = Scripted([state()])
    scripted.proc_root = _proc(tmp_path, [93])
    out = run_module(sglang_service_stop, {"unit": "sglang-qwen.service"}, capsys, monkeypatch, scripted, check_mode=True)
    assert out["changed"] is True and "stop" not in scripted.commands
    assert out["msg"] == "sglang-qwen.service would be stopped"


# ----------------------------------------------------------------------------------------------
# the journal of a long start, read from journalctl and systemctl programs on PATH

FAKE_JOURNALCTL = pathlib.Path(__file__).resolve().parents[2] / "fake_journalctl.py"
DECODE = (b"[2026-11-30 12:10:00 TP0] Decode batch, #running-req: 12, #full token: 82345, full token usage: 0.31, "
          b"cuda graph: True, gen throughput (token/s): 93.65, #queue-req: 0\n")


def test_each_poll_reads_only_what_the_journal_gained(fixtures_dir, tmp_path, capsys, monkeypatch):
    start = (fixtures_dir / "sglang-logs" / "001-qwq32b-tp4-l4-ready-2025-03.log").read_bytes()
    head = start[:start.index(b"[2025-03-08 12:29:21 TP0] Capture cuda graph begin")]
    journal = head + DECODE * ((24 << 20) // len(DECODE)) + start[len(head):]
    (tmp_path / "journal").write_bytes(journal)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "journalctl").write_text('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, FAKE_JOURNALCTL))
    (bin_dir / "systemctl").write_text("#!/bin/sh\nprintf '%s'\n" % "".join("%s=%s\\n" % kv for kv in state().items()))
    for tool in ("journalctl", "systemctl"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    monkeypatch.setenv("FAKE_JOURNAL", str(tmp_path / "journal"))
    monkeypatch.setenv("FAKE_JOURNAL_STEP", str(len(journal) // 6 + 1))
    monkeypatch.setenv("FAKE_JOURNAL_LOG", str(tmp_path / "calls"))
    clock = Scripted([])
    monkeypatch.setattr(sglang_wait_ready, "wait_ready", functools.partial(
        _readiness.wait_ready, http=lambda url, timeout, tls: (503, None), clock=clock.clock, sleep=clock.sleep))
    tracemalloc.start()
    with patch_module_args({"unit": "sglang-qwen.service", "budget": 2700, "timeout": 9}):
        with pytest.raises(SystemExit):
            sglang_wait_ready.main()
    dummy, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out = json.loads(capsys.readouterr().out)
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert out["status"] == "waiting" and out["polls"] == len(calls) >= 8
    assert "--after-cursor" not in calls[0]["argv"] and calls[0]["from"] == 0
    for before, poll in zip(calls, calls[1:]):
        # each poll starts where the last one ended, so no entry is read twice
        assert ";i=%x;" % before["to"] in poll["argv"][poll["argv"].index("--after-cursor") + 1] and poll["from"] == before["to"]
    assert sum(c["to"] - c["from"] for c in calls) == len(journal)
    assert out["log"]["journal"]["kept"] == out["log"]["journal"]["entries"] == journal.count(b"\n")
    assert out["log"]["ready_line"] is True and out["log"]["max_total_num_tokens"] == 46611
    assert peak < 8 << 20, "a poll holds a chunk and a line, not the journal (peak %d bytes)" % peak
