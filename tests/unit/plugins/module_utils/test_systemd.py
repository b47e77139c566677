# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one ``systemctl show`` reader, on real systemd 252 answers (tests/fixtures/tool-outputs/systemctl-show), and the
one check of a unit before host_files installs it (the real systemd-analyze on host_files' real temporary file)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _systemd
from ansible_collections.llmops.sglang.plugins.module_utils._host_files import HostFilesError, install
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import shown_commands

READINESS = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "MainPID", "ExecMainCode",
             "ExecMainStatus", "ExecMainStartTimestampMonotonic", "ControlGroup", "TimeoutStopUSec")


@pytest.fixture
def sample(fixtures_dir):
    def read(name):
        return (fixtures_dir / "tool-outputs" / "systemctl-show" / name).read_text()
    return read


def fake_run(stdout, rc=0, stderr=""):
    calls = []

    def run(argv, timeout=None):
        calls.append((argv, timeout))
        return rc, stdout.encode(), stderr
    run.calls = calls
    return run


def test_a_running_unit(sample):
    run = fake_run(sample("show-active.txt"))
    state = _systemd.show("sglang-running.service", READINESS, "/usr/bin/systemctl", run=run)
    assert run.calls == [(["/usr/bin/systemctl", "show", "--property=" + ",".join(READINESS), "--", "sglang-running.service"],
                          _systemd.SHOW_TIMEOUT)]
    assert state["ActiveState"] == "active" and state["MainPID"] == "88" and state["TimeoutStopUSec"] == "20s"
    assert state["ControlGroup"] == "/system.slice/sglang-running.service" and len(state["InvocationID"]) == 32
    assert sorted(state) == sorted(READINESS)


def test_load_state_is_always_asked(sample):
    run = fake_run(sample("show-invocation.txt"))
    assert _systemd.show("sglang-sample.service", ["InvocationID"], run=run) == {
        "LoadState": "loaded", "InvocationID": "d1f29de838f74677b7ba1eda5cf3d086"}
    assert run.calls[0][0][:3] == ["systemctl", "show", "--property=InvocationID,LoadState"]


@pytest.mark.parametrize("name,props", [("show-not-found.txt", READINESS), ("show-execstart-not-found.txt", ["ExecStart"])])
def test_an_unknown_unit_names_the_fix(sample, name, props):
    # systemctl answers rc 0 for a unit it does not know: only LoadState tells
    with pytest.raises(_systemd.SystemdError, match=r"systemd knows no unit nonexistent-llmops.service \(LoadState=not-found\): "
                                                    r"check the name with systemctl list-unit-files 'nonexistent-llmops\*'"):
        _systemd.show("nonexistent-llmops.service", props, run=fake_run(sample(name)))
    state = _systemd.show("nonexistent-llmops.service", props, run=fake_run(sample(name)), missing_ok=True)
    assert state["LoadState"] == "not-found" and "ExecStart" not in state


def test_every_execstart_line_is_kept(sample):
    state = _systemd.show("two-step.service", ["ExecStart"], run=fake_run(sample("show-execstart-two.txt")))
    assert shown_commands(state["ExecStart"]) == ["/bin/true first", "/bin/echo second --tp 2"]
    state = _systemd.show("sglang-sample.service", ["ExecStart"], run=fake_run(sample("show-execstart.txt")))
    assert shown_commands(state["ExecStart"]) == ["/bin/sleep 600 --model-path /models/Qwen3-8B --kv-cache-dtype fp8_e4m3 --port 30000"]


def test_a_host_without_systemd(sample):
    with pytest.raises(_systemd.SystemdError, match=r"systemctl show sglang.service failed \(rc=1\): System has not been booted "
                                                    r".*systemd does not run this host .*use a host booted with systemd"):
        _systemd.show("sglang.service", ["InvocationID"], run=fake_run("", 1, sample("show-no-systemd.err").strip()))


@pytest.mark.parametrize("unit", ["", "--all", "a b", "-x"])
def test_a_name_that_is_not_a_unit_is_refused_before_systemctl_runs(unit):
    run = fake_run("")
    with pytest.raises(_systemd.SystemdError, match="is not a unit name; give a name like sglang-qwen.service"):
        _systemd.show(unit, ["LoadState"], run=run)
    assert run.calls == []


def test_real_runner_missing_systemctl_and_timeout(tmp_path):
    with pytest.raises(_systemd.SystemdError, match=r"cannot run .*/systemctl: No such file or directory; this host needs systemd"):
        _systemd.show("sglang.service", ["LoadState"], str(tmp_path / "systemctl"))
    slow = tmp_path / "slow-systemctl"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(_systemd.SystemdError, match="did not finish within 1 s; check that systemd answers"):
        _systemd.show("sglang.service", ["LoadState"], str(slow), timeout=1)


def test_real_runner_reads_a_stand_in(tmp_path, sample):
    (tmp_path / "out").write_text(sample("show-active.txt"))
    stand_in = tmp_path / "systemctl"
    stand_in.write_text("#!/bin/sh\necho \"$@\" > %s/argv\ncat %s/out\n" % (tmp_path, tmp_path))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    state = _systemd.show("sglang-running.service", ["ActiveState", "LoadState"], str(stand_in))
    assert state["ActiveState"] == "active"
    assert (tmp_path / "argv").read_text().split() == ["show", "--property=ActiveState,LoadState", "--", "sglang-running.service"]


def test_parse_show_keeps_values_with_equals_signs():
    assert _systemd.parse_show("ActiveState=active\nExecStart={ path=/x ; argv[]=/x a=b }\nnoise\n") == {
        "ActiveState": "active", "ExecStart": "{ path=/x ; argv[]=/x a=b }"}


def _run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_a_unit_is_verified_under_its_own_name_before_host_files_installs_it(tmp_path):
    unit = tmp_path / "sglang-router.service"
    good = "[Service]\nExecStart=/bin/true\n"

    def write(text, strict):
        files = [{"path": str(unit), "content": text, "owner": "root", "group": "root", "mode": "0644",
                  "validate": _systemd.verify_command(unit.name, strict)}]
        return install([], files, run=_run)

    # host_files' temporary file (.sglang-router.service.XXXX) is no unit name: systemd-analyze refuses it as it is
    plain = [{"path": str(unit), "content": good, "owner": "root", "group": "root", "mode": "0644",
              "validate": "systemd-analyze verify --man=no %s"}]
    with pytest.raises(HostFilesError, match="Failed to prepare filename"):
        install([], plain, run=_run)
    assert write(good, strict=True)["paths"][str(unit)]["differs"] == ["missing"] and unit.read_text() == good
    with pytest.raises(HostFilesError, match="failed its validation .*nor an absolute path: relative"):
        write("[Service]\nExecStart=relative/sglang-router\n", strict=False)
    warned = good + "NoSuchKey=1\n"
    with pytest.raises(HostFilesError, match=r"Unknown key .NoSuchKey. in section \[Service\]"):
        write(warned, strict=True)
    assert unit.read_text() == good and os.listdir(tmp_path) == [unit.name]
    assert write(warned, strict=False)["paths"][str(unit)]["differs"] == ["content"] and unit.read_text() == warned


@pytest.mark.parametrize("name", ["sglang-router", "a b.service", "x'.service", "x\\y.service", "", None])
def test_a_name_the_verify_command_cannot_carry_is_refused(name):
    with pytest.raises(ValueError, match="is not a unit file name"):
        _systemd.verify_command(name, strict=False)
