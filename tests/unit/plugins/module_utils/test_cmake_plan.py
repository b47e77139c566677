"""What a configured CMake tree will compile (_cmake_plan), read from real generated files of the fixture kernel
project (tests/fixtures/cmake_plan), and the verdict and report the sgl_kernel dry run prints."""

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _cmake_plan as cp


@pytest.fixture(scope="module")
def samples(fixtures_dir):
    folder = fixtures_dir / "cmake_plan"
    return {p.name: p.read_text() for p in folder.iterdir() if p.name != "MANIFEST.md"}


def _summary(samples, name, ninja=True):
    units = cp.parse_compile_commands(samples[name + ".compile_commands.json"])
    links = cp.parse_link_outputs(samples["upstream-120f.build.ninja"]) if ninja else {}
    return cp.summarize(units, links)


def test_the_trees_own_gencode_list_and_cmake_architectures_per_target(samples):
    s = _summary(samples, "upstream-120f")
    assert sorted(s["targets"]) == ["common_ops_sm100_build", "common_ops_sm90_build"]
    for name, variant in (("common_ops_sm90_build", "sm90"), ("common_ops_sm100_build", "sm100")):
        t = s["targets"][name]
        assert t["cubins"] == ["sm_90a", "sm_100a", "sm_120a", "sm_120f"]
        assert t["ptx"] == ["compute_120f"]
        assert (t["cuda_units"], t["nvfp4_units"], t["unit_archs"]) == (2, 2, 8)
        assert t["library"] == variant + "/common_ops.so"
    assert (s["cuda_units"], s["unit_archs"], s["nvfp4"]) == (4, 16, True)


def test_the_restricted_tree_compiles_one_arch(samples):
    s = _summary(samples, "upstream-120f-restricted")
    assert {tuple(t["cubins"]) for t in s["targets"].values()} == {("sm_120f",)}
    assert s["unit_archs"] == 4
    assert cp.check(s, ["sm_120a"], True, [], restrict_to=["120f"]) == []


def test_the_override_on_disk_is_the_one_the_plan_writes(samples):
    assert samples["upstream-120f-restricted.restrict-archs.cmake"] == cp.restrict_override(["120f"])


def test_cmakes_unused_define_warning(samples):
    assert cp.unused_defines(samples["upstream-120f.dry-run.log"]) == ["SGL_KERNEL_BUILD_SM100_VARIANT"]
    # a reconfigure (no warning) reports none
    log = samples["upstream-120f.dry-run.log"]
    assert cp.unused_defines(log[:log.index("CMake Warning (unused-cli)")]) == []


@pytest.mark.parametrize("argv,cubins,ptx,unresolved", [
    (["nvcc", "-gencode", "arch=compute_90a,code=sm_90a"], {"sm_90a"}, set(), []),
    (["nvcc", "--generate-code=arch=compute_120f,code=[compute_120f,sm_120f]"], {"sm_120f"}, {"compute_120f"}, []),
    (["nvcc", "--generate-code=arch=compute_120a,code=[sm_120a]"], {"sm_120a"}, set(), []),
    (["nvcc", "-gencode=arch=compute_120a,code=compute_120a"], set(), {"compute_120a"}, []),
    (["nvcc", "-arch=sm_120a"], {"sm_120a"}, {"compute_120a"}, []),
    (["nvcc", "-arch", "compute_90", "-code", "sm_90,compute_90"], {"sm_90"}, {"compute_90"}, []),
    (["nvcc", "-arch=native"], set(), set(), ["-arch=native"]),
    (["nvcc", "-c", "x.cu"], set(), set(), [cp.NVCC_DEFAULT]),
])
def test_nvcc_arch_options(argv, cubins, ptx, unresolved):
    assert cp.unit_archs(argv) == (cubins, ptx, unresolved)


def test_checks_name_the_missing_arch_nvfp4_and_leftovers(samples):
    s = _summary(samples, "upstream-120f")
    assert cp.check(s, ["sm_120a"], True, []) == []
    no_120 = json.loads(samples["upstream-120f.compile_commands.json"].replace("120", "110"))
    s110 = cp.summarize(cp.parse_compile_commands(json.dumps(no_120)))
    problems = cp.check(s110, ["sm_120a"], True, [], fixes={"arch": "ADD-120A"})
    assert problems == ["no CUDA unit will be compiled for sm_120a (cubins: sm_90a, sm_100a, sm_110a, sm_110f). Fix: ADD-120A"]
    no_fp4 = samples["upstream-120f.compile_commands.json"].replace("-DENABLE_NVFP4=1", "-DOTHER=1")
    s_fp4 = cp.summarize(cp.parse_compile_commands(no_fp4))
    assert cp.check(s_fp4, ["sm_120a"], True, ["SGL_KERNEL_ENABLE_FP4"], fixes={"nvfp4": "FP4-ON"}) == [
        "no CUDA unit is compiled with -DENABLE_NVFP4 (CMake did not use SGL_KERNEL_ENABLE_FP4). Fix: FP4-ON"]
    assert cp.check(s_fp4, ["sm_120a"], False, []) == []
    leftovers = cp.check(s, ["sm_120a"], True, [], restrict_to=["120f"])
    assert len(leftovers) == 2 and all("sm_90a, sm_100a, sm_120a" in p for p in leftovers)


def test_ptx_alone_does_not_meet_a_requirement():
    s = cp.summarize(cp.parse_compile_commands(json.dumps([{
        "directory": "/b", "file": "/s/a.cu", "output": "CMakeFiles/t.dir/a.cu.o",
        "command": "/usr/local/cuda/bin/nvcc -gencode=arch=compute_120a,code=compute_120a -c /s/a.cu"}])))
    assert cp.check(s, ["sm_120a"], False, []) and s["ptx"] == ["compute_120a"]


def test_report_and_estimate(samples):
    s = _summary(samples, "upstream-120f")
    lines = cp.report(s, ["X"], [], 5.0, "sm_120a", 2, 2, {"seconds": 100.0, "unit_archs": 4, "jobs": 2})
    assert "  common_ops_sm100_build -> sm100/common_ops.so: 2 CUDA units x archs sm_90a sm_100a sm_120a sm_120f " \
           "+ PTX compute_120f; NVFP4 in 2 of 2 units" in lines
    assert "NVFP4 (-DENABLE_NVFP4): on" in lines and "Defines CMake did not use: X" in lines
    # 16 units x archs x 5 s x 2 / 2 jobs = 80 s; the last build: 100 s x 2 jobs / 4 = 50 s per unit-arch -> 400 s
    assert any(line.startswith("Estimated build time: 1m20s, an estimate: 16 units x archs x 5.0 s") for line in lines)
    assert lines[-1].endswith(": 6m40s")
    assert cp.estimate(16, None, 1, 2) is None


@pytest.mark.parametrize("text", ["{", "{}", "[]x"])
def test_unreadable_compile_commands_name_the_fix(text):
    with pytest.raises(cp.CMakePlanError, match="compile_commands.json"):
        cp.parse_compile_commands(text)
