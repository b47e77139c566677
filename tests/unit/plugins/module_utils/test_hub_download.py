# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_hub_download and the hub_download module: the stall rule on samples, then real processes that download, hang,
fail and ignore SIGTERM, with the bytes measured on disk as the role's download leaves them."""

import json
import os
import sys
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils import _hub_download
from ansible_collections.llmops.sglang.plugins.module_utils._hub_download import StallWatch, dir_bytes, run_download
from ansible_collections.llmops.sglang.plugins.modules import hub_download

# A stand-in hub CLI: `download REPO --revision R --local-dir DIR --max-workers N` in one of four modes (the revision):
# slow (a partial file grows 64 KiB every 0.2 s, then is moved in place), hang (one partial chunk, then nothing),
# stubborn (hang, ignoring SIGTERM), fail (exit 3 with the hub's error), loud (1 MiB on stdout, then nothing). It records its argv, pid and HF_TOKEN.
FAKE_CLI = r'''
import json, os, signal, sys, time
argv = sys.argv[1:]
mode, local_dir = argv[argv.index("--revision") + 1], argv[argv.index("--local-dir") + 1]
with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "record.json"), "w") as f:
    json.dump({"argv": sys.argv, "pid": os.getpid(), "token": os.environ.get("HF_TOKEN")}, f)
if mode == "loud":
    sys.stdout.write("x" * (1 << 20))
    sys.stdout.flush()
    time.sleep(120)
if mode == "fail":
    sys.stderr.write("RevisionNotFoundError: 404 Client Error. Revision Not Found\n")
    sys.exit(3)
partial = os.path.join(local_dir, ".cache", "huggingface", "download")
os.makedirs(partial, exist_ok=True)
tmp = os.path.join(partial, "model.safetensors.incomplete")
with open(tmp, "wb") as f:
    f.write(b"x" * 65536)
    f.flush()
    if mode == "slow":
        for _ in range(10):
            time.sleep(0.2)
            f.write(b"x" * 65536)
            f.flush()
if mode == "slow":
    os.replace(tmp, os.path.join(local_dir, "model.safetensors"))
    print(local_dir)
    sys.exit(0)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(120)
'''


@pytest.fixture
def cli(tmp_path):
    path = tmp_path / "hf"
    path.write_text("#!%s\n%s" % (sys.executable, FAKE_CLI))
    path.chmod(0o755)
    return path


def argv(cli, mode, local_dir):
    return [str(cli), "download", "nvidia/Qwen3.5-397B-A17B-NVFP4", "--revision", mode, "--local-dir", str(local_dir),
            "--max-workers", "8"]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ---- the rule, on samples ---------------------------------------------------------------------------------------

def test_bytes_that_do_not_change_stall_after_the_timeout_and_not_before():
    watch = StallWatch(600, start=1000)
    assert [watch.see(1000 + t, 5 << 30) for t in (60, 300, 599)] == [None, None, None]
    assert watch.see(1600, 5 << 30) == 600


def test_a_slow_download_that_still_grows_never_stalls():
    watch = StallWatch(600, start=0)
    assert all(watch.see(t, t * 10) is None for t in range(60, 7200, 60))


def test_the_clock_restarts_at_every_change_even_a_shrinking_one():
    watch = StallWatch(600, start=0)
    assert watch.see(500, 100) is None and watch.see(590, 200) is None
    assert watch.see(1100, 200) is None  # 510 s after the last change
    assert watch.see(1150, 50) is None  # a partial file started again: activity
    assert watch.see(1749, 50) is None and watch.see(1750, 50) == 600


def test_a_download_that_never_writes_stalls_from_its_start_and_zero_never_stalls():
    assert StallWatch(60, start=100).see(160, 0) == 60
    assert StallWatch(60, start=100).see(159, 0) is None
    assert StallWatch(0, start=0).see(10 ** 6, 0) is None


def test_dir_bytes_counts_the_hubs_partial_files_and_no_links(tmp_path):
    partial = tmp_path / ".cache" / "huggingface" / "download"
    partial.mkdir(parents=True)
    (partial / "model-00001.safetensors.incomplete").write_bytes(b"x" * 3000)
    (tmp_path / "config.json").write_bytes(b"{}")
    (tmp_path / "link").symlink_to("/etc/passwd")
    assert dir_bytes(str(tmp_path)) == 3002
    assert dir_bytes(str(tmp_path), max_entries=1) < 3002
    assert dir_bytes(str(tmp_path / "missing")) == 0


# ---- real processes ---------------------------------------------------------------------------------------------

def test_a_hung_download_is_stopped_with_the_cause_and_the_fixes(cli, tmp_path):
    start = time.monotonic()
    res = run_download(argv(cli, "hang", tmp_path / "ckpt"), str(tmp_path / "ckpt"), dict(os.environ), stall_timeout=1,
                       sample_every=0.1)
    took = time.monotonic() - start
    pid = json.loads((tmp_path / "record.json").read_text())["pid"]
    assert res["stalled"] is True and res["rc"] is None and res["bytes"] == 65536 and 1 <= res["idle_s"] < 3
    assert res["msg"].startswith("no progress for 1 s (stall_timeout 1): the bytes under %s" % (tmp_path / "ckpt"))
    for fix in (".incomplete partial files", "stayed at 0.1 MiB", "the next run resumes it", "HTTPS_PROXY",
                "HF token", "sglang_runtime_download_stall_timeout"):
        assert fix in res["msg"]
    assert not alive(pid) and took < 5, took


