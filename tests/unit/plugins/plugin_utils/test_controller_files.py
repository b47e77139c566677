"""_controller_files.save: what the action plugin llmops.sglang.controller_files writes on the controller."""

import os
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._controller_files import ControllerFilesError, save


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_then_reports_nothing_changed(tmp_path):
    target = tmp_path / "reports" / "gpu01"
    first = save(str(target), {"preflight.json": '{"passed": true}\n'})
    assert first == {"changed": True, "dir": str(target), "written": [str(target / "preflight.json")]}
    assert (target / "preflight.json").read_text() == '{"passed": true}\n'
    assert _mode(target / "preflight.json") == 0o644 and _mode(target) == 0o755
    assert save(str(target), {"preflight.json": '{"passed": true}\n'}) == {"changed": False, "dir": str(target), "written": []}


def test_only_the_changed_file_is_rewritten(tmp_path):
    save(str(tmp_path), {"a.json": "1\n", "b.md": "b\n"})
    inode = os.stat(tmp_path / "b.md").st_ino
    result = save(str(tmp_path), {"a.json": "2\n", "b.md": "b\n"})
    assert result["written"] == [str(tmp_path / "a.json")] and (tmp_path / "a.json").read_text() == "2\n"
    assert os.stat(tmp_path / "b.md").st_ino == inode
    # same size, other bytes; then another mode: both are changes
    assert save(str(tmp_path), {"a.json": "3\n"})["written"] == [str(tmp_path / "a.json")]
    assert save(str(tmp_path), {"a.json": "3\n"}, mode="0600")["changed"] is True and _mode(tmp_path / "a.json") == 0o600
    assert save(str(tmp_path), {"a.json": "3\n"}, mode=0o600)["changed"] is False


def test_check_mode_writes_nothing(tmp_path):
    target = tmp_path / "new"
    result = save(str(target), {"r.json": "{}\n"}, check=True)
    assert result["changed"] is True and result["written"] == [str(target / "r.json")] and not target.exists()


def test_a_symlink_in_place_of_a_report_is_replaced_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("keep\n")
    (tmp_path / "d").mkdir()
    os.symlink(outside, tmp_path / "d" / "r.json")
    save(str(tmp_path / "d"), {"r.json": "new\n"})
    assert outside.read_text() == "keep\n" and not os.path.islink(tmp_path / "d" / "r.json")


@pytest.mark.parametrize("files,mode,words", [
    ({}, "0644", "at least one entry"),
    ({"../x": "a"}, "0644", "plain name"),
    ({"a/b": "a"}, "0644", "plain name"),
    ({"..": "a"}, "0644", "plain name"),
    ({"r.json": {"a": 1}}, "0644", "to_nice_json"),
    ({"r.json": "a"}, "rw-r--r--", "octal file mode"),
    ({"r.json": "a"}, "01777", "octal file mode"),
])
def test_bad_arguments_name_the_fix(tmp_path, files, mode, words):
    with pytest.raises(ControllerFilesError, match=words.replace(".", r"\.")):
        save(str(tmp_path), files, mode)
    assert list(tmp_path.iterdir()) == []


def test_a_file_where_the_directory_should_be(tmp_path):
    (tmp_path / "gpu01").write_text("x")
    with pytest.raises(ControllerFilesError, match="is not a directory"):
        save(str(tmp_path / "gpu01"), {"r.json": "{}"})


def test_an_unwritable_directory_says_so(tmp_path):
    if os.geteuid() == 0:
        target = "/proc/llmops-no-such-dir"  # even root cannot create a directory in /proc
    else:
        target = str(tmp_path / "ro" / "x")
        (tmp_path / "ro").mkdir(mode=0o555)
    with pytest.raises(ControllerFilesError, match="cannot write the reports in .*make the directory writable"):
        save(target, {"r.json": "{}"})
