"""Parsing of real cuobjdump / nvcc outputs (tests/fixtures/cuobjdump, captured from fixture builds)."""

import importlib.metadata
import json
import os
import stat
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb


@pytest.fixture(scope="module")
def captures(fixtures_dir):
    folder = fixtures_dir / "cuobjdump"
    index = json.loads((folder / "index.json").read_text())

    def load(name):
        entry = index[name]
        out = folder / entry["stdout"]
        err = folder / entry["stderr"]
        return (
            entry["rc"],
            out.read_text() if out.exists() else "",
            err.read_text() if err.exists() else "",
        )

    load.index = index
    return load


def _cmake_expectation(value):
    """Archs CMake puts in the binary for a CMAKE_CUDA_ARCHITECTURES value: (cubin archs, PTX archs)."""
    elf, ptx = set(), set()
    for item in value.split(";"):
        arch, mode = (item.split("-", 1) + [""])[:2]
        name = "sm_" + arch
        if mode in ("", "real"):
            elf.add(name)
        if mode in ("", "virtual"):
            ptx.add(name)
    return elf, ptx


def _collapsed(arch):
    # --list-elf prints a family cubin (sm_120f) as sm_120.
    return arch[:-1] if arch.endswith("f") else arch


def _translation_units(fixtures_dir):
    return len(list((fixtures_dir / "kernel_project" / "csrc").glob("*.cu")))


LISTED = ["fixture-120a", "fixture-90a", "fixture-90a-120f-120a", "fixture-120a-real", "fixture-120f-virtual"]


@pytest.mark.parametrize("capture", LISTED)
def test_listings_match_the_cmake_arch_list(captures, capture, fixtures_dir):
    want_elf, want_ptx = _cmake_expectation(captures.index[capture + ".list-elf"]["cmake_cuda_architectures"])
    has_code, cubins = cb.parse_listing("elf", *captures(capture + ".list-elf"))
    has_code_ptx, ptx = cb.parse_listing("ptx", *captures(capture + ".list-ptx"))
    assert has_code and has_code_ptx
    assert {c["arch"] for c in cubins} == {_collapsed(a) for a in want_elf}
    assert {p["arch"] for p in ptx} == want_ptx
    # One fatbin per translation unit (FP4 build: common.cu + fp4_quant.cu).
    units = _translation_units(fixtures_dir)
    assert len(cubins) == units * len(want_elf)
    assert len(ptx) == units * len(want_ptx)
    assert all(c["name"].startswith("libfixture_ops.") and c["name"].endswith(".cubin") for c in cubins)


def test_family_cubins_are_resolved_from_fatbin_headers(captures):
    _has, cubins = cb.parse_listing("elf", *captures("fixture-90a-120f-120a.list-elf"))
    assert cb.needs_header_pass(cubins)
    rc, out, _err = captures("fixture-90a-120f-120a.dump-elf-symbols")
    assert rc == 0
    headers = cb.parse_fatbin_headers(out)
    refined, resolved = cb.refine_cubin_archs(cubins, headers)
    assert resolved
    want_elf, want_ptx = _cmake_expectation(captures.index["fixture-90a-120f-120a.list-elf"]["cmake_cuda_architectures"])
    assert {c["arch"] for c in refined} == want_elf
    assert [c["name"] for c in refined] == [c["name"] for c in cubins]
    assert {arch for kind, arch in headers if kind == "ptx"} == want_ptx
    # Family acceptance only works because of the header pass.
    assert not cb.arch_satisfied("sm_120f", [c["arch"] for c in cubins])
    assert cb.arch_satisfied("sm_120f", [c["arch"] for c in refined])


def test_refinement_refuses_headers_that_do_not_line_up(captures):
    _has, cubins = cb.parse_listing("elf", *captures("fixture-90a-120f-120a.list-elf"))
    ptx_only_headers = cb.parse_fatbin_headers(captures("fixture-120f-virtual.dump-elf-symbols")[1])
    assert ptx_only_headers and all(kind == "ptx" for kind, _arch in ptx_only_headers)
    assert cb.refine_cubin_archs(cubins, ptx_only_headers) == (cubins, False)
    # Same count but another arch number in one slot: keep what --list-elf said.
    headers = cb.parse_fatbin_headers(captures("fixture-90a-120f-120a.dump-elf-symbols")[1])
    swapped = [("elf", "sm_100f") if arch == "sm_120f" else (kind, arch) for kind, arch in headers]
    assert cb.refine_cubin_archs(cubins, swapped) == (cubins, False)


@pytest.mark.parametrize("capture", ["fixture-120a", "fixture-90a"])
def test_no_header_pass_without_plain_blackwell_cubins(captures, capture):
    _has, cubins = cb.parse_listing("elf", *captures(capture + ".list-elf"))
    assert cubins and not cb.needs_header_pass(cubins)


