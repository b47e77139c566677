"""The kernel reader on a real CUDA library (tests/fixtures/fatbin/libkernel_names.so: plain, zstd and LZ4 entries),
checked against the real cuobjdump (its captured --dump-elf-symbols, and cubins it unpacks here) and binutils'
c++filt (the identifiers of real kernel names)."""

import pathlib
import re
import shutil
import struct
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _cubin as cu
from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb
from ansible_collections.llmops.sglang.plugins.module_utils import _fatbin as fb

FP4 = "_ZN7fixture4gemm15fp4_gemm_kernelIN7cutlass12float_e2m1_tEEEvPKT_PKfPfi"
NORM = "_ZN7fixture4norm15rms_norm_kernelIfEEvPT_fi"


@pytest.fixture(scope="module")
def folder(fixtures_dir):
    return fixtures_dir / "fatbin"


@pytest.fixture(scope="module")
def library(folder):
    return str(folder / "libkernel_names.so")


@pytest.fixture(scope="module")
def unpacked(library):
    """{cubin name: bytes} of every cubin, as the collection unpacks it (zstd by the zstd program)."""
    _has, entries = fb.read_entries(library)
    cubins = [e for e in entries if e["kind"] == "elf"]
    found = {}
    with open(library, "rb") as handle:
        for cubin in cubins:
            method, data, size = fb.read_payload(handle, cubin["offset"])
            found[cubin["name"]] = (method, cb.unzstd(cb.find_zstd(), data, size) if method == "zstd"
                                    else fb.lz4_block(data, size) if method == "lz4" else data)
    return found


def test_plain_zstd_and_lz4_cubins_unpack_to_what_cuobjdump_extracts(library, unpacked, tmp_path):
    shutil.copyfile(library, str(tmp_path / "libkernel_names.so"))
    subprocess.run([cb.find_cuobjdump(), "-xelf", "all", "libkernel_names.so"], cwd=str(tmp_path), check=True,
                   stdout=subprocess.PIPE)
    extracted = dict((p.name, p.read_bytes()) for p in tmp_path.glob("*.cubin"))
    assert sorted(extracted) == sorted(unpacked)
    assert {m for m, _d in unpacked.values()} == {None, "zstd", "lz4"}
    for name, (_method, data) in unpacked.items():
        assert data == extracted[name], name


def test_kernels_are_the_entries_cuobjdump_marks(folder, unpacked):
    """Per cubin, in file order, the kernels are exactly the FUNC symbols --dump-elf-symbols marks ENTRY; the
    __device__ function (a FUNC without the flag) is not one."""
    dumped = cb.parse_elf_symbols((folder / "libkernel_names.dump-elf-symbols.out").read_text())
    listed = cb.parse_listing("elf", 0, (folder / "libkernel_names.list-elf.out").read_text(), "")[1]
    assert len(dumped) == len(listed) == 6
    for (arch, names), cubin in zip(dumped, listed):
        assert [n for n, _size in cu.kernels(unpacked[cubin["name"]][1])] == names, cubin["name"]
    assert [names for _arch, names in dumped] == [[], [FP4], [FP4], [NORM], [NORM], ["silu_and_mul"]]
    text = (folder / "libkernel_names.dump-elf-symbols.out").read_text()
    assert re.search(r"^FUNC\s+LOCAL\s+DEFAULT\s+-\s+\S*dequant", text, re.M)  # the device function, not an ENTRY


def test_code_sizes_show_the_trap_only_stub(unpacked):
    sizes = dict((name, cu.kernels(data)) for name, (_m, data) in unpacked.items())
    [(_n, real)] = sizes["libkernel_names.2.sm_120a.cubin"]
    [(_n, stub)] = sizes["libkernel_names.3.sm_90a.cubin"]
    assert real > 10 * stub and 0 < stub <= 512


