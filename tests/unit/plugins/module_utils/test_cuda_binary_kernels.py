"""The kernel requirement (require_kernels) on the real library tests/fixtures/fatbin/libkernel_names.so: which
kernels match for which arch, what is unpacked and when, and the failures, each naming its cause and fix."""

import os
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb
from ansible_collections.llmops.sglang.plugins.module_utils import _fatbin as fb


@pytest.fixture(scope="module")
def library(fixtures_dir):
    return str(fixtures_dir / "fatbin" / "libkernel_names.so")


def _scan(library, patterns, required, accept_family=False, read=cb.fatbin_kernels):
    compiled = cb.kernel_patterns(patterns)

    def kernels(path, cubins):
        return cb.scan_kernels(path, cubins, read, compiled, required, accept_family)
    result = cb.inspect_path(library, kernels=kernels)
    rows, missing = cb.kernel_report(result["libraries"], compiled, required)
    return result, dict(((r["pattern"], r["arch"]), r) for r in rows), missing


def test_fp4_kernel_found_for_sm120a_with_its_code_size_and_the_stub_for_sm90a(library):
    result, rows, missing = _scan(library, ["fp4|e2m1"], ["sm_120a", "sm_90a"])
    real, stub = rows[("fp4|e2m1", "sm_120a")], rows[("fp4|e2m1", "sm_90a")]
    assert missing == []
    assert real["count"] == 1 and real["kernels"][0]["cubin"] == "libkernel_names.2.sm_120a.cubin"
    assert real["kernels"][0]["readable"] == "fixture::gemm::fp4_gemm_kernel::cutlass::float_e2m1_t"
    assert real["kernels"][0]["library"] == "libkernel_names.so" and real["kernels"][0]["arch"] == "sm_120a"
    # the trap-only stub that nvcc keeps for sm_90a shows in its size
    assert stub["count"] == 1 and stub["smallest"] <= 512 < real["smallest"] == real["code_bytes"]
    # sm_120a: the plain cubin and the LZ4 one (silu_and_mul); sm_90a: the plain one and the zstd one
    assert (real["cubins_searched"], real["kernels_searched"]) == (2, 2)
    assert (stub["cubins_searched"], stub["kernels_searched"]) == (2, 2)
    assert result["libraries"][0]["kernels"]["cubins"] == 4


@pytest.mark.parametrize("pattern", ["fp4|e2m1", "cutlass::float_e2m1_t", "fixture::gemm", "^_ZN7fixture4gemm", "float_e2m1"])
def test_patterns_match_the_mangled_name_or_its_identifiers(library, pattern):
    _result, rows, missing = _scan(library, [pattern], ["sm_120a"])
    assert missing == [] and rows[(pattern, "sm_120a")]["count"] == 1


def test_an_unmangled_kernel_in_an_lz4_cubin(library):
    _result, rows, missing = _scan(library, ["^silu_and_mul$"], ["sm_120a"])
    [kernel] = rows[("^silu_and_mul$", "sm_120a")]["kernels"]
    assert missing == [] and kernel["cubin"] == "libkernel_names.6.sm_120a.cubin" and kernel["size"] > 0


def test_a_family_cubin_counts_for_sm120a_only_with_accept_family(library):
    _result, _rows, missing = _scan(library, ["rms_norm"], ["sm_120a"])
    assert missing == [{"pattern": "rms_norm", "arch": "sm_120a"}]
    _result, rows, missing = _scan(library, ["rms_norm"], ["sm_120a"], accept_family=True)
    assert missing == [] and rows[("rms_norm", "sm_120a")]["kernels"][0]["arch"] == "sm_120f"  # a zstd cubin


def test_missing_kernels_fail_naming_the_pattern_the_arch_and_the_fix(library):
    result, rows, missing = _scan(library, ["fp4|e2m1", "rms_norm"], ["sm_120f"])
    assert missing == [{"pattern": "fp4|e2m1", "arch": "sm_120f"}]
    message = cb.missing_kernels_message(result, list(rows.values()))
    assert "no kernel matching 'fp4|e2m1' has a cubin for sm_120f (searched 1 kernels in 1 cubins that meet sm_120f)" in message
    assert "rms_norm" not in message and "SGL_KERNEL_ENABLE_FP4=ON" in message and message.startswith(library)
    _result, rows, _missing = _scan(library, ["fp4"], ["sm_100a"])
    assert "has a cubin for sm_100a (no cubin meets sm_100a)." in cb.missing_kernels_message(result, list(rows.values()))
    _result, rows, _missing = _scan(library, ["rms_norm"], ["sm_120a"])
    assert ("no kernel matching 'rms_norm' has a cubin for sm_120a (searched 2 kernels in 2 cubins that meet sm_120a; sm_120f "
            "family cubins are not counted without accept_family=true)") in cb.missing_kernels_message(result, list(rows.values()))


