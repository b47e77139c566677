"""host_state: what a role would change, read in one module run from the real host (accounts, dpkg, files, commands).
What it says about an account is held to Ansible's own group and user modules, run in check mode on the same account."""

import base64
import contextlib
import grp
import io
import json
import os
import pathlib
import pwd
import shutil
import stat

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args
from ansible.modules import group as group_module
from ansible.modules import user as user_module

from ansible_collections.llmops.sglang.plugins.module_utils._host_state import account_drift
from ansible_collections.llmops.sglang.plugins.modules import host_state

ROOT = pathlib.Path(__file__).resolve().parents[4]


def run(args, capsys, **flags):
    with patch_module_args(dict(args, **{"_ansible_" + k: v for k, v in flags.items()})):
        with pytest.raises(SystemExit):
            host_state.main()
    return json.loads(capsys.readouterr().out)


def my_account(user=None, group=None, home=None):
    """The running user's real account, as the service account role's tasks would get it: no drift."""
    me = pwd.getpwuid(os.getuid())
    name = grp.getgrgid(me.pw_gid).gr_name
    home_mode = "%04o" % stat.S_IMODE(os.stat(me.pw_dir).st_mode)
    return {"group": dict({"name": name, "system": True}, **(group or {})),
            "user": dict({"name": me.pw_name, "group": name, "groups": [], "append": True, "system": True,
                          "shell": me.pw_shell, "home": me.pw_dir, "create_home": True, "comment": me.pw_gecos}, **(user or {})),
            "home": dict({"path": me.pw_dir, "owner": me.pw_name, "group": name, "mode": home_mode}, **(home or {}))}


def builtin_changed(module, args):
    """Whether Ansible's own module, run in check mode on this machine, would change something."""
    out = io.StringIO()
    with patch_module_args(dict(args, _ansible_check_mode=True)), contextlib.redirect_stdout(out):
        with pytest.raises(SystemExit):
            module.main()
    result = json.loads(out.getvalue())
    assert not result.get("failed"), result
    return result["changed"]


def other_group():
    """A group of this machine the running user is not in."""
    me = pwd.getpwuid(os.getuid())
    return next(g.gr_name for g in grp.getgrall() if g.gr_gid != me.pw_gid and me.pw_name not in g.gr_mem)


def test_an_account_as_it_is_has_no_drift_and_each_difference_is_named():
    assert account_drift(my_account()) == []
    assert account_drift(my_account(user={"shell": "/usr/sbin/nologin-not"})) == ["shell"]
    assert account_drift(my_account(user={"comment": "SGLang server, renamed"})) == ["comment"]
    assert account_drift(my_account(user={"home": "/nonexistent-home"})) == ["home", "home_dir"]
    assert account_drift(my_account(user={"home": "/nonexistent-home", "create_home": False})) == ["home"]
    mode = my_account()["home"]["mode"]
    assert account_drift(my_account(home={"mode": "0777" if mode != "0777" else "0700"})) == ["home_dir"]
    assert account_drift(my_account(user={"groups": ["no-such-group-llmops"]})) == ["groups"]
    assert account_drift(my_account(user={"groups": [other_group()]})) == ["groups"]
    assert account_drift(my_account(user={"group": other_group()})) == ["primary_group"]
    assert account_drift(my_account(user={"name": "no-such-user-llmops"})) == ["user"]
    assert account_drift(my_account(group={"name": "no-such-group-llmops"})) == ["group"]