def test_names_and_sizes_agree_with_readelf(unpacked, tmp_path):
    """binutils' readelf reads the same defined FUNC symbols with st_other 0x10 and the same st_size."""
    for name, (_method, data) in unpacked.items():
        path = tmp_path / name
        path.write_bytes(data)
        out = subprocess.run(["readelf", "-sW", str(path)], stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
        want = sorted((m.group(2), int(m.group(1))) for m in re.finditer(
            r"^\s*\d+: [0-9a-f]+\s+(\d+) FUNC\s+\w+\s+\w+\s+\[<other>: 10\]\s+\d+ (\S+)$", out, re.M))
        assert sorted(cu.kernels(data)) == want, name


def _demangled_words(text):
    """The identifiers of c++filt's output: words not glued to a number (the u of 128u), keywords left out."""
    words = set(re.findall(r"(?<![0-9A-Za-z_$.])[A-Za-z_$][A-Za-z0-9_$]*", text))
    return words - {"void", "const", "int", "long", "unsigned", "char", "short", "float", "double", "bool", "signed", "true",
                    "false", "anonymous", "namespace", "volatile", "std", "decltype", "auto", "operator"}


def test_identifiers_are_those_cplusfilt_prints(folder):
    """On the kernel names of the fixture and on a sample of the sm_120a kernel names of the real sgl-kernel 0.4.10
    wheel (templates, literals, substitutions, anonymous namespaces): the identifiers are exactly the words c++filt
    prints, the anonymous namespace spelt as mangled. c++filt leaves out the signature of a function named in a
    template argument (``L_Z...E``), so those names may have more."""
    names = [FP4, NORM] + (folder / "sgl_kernel_0.4.10_sm120a_kernels.txt").read_text().split()
    out = subprocess.run(["c++filt"], input="\n".join(names), stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    checked = 0
    for name, demangled in zip(names, out.splitlines()):
        if demangled == name:  # c++filt gives up on some of CUTLASS's longest names
            continue
        mine = {w for w in cu.identifiers(name) if not w.startswith("_GLOBAL__N_")}
        printed = _demangled_words(demangled) - {"_GLOBAL__N_"}
        assert printed <= mine, name
        assert "L_Z" in name or mine == printed, name
        checked += 1
    assert checked >= 40
    assert cu.readable(FP4) == "fixture::gemm::fp4_gemm_kernel::cutlass::float_e2m1_t"
    assert cu.readable("silu_and_mul") == "silu_and_mul" and cu.identifiers("") == []


@pytest.mark.parametrize("name, want", [
    ("_Z6kernelILi128ELb1EEvv", ["kernel"]),                    # literals are not lengths
    ("_Z3fooIfLf3f800000EEvv", ["foo"]),                         # a float literal
    ("_ZN3foo3barIS_EEvT_", ["foo", "bar"]),                      # substitution and template parameter
    ("_ZN12_GLOBAL__N_16kernelEv", ["_GLOBAL__N_1", "kernel"]),  # the anonymous namespace
    ("_Z1fDv4_fA16_i", ["f"]),                                   # vector and array sizes
    ("_Z3fooILi99999999EEvv", ["foo"]),                          # a literal longer than the name
    ("_Z99x", []),                                               # a length past the end
])
def test_identifiers_of_tricky_manglings(name, want):
    assert cu.identifiers(name) == want


def _cubin(unpacked):
    return unpacked["libkernel_names.2.sm_120a.cubin"][1]


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:40], "not an ELF file"),
    (lambda d: b"\x7fELF\x01" + d[5:], "not a 64-bit little-endian"),
    (lambda d: d[:struct.unpack_from("<Q", d, 0x28)[0] + 10], "section table"),
])
def test_broken_cubins_raise_with_the_cause(unpacked, damage, message):
    with pytest.raises(cu.CubinError, match=message):
        cu.kernels(damage(_cubin(unpacked)))


def test_a_symbol_table_past_the_end_is_refused(unpacked):
    data = bytearray(_cubin(unpacked))
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shnum = struct.unpack_from("<H", data, 0x3C)[0]
    for i in range(shnum):
        at = shoff + i * 64
        if struct.unpack_from("<I", data, at + 4)[0] == cu.SHT_SYMTAB:
            struct.pack_into("<Q", data, at + 32, 1 << 40)  # sh_size
    with pytest.raises(cu.CubinError, match="symbol table"):
        cu.kernels(bytes(data))


def test_lz4_blocks_that_lie_are_refused(library):
    _has, entries = fb.read_entries(library)
    [lz4] = [e for e in entries if e["kind"] == "elf" and e["arch"] == "sm_120a" and e["compressed"]]
    with open(library, "rb") as handle:
        method, data, size = fb.read_payload(handle, lz4["offset"])
    assert method == "lz4" and data[1:5] == b"\x7fELF"
    assert len(fb.lz4_block(data, size)) == size
    for broken, message in ((data, size - 1), (data, size + 1), (data[:len(data) // 2], size), (b"\x0f\x00", 100)):
        with pytest.raises(fb.FatbinError, match="LZ4"):
            fb.lz4_block(broken, message)


def test_read_payload_refuses_what_does_not_fit(library, tmp_path):
    _has, entries = fb.read_entries(library)
    [zstd] = [e for e in entries if e["arch"] == "sm_120f" and e["kind"] == "elf"]
    data = bytearray(pathlib.Path(library).read_bytes())
    struct.pack_into("<I", data, zstd["offset"] + 16, zstd["size"] + 1)  # more compressed bytes than the payload
    struct.pack_into("<Q", data, zstd["offset"] + 56 + 0, 1 << 40)
    copy = tmp_path / "lib.so"
    copy.write_bytes(bytes(data))
    with open(str(copy), "rb") as handle, pytest.raises(fb.FatbinError, match="compressed bytes"):
        fb.read_payload(handle, zstd["offset"])
    struct.pack_into("<I", data, zstd["offset"] + 16, 8)
    copy.write_bytes(bytes(data))
    with open(str(copy), "rb") as handle, pytest.raises(fb.FatbinError, match="more than the %d" % fb.MAX_CUBIN_BYTES):
        fb.read_payload(handle, zstd["offset"])
