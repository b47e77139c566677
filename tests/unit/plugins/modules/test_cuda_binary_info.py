"""cuda_binary_info on wheels of the fixture kernel project, built here with the real nvcc and read
with the real cuobjdump."""

import ctypes
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import struct
import sys
import time
import zipfile

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary, _fatbin
from ansible_collections.llmops.sglang.plugins.module_utils._cuda_binary import CudaBinaryError, default_runner
from ansible_collections.llmops.sglang.plugins.modules import cuda_binary_info

ROOT = pathlib.Path(__file__).resolve().parents[4]
BUILD = ROOT / "tests" / "lab" / "bin" / "build-kernel-fixture"
MODULE = ROOT / "plugins" / "modules" / "cuda_binary_info.py"
LIBRARY = "llmops_fixture_kernel/libfixture_ops.so"

# name -> (CMAKE_CUDA_ARCHITECTURES, SGL_KERNEL_ENABLE_FP4)
BUILDS = {
    "sm120a": ("120a", "ON"),
    "sm90a": ("90a", "ON"),
    # sm_120f family cubin + sm_120a PTX (no sm_120a cubin), without the FP4 source.
    "family": ("90a-real;120f-real;120a-virtual", "OFF"),
    # sm_90a, sm_120f and sm_120a cubins side by side: the build of the fixture-90a-120f-120a captures.
    "mix": ("90a-real;120f-real;120a", "ON"),
}
# The builds whose real cuobjdump outputs are in tests/fixtures/cuobjdump.
CAPTURED = {"sm120a": "fixture-120a", "sm90a": "fixture-90a", "mix": "fixture-90a-120f-120a"}


def _nvcc():
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)


