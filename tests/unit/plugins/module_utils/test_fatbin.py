"""The fatbin header reader on a real CUDA library (tests/fixtures/fatbin), checked against what the real cuobjdump
says about it (captured, and run here), and on broken copies of it."""

import pathlib
import shutil
import struct
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb
from ansible_collections.llmops.sglang.plugins.module_utils import _fatbin as fb


@pytest.fixture(scope="module")
def folder(fixtures_dir):
    return fixtures_dir / "fatbin"


@pytest.fixture(scope="module")
def library(folder):
    return str(folder / "libfatbin_mix.so")


def _section(path):
    """(offset, size) of .nv_fatbin, found with binutils' readelf, not with the code under test."""
    out = subprocess.run(["readelf", "-W", "-S", path], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if ".nv_fatbin" in fields:
            at = fields.index(".nv_fatbin")
            return int(fields[at + 3], 16), int(fields[at + 4], 16)
    raise AssertionError("no .nv_fatbin in readelf's output")


def _copy(library, tmp_path, name="libcopy.so"):
    target = tmp_path / name
    shutil.copyfile(library, str(target))
    return target


def _patch(path, offset, data):
    with open(str(path), "r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def test_entries_match_the_real_cuobjdump_listing(folder, library):
    has_fatbin, entries = fb.read_entries(library)
    assert has_fatbin
    for kind in ("elf", "ptx"):
        _has, listed = cb.parse_listing(kind, 0, (folder / ("libfatbin_mix.list-%s.out" % kind)).read_text(), "")
        mine = [e for e in entries if e["kind"] == kind]
        assert [e["name"] for e in mine] == [e["name"] for e in listed]
        assert [e["index"] for e in mine] == list(range(1, len(listed) + 1))
    # The real archs, in file order, are the headers of --dump-elf-symbols: sm_120, sm_120a and sm_120f apart.
    headers = cb.parse_fatbin_headers((folder / "libfatbin_mix.dump-elf-symbols.out").read_text())
    assert [(e["kind"], e["arch"]) for e in entries] == headers
    assert {"sm_120", "sm_120a", "sm_120f", "sm_100f"} <= {arch for kind, arch in headers if kind == "elf"}


def test_family_and_arch_specific_flags(library):
    _has, entries = fb.read_entries(library)
    by_name = dict((e["name"], e) for e in entries)
    # --list-elf names the family cubin like the plain one; the entry flags tell them apart.
    assert by_name["libfatbin_mix.2.sm_120.cubin"]["arch"] == "sm_120"
    assert by_name["libfatbin_mix.3.sm_120a.cubin"]["arch"] == "sm_120a"
    assert by_name["libfatbin_mix.5.sm_120.cubin"]["arch"] == "sm_120f"
    assert by_name["libfatbin_mix.6.sm_100.cubin"]["arch"] == "sm_100f"
    assert fb.arch_name(120, fb.FLAG_FAMILY | fb.FLAG_COMPRESSED) == "sm_120f"
    with pytest.raises(fb.FatbinError, match="both the arch-specific and the family flag"):
        fb.arch_name(120, fb.FLAG_FAMILY | fb.FLAG_ARCH_SPECIFIC)


def test_entry_offsets_sizes_and_compression(library):
    """family.cu was built with -Xfatbin -compress-all: its payloads are zstd frames, the others plain ELF."""
    _has, entries = fb.read_entries(library)
    data = pathlib.Path(library).read_bytes()
    start, size = _section(library)
    for entry in entries:
        assert start <= entry["offset"] < start + size
        header_size = struct.unpack_from("<I", data, entry["offset"] + 4)[0]
        payload = data[entry["offset"] + header_size:entry["offset"] + header_size + 4]
        if entry["compressed"]:
            assert payload == b"\x28\xb5\x2f\xfd"
        elif entry["kind"] == "elf":
            assert payload == b"\x7fELF"
    assert {e["arch"] for e in entries if e["compressed"] and e["kind"] == "elf"} == {"sm_120f", "sm_100f", "sm_80"}
    assert all(e["compressed"] for e in entries if e["kind"] == "ptx")  # nvcc compresses PTX by default


def test_the_cubins_own_elf_flags_do_not_tell_the_variants_apart(library):
    """Why the reader takes the entry flags: the sm_120 and sm_120a cubins carry the same e_flags."""
    _has, entries = fb.read_entries(library)
    data = pathlib.Path(library).read_bytes()
    e_flags = {}
    for entry in entries:
        if entry["kind"] == "elf" and not entry["compressed"]:
            cubin = entry["offset"] + struct.unpack_from("<I", data, entry["offset"] + 4)[0]
            e_flags[entry["arch"]] = struct.unpack_from("<I", data, cubin + 0x30)[0]
    assert e_flags["sm_120"] == e_flags["sm_120a"]


def test_both_readers_agree_with_the_real_cuobjdump(library):
    binary = cb.find_cuobjdump()
    fast = cb.inspect_library(library, cb.library_reader("fatbin"), list_cubins=True)
    slow = cb.inspect_library(library, cb.library_reader("cuobjdump", binary), list_cubins=True)
    assert fast["archs"] == slow["archs"]
    assert fast["elf_archs"] == slow["elf_archs"] == ["sm_75", "sm_80", "sm_90a", "sm_100f", "sm_120", "sm_120a", "sm_120f"]
    assert fast["ptx_archs"] == slow["ptx_archs"] == ["sm_80", "sm_90a", "sm_120f"]
    assert [(c["name"], c["arch"]) for c in fast["cubins"]] == [(c["name"], c["arch"]) for c in slow["cubins"]]
    assert fast["family_resolved"] and slow["family_resolved"]
    counted = dict(((a["kind"], a["arch"]), a) for a in fast["archs"])
    assert counted[("elf", "sm_120f")]["family"] and not counted[("elf", "sm_120f")]["arch_specific"]
    assert counted[("elf", "sm_120a")]["arch_specific"] and not counted[("elf", "sm_120")]["family"]
    # By default the summary only: no per-cubin list.
    assert "cubins" not in cb.inspect_library(library)


def test_host_only_library_has_no_fatbin(tmp_path):
    src = tmp_path / "host.c"
    src.write_text("int host_only(void) { return 1; }\n")
    lib = tmp_path / "libhost.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    assert fb.read_entries(str(lib)) == (False, [])


@pytest.mark.parametrize("cut", ["in the section table", "in the fatbin"])
def test_truncated_library(library, tmp_path, cut):
    copy = _copy(library, tmp_path)
    start, size = _section(library)
    keep = start + size // 2 if cut == "in the fatbin" else copy.stat().st_size - 100
    with open(str(copy), "r+b") as handle:
        handle.truncate(keep)
    with pytest.raises(fb.FatbinError, match="truncated"):
        fb.read_entries(str(copy))


def test_a_fatbin_that_claims_more_than_its_section(library, tmp_path):
    copy = _copy(library, tmp_path)
    start, _size = _section(library)
    _patch(copy, start + 8, struct.pack("<Q", 1 << 40))
    with pytest.raises(fb.FatbinError, match=r"fatbin at file offset %d claims \d+ bytes, past the end of its section" % start):
        fb.read_entries(str(copy))


def test_an_entry_that_claims_more_than_its_fatbin(library, tmp_path):
    copy = _copy(library, tmp_path)
    start, _size = _section(library)
    _patch(copy, start + 16 + 8, struct.pack("<Q", 1 << 33))  # payload size of the first entry
    with pytest.raises(fb.FatbinError, match="entry at file offset %d claims a 64-byte header and 8589934592 bytes" % (start + 16)):
        fb.read_entries(str(copy))


def test_garbage_where_a_fatbin_should_start(library, tmp_path):
    copy = _copy(library, tmp_path)
    start, _size = _section(library)
    body = struct.unpack_from("<Q", pathlib.Path(library).read_bytes(), start + 8)[0]
    _patch(copy, start + 16 + body, b"\x01\x02\x03\x04")  # the second fatbin's magic
    with pytest.raises(fb.FatbinError, match="unexpected data at offset %d of the .nv_fatbin section" % (16 + body)):
        fb.read_entries(str(copy))


def test_the_entry_count_is_bounded(library, tmp_path, monkeypatch):
    """A section of back-to-back empty 64-byte entries: read while under the bound, refused past it."""
    copy = _copy(library, tmp_path)
    start, size = _section(library)
    count = (size - 16) // 64
    entry = struct.pack("<HHIQ", 2, 0x101, 64, 0) + b"\0" * 12 + struct.pack("<I", 120) + b"\0" * 32
    _patch(copy, start, struct.pack("<IHHQ", fb.FATBIN_MAGIC, 1, 16, count * 64) + entry * count + b"\0" * (size - 16 - count * 64))
    _has, entries = fb.read_entries(str(copy))
    assert len(entries) == count and entries[-1]["name"] == "libcopy.%d.sm_120.cubin" % count
    monkeypatch.setattr(fb, "MAX_ENTRIES", count - 1)
    with pytest.raises(fb.FatbinError, match="more than %d fatbin entries" % (count - 1)):
        fb.read_entries(str(copy))


def test_the_section_count_is_bounded(library, tmp_path):
    """Extended numbering (e_shnum 0): the count is section 0's sh_size, here 2**40."""
    copy = _copy(library, tmp_path)
    data = pathlib.Path(library).read_bytes()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    _patch(copy, 0x3C, struct.pack("<H", 0))
    _patch(copy, shoff + 32, struct.pack("<Q", 1 << 40))
    with pytest.raises(fb.FatbinError, match="claims 1099511627776 sections, more than 65536"):
        fb.read_entries(str(copy))


@pytest.mark.parametrize("content, match", [
    (b"", "not an ELF file"),
    (b"not a library\n" * 10, "not an ELF file"),
    (b"\x7fELF\x01\x01" + b"\0" * 100, "not a 64-bit little-endian ELF file"),
])
def test_not_a_64_bit_elf(tmp_path, content, match):
    path = tmp_path / "libx.so"
    path.write_bytes(content)
    with pytest.raises(fb.FatbinError, match=match):
        fb.read_entries(str(path))


def test_the_module_error_names_the_library_the_cause_and_the_fix(library, tmp_path):
    copy = _copy(library, tmp_path, "libbroken.so")
    start, _size = _section(library)
    _patch(copy, start + 8, struct.pack("<Q", 1 << 40))
    with pytest.raises(cb.CudaBinaryError, match=r"^libbroken.so: the fatbin at file offset \d+ claims .*set reader=cuobjdump"):
        cb.inspect_path(str(copy))


def test_a_region_named_by_thousands_of_section_headers_is_walked_once(library, tmp_path, monkeypatch):
    """The real library with a 4 MiB .nv_fatbin region named by 20,000 section headers: the same entries as the honest
    file with one header, and no byte of the file walked twice (counted; the old walk read 80 GB)."""
    from crafted_elf import repeat_fatbin  # tests/unit/crafted_elf.py

    real = pathlib.Path(library).read_bytes()
    honest, shift = repeat_fatbin(real, 1, 4 << 20)
    crafted, _shift = repeat_fatbin(real, 20000, 4 << 20)
    for name, data in (("honest", honest), ("crafted", crafted)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "libfatbin_mix.so").write_bytes(data)
    sections = subprocess.run(["readelf", "-W", "-S", str(tmp_path / "crafted" / "libfatbin_mix.so")], stdout=subprocess.PIPE,
                              universal_newlines=True, check=True).stdout
    assert sections.count(" .nv_fatbin ") == 20000  # binutils reads the crafted table as 20,000 .nv_fatbin sections

    walked = []
    walk = fb._walk

    def counted(view, start, end, entries):
        walked.append(end - start)
        assert sum(walked) <= len(crafted), "walked %d bytes of a %d-byte file" % (sum(walked), len(crafted))
        return walk(view, start, end, entries)

    monkeypatch.setattr(fb, "_walk", counted)
    has, entries = fb.read_entries(str(tmp_path / "crafted" / "libfatbin_mix.so"))
    monkeypatch.undo()
    assert walked == [_section(library)[1] + (4 << 20)]  # the one region, once
    assert (has, entries) == fb.read_entries(str(tmp_path / "honest" / "libfatbin_mix.so"))
    _has, original = fb.read_entries(library)
    assert [dict(e, offset=e["offset"] - shift) for e in entries] == original
    assert len(entries) == 10


def test_overlapping_fatbin_sections_are_walked_as_their_union():
    named = [(b".nv_fatbin", 100, 50, 1), (b".nv_fatbin", 100, 50, 1), (b".nv_fatbin", 120, 100, 1), (b".text", 0, 900, 1),
             (b".nv_fatbin", 400, 10, 1), (b".nv_fatbin", 410, 5, 1), (b".nv_fatbin", 500, 0, 1), (b".nv_fatbin", 600, 9, 8)]
    assert fb.fatbin_regions(named, 1000) == [(100, 220), (400, 410), (410, 415)]
    with pytest.raises(fb.FatbinError, match="runs past the end of the file"):
        fb.fatbin_regions([(b".nv_fatbin", 990, 20, 1)], 1000)
