"""host_state: what a role would change, read in one module run from the real host (accounts, dpkg, files, commands)."""

import base64
import json
import os
import pwd
import shutil
import stat

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils._host_state import account_drift
from ansible_collections.llmops.sglang.plugins.modules import host_state


def run(args, capsys, **flags):
    with patch_module_args(dict(args, **{"_ansible_" + k: v for k, v in flags.items()})):
        with pytest.raises(SystemExit):
            host_state.main()
    return json.loads(capsys.readouterr().out)


def root_account(**changes):
    """The running user's real account, as the service account role would ask for it: no drift."""
    me = pwd.getpwuid(os.getuid())
    home_mode = "%04o" % stat.S_IMODE(os.stat(me.pw_dir).st_mode)
    account = {"user": me.pw_name, "group": __import__("grp").getgrgid(me.pw_gid).gr_name, "groups": [],
               "home": me.pw_dir, "shell": me.pw_shell, "comment": me.pw_gecos, "home_mode": home_mode}
    return dict(account, **changes)


def test_an_account_as_it_is_has_no_drift_and_each_difference_is_named():
    assert account_drift(root_account()) == []
    assert account_drift(root_account(shell="/usr/sbin/nologin-not")) == ["shell"]
    assert account_drift(root_account(comment="SGLang server, renamed")) == ["comment"]
    assert account_drift(root_account(home="/nonexistent-home")) == ["home", "home_dir"]
    mode = root_account()["home_mode"]
    assert account_drift(root_account(home_mode="0777" if mode != "0777" else "0700")) == ["home_dir"]
    assert account_drift(root_account(groups=["no-such-group-llmops"])) == ["groups"]
    assert account_drift(root_account(user="no-such-user-llmops")) == ["user"]
    assert account_drift(root_account(group="no-such-group-llmops")) == ["group"]


def test_one_run_reads_files_paths_commands_and_compares_files_without_writing(tmp_path, capsys):
    stamp = tmp_path / "stamp.json"
    stamp.write_text('{"installed_at": "2026-11-30T10:00:00Z"}\n')
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    req = tmp_path / "requirements.txt"
    req.write_text("sglang==0.5.22\n")
    req.chmod(0o644)
    result = run({
        "paths": [str(tmp_path), str(tmp_path / "absent")],
        "read": [str(stamp), str(big), str(tmp_path / "absent")], "read_limit": 1024,
        "commands": [{"name": "echo", "argv": ["/bin/echo", "[]"]},
                     {"name": "pip_list", "argv": [str(tmp_path / "venv/bin/python"), "-m", "pip", "list"]},
                     {"name": "slow", "argv": ["/bin/sleep", "5"], "timeout": 1}],
        "directories": [{"path": str(tmp_path / "venv")}],
        "files": [{"path": str(req), "content": "sglang==0.5.23\n"}],
    }, capsys, check_mode=True)
    assert result["changed"] is False and not result.get("failed")
    assert result["stat"][str(tmp_path)]["isdir"] is True and result["stat"][str(tmp_path / "absent")] == {"exists": False}
    assert base64.b64decode(result["read"][str(stamp)]["content"]) == stamp.read_bytes()
    assert result["read"][str(big)]["content"] is None and "larger than 1024 bytes" in result["read"][str(big)]["error"]
    assert result["read"][str(tmp_path / "absent")] == {"exists": False, "content": None, "error": None}
    assert result["commands"]["echo"]["rc"] == 0 and result["commands"]["echo"]["stdout"] == "[]\n"
    assert result["commands"]["pip_list"]["not_found"] is True and result["commands"]["pip_list"]["rc"] == 127
    assert result["commands"]["slow"]["timed_out"] is True
    assert result["files"][str(req)]["differs"] == ["content"]
    assert result["files"][str(tmp_path / "venv")]["differs"] == ["missing"]
    assert req.read_text() == "sglang==0.5.22\n" and not (tmp_path / "venv").exists()


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs a Debian host (CI is Debian 12)")
def test_packages_dpkg_does_not_list_as_installed_are_missing(capsys):
    result = run({"packages": ["dpkg", "llmops-no-such-package"]}, capsys)
    assert result["packages_missing"] == ["llmops-no-such-package"]


def test_accounts_are_keyed_by_user(capsys):
    result = run({"accounts": [root_account(), root_account(user="no-such-user-llmops")]}, capsys)
    assert result["accounts"] == {root_account()["user"]: {"drift": []}, "no-such-user-llmops": {"drift": ["user"]}}


def test_commands_need_names_of_their_own(capsys):
    result = run({"commands": [{"name": "a", "argv": ["/bin/true"]}, {"name": "a", "argv": ["/bin/false"]}]}, capsys)
    assert result["failed"] is True and "a name of its own" in result["msg"]
    zero = run({"commands": [{"name": "a", "argv": ["/bin/true"], "timeout": 0}]}, capsys)
    assert zero["failed"] is True and "timeout 0 must be between 1 and" in zero["msg"]