def _build(outdir, arch, fp4):
    marker = outdir / "wheel.txt"
    if marker.exists():
        return pathlib.Path(marker.read_text().strip())
    env = dict(os.environ, SGL_KERNEL_ENABLE_FP4=fp4, PYTHON=sys.executable)
    start = time.monotonic()
    proc = subprocess.run([str(BUILD), str(outdir), arch], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if proc.returncode != 0:
        pytest.fail("building the fixture kernel for %s failed (exit %d):\n%s" % (arch, proc.returncode, proc.stderr[-4000:]))
    wheel = pathlib.Path(proc.stdout.strip().splitlines()[-1])
    (outdir / "seconds.txt").write_text("%.1f\n" % (time.monotonic() - start))
    marker.write_text(str(wheel))
    return wheel


@pytest.fixture(scope="session")
def wheels(tmp_path_factory):
    """The fixture wheels, built once per test run (shared by pytest-xdist workers under a lock)."""
    if not _nvcc():
        pytest.fail("nvcc not found on PATH or in /usr/local/cuda/bin: these tests build CUDA code for real (CUDA >= 12.8 needed)")
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, common to all workers
    root = base / "kernel-fixture-wheels"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return {name: _build(root / name, arch, fp4) for name, (arch, fp4) in BUILDS.items()}


def _run(path, **params):
    params = dict(dict(path=str(path), require_archs=[], accept_family=False, cuobjdump=None, reader="fatbin", list_cubins=False),
                  **params)
    return cuda_binary_info.run_module(params, default_runner)


def _member_sha256(wheel, member):
    with zipfile.ZipFile(wheel) as archive:
        return hashlib.sha256(archive.read(member)).hexdigest()


def test_sm120a_wheel_meets_sm120a(wheels):
    result, failure = _run(wheels["sm120a"], require_archs=["sm_120a"])
    assert failure is None
    assert result["kind"] == "wheel"
    assert result["missing_archs"] == [] and result["required_archs"] == ["sm_120a"]
    assert result["elf_archs"] == ["sm_120a"]
    assert result["ptx_archs"] == ["sm_120a"]  # CMake's plain "120a" also embeds compute_120a PTX
    [lib] = result["libraries"]
    assert lib["path"] == LIBRARY and lib["has_device_code"]
    # One cubin and one PTX per translation unit (common.cu, fp4_quant.cu), counted per arch.
    assert lib["archs"] == [{"kind": "elf", "arch": "sm_120a", "count": 2, "arch_specific": True, "family": False},
                            {"kind": "ptx", "arch": "sm_120a", "count": 2, "arch_specific": True, "family": False}]
    assert "cubins" not in lib and result["reader"] == "fatbin" and result["cuobjdump"] is None
    # The sgl_kernel role passes its cuobjdump: the default reader does not need it.
    assert _run(wheels["sm120a"], cuobjdump="/nonexistent/cuobjdump")[0]["elf_archs"] == ["sm_120a"]


def test_sm90a_wheel_fails_naming_sm120a_and_the_fix(wheels):
    result, failure = _run(wheels["sm90a"], require_archs=["120a"])
    assert result["missing_archs"] == ["sm_120a"]
    assert result["elf_archs"] == ["sm_90a"]
    assert "no cubin for sm_120a" in failure
    assert "found cubins: sm_90a" in failure
    assert str(wheels["sm90a"]) in failure
    for fix in ("TORCH_CUDA_ARCH_LIST including 12.0a", "CMAKE_CUDA_ARCHITECTURES including 120a", "SGL_KERNEL_ENABLE_FP4=ON"):
        assert fix in failure
    # The sm_90a wheel still meets an sm_90a requirement, and an empty one.
    assert _run(wheels["sm90a"], require_archs=["9.0a"])[1] is None
    assert _run(wheels["sm90a"])[1] is None


def test_several_requirements_report_each_missing_one(wheels):
    result, failure = _run(wheels["sm120a"], require_archs=["sm_90a", "sm_120a", "sm_100a", "sm_120a"])
    assert result["required_archs"] == ["sm_90a", "sm_120a", "sm_100a"]
    assert result["missing_archs"] == ["sm_90a", "sm_100a"]
    assert "no cubin for sm_90a, sm_100a" in failure and "12.0a" not in failure.split("Fix:")[1]


def test_sha256_of_the_wheel_and_its_library(wheels):
    for wheel in wheels.values():
        result, _failure = _run(wheel)
        assert result["sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
        [lib] = result["libraries"]
        assert lib["sha256"] == _member_sha256(wheel, LIBRARY)
        with zipfile.ZipFile(wheel) as archive:
            assert lib["size"] == archive.getinfo(LIBRARY).file_size


def test_family_cubin_needs_accept_family_and_ptx_never_counts(wheels):
    result, failure = _run(wheels["family"], require_archs=["sm_120a"])
    [lib] = result["libraries"]
    assert lib["family_resolved"] is True
    assert result["elf_archs"] == ["sm_90a", "sm_120f"]
    assert result["ptx_archs"] == ["sm_120a"]
    assert result["missing_archs"] == ["sm_120a"]
    assert "An sm_120f family cubin is present: set accept_family=true" in failure
    assert "PTX for sm_120a is present, but only cubins count" in failure
    result, failure = _run(wheels["family"], require_archs=["sm_120a"], accept_family=True)
    assert failure is None and result["missing_archs"] == []
    assert _run(wheels["family"], require_archs=["sm_120f"])[1] is None


def test_fixture_library_loads_and_has_fp4_only_when_enabled(wheels, tmp_path):
    for name, (_arch, fp4) in BUILDS.items():
        folder = tmp_path / name
        with zipfile.ZipFile(wheels[name]) as archive:
            archive.extractall(folder)
        lib = ctypes.CDLL(str(folder / LIBRARY))
        assert lib.fixture_features() == (1 if fp4 == "ON" else 0)
        if fp4 == "ON":
            lib.fixture_fp4_roundtrip.restype = ctypes.c_float
            lib.fixture_fp4_roundtrip.argtypes = [ctypes.c_float]
            # e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6: round to nearest, saturate at 6.
            assert [lib.fixture_fp4_roundtrip(v) for v in (2.6, 5.1, 100.0, -1.7, 0.2)] == [3.0, 6.0, 6.0, -1.5, 0.0]
        else:
            assert not hasattr(lib, "fixture_fp4_roundtrip")


def test_directory_with_a_host_library_and_a_symlink(wheels, tmp_path):
    with zipfile.ZipFile(wheels["sm120a"]) as archive:
        archive.extractall(tmp_path)
    src = tmp_path / "host.c"
    src.write_text("int host_only(void) { return 2; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libhost.so.1"), str(src)], check=True)
    os.symlink("libhost.so.1", tmp_path / "libhost.so")
    result, failure = _run(tmp_path, require_archs=["sm_120a"])
    assert failure is None
    assert result["kind"] == "directory" and result["sha256"] is None
    by_path = {lib["path"]: lib for lib in result["libraries"]}
    assert sorted(by_path) == ["libhost.so.1", LIBRARY]
    assert by_path["libhost.so.1"]["has_device_code"] is False
    assert by_path[LIBRARY]["elf_archs"] == ["sm_120a"]