def test_both_readers_find_the_same_kernels(library):
    fast = cb.inspect_library(library)
    cubins = [dict(c, kind="elf") for c in cb.inspect_library(library, list_cubins=True)["cubins"]]
    slow = cb.cuobjdump_kernels(library, cubins, lambda c: True, cb.find_cuobjdump())
    mine = cb.fatbin_kernels(library, cubins, lambda c: True)
    assert [(c["name"], [n for n, _s in k]) for c, k in mine] == [(c["name"], [n for n, _s in k]) for c, k in slow]
    assert all(size is None for _c, kernels in slow for _n, size in kernels)
    assert fast["has_device_code"] and len(mine) == 6


def test_only_the_cubins_that_meet_a_required_arch_are_unpacked(library, monkeypatch, tmp_path):
    """sm_120a without accept_family: the plain and the LZ4 cubin; zstd is never run (nor needed)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    _result, _rows, missing = _scan(library, ["fp4"], ["sm_120a"])
    assert missing == []
    with pytest.raises(cb.CudaBinaryError, match=r"zstd-compressed and the zstd program is not on PATH: .*apt install zstd.*reader=cuobjdump"):
        _scan(library, ["fp4"], ["sm_120a"], accept_family=True)


def test_the_arch_check_reads_no_payload(library, monkeypatch):
    def refuse(*_args):
        raise AssertionError("a payload was read")
    monkeypatch.setattr(cb, "read_payload", refuse)
    assert "sm_120a" in cb.inspect_path(library)["elf_archs"]


def _program(tmp_path, body):
    path = tmp_path / "zstd"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize("body, message", [
    ("cat >/dev/null; printf 'short'", "gave 5 bytes where the fatbin entries declare 10528"),
    ("cat >/dev/null; echo 'zstd: /*stdin*\\: unsupported format' >&2; exit 1", r"exited with 1 \(zstd: .*unsupported format\)"),
    ("cat >/dev/null; head -c 100000000 /dev/zero", "printed more than the 10528 bytes declared and was stopped"),
])
def test_a_zstd_that_fails_or_lies_is_named(library, tmp_path, monkeypatch, body, message):
    monkeypatch.setenv("PATH", "%s%s%s" % (tmp_path, os.pathsep, os.environ.get("PATH", "")))
    _program(tmp_path, body)
    with pytest.raises(cb.CudaBinaryError, match="libkernel_names.so: zstd could not unpack libkernel_names.4.sm_120.cubin: it %s; "
                       "the fatbin is corrupt, or set reader=cuobjdump" % message):
        _scan(library, ["norm"], ["sm_120f"])


def test_bounds_on_what_is_unpacked(library, monkeypatch):
    monkeypatch.setattr(cb, "MAX_KERNEL_CUBINS", 1)
    with pytest.raises(cb.CudaBinaryError, match="more than 1, or unpack to more than .*narrow require_archs"):
        _scan(library, ["fp4"], ["sm_120a"])
    monkeypatch.setattr(cb, "MAX_KERNEL_CUBINS", 100)
    monkeypatch.setattr(fb, "MAX_CUBIN_BYTES", 1000)
    with pytest.raises(cb.CudaBinaryError, match="unpacks to 17216 bytes, more than the 1000"):
        _scan(library, ["fp4"], ["sm_120a"])


def test_zstd_frames_of_several_cubins_go_to_one_run_split_by_their_declared_sizes(library, monkeypatch):
    runs = []
    real = cb.unzstd

    def counting(zstd, data, size, what):
        runs.append(size)
        return real(zstd, data, size, what)
    monkeypatch.setattr(cb, "unzstd", counting)
    _result, rows, _missing = _scan(library, ["norm"], ["sm_120f", "sm_90a"])
    assert runs == [10528 + 8248]
    assert rows[("norm", "sm_120f")]["count"] == rows[("norm", "sm_90a")]["count"] == 1
    runs[:] = []
    monkeypatch.setattr(cb, "ZSTD_BATCH_BYTES", 10000)
    _scan(library, ["norm"], ["sm_120f", "sm_90a"])
    assert runs == [10528, 8248]


@pytest.mark.parametrize("patterns, message", [
    (["fp4("], r"'fp4\(' is not a Python regular expression \(missing \), unterminated subpattern"),
    ([" "], "empty pattern"),
    (["a"] * 101, "101 patterns, more than 100: join them with |"),
])
def test_bad_patterns_are_named(patterns, message):
    with pytest.raises(cb.CudaBinaryError, match=message):
        cb.kernel_patterns(patterns)


def test_cuobjdump_symbol_dump_that_does_not_line_up_is_refused(library):
    cubins = [dict(c, kind="elf") for c in cb.inspect_library(library, list_cubins=True)["cubins"]]

    def runner(argv):
        return 0, "Fatbin elf code:\n================\narch = sm_120a\n", ""
    with pytest.raises(cb.CudaBinaryError, match="lists 1 cubins where --list-elf lists 6: set reader=fatbin"):
        cb.cuobjdump_kernels(library, cubins, lambda c: True, "cuobjdump", runner)