def test_missing_ptx_or_elf_is_empty_not_an_error(captures):
    rc, out, err = captures("fixture-120a-real.list-ptx")
    assert rc == 0 and "No PTX file found" in err
    assert cb.parse_listing("ptx", rc, out, err) == (True, [])
    rc, out, err = captures("fixture-120f-virtual.list-elf")
    assert "No ELF file found" in err
    assert cb.parse_listing("elf", rc, out, err) == (True, [])


@pytest.mark.parametrize("capture", ["host-only.list-elf", "host-only.list-ptx"])
def test_library_without_device_code(captures, capture):
    rc, out, err = captures(capture)
    assert rc == 255
    assert cb.parse_listing(capture.rsplit("-", 1)[1], rc, out, err) == (False, [])


@pytest.mark.parametrize("capture, text", [("not-a-binary.list-elf", "Invalid fatbin header"), ("missing-file.list-elf", "Could not open input file")])
def test_cuobjdump_failures_raise_with_its_message(captures, capture, text):
    with pytest.raises(cb.CudaBinaryError, match="exited with 1: cuobjdump fatal.*" + text):
        cb.parse_listing("elf", *captures(capture))


@pytest.mark.parametrize("text, want", [
    ("sm_120a", "sm_120a"), ("SM_120A", "sm_120a"), ("120a", "sm_120a"), ("12.0a", "sm_120a"), (" 12.0a ", "sm_120a"),
    ("9.0a", "sm_90a"), ("90a", "sm_90a"), ("10.3f", "sm_103f"), ("sm_120", "sm_120"), ("12.1", "sm_121"), (120, "sm_120"),
])
def test_normalize_arch(text, want):
    assert cb.normalize_arch(text) == want


@pytest.mark.parametrize("text", ["compute_120a", "sm_12x", "", "12.0x", "sm120a", "12.10a", "sm_120af"])
def test_normalize_arch_rejects_with_the_accepted_spellings(text):
    with pytest.raises(cb.CudaBinaryError, match="sm_120a, 120a or 12.0a"):
        cb.normalize_arch(text)


def test_torch_and_cmake_spellings_round_trip(captures):
    headers = cb.parse_fatbin_headers(captures("fixture-90a-120f-120a.dump-elf-symbols")[1])
    archs = sorted({arch for _kind, arch in headers})
    assert archs
    for arch in archs:
        assert cb.normalize_arch(cb.torch_arch(arch)) == arch
        assert cb.normalize_arch(cb.cmake_arch(arch)) == arch
    assert cb.torch_arch("sm_90a") == "9.0a" and cb.cmake_arch("sm_120f") == "120f"


@pytest.mark.parametrize("required, cubins, family, met", [
    ("sm_120a", ["sm_120a"], False, True),
    ("sm_120a", ["sm_90a", "sm_100a"], True, False),
    ("sm_120a", ["sm_120"], True, False),         # plain code lacks the arch-specific (FP4 MMA) features
    ("sm_120a", ["sm_120f"], False, False),
    ("sm_120a", ["sm_120f"], True, True),
    ("sm_103a", ["sm_100f"], True, False),        # another number's family never counts
    ("sm_121a", ["sm_120f"], True, False),
    ("sm_120", ["sm_120a"], False, True),         # any sm_120 flavour loads on a CC 12.0 device
    ("sm_120", ["sm_120f"], False, True),
    ("sm_120", ["sm_121"], False, False),
    ("sm_120f", ["sm_120a"], True, False),        # sm_120a code does not load on the other family members
    ("sm_120f", ["sm_120f"], False, True),
])
def test_requirement_rule(required, cubins, family, met):
    assert cb.arch_satisfied(required, cubins, accept_family=family) is met
    assert cb.missing_archs([required], cubins, family) == ([] if met else [required])


def test_sorted_archs_orders_by_number():
    assert cb.sorted_archs(["sm_120a", "sm_90a", "sm_100a", "sm_120a", "sm_80"]) == ["sm_80", "sm_90a", "sm_100a", "sm_120a"]


def test_version_of_the_installed_cuobjdump(fixtures_dir):
    binary = cb.find_cuobjdump()
    rc, out, _err = cb.default_runner([binary, "--version"])
    assert rc == 0
    version = cb.parse_version(out)
    if "site-packages" in binary:
        assert version == importlib.metadata.version(cb.CUOBJDUMP_PYPI)
    assert cb.parse_version((fixtures_dir / "cuobjdump" / "cuobjdump-version.out").read_text()) == "13.5.37"