def test_a_cli_that_ignores_sigterm_is_killed(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(_hub_download, "TERM_GRACE", 0.5)
    res = run_download(argv(cli, "stubborn", tmp_path / "ckpt"), str(tmp_path / "ckpt"), dict(os.environ), stall_timeout=1,
                       sample_every=0.1)
    assert res["stalled"] and not alive(json.loads((tmp_path / "record.json").read_text())["pid"])


def test_a_slow_download_finishes_under_a_short_stall_timeout(cli, tmp_path):
    res = run_download(argv(cli, "slow", tmp_path / "ckpt"), str(tmp_path / "ckpt"), dict(os.environ), stall_timeout=1,
                       sample_every=0.1)
    assert (res["rc"], res["stalled"], res["bytes"], res["msg"]) == (0, False, 11 * 65536, "")
    assert res["stdout_lines"] == [str(tmp_path / "ckpt")]


def test_a_failing_cli_reports_its_rc_and_stderr(cli, tmp_path):
    res = run_download(argv(cli, "fail", tmp_path / "ckpt"), str(tmp_path / "ckpt"), dict(os.environ))
    assert (res["rc"], res["stalled"], res["msg"]) == (3, False, "hf exited with rc 3")
    assert res["stderr_lines"] == ["RevisionNotFoundError: 404 Client Error. Revision Not Found"]


def test_a_cli_that_floods_its_output_is_stopped(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(_hub_download, "MAX_OUTPUT_BYTES", 65536)
    res = run_download(argv(cli, "loud", tmp_path / "ckpt"), str(tmp_path / "ckpt"), dict(os.environ), stall_timeout=0,
                       sample_every=0.1)
    assert res["rc"] is None and not res["stalled"] and "printed more than 65536 bytes and was stopped" in res["msg"]
    assert sum(len(line) for line in res["stdout_lines"]) <= _hub_download.OUTPUT_BYTES
    assert not alive(json.loads((tmp_path / "record.json").read_text())["pid"])


def test_a_missing_cli_is_named(tmp_path):
    res = run_download([str(tmp_path / "nope"), "download"], str(tmp_path), dict(os.environ))
    assert res["rc"] is None and "cannot run %s (No such file or directory)" % (tmp_path / "nope") in res["msg"]


# ---- the module -------------------------------------------------------------------------------------------------

def run_module(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            hub_download.main()
    return json.loads(capsys.readouterr().out)


def test_the_module_gives_the_token_only_in_the_environment_and_fails_a_stall(cli, tmp_path, capsys, monkeypatch):
    token = "hf_unitTokenThatMustNeverShow0123456789"
    monkeypatch.setenv("HF_TOKEN", "hf_fromTheEnvironmentOfAnsible")
    base = {"cli": str(cli), "repo": "nvidia/Qwen3.5-397B-A17B-NVFP4", "local_dir": str(tmp_path / "ckpt")}
    res = run_module(dict(base, revision="slow", token=token, stall_timeout=1, sample_interval=0.1), capsys)
    record = json.loads((tmp_path / "record.json").read_text())
    assert not res.get("failed") and res["rc"] == 0 and res["changed"] is True
    assert record["token"] == token and token not in json.dumps(record["argv"]) and token not in json.dumps(res)
    assert record["argv"][1:] == ["download", "nvidia/Qwen3.5-397B-A17B-NVFP4", "--revision", "slow", "--local-dir",
                                  str(tmp_path / "ckpt"), "--max-workers", "8"]
    res = run_module(dict(base, revision="fail"), capsys)
    assert json.loads((tmp_path / "record.json").read_text())["token"] is None  # no token: none from Ansible's environment
    assert res["failed"] and res["rc"] == 3 and res["msg"] == "hf exited with rc 3"
    res = run_module(dict(base, revision="hang", stall_timeout=1, sample_interval=0.1), capsys)
    assert res["failed"] and res["stalled"] and res["msg"].startswith("no progress for 1 s")


@pytest.mark.parametrize("option,value,message", [
    ("cli", "hf", "cli must be an absolute path (the hf CLI in the runtime venv), got 'hf'"),
    ("stall_timeout", -1, "stall_timeout must be at least 0, got -1"),
    ("max_workers", 0, "max_workers must be at least 1, got 0"),
    ("sample_interval", 0, "sample_interval must be seconds in (0, 3600], got 0.0"),
])
def test_bad_options_are_named(tmp_path, capsys, option, value, message):
    res = run_module({"cli": "/bin/false", "repo": "a/b", "revision": "r", "local_dir": str(tmp_path), option: value}, capsys)
    assert res["failed"] and res["msg"] == message
