"""_files.write_atomic: the one atomic write (caches, stamps, controller reports)."""

import os
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._files import write_atomic


def test_writes_the_bytes_with_the_mode_and_replaces_a_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    os.symlink(outside, tmp_path / "cache.json")
    write_atomic(str(tmp_path / "cache.json"), b"{}\n", 0o600)
    assert (tmp_path / "cache.json").read_bytes() == b"{}\n" and not os.path.islink(tmp_path / "cache.json")
    assert stat.S_IMODE(os.stat(tmp_path / "cache.json").st_mode) == 0o600 and outside.read_bytes() == b"keep"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    (tmp_path / "stamp.json").write_bytes(b"old")
    with pytest.raises(TypeError):
        write_atomic(str(tmp_path / "stamp.json"), "not bytes", 0o644)
    assert sorted(os.listdir(tmp_path)) == ["stamp.json"] and (tmp_path / "stamp.json").read_bytes() == b"old"


def test_a_missing_directory_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        write_atomic(str(tmp_path / "no" / "file"), b"x", 0o644)