def _fake_binary(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_search_order_path_then_cuda_home_then_site_packages(tmp_path):
    site = tmp_path / "site-packages"
    in_site = _fake_binary(site / "nvidia" / "cu13" / "bin" / "cuobjdump")
    legacy = _fake_binary(site / "nvidia" / "cuda_cuobjdump" / "bin" / "cuobjdump")
    cuda_home = _fake_binary(tmp_path / "cuda" / "bin" / "cuobjdump")
    on_path = _fake_binary(tmp_path / "path" / "cuobjdump")
    kwargs = dict(sites=[str(site)], cuda_roots=())
    assert cb.find_cuobjdump(environ={"PATH": str(tmp_path / "path"), "CUDA_HOME": str(tmp_path / "cuda")}, **kwargs) == on_path
    assert cb.find_cuobjdump(environ={"PATH": "", "CUDA_HOME": str(tmp_path / "cuda")}, **kwargs) == cuda_home
    assert cb.find_cuobjdump(environ={"PATH": ""}, **kwargs) == in_site
    os.unlink(in_site)
    assert cb.find_cuobjdump(environ={"PATH": ""}, **kwargs) == legacy


def test_not_found_names_the_pypi_package(tmp_path):
    with pytest.raises(cb.CudaBinaryError, match="pip install nvidia-cuda-cuobjdump"):
        cb.find_cuobjdump(environ={"PATH": str(tmp_path)}, sites=[str(tmp_path)], cuda_roots=())


def test_explicit_cuobjdump_file_or_folder(tmp_path):
    real = cb.find_cuobjdump()
    assert cb.find_cuobjdump(real) == real
    assert cb.find_cuobjdump(os.path.dirname(real)) == real
    (tmp_path / "cuobjdump").write_text("not executable")
    with pytest.raises(cb.CudaBinaryError, match="not an executable file"):
        cb.find_cuobjdump(str(tmp_path / "cuobjdump"))


def test_the_pip_package_is_found_in_this_interpreters_site_packages():
    # The test venv has nvidia-cuda-cuobjdump (requirements.txt): discovery must reach it with no
    # PATH and no CUDA install, as on a managed host with only the pip package.
    found = cb.find_cuobjdump(environ={"PATH": ""}, cuda_roots=())
    files = importlib.metadata.files(cb.CUOBJDUMP_PYPI)
    shipped = [str(f.locate()) for f in files if f.name == "cuobjdump"]
    assert os.path.realpath(found) in [os.path.realpath(p) for p in shipped]


def test_host_library_built_here_has_no_device_code(tmp_path):
    src = tmp_path / "host.c"
    src.write_text("int host_only(void) { return 1; }\n")
    lib = tmp_path / "libhost.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    for reader in cb.READERS:
        result = cb.inspect_library(str(lib), cb.library_reader(reader, cb.find_cuobjdump()), list_cubins=True)
        assert result["has_device_code"] is False
        assert result["cubins"] == [] and result["elf_archs"] == [] and result["archs"] == []
        assert result["size"] == lib.stat().st_size


@pytest.mark.parametrize("name, shared", [
    ("common_ops.abi3.so", True), ("libcudart.so.13", True), ("libfoo.so.1.2", True),
    ("dir.so/readme.txt", False), ("module.sox", False), ("libfoo.a", False),
])
def test_shared_library_names(name, shared):
    assert cb.is_shared_library(name) is shared


def test_a_wheel_member_larger_than_a_library_may_be_is_refused(tmp_path, monkeypatch):
    import zipfile
    wheel = tmp_path / "bomb-0.1-py3-none-any.whl"
    with zipfile.ZipFile(str(wheel), "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bomb/common_ops.so", b"\0" * 200000)  # 200 KB of zeros deflate to a few hundred bytes
    monkeypatch.setattr(cb, "MAX_LIBRARY_BYTES", 100000)
    with pytest.raises(cb.CudaBinaryError, match="bomb/common_ops.so unpacks to 200000 bytes, more than the 100000"):
        cb.inspect_path(str(wheel), cb.library_reader("cuobjdump", "/nonexistent/cuobjdump"), tmp_dir=str(tmp_path))
    assert os.listdir(str(tmp_path)) == [wheel.name]  # nothing was unpacked


def test_a_cuobjdump_that_floods_is_stopped(tmp_path, monkeypatch):
    flood = tmp_path / "cuobjdump"
    flood.write_text("#!/bin/sh\nexec yes 'ELF file    1: x.1.sm_120a.cubin'\n")
    flood.chmod(flood.stat().st_mode | stat.S_IEXEC)
    library = tmp_path / "libx.so"
    library.write_bytes(b"\x7fELF")
    monkeypatch.setattr(cb, "MAX_CUOBJDUMP_OUTPUT", 1 << 20)
    with pytest.raises(cb.CudaBinaryError, match="libx.so: cuobjdump exited with -1: cuobjdump printed more than 1048576 bytes"):
        cb.inspect_path(str(library), cb.library_reader("cuobjdump", str(flood)))


def test_a_path_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "fifo.so"
    os.mkfifo(str(fifo))
    for path in ("/dev/zero", str(fifo)):  # /dev/zero was hashed for ever
        with pytest.raises(cb.CudaBinaryError, match="is not a regular file: give a wheel"):
            cb.inspect_path(path)
