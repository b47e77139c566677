"""host_files: a role's directories and files compared and installed in one module run, on a real filesystem."""

import grp
import json
import os
import pwd
import stat

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils._host_files import HostFilesError, install
from ansible_collections.llmops.sglang.plugins.modules import host_files

# Passes when the file holds the word "valid" (a real command run on the temporary file, like systemd-analyze verify).
VALIDATE = "/bin/sh -c 'grep -q valid \"$1\"' validate %s"
SECRET = "SGLANG_API_KEY='sk-7f3a9c'\n"


def run(args, capsys, **flags):
    with patch_module_args(dict(args, **{"_ansible_" + k: v for k, v in flags.items()})):
        with pytest.raises(SystemExit):
            host_files.main()
    return json.loads(capsys.readouterr().out)


def layout(tmp_path, unit="valid unit\n"):
    conf = tmp_path / "etc" / "sglang"
    return {
        "directories": [{"path": str(conf)}],
        "files": [{"path": str(conf / "sglang.service"), "content": unit, "validate": VALIDATE},
                  {"path": str(conf / "sglang.env"), "secret_content": SECRET, "mode": "0600"}],
    }


def test_installs_then_a_second_run_changes_nothing(tmp_path, capsys):
    first = run(layout(tmp_path), capsys)
    conf = tmp_path / "etc" / "sglang"
    assert first["changed"] is True and not first.get("failed")
    assert first["paths"][str(conf / "sglang.env")] == {"changed": True, "existed": False, "differs": ["missing"]}
    assert (conf / "sglang.service").read_text() == "valid unit\n" and (conf / "sglang.env").read_text() == SECRET
    assert stat.S_IMODE((conf / "sglang.env").stat().st_mode) == 0o600
    assert stat.S_IMODE(conf.stat().st_mode) == 0o755 and (conf / "sglang.service").stat().st_uid == os.getuid()
    second = run(layout(tmp_path), capsys)
    assert second["changed"] is False
    assert all(p == {"changed": False, "existed": True, "differs": []} for p in second["paths"].values())
    assert sorted(os.listdir(conf)) == ["sglang.env", "sglang.service"]


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path, capsys):
    run(layout(tmp_path), capsys)
    unit = tmp_path / "etc" / "sglang" / "sglang.service"
    result = run(layout(tmp_path, "valid unit, new flag\n"), capsys, check_mode=True, diff=True)
    assert result["changed"] is True and result["paths"][str(unit)]["differs"] == ["content"]
    assert unit.read_text() == "valid unit\n"
    assert result["diff"] == [{"before_header": str(unit), "after_header": str(unit), "before": "valid unit\n",
                               "after": "valid unit, new flag\n"}]


def test_a_secret_is_never_in_the_result_diff_or_log_even_when_it_changes(tmp_path, capsys):
    run(layout(tmp_path), capsys)
    env = tmp_path / "etc" / "sglang" / "sglang.env"
    args = layout(tmp_path)
    args["files"][1]["secret_content"] = "SGLANG_API_KEY='sk-rotated-0b1c'\n"
    with patch_module_args(dict(args, _ansible_diff=True)):
        with pytest.raises(SystemExit):
            host_files.main()
    out = capsys.readouterr().out
    assert "sk-rotated-0b1c" not in out and "sk-7f3a9c" not in out
    assert json.loads(out)["paths"][str(env)]["differs"] == ["content"] and json.loads(out)["diff"] == []
    assert env.read_text() == "SGLANG_API_KEY='sk-rotated-0b1c'\n"


def test_a_multi_line_secret_never_reaches_the_hosts_journal(tmp_path, monkeypatch):
    # what AnsibleModule hands to journald (message and fields) for this invocation
    logged = []
    monkeypatch.setattr(basic.AnsibleModule, "log", lambda self, msg, log_args=None: logged.append((msg, log_args)))
    args = layout(tmp_path)
    args["files"][1]["secret_content"] = "# managed\nSGLANG_API_KEY='sk-rotated-0b1c'\nHF_TOKEN='hf_x'\n"
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            host_files.main()
    assert len(logged) == 1 and logged[0][0].startswith("Invoked with ")
    text = repr(logged)
    assert "sk-rotated-0b1c" not in text and "hf_x" not in text and "sglang.service" in text and "valid unit" in text