def test_single_library_file(wheels, tmp_path):
    with zipfile.ZipFile(wheels["sm90a"]) as archive:
        archive.extractall(tmp_path)
    path = tmp_path / LIBRARY
    result, failure = _run(path, require_archs=["sm_120a"])
    assert result["kind"] == "file"
    assert result["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert result["missing_archs"] == ["sm_120a"] and "no cubin for sm_120a" in failure


def test_wheel_without_shared_libraries(tmp_path):
    wheel = tmp_path / "pure-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pure/__init__.py", "")
    result, failure = _run(wheel)
    assert failure is None and result["libraries"] == [] and result["elf_archs"] == []
    _result, failure = _run(wheel, require_archs=["sm_120a"])
    assert "holds no shared library" in failure


@pytest.mark.parametrize("kind", ["missing", "not-a-zip", "bad-arch", "bad-cuobjdump"])
def test_bad_input_raises_a_message_with_the_fix(tmp_path, kind):
    params = {}
    path = tmp_path / "x.whl"
    if kind == "missing":
        match = "does not exist: give a wheel"
    elif kind == "not-a-zip":
        path.write_text("not a zip")
        match = "not a valid wheel"
    elif kind == "bad-arch":
        params["require_archs"] = ["compute_120a"]
        match = "is not a GPU arch"
    else:
        path.write_text("")
        params.update(cuobjdump=str(tmp_path), reader="cuobjdump")
        match = "is not an executable file"
    with pytest.raises(CudaBinaryError, match=match):
        _run(path, **params)


