"""The sgl_kernel dry run end to end with the real cmake, nvcc and cuobjdump: the role's build.sh (rendered from its
template for the role's plan) configures the fixture kernel project in its upstream layout, cmake_cuda_plan reads
what CMake generated, and the build that follows produces exactly the archs the dry run reported."""

import ctypes
import json
import pathlib
import shlex
import shutil
import subprocess
import zipfile

import jinja2
import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.module_utils import _cuda_binary as cb
from ansible_collections.llmops.sglang.plugins.plugin_utils import _sgl_kernel_plan as sk
from ansible_collections.llmops.sglang.plugins.module_utils._cuda_toolkit import parse_nvcc_version
from ansible_collections.llmops.sglang.plugins.modules import cmake_cuda_plan

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "sgl_kernel"
PROJECT = ROOT / "tests" / "fixtures" / "kernel_project"
CUDA_HOME = "/usr/local/cuda"
UPSTREAM = {"LLMOPS_FIXTURE_UPSTREAM_LAYOUT": "ON"}


def _release():
    nvcc = pathlib.Path(CUDA_HOME) / "bin" / "nvcc"
    if not nvcc.exists():
        pytest.fail("no nvcc at %s: these tests configure and build CUDA code for real (CUDA >= 12.9 needed)" % nvcc)
    return parse_nvcc_version(subprocess.run([str(nvcc), "--version"], stdout=subprocess.PIPE, universal_newlines=True,
                                             check=True).stdout)["release"]


def _values(build_dir, **settings):
    """What the role hands its plan on the build host, for a build of the fixture in build_dir."""
    v = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    v.update(sgl_kernel_build_dir=str(build_dir), sgl_kernel_build_venv=str(ROOT / ".venv"), sgl_kernel_cuda_home=CUDA_HOME,
             sgl_kernel_build_host="build1", sgl_kernel_controller_dir=str(build_dir / "controller"), sgl_kernel_ccache=False,
             sgl_kernel_build_jobs=2, sgl_kernel_extra_cmake_defines=UPSTREAM)
    v.update(settings)
    probe = {"venv": {"exists": True, "packages": {}}, "cores": 2, "mem_available_bytes": 8 << 30}
    v.update(_sgl_kernel_run={"host": "build1", "play_hosts": ["build1"], "check_mode": False},
             _sgl_kernel_probe_source="", _sgl_kernel_toolkit={"installed": True, "release": _release(), "archs_ok": True},
             _sgl_kernel_git={"after": "0" * 40}, _sgl_kernel_build_probe={"stdout": json.dumps(probe)})
    return v


def _render(values, plan):
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(quote=shlex.quote, comment=lambda text: "# managed")
    template = env.from_string((ROLE / "templates" / "build.sh.j2").read_text())
    script = pathlib.Path(values["sgl_kernel_build_dir"]) / "build.sh"
    script.write_text(template.render(dict(values, _sgl_kernel=plan, ansible_managed="managed")))
    return script


def _run(script, *args):
    proc = subprocess.run(["bash", str(script)] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900, check=False)
    return proc.returncode, proc.stdout


def dry_run(build_dir, probe=True, **settings):
    """The role's dry run: build.sh --configure-only, cmake_cuda_plan, then the plan's report and verdict."""
    build_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(str(PROJECT), str(build_dir / "src" / "sgl-kernel"), dirs_exist_ok=True)
    values = _values(build_dir, **settings)
    plan = sk.plan(values)
    if plan["restrict_override"] is not None:
        pathlib.Path(plan["restrict_override_path"]).write_text(plan["restrict_override"])
    script = _render(values, plan)
    rc, out = _run(script, "--configure-only")
    assert rc == 0, out
    cmake = cmake_cuda_plan.run_module({"build_dir": plan["dry_run_dir"], "log": plan["dry_run_log"],
                                        "nvcc": plan["nvcc"] if probe else None, "probe_arch": "sm_120a", "timeout": 300})
    values.update(_sgl_kernel_configure={"rc": rc, "stdout": out}, _sgl_kernel_cmake_plan=cmake)
    return {"values": values, "plan": sk.plan(values), "cmake": cmake, "script": script}


def build(run):
    """The real build the dry run planned; per library in the wheel, its cuobjdump archs (arch-level results only)."""
    rc, out = _run(run["script"])
    log = pathlib.Path(run["plan"]["build_log"]).read_text()
    assert rc == 0, log[-4000:]
    wheels = list(pathlib.Path(run["plan"]["staging_dir"]).glob("*.whl"))
    assert len(wheels) == 1
    found, unpacked = {}, pathlib.Path(run["plan"]["staging_dir"]) / "unpacked"
    with zipfile.ZipFile(str(wheels[0])) as wheel:
        wheel.extractall(str(unpacked))
    read = cb.library_reader("cuobjdump", cb.find_cuobjdump())   # the real cuobjdump, not the collection's reader
    for library in unpacked.rglob("*.so"):
        info = cb.inspect_library(str(library), read)
        found[library.relative_to(unpacked).as_posix()] = (set(info["elf_archs"]), set(info["ptx_archs"]))
        # FIXTURE_FEATURE_FP4: the library was compiled with ENABLE_NVFP4 (loading needs no GPU)
        run.setdefault("fp4", set()).add(ctypes.CDLL(str(library)).fixture_features() == 1)
    return found


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """Defaults (120f added by CMAKE_CUDA_ARCHITECTURES) on the upstream layout: dry run, then the build."""
    run = dry_run(tmp_path_factory.mktemp("full"))
    run["built"] = build(run)
    return run