def test_a_failed_validation_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, capsys):
    run(layout(tmp_path), capsys)
    conf = tmp_path / "etc" / "sglang"
    result = run(layout(tmp_path, "broken unit\n"), capsys)
    assert result["failed"] is True
    assert "sglang.service failed its validation (/bin/sh, rc 1)" in result["msg"] and "fix the content" in result["msg"]
    assert (conf / "sglang.service").read_text() == "valid unit\n"
    assert sorted(os.listdir(conf)) == ["sglang.env", "sglang.service"]


def test_a_mode_drift_is_fixed_in_place_and_a_symlink_is_replaced_not_followed(tmp_path):
    args = layout(tmp_path)
    install(args["directories"], args["files"], run=lambda argv: (0, "", ""))
    conf = tmp_path / "etc" / "sglang"
    os.chmod(conf / "sglang.env", 0o644)
    inode = (conf / "sglang.env").stat().st_ino
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    (conf / "sglang.service").unlink()
    os.symlink(outside, conf / "sglang.service")
    result = install(args["directories"], args["files"], run=lambda argv: (0, "", ""))
    assert result["paths"][str(conf / "sglang.env")]["differs"] == ["mode"]
    assert result["paths"][str(conf / "sglang.service")]["differs"] == ["type"]
    assert (conf / "sglang.env").stat().st_ino == inode and stat.S_IMODE((conf / "sglang.env").stat().st_mode) == 0o600
    assert not os.path.islink(conf / "sglang.service") and outside.read_text() == "keep\n"


def test_an_unknown_owner_fails_with_the_fix_but_is_a_change_in_check_mode(tmp_path):
    files = [{"path": str(tmp_path / "f"), "content": "x", "owner": "no-such-user-llmops", "group": "root", "mode": "0644"}]
    with pytest.raises(HostFilesError, match="does not exist on the host; create the account first"):
        install([], files)
    assert install([], files, check=True)["paths"][str(tmp_path / "f")]["changed"] is True
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("owner", ["ro\x00ot", ""])
def test_an_owner_that_is_no_account_name_fails_with_the_fix_in_check_mode_too(tmp_path, owner):
    files = [{"path": str(tmp_path / "f"), "content": "x", "owner": owner, "group": "root", "mode": "0644"}]
    for check in (False, True):
        with pytest.raises(HostFilesError, match="is not an account name"):
            install([], files, check=check)


@pytest.mark.parametrize("directories, files, message", [
    ([{"path": "etc/sglang", "owner": "root", "group": "root", "mode": "0755"}], [], "must be an absolute path"),
    ([], [{"path": "/tmp/x", "content": "x", "owner": "root", "group": "root", "mode": "rw-r--r--"}], "not an octal file mode"),
    ([], [{"path": "/tmp/x", "content": "x", "owner": "root", "group": "root", "mode": "0644", "validate": "true"}],
     "must be a command with %s"),
    ([{"path": "/tmp/x", "owner": "root", "group": "root", "mode": "0755"}],
     [{"path": "/tmp/x", "content": "x", "owner": "root", "group": "root", "mode": "0644"}], "listed twice"),
])
def test_bad_entries_name_the_cause(directories, files, message):
    with pytest.raises(HostFilesError, match=message):
        install(directories, files, check=True)


def test_a_directory_where_a_file_goes_and_a_missing_parent_are_clear_errors(tmp_path, capsys):
    (tmp_path / "unit").mkdir()
    result = run({"files": [{"path": str(tmp_path / "unit"), "content": "x"}]}, capsys)
    assert result["failed"] is True and "is a directory: move it away" in result["msg"]
    result = run({"files": [{"path": str(tmp_path / "missing" / "unit"), "content": "x"}]}, capsys)
    assert result["failed"] is True and "check that its directory exists (list it under directories)" in result["msg"]
    assert "Traceback" not in result["msg"]


