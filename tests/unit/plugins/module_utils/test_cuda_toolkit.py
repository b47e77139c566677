"""_cuda_toolkit: parsers on captured nvcc outputs, and test compiles with the machine's real nvcc 13.0."""

import json
import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_toolkit as ct

NVCC = "/usr/local/bin/nvcc"


@pytest.fixture(scope="module")
def nvcc():
    if not os.access(NVCC, os.X_OK):
        pytest.fail("%s not found: these tests run the real CUDA compiler (CUDA >= 12.8 needed)" % NVCC)
    return NVCC


@pytest.fixture(scope="module")
def gpu_out(fixtures_dir):
    base = fixtures_dir / "gpu-outputs"
    return lambda prefix: next(base.glob(prefix + "-*.txt")).read_text()


@pytest.mark.parametrize("prefix, release, version, build", [
    ("34", "12.8", "12.8.93", "cuda_12.8.r12.8/compiler.35583870_0"),
    ("35", "12.9", "12.9.86", "cuda_12.9.r12.9/compiler.36037853_0"),
    ("36", "13.0", "13.0.88", "cuda_13.0.r13.0/compiler.36424714_0"),
    ("04", "13.2", "13.2.78", "cuda_13.2.r13.2/compiler.37668154_0"),
])
def test_parse_nvcc_version(gpu_out, prefix, release, version, build):
    assert ct.parse_nvcc_version(gpu_out(prefix)) == {"release": release, "version": version, "build": build}


def test_parse_nvcc_version_missing(gpu_out):
    # "nvcc: command not found" in the B300 capture
    assert ct.parse_nvcc_version(gpu_out("11"))["release"] is None


def test_parse_list_gpu_code(gpu_out):
    codes = ct.parse_arch_list(gpu_out("37"), "sm_")
    assert codes[0] == "sm_50" and codes[-3:] == ["sm_100", "sm_101", "sm_120"]
    assert len(codes) == 17
    assert ct.parse_arch_list(gpu_out("37"), "compute_") == []


@pytest.mark.parametrize("arch, gencode", [
    ("sm_120a", "arch=compute_120a,code=sm_120a"),
    ("sm_90a", "arch=compute_90a,code=sm_90a"),
    ("sm_100f", "arch=compute_100f,code=sm_100f"),
    ("sm_89", "arch=compute_89,code=sm_89"),
])
def test_validate_arch(arch, gencode):
    assert ct.validate_arch(arch) == gencode


@pytest.mark.parametrize("arch", ["compute_120a", "120a", "sm_120a; rm -rf /", "sm_", "SM_120A"])
def test_validate_arch_rejects(arch):
    with pytest.raises(ValueError, match="sm_<digits>"):
        ct.validate_arch(arch)


def test_real_nvcc_facts(nvcc, tmp_path):
    result = ct.collect(nvcc=nvcc, archs=[], cache_dir=str(tmp_path))
    assert result["installed"] is True
    assert result["release"] == "13.0" and result["version"] == "13.0.88"
    assert "compute_120" in result["gpu_archs"] and "compute_90" in result["gpu_archs"]
    assert all(a.startswith("compute_") for a in result["gpu_archs"])
    assert "sm_120" in result["gpu_codes"]
    assert result["archs_ok"] is None and result["cache_written"] is False


def test_real_compile_sm_120a_and_bogus_arch(nvcc):
    good = ct.try_compile(nvcc, "sm_120a")
    assert good["compiles"] is True and good["error"] is None
    assert good["command"] == "nvcc -cubin -gencode arch=compute_120a,code=sm_120a probe.cu"
    bad = ct.try_compile(nvcc, "sm_999")
    assert bad["compiles"] is False
    assert bad["error_class"] == "unsupported_arch"
    assert "compute_999" in bad["error"]


def test_real_compile_without_host_compiler(nvcc):
    # nvcc preprocesses with gcc even for -cubin; with no gcc on PATH the failure must not read as "arch unsupported"
    env = dict(os.environ, PATH=os.path.dirname(os.path.realpath("/usr/local/cuda/bin/nvcc")))
    result = ct.try_compile("/usr/local/cuda/bin/nvcc", "sm_120a", env=env)
    assert result["compiles"] is False
    assert result["error_class"] == "host_compiler"


def test_cache_written_then_used(nvcc, tmp_path):
    first = ct.collect(nvcc=nvcc, archs=["sm_120a", "sm_999"], cache_dir=str(tmp_path / "cache"))
    assert first["arch_tests"]["sm_120a"]["compiles"] and not first["arch_tests"]["sm_999"]["compiles"]
    assert first["archs_ok"] is False
    assert first["cache_written"] is True
    assert [t["from_cache"] for t in first["arch_tests"].values()] == [False, False]
    data = json.loads(open(first["cache_file"]).read())
    assert data["version"] == "13.0.88" and data["nvcc"] == os.path.realpath(nvcc)
    assert data["archs"]["sm_120a"]["compiles"] is True

    second = ct.collect(nvcc=nvcc, archs=["sm_120a", "sm_999"], cache_dir=str(tmp_path / "cache"))
    assert second["cache_file"] == first["cache_file"]
    assert [t["from_cache"] for t in second["arch_tests"].values()] == [True, True]
    assert second["arch_tests"]["sm_999"]["error_class"] == "unsupported_arch"
    assert second["cache_written"] is False  # nothing new to store