@pytest.fixture(scope="module")
def restricted(tmp_path_factory):
    run = dry_run(tmp_path_factory.mktemp("restricted"), sgl_kernel_restrict_archs=True)
    run["built"] = build(run)
    return run


def _planned(run):
    """library path in the wheel -> (cubin archs, PTX archs as cuobjdump names them) the dry run planned."""
    out = {}
    for target in run["cmake"]["targets"].values():
        if target["cuda_units"]:
            ptx = {a.replace("compute_", "sm_") for a in target["ptx"]}
            out["llmops_fixture_kernel/" + target["library"]] = (set(target["cubins"]), ptx)
    return out


@pytest.mark.parametrize("case", ["full", "restricted"])
def test_the_dry_run_reports_exactly_what_the_build_produces(case, request):
    run = request.getfixturevalue(case)
    assert run["plan"]["dry_run_error"] is None, run["plan"]["dry_run_report"]
    assert run["built"] == _planned(run)
    assert run["fp4"] == {run["cmake"]["nvfp4"]} == {True}
    assert set(run["built"]) == {"llmops_fixture_kernel/sm90/common_ops.so", "llmops_fixture_kernel/sm100/common_ops.so"}


def test_the_trees_own_list_plus_cmake_architectures_and_the_unknown_define(full):
    cmake, report = full["cmake"], "\n".join(full["plan"]["dry_run_report"])
    for name in ("common_ops_sm90_build", "common_ops_sm100_build"):
        t = cmake["targets"][name]
        # the tree's own list (below-SM90 off by the role), CMAKE_CUDA_ARCHITECTURES=120f adds one; torch's 12.0f is cleared
        assert t["cubins"] == ["sm_90a", "sm_100a", "sm_120a", "sm_120f"] and t["ptx"] == ["compute_120f"]
        assert t["cuda_units"] == 2 and t["nvfp4_units"] == 2
    assert cmake["unit_archs"] == 16 and cmake["nvfp4"]
    # the role's default variant define that this tree (like upstream's v0.5-era CMakeLists) does not know
    assert cmake["unused_defines"] == ["SGL_KERNEL_BUILD_SM100_VARIANT"]
    assert "Defines CMake did not use: SGL_KERNEL_BUILD_SM100_VARIANT" in report
    assert "CUDA translation units x archs: 16 (4 units)" in report
    assert "an estimate: 16 units x archs x" in report and cmake["unit_seconds"] > 0


def test_the_restriction_removes_the_other_archs(full, restricted):
    for t in restricted["cmake"]["targets"].values():
        assert t["cubins"] == ["sm_120f"] and t["ptx"] == ["compute_120f"]
    assert restricted["cmake"]["unit_archs"] == 4 < full["cmake"]["unit_archs"]
    assert restricted["plan"]["key"] != full["plan"]["key"]
    assert restricted["plan"]["key_inputs"]["restrict_archs"]["keep"] == ["120f"]
    assert "restrict_archs" not in full["plan"]["key_inputs"]
    assert all(archs == ({"sm_120f"}, {"sm_120f"}) for archs in restricted["built"].values())


def test_a_tree_that_ignores_fp4_fails_before_the_build(tmp_path):
    run = dry_run(tmp_path, probe=False, sgl_kernel_extra_cmake_defines=dict(UPSTREAM, SGL_KERNEL_ENABLE_FP4="OFF"))
    assert not run["cmake"]["nvfp4"]
    assert "no CUDA unit is compiled with -DENABLE_NVFP4" in run["plan"]["dry_run_error"]
    assert "sgl_kernel_enable_fp4" in run["plan"]["dry_run_error"]


def test_restricted_without_an_arch_variable_fails_naming_sm_120a(tmp_path):
    # the own list has no 120f and nothing asks for it: only CMake's default arch (the compiler's) is left
    run = dry_run(tmp_path, probe=False, sgl_kernel_restrict_archs=True, sgl_kernel_arch_cmake_variable="")
    error = run["plan"]["dry_run_error"]
    assert not any(a.startswith("sm_12") for a in run["cmake"]["cubins"])
    assert "no CUDA unit will be compiled for sm_120a" in error and "CMAKE_CUDA_ARCHITECTURES" in error
    assert "the arch restriction left %s" % run["cmake"]["cubins"][0] in error