def _module(args, check_mode=False):
    args = dict(args, _ansible_check_mode=check_mode)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    proc = subprocess.run([sys.executable, str(MODULE)], input=json.dumps({"ANSIBLE_MODULE_ARGS": args}),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env, check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_module_end_to_end(wheels):
    rc, out = _module({"path": str(wheels["sm120a"]), "require_archs": ["sm_120a"]}, check_mode=True)
    assert rc == 0 and out["changed"] is False and out["elf_archs"] == ["sm_120a"]
    rc, out = _module({"path": str(wheels["sm90a"]), "require_archs": ["sm_120a"]})
    assert rc == 1 and out["failed"] is True
    assert "no cubin for sm_120a" in out["msg"] and out["missing_archs"] == ["sm_120a"]
    assert out["sha256"] == hashlib.sha256(wheels["sm90a"].read_bytes()).hexdigest()
    rc, out = _module({"path": str(wheels["sm90a"]), "require_archs": ["sm_12x"]})
    assert rc == 1 and "is not a GPU arch" in out["msg"] and "Traceback" not in out["msg"]


def _library(wheel, folder):
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(LIBRARY, str(folder))
    return str(folder / LIBRARY)


@pytest.mark.parametrize("build", sorted(CAPTURED))
def test_fatbin_reader_matches_the_captured_cuobjdump(wheels, tmp_path, fixtures_dir, build):
    """The Python reader lists what the real cuobjdump listed for the same build, and tells sm_120f from sm_120."""
    folder = fixtures_dir / "cuobjdump"
    captured = json.loads((folder / "index.json").read_text())
    _has, entries = _fatbin.read_entries(_library(wheels[build], tmp_path))
    for kind in ("elf", "ptx"):
        capture = captured["%s.list-%s" % (CAPTURED[build], kind)]
        assert capture["cmake_cuda_architectures"] == BUILDS[build][0]
        _code, listed = _cuda_binary.parse_listing(kind, 0, (folder / capture["stdout"]).read_text(), "")
        assert [e["name"] for e in entries if e["kind"] == kind] == [e["name"] for e in listed]
    headers = folder / (CAPTURED[build] + ".dump-elf-symbols.out")
    if headers.exists():
        assert [(e["kind"], e["arch"]) for e in entries] == _cuda_binary.parse_fatbin_headers(headers.read_text())
        assert {"sm_120f", "sm_120a"} <= {e["arch"] for e in entries if e["kind"] == "elf"}


def test_both_readers_give_the_same_answer_on_every_build(wheels):
    for name, wheel in sorted(wheels.items()):
        fast, _failure = _run(wheel, list_cubins=True)
        slow, _failure = _run(wheel, list_cubins=True, reader="cuobjdump")
        assert slow["reader"] == "cuobjdump" and slow["cuobjdump_version"]
        for key in ("elf_archs", "ptx_archs"):
            assert fast[key] == slow[key], name
        [quick], [full] = fast["libraries"], slow["libraries"]
        assert quick["archs"] == full["archs"], name
        assert [(c["name"], c["arch"]) for c in quick["cubins"]] == [(c["name"], c["arch"]) for c in full["cubins"]], name
        assert [(p["name"], p["arch"]) for p in quick["ptx"]] == [(p["name"], p["arch"]) for p in full["ptx"]], name
    mix = _run(wheels["mix"])[0]["libraries"][0]["archs"]
    assert [(a["kind"], a["arch"], a["count"]) for a in mix] == [
        ("elf", "sm_90a", 2), ("elf", "sm_120a", 2), ("elf", "sm_120f", 2), ("ptx", "sm_120a", 2)]


def test_a_corrupt_library_fails_with_the_cause(wheels, tmp_path):
    path = pathlib.Path(_library(wheels["sm120a"], tmp_path))
    data = bytearray(path.read_bytes())
    at = data.index(struct.pack("<I", _fatbin.FATBIN_MAGIC))
    data[at + 8:at + 16] = struct.pack("<Q", 1 << 40)
    path.write_bytes(bytes(data))
    rc, out = _module({"path": str(path)})
    assert rc == 1 and out["failed"] is True and "Traceback" not in out["msg"]
    assert out["msg"].startswith("libfixture_ops.so: the fatbin at file offset %d claims" % at)
    assert "set reader=cuobjdump" in out["msg"]


def test_require_kernels_tells_an_arch_from_the_kernels_it_holds(wheels):
    """The fixture built without its FP4 source still meets sm_120a (its sm_120f family cubins, accepted): only the
    kernel check sees that no FP4 kernel is there. Built with it, the FP4 kernel has an sm_120a cubin."""
    result, failure = _run(wheels["sm120a"], require_archs=["sm_120a"], require_kernels=["fp4"])
    assert failure is None and result["missing_kernels"] == [] and result["required_kernels"] == ["fp4"]
    [row] = result["kernel_matches"]
    assert (row["pattern"], row["arch"], row["count"]) == ("fp4", "sm_120a", 1)
    assert row["kernels"][0]["readable"] == "fixture_fp4_quantize_kernel" and row["kernels"][0]["library"] == LIBRARY
    assert row["kernels"][0]["size"] > 0 and row["code_bytes"] == row["kernels"][0]["size"]
    result, failure = _run(wheels["family"], require_archs=["sm_120a"], accept_family=True, require_kernels=["fp4", "scale"])
    assert result["missing_archs"] == []
    assert result["missing_kernels"] == [{"pattern": "fp4", "arch": "sm_120a"}]
    assert "no kernel matching 'fp4' has a cubin for sm_120a (searched 1 kernels in 1 cubins that meet sm_120a)" in failure
    assert "'scale'" not in failure
    assert [k["arch"] for r in result["kernel_matches"] for k in r["kernels"]] == ["sm_120f"]  # fixture_scale_kernel
    # without require_kernels nothing is unpacked and nothing is reported
    result, failure = _run(wheels["family"], require_archs=["sm_120a"], accept_family=True)
    assert failure is None and result["kernel_matches"] == [] and "kernels" not in result["libraries"][0]


def test_require_kernels_module_failures(fixtures_dir):
    library = str(fixtures_dir / "fatbin" / "libkernel_names.so")
    rc, out = _module({"path": library, "require_archs": ["sm_120f"], "require_kernels": ["fp4|e2m1"]})
    assert rc == 1 and out["missing_kernels"] == [{"pattern": "fp4|e2m1", "arch": "sm_120f"}] and out["missing_archs"] == []
    assert "no kernel matching 'fp4|e2m1' has a cubin for sm_120f" in out["msg"]
    rc, out = _module({"path": library, "require_archs": ["sm_100a", "sm_120a"], "require_kernels": ["fp4|e2m1"]})
    assert rc == 1 and out["msg"].count("no cubin for sm_100a") == 1 and "no kernel matching 'fp4|e2m1' has a cubin for sm_100a" in out["msg"]
    rc, out = _module({"path": library, "require_kernels": ["fp4"]})
    assert rc == 1 and "require_kernels needs require_archs" in out["msg"] and "Traceback" not in out["msg"]
    rc, out = _module({"path": library, "require_archs": ["sm_120a"], "require_kernels": ["fp4["]})
    assert rc == 1 and "'fp4[' is not a Python regular expression" in out["msg"] and out["missing_kernels"] == []
    rc, out = _module({"path": library, "require_archs": ["sm_120a"], "require_kernels": ["fp4"], "reader": "cuobjdump",
                       "cuobjdump": _cuda_binary.find_cuobjdump()}, check_mode=True)
    assert rc == 0 and out["kernel_matches"][0]["count"] == 1 and out["kernel_matches"][0]["smallest"] is None