def test_cache_is_keyed_by_compiler(nvcc, tmp_path):
    key = ct.cache_key(os.path.realpath(nvcc), "13.0.88", 1)
    assert key != ct.cache_key(os.path.realpath(nvcc), "13.0.88", 2)
    assert key != ct.cache_key(os.path.realpath(nvcc), "12.8.93", 1)
    assert key != ct.cache_key("/usr/local/cuda-12.8/bin/nvcc", "13.0.88", 1)
    # a cache entry for another compiler is never read
    stale = ct.cache_path(str(tmp_path), ct.cache_key("/elsewhere/nvcc", "13.0.88", 1))
    os.makedirs(str(tmp_path), exist_ok=True)
    with open(stale, "w") as handle:
        json.dump({"archs": {"sm_120a": {"compiles": False, "error_class": "unsupported_arch", "error": "x", "command": "x"}}}, handle)
    result = ct.collect(nvcc=nvcc, archs=["sm_120a"], cache_dir=str(tmp_path))
    assert result["arch_tests"]["sm_120a"]["compiles"] is True and result["arch_tests"]["sm_120a"]["from_cache"] is False


def test_check_mode_compiles_but_does_not_write(nvcc, tmp_path):
    cache = tmp_path / "cache"
    result = ct.collect(nvcc=nvcc, archs=["sm_120a"], cache_dir=str(cache), check_mode=True)
    assert result["arch_tests"]["sm_120a"]["compiles"] is True
    assert result["cache_written"] is False
    assert not cache.exists()


def test_unwritable_cache_is_a_problem_not_a_failure(nvcc, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = ct.collect(nvcc=nvcc, archs=["sm_120a"], cache_dir=str(blocker / "sub"))
    assert result["installed"] and result["archs_ok"] is True
    assert result["cache_written"] is False
    assert len(result["problems"]) == 1 and "could not write the cache file" in result["problems"][0]


def test_not_installed(tmp_path):
    missing = ct.collect(nvcc=str(tmp_path / "nvcc"), archs=["sm_120a"], cache_dir=str(tmp_path))
    assert missing["installed"] is False and missing["nvcc"] is None and missing["arch_tests"] == {}
    assert ct.find_nvcc(path=str(tmp_path), extra_dirs=()) is None
    assert ct.find_nvcc(path=str(tmp_path), extra_dirs=("/usr/local/cuda/bin",)) == "/usr/local/cuda/bin/nvcc"


def test_nvcc_that_is_not_nvcc(tmp_path):
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\necho 'nvcc: this is not a CUDA compiler'\nexit 1\n")
    fake.chmod(0o755)
    result = ct.collect(nvcc=str(fake), archs=["sm_120a"], cache_dir=str(tmp_path))
    assert result["installed"] is False and result["nvcc"] == str(fake)
    assert "--version failed (rc 1)" in result["problems"][0]


def test_bad_arch_raises_before_running(tmp_path):
    with pytest.raises(ValueError):
        ct.collect(nvcc=NVCC, archs=["compute_120a"], cache_dir=str(tmp_path))


# ---- the cuda_toolkit_info module entry point ----

def _run_module(capsys, args):
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.llmops.sglang.plugins.modules import cuda_toolkit_info

    with patch_module_args(args):
        with pytest.raises(SystemExit):
            cuda_toolkit_info.main()
    return json.loads(capsys.readouterr().out)


def test_module_main(nvcc, capsys, tmp_path):
    cache = tmp_path / "cache"
    checked = _run_module(capsys, {"nvcc": nvcc, "cache_dir": str(cache), "archs": ["sm_120a", "sm_999"], "_ansible_check_mode": True})
    assert checked["changed"] is False and checked.get("failed") is not True
    assert checked["arch_tests"]["sm_120a"]["compiles"] is True and checked["arch_tests"]["sm_999"]["compiles"] is False
    assert checked["cache_written"] is False and not cache.exists()
    real = _run_module(capsys, {"nvcc": nvcc, "cache_dir": str(cache)})
    assert real["release"] == "13.0" and real["archs_ok"] is True and real["cache_written"] is True
    assert os.path.isfile(real["cache_file"])


def test_module_rejects_bad_arch(capsys, tmp_path):
    result = _run_module(capsys, {"archs": ["120a"], "cache_dir": str(tmp_path)})
    assert result["failed"] is True
    assert result["msg"] == "archs: arch '120a' is not of the form sm_<digits>[a|f] (for example sm_120a, sm_90a, sm_100f)"


def test_module_without_toolkit(capsys, tmp_path):
    result = _run_module(capsys, {"nvcc": str(tmp_path / "nvcc"), "cache_dir": str(tmp_path)})
    assert result.get("failed") is not True and result["installed"] is False
    assert "warnings" not in result  # a host without a toolkit is a normal answer


def test_cache_file_reads_are_bounded(tmp_path):
    good = tmp_path / "good.json"
    ct.write_cache(str(good), {"nvcc": "/usr/local/cuda/bin/nvcc", "version": "13.0.88", "mtime": 1, "archs": {}})
    assert ct.load_cache(str(good))["version"] == "13.0.88"
    big = tmp_path / "big.json"
    big.write_text('{"archs": {}, "pad": "%s"}' % ("x" * ct.MAX_CACHE_BYTES))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000)
    for path in (big, deep, tmp_path / "missing.json", tmp_path):
        assert ct.load_cache(str(path)) is None


def test_an_nvcc_that_floods_is_stopped(tmp_path):
    flood = tmp_path / "nvcc"
    flood.write_text("#!/bin/sh\nexec yes 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    flood.chmod(0o755)
    result = ct.collect(nvcc=str(flood), archs=[], cache_dir=str(tmp_path / "cache"), timeout=60)
    assert result["installed"] is False
    assert "printed more than 16777216 bytes and was stopped" in result["problems"][0]