def test_content_and_secret_content_are_exclusive(tmp_path, capsys):
    result = run({"files": [{"path": str(tmp_path / "f"), "content": "a", "secret_content": "b"}]}, capsys)
    assert result["failed"] is True and "mutually exclusive" in result["msg"]


def test_a_failed_validation_of_a_secret_file_does_not_repeat_what_the_validator_printed(tmp_path, capsys):
    """A validator that prints the file it read (grep does) must not carry the secret into the failure message."""
    env = tmp_path / "sglang.env"
    args = {"files": [{"path": str(env), "secret_content": SECRET, "mode": "0600",
                       "validate": "/bin/sh -c 'cat \"$1\"; exit 3' validate %s"}]}
    result = run(args, capsys)
    assert result["failed"] is True and "rc 3" in result["msg"] and "output not shown" in result["msg"]
    assert "sk-7f3a9c" not in json.dumps(result) and not env.exists()


def _other_account():
    """A user and a group of this machine other than the running user's own (check mode compares, never chowns)."""
    user = next(p.pw_name for p in pwd.getpwall() if p.pw_uid != os.getuid())
    group = next(g.gr_name for g in grp.getgrall() if g.gr_gid != os.getgid())
    return user, group


def test_the_diff_shows_created_paths_and_owner_and_mode_before_and_after_but_never_a_secret_text(tmp_path, capsys):
    conf = tmp_path / "etc" / "sglang"
    unit, env = str(conf / "sglang.service"), str(conf / "sglang.env")
    me, my_group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    first = run(dict(layout(tmp_path), directories=[{"path": str(conf), "owner": me, "group": my_group}]), capsys, diff=True)
    created = {(d["before_header"], json.dumps(d["before"], sort_keys=True)): d["after"] for d in first["diff"]}
    assert created[(str(conf), json.dumps({"path": str(conf), "state": "absent"}))] == {
        "path": str(conf), "state": "directory", "owner": me, "group": my_group, "mode": "0755"}
    assert created[(env, json.dumps({"path": env, "state": "absent"}))] == {
        "path": env, "state": "file", "owner": "root", "group": "root", "mode": "0600"}
    assert {"before_header": unit, "after_header": unit, "before": "", "after": "valid unit\n"} in first["diff"]
    assert SECRET not in json.dumps(first) and "sk-7f3a9c" not in json.dumps(first)

    os.chmod(env, 0o644)
    os.chmod(conf, 0o700)
    user, group = _other_account()
    args = layout(tmp_path)
    args["files"][0].update(owner=user, group=group)
    result = run(args, capsys, check_mode=True, diff=True)
    assert result["paths"][unit]["differs"] == ["owner"] and result["paths"][env]["differs"] == ["mode"]
    assert result["diff"] == [
        {"before_header": str(conf), "after_header": str(conf), "before": {"path": str(conf), "mode": "0700"},
         "after": {"path": str(conf), "mode": "0755"}},
        {"before_header": unit, "after_header": unit, "before": {"path": unit, "owner": me, "group": my_group},
         "after": {"path": unit, "owner": user, "group": group}},
        {"before_header": env, "after_header": env, "before": {"path": env, "mode": "0644"},
         "after": {"path": env, "mode": "0600"}},
    ]
    assert "diff" not in run(args, capsys, check_mode=True)


def test_a_symlink_in_place_of_a_file_is_shown_as_a_link_and_its_target_is_never_read(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("SECRET OF ANOTHER FILE\n")
    link = tmp_path / "unit"
    os.symlink(outside, link)
    files = [{"path": str(link), "content": "new\n", "owner": "root", "group": "root", "mode": "0644"}]
    diff = install([], files, check=True)["diff"]
    assert diff[0] == {"before_header": str(link), "after_header": str(link), "before": "", "after": "new\n"}
    assert diff[1]["before"] == {"path": str(link), "state": "link"} and diff[1]["after"]["state"] == "file"
    assert "ANOTHER" not in json.dumps(diff)
