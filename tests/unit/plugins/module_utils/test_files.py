"""_files: the one atomic write (caches, stamps, controller reports) and the one open of a staged file (only a regular
file, never blocking), on real FIFOs, sockets and devices."""

import os
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._files import NotRegularFile, open_regular, read_regular, write_atomic


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


# ---------------------------------------------------------------------------------------------
# open_regular / read_regular: only a regular file is opened, and opening never blocks


@pytest.mark.parametrize("kind,what", [("fifo", "a FIFO"), ("socket", "a socket"), ("dev_zero", "a character device")])
def test_only_a_regular_file_is_opened_and_never_blocks(tmp_path, kind, what):
    from odd_files import make_odd, within  # tests/unit/odd_files.py

    path = tmp_path / "config.json"
    make_odd(path, kind)
    _result, error = within(10, read_regular, str(path), 1 << 20)
    assert isinstance(error, NotRegularFile) and error.kind.startswith(what), error
    assert str(path) in str(error) and "not a regular file" in str(error)


def test_a_directory_is_not_a_regular_file_and_errors_of_open_pass_through(tmp_path):
    with pytest.raises(NotRegularFile, match="is a directory, not a regular file"):
        read_regular(str(tmp_path), 10)
    with pytest.raises(FileNotFoundError):
        read_regular(str(tmp_path / "missing"), 10)


def test_a_regular_file_is_read_up_to_one_byte_past_the_limit(tmp_path):
    (tmp_path / "f").write_bytes(b"0123456789")
    assert read_regular(str(tmp_path / "f"), 4) == b"01234"
    assert read_regular(str(tmp_path / "f"), 100) == b"0123456789"
    os.symlink(tmp_path / "f", tmp_path / "link")  # a symlink to a regular file is followed
    with open_regular(str(tmp_path / "link")) as handle:
        assert handle.read() == b"0123456789"