@pytest.mark.skipif(os.getuid() != 0, reason="the user module reads /etc/shadow (CI runs as root)")
@pytest.mark.parametrize("user, group", [
    ({}, {}),
    ({"shell": "/usr/sbin/nologin-not"}, {}),
    ({"comment": "SGLang server, renamed"}, {}),
    ({"home": "/nonexistent-home"}, {}),
    ({"home": "/nonexistent-home", "create_home": False}, {}),
    ({"groups": ["OTHER"]}, {}),
    ({"groups": ["OTHER"], "append": False}, {}),
    ({"groups": [], "append": False}, {}),
    ({"group": "OTHER"}, {}),
    ({"name": "no-such-user-llmops"}, {}),
    ({"system": False}, {"system": False}),
    ({}, {"name": "no-such-group-llmops"}),
])
def test_the_drift_is_what_ansible_s_own_group_and_user_modules_would_change(user, group):
    other = other_group()
    user = {k: ([other] if v == ["OTHER"] else other if v == "OTHER" else v) for k, v in user.items()}
    account = my_account(user=user, group=group)
    drift = account_drift(account)
    assert ("group" in drift) == builtin_changed(group_module, account["group"])
    if "group" not in drift:   # the home entry is the real home's: what else differs is the user module's
        assert bool(drift) == builtin_changed(user_module, account["user"]), drift


def test_an_argument_host_state_does_not_compare_fails_the_read(capsys):
    """A new argument of a write (anchored into the read) must not pass unread: it would never reach a settled host."""
    account = my_account()
    account["user"]["password_lock"] = True
    result = run({"accounts": [account]}, capsys)
    assert result["failed"] is True and "accounts.user.password_lock" in result["msg"]
    latest = run({"apt": {"name": ["dpkg"], "state": "latest"}}, capsys)
    assert latest["failed"] is True and latest["msg"] == "value of state must be one of: present, got: latest found in apt"


def _tasks(path):
    return yaml.safe_load((ROOT / path).read_text())


def test_the_service_account_is_read_with_the_arguments_its_writes_get():
    read, writes = [t for t in _tasks("roles/_service_account/tasks/main.yml") if "llmops.sglang.host_state" in t or "block" in t]
    [account] = read["llmops.sglang.host_state"]["accounts"]
    group_task, user_task, home_task = writes["block"]
    # the same YAML nodes (anchors): an argument added to a write is an argument of the read
    assert group_task["ansible.builtin.group"] is account["group"] and user_task["ansible.builtin.user"] is account["user"]
    assert home_task["llmops.sglang.host_files"]["directories"] == [account["home"]]
    assert home_task["llmops.sglang.host_files"]["directories"][0] is account["home"]


def test_the_runtime_reads_its_packages_directory_and_file_with_the_arguments_its_writes_get():
    tasks = _tasks("roles/sglang_runtime/tasks/packages.yml")
    [read] = [t for t in tasks if "llmops.sglang.host_state" in t]
    [apt] = [t for t in tasks if "ansible.builtin.apt" in t]
    [include] = [t for t in tasks if "ansible.builtin.include_tasks" in t]
    state = read["llmops.sglang.host_state"]
    assert apt["ansible.builtin.apt"] is state["apt"]
    assert include["vars"]["_sglang_runtime_dirs"] is state["directories"] and include["vars"]["_sglang_runtime_files"] is state["files"]
    applied = [t.get("llmops.sglang.host_files") for t in _tasks("roles/sglang_runtime/tasks/packages_apply.yml")]
    assert {"directories": "{{ _sglang_runtime_dirs }}"} in applied and {"files": "{{ _sglang_runtime_files }}"} in applied


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
    result = run({"apt": {"name": ["dpkg", "llmops-no-such-package"], "state": "present"}}, capsys)
    assert result["packages_missing"] == ["llmops-no-such-package"]


def test_accounts_are_keyed_by_user(capsys):
    result = run({"accounts": [my_account(), my_account(user={"name": "no-such-user-llmops"})]}, capsys)
    assert result["accounts"] == {my_account()["user"]["name"]: {"drift": []}, "no-such-user-llmops": {"drift": ["user"]}}


def test_commands_need_names_of_their_own(capsys):
    result = run({"commands": [{"name": "a", "argv": ["/bin/true"]}, {"name": "a", "argv": ["/bin/false"]}]}, capsys)
    assert result["failed"] is True and "a name of its own" in result["msg"]
    zero = run({"commands": [{"name": "a", "argv": ["/bin/true"], "timeout": 0}]}, capsys)
    assert zero["failed"] is True and "timeout 0 must be between 1 and" in zero["msg"]
