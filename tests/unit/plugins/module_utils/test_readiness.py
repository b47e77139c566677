# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readiness wait and clean stop, against a scripted systemd/journald and real SGLang logs."""

from __future__ import annotations

import json
import os

import fake_journalctl
import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _readiness as r
from ansible_collections.llmops.sglang.plugins.module_utils import _redact
from ansible_collections.llmops.sglang.plugins.module_utils import _service_stop as stop
from ansible_collections.llmops.sglang.plugins.module_utils import _systemd
from ansible_collections.llmops.sglang.plugins.module_utils import _unit_processes as procs
from ansible_collections.llmops.sglang.plugins.module_utils._process import stream
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import PHASES

UNIT = "sglang-qwen.service"
URL = "http://127.0.0.1:30000/health_generate"
CGROUP = "/system.slice/sglang-qwen.service"


class Clock(object):
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += max(0.0, seconds)


class FakeSystem(object):
    """systemctl show / stop and journalctl as seen by _readiness, driven by the number of polls.

    states: list of property dicts, one per `systemctl show` call (the last one repeats).
    journal: bytes the invocation's processes wrote; lines_per_poll lines of them become visible per show call,
    served as journalctl's JSON entries (tests/unit/fake_journalctl.py). pid1: systemd's messages, one a line.
    """

    def __init__(self, clock, states, journal=b"", lines_per_poll=10 ** 9, health=None, pid1=b""):
        self.clock = clock
        self.states = states
        self.journal = journal
        self.line_ends = [i + 1 for i, c in enumerate(journal) if c == 10]
        self.lines_per_poll = lines_per_poll
        self.health = health or (lambda poll: (503, None))
        self.pid1 = pid1
        self.shows = 0
        self.calls = []
        self.stopped = False
        self.on_stop = None

    def state(self):
        return self.states[min(self.shows, len(self.states)) - 1]

    def run(self, argv, timeout=None):
        self.calls.append(list(argv))
        if argv[1] == "show":
            self.shows += 1
            st = dict(self.state())
            return 0, "".join("%s=%s\n" % kv for kv in st.items()).encode(), ""
        if argv[1] == "stop":
            self.stopped = True
            if self.on_stop:
                self.on_stop()
            return 0, b"", ""
        if argv[0] == "journalctl" and argv[1].startswith("_SYSTEMD_INVOCATION_ID="):
            lines = min(len(self.line_ends), self.lines_per_poll * self.shows)
            visible = self.line_ends[lines - 1] if lines else 0
            matches, fields, start = fake_journalctl.parse_argv(argv)
            return 0, fake_journalctl.to_json(self.journal[start:visible], start, fields, fake_journalctl.known_fields(matches)), ""
        if argv[0] == "journalctl" and argv[1] == "_PID=1":
            matches, fields, start = fake_journalctl.parse_argv(argv)
            if self.pid1.startswith(b"{"):
                return 0, self.pid1, ""     # recorded journalctl output
            return 0, fake_journalctl.pid1_json(self.pid1, matches["INVOCATION_ID"], fields), ""
        raise AssertionError("unexpected command %r" % argv)

    def http(self, url, timeout, tls):
        return self.health(self.shows)


def unit_state(clock, **kw):
    st = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "Result": "success", "NRestarts": "0",
          "InvocationID": "a" * 32, "MainPID": "4242", "ExecMainCode": "0", "ExecMainStatus": "0",
          "ExecMainStartTimestampMonotonic": str(int((clock() - 1.0) * 1e6)), "ControlGroup": CGROUP, "TimeoutStopUSec": "1min"}
    st.update(dict((k, str(v)) for k, v in kw.items()))
    return st


def wait(system, clock, budget=60, timeout=None, **kw):
    kw.setdefault("proc_root", "/nonexistent-proc")
    return r.wait_ready(UNIT, URL, budget, timeout or budget + 60, run=system.run, http=system.http, clock=clock, sleep=clock.sleep, **kw)


@pytest.fixture
def logs(fixtures_dir):
    def read(name):
        return (fixtures_dir / "sglang-logs" / name).read_bytes()
    return read


# ----------------------------------------------------------------------------------------------
# small helpers


def test_timespans():
    assert stop.parse_timespan("1min 30s") == 90.0
    assert stop.parse_timespan("500ms") == 0.5
    assert stop.parse_timespan("5s") == 5.0
    assert stop.parse_timespan("infinity") is None
    assert stop.parse_timespan("") is None


def test_secret_values_are_masked():
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "s3cr3t", "--hf-token=hf_abc", "--max-total-tokens", "5"]
    masked = _redact.redact_argv(argv)
    assert "s3cr3t" not in masked and "hf_abc" not in " ".join(masked)
    assert masked[3:6] == ["--api-key", r.MASK, "--hf-token=" + r.MASK]
    assert masked[6:] == ["--max-total-tokens", "5"]
    dump = "server_args=ServerArgs(model_path='/m', api_key='a key with spaces', max_total_tokens=None)"
    assert "a key with spaces" not in r.mask_text(dump)
    assert "max_total_tokens=None" in r.mask_text(dump)
    assert r.mask_text("SGLANG_API_KEY=abc123 HF_TOKEN=hf_x") == "SGLANG_API_KEY=%s HF_TOKEN=%s" % (r.MASK, r.MASK)


# ----------------------------------------------------------------------------------------------
# readiness


def test_ready_after_a_real_startup_log_with_phase_timeline(logs):
    clock = Clock()
    journal = logs("001-qwq32b-tp4-l4-ready-2025-03.log")
    total_lines = len(journal.splitlines())
    # health answers once the whole startup log is visible (8 lines appear per second)
    polls_needed = -(-total_lines // 8)
    system = FakeSystem(clock, [unit_state(clock)], journal, lines_per_poll=8,
                        health=lambda poll: (200, None) if poll > polls_needed else (503, None))
    out = wait(system, clock)
    assert out["status"] == "ready" and out["ready"]
    phases = [p["phase"] for p in out["phases"]]
    assert phases[-1] == "ready"
    assert phases[:4] == ["starting", "loading_weights", "kv_pool_allocated", "capturing_cuda_graphs"]
    # phases only move forward, and their times do too
    assert [PHASES.index(p) for p in phases] == sorted(PHASES.index(p) for p in phases)
    assert [p["at"] for p in out["phases"]] == sorted(p["at"] for p in out["phases"])
    # one poll per second
    assert out["polls"] == polls_needed + 1
    assert out["waited"] == pytest.approx(polls_needed, abs=0.01)
    assert out["invocation_id"] == "a" * 32 and out["n_restarts_baseline"] == 0
    assert out["log"]["ready_line"] is True


def test_no_kernel_image_fails_fast_and_names_the_crash_loop(logs):
    clock = Clock()
    active = unit_state(clock)
    restarting = unit_state(clock, ActiveState="activating", SubState="auto-restart", Result="exit-code", ExecMainCode=1, ExecMainStatus=1)
    system = FakeSystem(clock, [active, active, restarting], logs("010-rtxpro6000-sm120-fp8kv-no-kernel-image-2026-05.log"))
    out = wait(system, clock, budget=2700)
    cause = out["cause"]
    assert out["status"] == "failed"
    assert cause["class"] == "no_kernel_image"
    assert "no kernel image is available for execution on the device" in cause["message"]
    assert cause["crash_loop"] is True and cause["restarts"] == 1
    assert out["waited"] < 5, "must not wait out the 2700 s budget"
    text = r.describe_cause(UNIT, cause)
    assert text.startswith("sglang-qwen.service is not ready: no_kernel_image: ")
    assert "crash loop" in text


def test_cuda_oom_from_a_real_traceback(logs):
    clock = Clock()
    dead = unit_state(clock, ActiveState="failed", SubState="failed", Result="exit-code", ExecMainCode=1, ExecMainStatus=1)
    system = FakeSystem(clock, [dead], logs("029-h20-deepep-2node-capture-graph-cuda-oom-truncated-2025-04.log"))
    out = wait(system, clock)
    assert out["cause"]["class"] == "cuda_oom"
    assert "CUDA out of memory" in out["cause"]["message"]
    assert out["cause"]["crash_loop"] is False
    assert out["cause"]["unit"]["active_state"] == "failed"


def test_silent_crash_loop_is_named_from_systemd():
    clock = Clock()
    first = unit_state(clock)
    pending = unit_state(clock, ActiveState="activating", SubState="auto-restart", Result="exit-code", ExecMainStatus=3, ExecMainCode=1)
    out = wait(FakeSystem(clock, [first, pending], b""), clock)
    assert out["cause"]["class"] == "crash_loop"
    assert out["cause"]["message"] == ("the main process exited with status 3 and systemd restarts the unit (Restart=); "
                                       "automatic restart #1")
    assert out["n_restarts_baseline"] == 0


def test_restart_seen_only_after_it_happened():
    clock = Clock()
    # the next poll already sees the restarted process: a new invocation, NRestarts one higher
    again = unit_state(clock, NRestarts=4, InvocationID="b" * 32)
    out = wait(FakeSystem(clock, [unit_state(clock, NRestarts=3), again], b""), clock)
    assert out["cause"]["class"] == "crash_loop"
    assert out["cause"]["message"].startswith("the server process died and systemd restarts the unit")
    assert out["cause"]["restarts"] == 1 and out["n_restarts_baseline"] == 3


@pytest.mark.parametrize("result, cls, words", [
    ("exit-code", "exited", "exited with status 1 (Result=exit-code)"),
    ("oom-kill", "host_oom", "OOM killer"),
    ("start-limit-hit", "crash_loop", "start limit"),
])
def test_failed_unit_without_log_cause(result, cls, words):
    clock = Clock()
    system = FakeSystem(clock, [unit_state(clock, ActiveState="failed", SubState="failed", Result=result, ExecMainCode=1, ExecMainStatus=1)])
    out = wait(system, clock)
    assert out["cause"]["class"] == cls
    assert words in out["cause"]["message"]


def test_port_in_use_line_is_a_named_cause():
    clock = Clock()
    journal = (b"[2026-11-30 12:09:22] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n"
               b"[2026-11-30 12:09:22] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
               b"address already in use\n")
    dead = unit_state(clock, ActiveState="failed", SubState="failed", Result="exit-code", ExecMainCode=1, ExecMainStatus=1)
    out = wait(FakeSystem(clock, [dead], journal), clock)
    assert out["cause"]["class"] == "port_in_use"
    assert out["cause"]["message"] == "[Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use"


def test_rejected_command_line_is_a_named_cause():
    clock = Clock()
    journal = (b"usage: launch_server.py [-h] --model-path MODEL_PATH\n"
               b"launch_server.py: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer\n")
    dead = unit_state(clock, ActiveState="failed", SubState="failed", Result="exit-code", ExecMainCode=1, ExecMainStatus=2)
    out = wait(FakeSystem(clock, [dead], journal), clock)
    assert out["cause"]["class"] == "cli_argument_error"
    assert "--mamba-scheduler-strategy" in out["cause"]["message"]


def test_hang_spends_the_budget_and_names_the_phase(logs):
    clock = Clock()
    journal = logs("001-qwq32b-tp4-l4-ready-2025-03.log")
    # everything up to uvicorn, never the ready line
    journal = journal[:journal.index(b"The server is fired up")]
    out = wait(FakeSystem(clock, [unit_state(clock)], journal), clock, budget=20)
    assert out["cause"]["class"] == "timeout"
    assert "budget 20 s" in out["cause"]["message"]
    assert "stuck in phase warming_up" in out["cause"]["message"]
    assert "answered HTTP 503" in out["cause"]["message"]
    assert 19 <= out["elapsed"] <= 21
    assert out["polls"] <= 21


def test_waiting_slices_hand_over_the_invocation(logs):
    clock = Clock()
    journal = logs("001-qwq32b-tp4-l4-ready-2025-03.log")
    system = FakeSystem(clock, [unit_state(clock)], journal, lines_per_poll=5,
                        health=lambda poll: (200, None) if poll > 30 else (None, "[Errno 111] Connection refused"))
    first = wait(system, clock, budget=600, timeout=3)
    assert first["status"] == "waiting" and not first["ready"]
    assert first["phase"] in PHASES and first["cause"] is None
    second = wait(system, clock, budget=600, invocation_id=first["invocation_id"], n_restarts=first["n_restarts_baseline"])
    assert second["status"] == "ready"
    assert second["elapsed"] > first["elapsed"]


def test_unit_not_installed():
    clock = Clock()
    out = wait(FakeSystem(clock, [{"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead", "NRestarts": "0"}]), clock)
    assert out["cause"]["class"] == "unit_not_loaded"


# ----------------------------------------------------------------------------------------------
# a fake /proc for ports and processes


def make_proc(root, procs, listen=()):
    """procs: {pid: (cgroup, argv, [socket inodes])}; listen: [(port, inode)]."""
    (root / "net").mkdir(parents=True, exist_ok=True)
    rows = ["  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"]
    for n, (port, inode) in enumerate(listen):
        rows.append("   %d: 0100007F:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 %s 1 0 100 0 0 10 0"
                    % (n, port, inode))
    (root / "net" / "tcp").write_text("\n".join(rows) + "\n")
    for pid, (cgroup, argv, sockets) in procs.items():
        d = root / str(pid)
        (d / "fd").mkdir(parents=True, exist_ok=True)
        (d / "cgroup").write_text("1:name=systemd:%s\n0::%s\n" % (cgroup, cgroup))
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (d / "stat").write_text("%d (python3) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n" % (pid, pid, pid, 5000 + pid))
        for n, inode in enumerate(sockets):
            os.symlink("socket:[%s]" % inode, str(d / "fd" / str(n + 3)))


def test_a_200_from_another_server_on_the_port_is_not_ready(tmp_path):
    make_proc(tmp_path, {100: ("/system.slice/old.service", ["python3", "old"], [777]),
                         200: ("/system.slice/sglang-port.service", ["python3", "new"], [])}, listen=[(30000, 777)])
    assert procs.port_owner("/system.slice/old.service", 30000, str(tmp_path)) is True
    assert procs.port_owner("/system.slice/sglang-port.service", 30000, str(tmp_path)) is False
    assert procs.port_owner("/system.slice/sglang-port.service", 30001, str(tmp_path)) is None

    clock = Clock()
    journal = b"[2026-11-30 12:09:22] ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use\n"
    alive = unit_state(clock, ControlGroup="/system.slice/sglang-port.service")
    dead = unit_state(clock, ControlGroup="/system.slice/sglang-port.service", ActiveState="failed", SubState="failed", Result="exit-code")
    system = FakeSystem(clock, [alive, alive, dead], journal, lines_per_poll=0, health=lambda poll: (200, None))
    # the journal line shows up only after the second poll
    system.lines_per_poll = 0
    out = None
    orig_run = system.run

    def run(argv, timeout=None):
        if system.shows >= 2:
            system.lines_per_poll = 10
        return orig_run(argv, timeout)
    system.run = run
    out = wait(system, clock, proc_root=str(tmp_path))
    assert out["status"] == "failed"
    assert out["cause"]["class"] == "port_in_use"


# ----------------------------------------------------------------------------------------------
# clean stop


def test_stop_names_the_child_systemd_had_to_kill(tmp_path):
    secret = "k3y-that-must-not-show"
    make_proc(tmp_path, {300: (CGROUP, ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server", "--api-key", secret], []),
                         301: (CGROUP, ["/opt/sglang/venv/bin/python", "-c", "import signal\nsignal.signal(15, 1)", "sglang::scheduler_TP0"], [])})
    clock = Clock()
    pid1 = (b"Stopping sglang-qwen.service - SGLang...\nsglang-qwen.service: State 'final-sigterm' timed out. Killing.\n"
            b"sglang-qwen.service: Killing process 301 (python3) with signal SIGKILL.\n"
            b"sglang-qwen.service: Failed with result 'timeout'.\n")
    before = unit_state(clock, TimeoutStopUSec="2s")
    after = unit_state(clock, ActiveState="failed", SubState="failed", Result="timeout", TimeoutStopUSec="2s")
    system = FakeSystem(clock, [before, after], pid1=pid1)

    def vanish():
        for pid in (300, 301):
            for name in ("cgroup", "stat", "cmdline"):
                os.unlink(str(tmp_path / str(pid) / name))
    system.on_stop = vanish
    out = stop.stop_unit(UNIT, run=system.run, proc_root=str(tmp_path), clock=clock, sleep=clock.sleep)
    assert system.stopped
    assert [p["pid"] for p in out["processes"]] == [300, 301]
    assert out["killed"] == [{"pid": 301, "comm": "python3", "cmdline": out["processes"][1]["cmdline"]}]
    assert "sglang::scheduler_TP0" in out["killed"][0]["cmdline"]
    assert out["survivors"] == []
    assert out["timed_out_state"] == "final-sigterm"
    assert out["timeout_stop_sec"] == 2.0
    text = stop.describe_stop(UNIT, out)
    assert "surviving child: pid 301 (" in text and "TimeoutStopSec=2 s" in text
    assert secret not in repr(out) and secret not in text


def test_stop_report_reads_only_pid1s_messages(tmp_path, fixtures_dir):
    # journald 252's answer to `journalctl INVOCATION_ID=<id> -o json` on a lab host after `systemctl stop` of a unit
    # whose child ignored SIGTERM, while user nobody sent `logger --journald` entries with that INVOCATION_ID=, and
    # SYSLOG_IDENTIFIER=systemd: one of them says systemd killed PID 1 (sshd)
    recorded = (fixtures_dir / "tool-outputs" / "journal" / "invocation-id-252.jsonl").read_bytes()
    assert b"Killing process 1 (sshd)" in recorded and b"Killing process 137 (python3)" in recorded
    clock = Clock()
    inv = "71476cfdbad141eb89a82e1fa7cc8e24"
    before = unit_state(clock, InvocationID=inv, TimeoutStopUSec="2s")
    after = unit_state(clock, InvocationID=inv, ActiveState="failed", SubState="failed", Result="timeout", TimeoutStopUSec="2s")
    empty = tmp_path / "proc"
    empty.mkdir()
    system = FakeSystem(clock, [before, after], pid1=recorded)
    out = stop.stop_unit(UNIT, run=system.run, proc_root=str(empty), clock=clock, sleep=clock.sleep)
    assert [p["pid"] for p in out["killed"]] == [137] and out["timed_out_state"] == "final-sigterm"
    query = [c for c in system.calls if c[0] == "journalctl"][0]
    assert query[1:6] == ["_PID=1", "_UID=0", "_TRANSPORT=journal", "INVOCATION_ID=" + inv, "-o"]


def test_stop_reports_a_process_that_survived(tmp_path):
    make_proc(tmp_path, {400: (CGROUP, ["python3", "stuck"], [])})
    clock = Clock()
    system = FakeSystem(clock, [unit_state(clock), unit_state(clock, ActiveState="failed", SubState="failed", Result="timeout")])
    out = stop.stop_unit(UNIT, run=system.run, proc_root=str(tmp_path), clock=clock, sleep=clock.sleep)
    assert [p["pid"] for p in out["survivors"]] == [400]
    assert "still running after the stop: pid 400 (python3 stuck)" in stop.describe_stop(UNIT, out)


def test_stop_in_check_mode_and_of_a_stopped_unit(tmp_path):
    make_proc(tmp_path, {500: (CGROUP, ["python3", "server"], [])})
    clock = Clock()
    system = FakeSystem(clock, [unit_state(clock)])
    out = stop.stop_unit(UNIT, check_mode=True, run=system.run, proc_root=str(tmp_path))
    assert out["changed"] and not system.stopped and [p["pid"] for p in out["processes"]] == [500]

    empty = tmp_path / "empty"
    empty.mkdir()
    system = FakeSystem(clock, [unit_state(clock, ActiveState="inactive", SubState="dead")])
    out = stop.stop_unit(UNIT, run=system.run, proc_root=str(empty))
    assert not out["changed"] and not system.stopped
    assert stop.describe_stop(UNIT, out) == ""


@pytest.mark.parametrize("unit", ["", None, "-x", "--all", "sglang qwen.service", "sglang-qwen.service\n"])
def test_a_bad_unit_name_runs_no_command(unit):
    clock = Clock()
    system = FakeSystem(clock, [unit_state(clock)])
    with pytest.raises(r.UnitError, match="is not a unit name; give a name like sglang-qwen.service"):
        r.wait_ready(unit, URL, 60, 60, run=system.run, http=system.http, clock=clock, sleep=clock.sleep)
    with pytest.raises(r.UnitError, match="is not a unit name"):
        stop.stop_unit(unit, run=system.run, clock=clock, sleep=clock.sleep)
    assert system.calls == [] and not system.stopped
    r.check_unit_name("sglang-qwen@0.service")  # a template instance is a unit name


# ----------------------------------------------------------------------------------------------
# the journal: only what is new, streamed


DECODE = (b"[2026-11-30 12:10:00 TP0] Decode batch, #running-req: 12, #full token: 82345, full token usage: 0.31, "
          b"cuda graph: True, gen throughput (token/s): 93.65, #queue-req: 0\n")


class StreamedJournal(object):
    """journalctl -o json as a stream: the journal grows between polls, entries cut into chunks of chunk bytes."""

    def __init__(self, pieces, chunk=1 << 20):
        self.pieces = pieces        # per poll: an iterable of byte blocks (whole lines) written since the last poll
        self.chunk = chunk
        self.polls = []
        self.written = 0
        self.json_bytes = 0

    def __call__(self, argv, sink):
        matches, fields, after = fake_journalctl.parse_argv(argv)
        assert after == self.written, "a poll starts where the last one ended"
        self.polls.append(argv)
        for block in self.pieces[len(self.polls) - 1]:
            data = fake_journalctl.to_json(block, self.written, fields, fake_journalctl.known_fields(matches))
            self.written += len(block)
            self.json_bytes += len(data)
            for i in range(0, len(data), self.chunk):
                sink(data[i:i + self.chunk])
        return 0, ""


def test_each_poll_reads_only_the_new_journal_with_bounded_memory(logs):
    import tracemalloc

    start = logs("001-qwq32b-tp4-l4-ready-2025-03.log")
    head = start[:start.index(b"[2025-03-08 12:29:21 TP0] Capture cuda graph begin")]
    tail = start[len(head):]
    noise = DECODE * ((64 << 10) // len(DECODE))
    journal = StreamedJournal([[head], (noise for dummy in range(160)), [tail]], chunk=64 << 10)
    tracker = r.JournalTracker(journal, "journalctl", "a" * 32, UNIT)
    tracker.update()
    assert tracker.phase == "kv_pool_allocated" and ";i=%x;" % len(head) in tracker.cursor
    tracemalloc.start()
    tracker.update()           # 10 MiB of decode lines (about 26 MiB of JSON, over three times the bound)
    dummy, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 << 20, "a poll holds at most a chunk and a line, not the journal (peak %d bytes)" % peak
    tracker.update()
    facts = tracker.facts()
    assert tracker.phase == "ready" and facts["ready_line"] and facts["max_total_num_tokens"] == 46611 and facts["error"] is None
    assert [("--after-cursor" in argv) for argv in journal.polls] == [False, True, True]
    assert tracker.bytes == facts["bytes_read"] == journal.json_bytes
    lines = start.count(b"\n") + 160 * noise.count(b"\n")
    assert facts["journal"]["entries"] == facts["journal"]["kept"] == lines


def test_the_journal_streams_from_a_real_journalctl_like_process(tmp_path, fixtures_dir):
    # journald 252's own output for a unit (tests/fixtures/tool-outputs/journal), printed by a program
    recorded = fixtures_dir / "tool-outputs" / "journal" / "unit-output-252.jsonl"
    script = tmp_path / "journalctl"
    script.write_text("#!/bin/sh\ncat '%s'\necho \"$@\" >&2\nexit 0\n" % recorded)
    script.chmod(0o755)
    tracker = r.JournalTracker(stream, str(script), "71476cfdbad141eb89a82e1fa7cc8e24", "jm-record.service")
    tracker.update()
    last = json.loads(recorded.read_bytes().splitlines()[-1])
    assert tracker.cursor == last["__CURSOR"] and tracker.phase == "loading_weights" and tracker.error is None
    # the rest of the line journald cut at LineMax is the ready line: not a record
    assert tracker.facts()["ready_line"] is False and tracker.facts()["journal"]["continuations"] == 2


def test_not_enough_memory_is_the_parsers_class():
    clock = Clock()
    journal = (b"[2026-11-30 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
               b'  File "/x/pool_configurator.py", line 96, in __post_init__\n'
               b"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.5\n")
    dead = unit_state(clock, ActiveState="failed", SubState="failed", Result="exit-code", ExecMainCode=1, ExecMainStatus=1)
    out = wait(FakeSystem(clock, [dead], journal), clock)
    assert out["cause"]["class"] == "not_enough_memory" and out["log"]["fatal"]["class"] == "not_enough_memory"
    from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log._log_audit import FATAL_CLASSES, audit_bytes
    assert "not_enough_memory" in FATAL_CLASSES and audit_bytes(journal)["facts"]["fatal"]["class"] == "not_enough_memory"


def test_readiness_uses_only_the_log_audits_public_api_and_no_fatal_class_of_its_own():
    """The fatal classes and the causes systemd shows live in sglang_log._facts alone; readiness asks
    LogAuditor.progress() and never classifies."""
    import ast
    import importlib

    from ansible_collections.llmops.sglang.plugins.module_utils.sglang_log import _facts
    tree = ast.parse(open(r.__file__).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and ".sglang_log." in (node.module or ""):
            public = importlib.import_module(node.module).__all__
            assert all(alias.name in public for alias in node.names), node.module
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "auditor":
            assert not node.attr.startswith("_"), node.attr
    strings = set(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))
    assert not strings & (set(_facts.FATAL_CLASSES) - {"none"})
    # the causes systemd and the budget show are the vocabulary's too: every class readiness names is one of them
    named = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            named |= set(v.value for k, v in zip(node.keys, node.values)
                         if isinstance(k, ast.Constant) and k.value == "class" and isinstance(v, ast.Constant))
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and isinstance(node.value.elts[0], ast.Constant) \
                and isinstance(node.value.elts[0].value, str):
            named.add(node.value.elts[0].value)
    assert named == set(_facts.UNIT_CAUSES), named
    assert not [s for s in strings if "ddress already in use" in s or "Not enough memory" in s or "unrecognized arguments" in s]


def test_a_real_failed_unit_reads_as_exited(fixtures_dir):
    """systemd 252's answer for a unit whose main process exited 1 (tests/fixtures/tool-outputs/systemctl-show)."""
    text = (fixtures_dir / "tool-outputs" / "systemctl-show" / "show-failed.txt").read_bytes()
    state = _systemd.show_unit(lambda argv, timeout=None: (0, text, ""), "systemctl", "sglang-sample.service")
    assert state["ExecMainStatus"] == 1 and state["MainPID"] == 0
    assert r._failure_reason(state) == ("exited", "the main process exited with status 1 (Result=exit-code)")
    not_found = (fixtures_dir / "tool-outputs" / "systemctl-show" / "show-not-found.txt").read_bytes()
    assert _systemd.show_unit(lambda argv, timeout=None: (0, not_found, ""), "systemctl", "x.service")["LoadState"] == "not-found"


def test_http_status_asks_a_real_server_through_the_one_client(serve_http):
    import http.server

    from sim_harness import free_port  # tests/unit/sim_harness.py

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            code = 200 if self.path == "/health" else 503
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = serve_http(Health)
    assert r.http_status(server.url + "/health", 5) == (200, None)
    assert r.http_status(server.url + "/health_generate", 5) == (503, None)
    status, error = r.http_status("http://127.0.0.1:%d/health" % free_port(), 5)
    assert status is None and "refused" in error
    assert r.http_status("http://fd00::11:30000/health", 5)[1].startswith("url ")


@pytest.mark.parametrize("part", ["headers", "chunk_size"])
def test_http_status_of_a_trickled_answer_ends_by_the_probe_timeout(part):
    import time

    from bench_servers import trickled  # tests/unit/bench_servers.py

    server = trickled(part)  # 20 s of answer, a byte every 50 ms
    try:
        start = time.monotonic()
        status, error = r.http_status(server.url + "/health", 0.5)
        took = time.monotonic() - start
    finally:
        server.close()
    assert status is None and "within 0.5s" in error and took < 2.5, (error, took)
