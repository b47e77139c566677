"""The sgl_kernel role's plan (_sgl_kernel_plan.py, filter llmops.sglang.sgl_kernel_plan): it reproduces what the role's Jinja
computed (fixtures rendered from it), decides each step as documented, and the role only wires values it returns."""

import json
import pathlib
import re
import shlex

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.sgl_kernel_plan import sgl_kernel_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils import _sgl_kernel_plan as sk

import role_plan  # tests/unit/role_plan.py

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "sgl_kernel"
FIXTURES = ROOT / "tests" / "fixtures" / "sgl_kernel_plan"
CASES = sorted(p.name[len("case_"):-len(".json")] for p in FIXTURES.glob("case_*.json"))
REAL_PROBE = (FIXTURES / "probe-sglang-venv-0.5.23-cpu.json").read_text()
WHEEL = "sglang_kernel-0.4.0-cp310-abi3-linux_x86_64.whl"
# what the fixtures' build steps registered (the same values the Jinja rendering used)
VERIFY = {"sha256": "c" * 64, "required_archs": ["sm_120a"], "elf_archs": ["sm_120f"], "ptx_archs": [],
          "cuobjdump_version": "13.0.88", "changed": False}
STAGED = {"files": [{"path": "/var/cache/llmops-sglang/sgl-kernel/staging/" + WHEEL, "size": 123456}]}
BUILD_RESULT = {"delta": "0:12:01.5", "rc": 0, "finished": True}


def defaults():
    values = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # the two templated defaults, as the fixtures rendered them (HOME=/root)
    values["sgl_kernel_controller_dir"] = "/root/.cache/llmops-sglang/sgl-kernel"
    return values


def values_for(case, host=None, build_host="build1", check_mode=False, **registered):
    """The values the role hands the plan for a fixture case, on `host` (default: the build host)."""
    c = json.loads((FIXTURES / ("case_%s.json" % case)).read_text())
    host = host or build_host
    v = defaults()
    v.update((k, val) for k, val in c.items() if k.startswith("sgl_kernel_") and k not in (
        "sgl_kernel_toolkit", "sgl_kernel_git", "sgl_kernel_build_probe_raw", "sgl_kernel_build_probe",
        "sgl_kernel_build", "sgl_kernel_runtime_probe"))
    v.update({
        "sgl_kernel_build_host": build_host,
        "_sgl_kernel_run": {"host": host, "play_hosts": sorted({build_host, host}), "check_mode": check_mode,
                            "probe_source": "print('probe')"},
        "_sgl_kernel_runtime_probe": {"stdout": json.dumps(c["sgl_kernel_runtime_probe"])},
        "sgl_kernel_build": c["sgl_kernel_build"]})
    if host == build_host:
        v.update({"_sgl_kernel_toolkit": c["sgl_kernel_toolkit"], "_sgl_kernel_git": c["sgl_kernel_git"],
                  "_sgl_kernel_build_probe": c["sgl_kernel_build_probe_raw"],
                  "_sgl_kernel_build_reprobe": {"skipped": True, "changed": False},
                  "_sgl_kernel_build_result": BUILD_RESULT, "_sgl_kernel_staged": STAGED, "_sgl_kernel_verify": VERIFY})
    v.update(registered)
    return v


def jinja(case):
    return json.loads((FIXTURES / ("jinja_%s.json" % case)).read_text())


def plan_of(values):
    """The role's one filter as its vars/main.yml calls it: the settings and the results by name, and the run."""
    settings = dict((name, values[name]) for name in sk.SETTINGS if name in values)
    return sgl_kernel_plan(settings, "plan", dict((name, values.get(name)) for name in sk.RESULTS), values["_sgl_kernel_run"])


# ---------------------------------------------------------------------------------------------
# Equal to the Jinja the plan replaced

# the old rule reinstalled ranges, extras/markers and +local pins on every run (fixed: pip's rule)
FIXED_MISSING = {"c_128_wheelhouse_pipcuob": ["wheel"], "e_129_family_multi": ["nvidia-cuda-cuobjdump==13.5.37"]}


@pytest.mark.parametrize("case", CASES)
def test_the_plan_reproduces_the_roles_jinja(case):
    old = jinja(case)
    p = plan_of(values_for(case))
    assert p["input_error"] is None and p["toolkit_error"] is None
    assert p["archs"] == old["archs_resolved"]
    assert p["toolkit_archs"] == old["require_archs_toolkit"]
    assert p["cuobjdump"] == old["cuobjdump_path"]
    assert p["requirements_missing"] == FIXED_MISSING.get(case, old["requirements_missing"])
    assert p["requirements_install_argv"] == (["/opt/sglang/build-venv/bin/python", "-m", "pip", "install",
                                               "--disable-pip-version-check"] + _one_word(old["pip_source_args"])
                                              + p["requirements_missing"])
    for key in ("key_inputs", "key", "jobs", "threads", "use_ccache", "build_environment", "dist_dir",
                "stamp_path", "installed_stamp_path", "build_needed"):
        assert p[key] == old[key], key
    # added since: compile_commands.json for the dry run, and the dry run's plan in the stamp
    assert p["cmake_defines"] == dict(old["cmake_defines"], CMAKE_EXPORT_COMPILE_COMMANDS="ON")
    stamp = json.loads(json.dumps(old["new_stamp"]))
    stamp["build"].update(cmake_defines=p["cmake_defines"], unit_archs=None)
    assert p["new_stamp"] == dict(stamp, plan=None)
    # added since: where the wheel came from and why (the pinned wheel is checked first where the FP4 table allows)
    assert p["record"] == dict(old["build_record"], stamp=p["new_stamp"] if old["build_record"]["stamp"] else None,
                               source="built", why=p["why"])
    assert p["cache_message"].endswith(old["build_reason"] if old["build_needed"] else "= stamp, build skipped")


@pytest.mark.parametrize("case", CASES)
def test_installing_hosts_decide_as_the_jinja_did(case):
    old = jinja(case)
    host = json.loads((FIXTURES / ("case_%s.json" % case)).read_text())["inventory_hostname"]
    p = plan_of(values_for(case, host=host))
    assert p["local_wheel"] == old["local_wheel_path"]
    assert p["copy_wheel"] == old["wheel_copy_needed"]
    # the old install task ran when the build had a wheel and install_needed held
    has_wheel = values_for(case)["sgl_kernel_build"]["sha256"] is not None
    assert p["install"] == (has_wheel and old["install_needed"])
    assert p["installed_stamp_path"] == old["installed_stamp_path"]


@pytest.mark.parametrize("case", CASES)
def test_the_build_script_is_the_one_the_jinja_wrote(case):
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(quote=shlex.quote, comment=lambda text: "# managed")
    values = values_for(case)
    template = env.from_string((ROLE / "templates" / "build.sh.j2").read_text())
    script = template.render(dict(values, _sgl_kernel=plan_of(values), ansible_managed="managed"))
    # the same environment and defines, in the same order, plus compile_commands.json (read by the dry run)
    settings = re.compile(r"^(export |    --config-settings=cmake\.define\.)")
    assert [line for line in script.splitlines() if settings.match(line)] == sorted(
        [line for line in jinja(case)["build_sh"].splitlines() if settings.match(line)]
        + ["    --config-settings=cmake.define.CMAKE_EXPORT_COMPILE_COMMANDS=ON \\"],
        key=lambda line: (not line.startswith("export"), line.lower()))
    assert script.count(" -m pip wheel . ") == 1


def test_the_cache_key_is_ansibles_to_json_hash_so_old_stamps_stay_valid():
    inputs = jinja("a_defaults_130")["key_inputs"]
    assert sk.cache_key(inputs) == jinja("a_defaults_130")["key"]
    assert sk.cache_key(dict(inputs, archs=["120a"])) != sk.cache_key(inputs)


# ---------------------------------------------------------------------------------------------
# Decisions

@pytest.mark.parametrize("archs,prefer,release,expected", [
    (["120a"], True, "13.0", ["120f"]),
    (["sm_120a"], True, "12.9", ["120f"]),
    (["120a"], True, "12.8", ["120a"]),          # nvcc 12.8 has no family targets
    (["120a"], False, "13.0", ["120a"]),
    (["120a"], "false", "13.0", ["120a"]),       # a string from the inventory
    (["100a", "103a", "121a", "90a", "89", 90, "120f"], True, "13.0", ["100f", "103f", "121f", "90a", "89", "90", "120f"]),
    (["sm_90a", "sm_100a"], "yes", "12.10", ["90a", "100f"]),
])
def test_family_targets_replace_arch_specific_blackwell_ones_from_nvcc_12_9(archs, prefer, release, expected):
    assert sk.resolve_archs(archs, prefer, release) == expected


def _one_word(args):
    """The former Jinja wrote "--find-links DIR" and "--index-url URL" as two words; the one rule writes them as
    one (pip reads both)."""
    out = []
    for arg in args:
        if out and out[-1] in ("--find-links", "--index-url"):
            out[-1] += "=" + arg
        else:
            out.append(arg)
    return out


def test_torch_arch_list_spells_dotted_archs():
    assert sk.torch_arch_list(["120f", "90a", "89", "100"]) == "12.0f;9.0a;8.9;10.0"


@pytest.mark.parametrize("explicit,toolkit_has,expected_path,expected_extra", [
    ("/opt/cuda/bin/cuobjdump", True, "/opt/cuda/bin/cuobjdump", []),
    ("/opt/cuda/bin/cuobjdump", False, "/opt/cuda/bin/cuobjdump", []),
    (None, True, "/usr/local/cuda/bin/cuobjdump", []),
    (None, False, "/venv/nvidia/cu13/bin/cuobjdump", ["nvidia-cuda-cuobjdump==13.5.37"]),
])
def test_the_cuobjdump_is_explicit_then_the_toolkits_then_pips(explicit, toolkit_has, expected_path, expected_extra):
    assert sk.cuobjdump_path(explicit, "/usr/local/cuda", toolkit_has, "/venv/nvidia/cu13/bin/cuobjdump") == expected_path
    assert sk.build_requirements(["wheel"], "nvidia-cuda-cuobjdump==13.5.37", explicit, toolkit_has) == ["wheel"] + expected_extra
    assert sk.build_requirements(["wheel"], "", explicit, toolkit_has) == ["wheel"]


def test_the_probe_is_asked_for_torch_and_each_requirement_once_by_canonical_name():
    assert sk.probe_packages(["Scikit_Build.Core==1.1.2", "cmake>=3.31", "ninja[x]; python_version>'3'", "torch==2.14.1",
                              "wheel", "Wheel"], "nvidia-cuda-cuobjdump==13.5.37") == [
        "torch", "scikit-build-core", "cmake", "ninja", "wheel", "nvidia-cuda-cuobjdump"]


def test_the_pin_rule_reads_a_real_probe_answer():
    v = values_for("a_defaults_130", _sgl_kernel_build_probe={"stdout": REAL_PROBE},
                   sgl_kernel_build_requirements=["torch==2.13.0", "packaging>=26", "cmake==4.4.5", "Packaging"])
    p = plan_of(v)
    # 2.13.0+cpu meets torch==2.13.0 (a pin without a local label ignores it); cmake is not installed;
    # the real toolkit has no cuobjdump, so pip's is required
    assert p["requirements_missing"] == ["cmake==4.4.5", "nvidia-cuda-cuobjdump==13.5.37"]
    assert p["key_inputs"]["torch_version"] == "2.13.0+cpu"
    assert p["cuobjdump"] is None  # the venv has none yet: the module searches
    v["sgl_kernel_build_requirements"] = ["torch==2.13.0+cu130"]
    assert plan_of(v)["requirements_missing"][0] == "torch==2.13.0+cu130"


def test_pip_output_decides_changed_and_the_second_probe():
    installed = {"stdout": "Collecting wheel\nSuccessfully installed wheel-0.45.1\n", "changed": True}
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_build_reqs=installed))
    assert p["requirements_changed"] and p["reprobe"]
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_build_reqs={"stdout": "Requirement already satisfied: wheel\n"}))
    assert not p["requirements_changed"] and not p["reprobe"]
    dry = {"stdout": "Would install wheel-0.45.1\n", "changed": True}
    p = plan_of(values_for("a_defaults_130", check_mode=True, _sgl_kernel_build_reqs=dry))
    assert p["requirements_changed"] and not p["reprobe"]
    assert "--dry-run" in p["requirements_install_argv"]


def test_the_second_probe_supplies_torch_and_the_pip_cuobjdump():
    first = json.loads((FIXTURES / "case_d_molecule_like_noreq.json").read_text())
    after = json.loads(first["sgl_kernel_build_probe_raw"]["stdout"])
    after["venv"]["packages"]["torch"] = "2.14.1+cu130"
    after["venv"]["cuobjdump"] = "/opt/sglang/build-venv/lib/python3.11/site-packages/nvidia/cu13/bin/cuobjdump"
    p = plan_of(values_for("d_molecule_like_noreq", _sgl_kernel_build_reprobe={"stdout": json.dumps(after), "changed": False}))
    assert p["key_inputs"]["torch_version"] == "2.14.1+cu130"
    assert p["cuobjdump"] == after["venv"]["cuobjdump"]


def test_check_mode_does_not_ask_a_venv_that_does_not_exist_yet():
    p = plan_of(values_for("b_nofamily_129_index_explicit", check_mode=True, _sgl_kernel_build_venv_made={"changed": True}))
    assert p["requirements_missing"] and not p["install_requirements"]
    assert p["build_needed"] and not p["build"]
    assert p["cache_message"].endswith("-> build (no stamp) (check mode: not built)")
    assert p["record"]["stamp"] is None and p["record"]["sha256"] is None and p["controller_files"] == []


@pytest.mark.parametrize("cores,mem_gib,budget,jobs,threads,expected", [
    (64, 200, 6, None, None, (33, 1)),   # 200 GiB / 6 GiB = 33 slots
    (16, 200, 6, None, None, (16, 1)),
    (16, 200, 6, 4, None, (4, 4)),       # fixed jobs: the slots left per job become nvcc threads
    (2, 23, 6, None, None, (2, 1)),
    (8, 5, 6, None, 3, (1, 3)),          # less memory than one job needs: still one job
    (16, None, 6, None, None, (1, 1)),   # unknown memory: one job
    (32, 64, "2.5", None, None, (25, 1)),
])
def test_parallelism_is_bounded_by_memory(cores, mem_gib, budget, jobs, threads, expected):
    mem = None if mem_gib is None else mem_gib * 1024 ** 3
    assert sk.parallelism(cores, mem, budget, jobs, threads) == expected


@pytest.mark.parametrize("force,stamp,wheel_sha,expected", [
    (True, {"key": "k", "wheel": {"sha256": "s"}}, "s", (True, "forced")),
    ("no", None, None, (True, "no stamp")),
    (False, {"key": "other", "wheel": {"sha256": "s"}}, "s", (True, "key changed")),
    (False, {"key": "k", "wheel": {"sha256": "s"}}, None, (True, "wheel missing or altered")),
    (False, {"key": "k", "wheel": {"sha256": "s"}}, "t", (True, "wheel missing or altered")),
    (False, {"key": "k", "wheel": {"sha256": "s"}}, "s", (False, None)),
])
def test_the_build_decision_and_its_reason(force, stamp, wheel_sha, expected):
    assert sk.build_decision(force, stamp, "k", wheel_sha) == expected


def test_an_unchanged_stamp_skips_the_build_and_keeps_the_stamp():
    first = json.loads((FIXTURES / "case_a_defaults_130.json").read_text())["sgl_kernel_build_probe_raw"]["stdout"]
    key = jinja("a_defaults_130")["key"]
    stamp = dict(jinja("a_defaults_130")["new_stamp"])
    probe = dict(json.loads(first), stamp=stamp, stamp_wheel_sha256=stamp["wheel"]["sha256"])
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_build_probe={"stdout": json.dumps(probe)}))
    assert p["key"] == key and not p["build_needed"] and not p["build"]
    assert p["cache_message"].endswith("key %s = stamp, build skipped" % key[:16])
    assert p["record"]["stamp"] == stamp and p["record"]["built"] is False
    assert p["record"]["controller_path"] == "/root/.cache/llmops-sglang/sgl-kernel/%s/%s" % (key[:16], WHEEL)
    # the controller's checksum file and stamp are written when missing (none here: another controller)
    sums = p["controller_files"][0]
    assert sums == {"dest": "/root/.cache/llmops-sglang/sgl-kernel/%s/%s.sha256" % (key[:16], WHEEL),
                    "content": "%s  %s\n" % ("c" * 64, WHEEL), "name": WHEEL + ".sha256"}
    assert json.loads(p["controller_files"][1]["content"]) == stamp


def test_the_controllers_files_are_rewritten_for_a_new_wheel_or_when_missing(tmp_path):
    key = jinja("a_defaults_130")["key"]
    folder = tmp_path / key[:16]
    folder.mkdir()
    (folder / (WHEEL + ".sha256")).write_text("old")
    v = values_for("a_defaults_130", sgl_kernel_controller_dir=str(tmp_path))
    stamp = dict(jinja("a_defaults_130")["new_stamp"])
    probe = dict(json.loads(json.loads((FIXTURES / "case_a_defaults_130.json").read_text())["sgl_kernel_build_probe_raw"]["stdout"]),
                 stamp=stamp, stamp_wheel_sha256=stamp["wheel"]["sha256"])
    v["_sgl_kernel_build_probe"] = {"stdout": json.dumps(probe)}
    unchanged = plan_of(dict(v, _sgl_kernel_fetched={"changed": False}))
    assert [f["dest"] for f in unchanged["controller_files"]] == [str(folder / "sgl-kernel-build.json")]
    fetched = plan_of(dict(v, _sgl_kernel_fetched={"changed": True}))
    assert [f["dest"].rsplit("/", 1)[1] for f in fetched["controller_files"]] == [WHEEL + ".sha256", "sgl-kernel-build.json"]
    # no stamp on the build host: a build, whose files replace the controller's
    v["_sgl_kernel_build_probe"] = json.loads((FIXTURES / "case_a_defaults_130.json").read_text())["sgl_kernel_build_probe_raw"]
    built = plan_of(v)
    assert built["record"]["built"] and len(built["controller_files"]) == 2


def test_the_controller_copy_must_carry_the_stamps_checksum():
    fetched = {"changed": True}
    ok = plan_of(values_for("a_defaults_130", _sgl_kernel_fetched=fetched,
                            _sgl_kernel_controller_wheel={"stat": {"checksum": "c" * 64}}))
    assert ok["controller_check"] and ok["controller_error"] is None
    bad = plan_of(values_for("a_defaults_130", _sgl_kernel_fetched=fetched,
                             _sgl_kernel_controller_wheel={"stat": {"checksum": "d" * 64}}))
    assert bad["controller_error"].startswith("sgl_kernel: %s has sha256 %s, the build stamp says %s;"
                                              % (bad["record"]["controller_path"], "d" * 64, "c" * 64))
    skipped = plan_of(values_for("a_defaults_130", _sgl_kernel_controller_wheel={"skipped": True}))
    assert not skipped["controller_check"] and skipped["controller_error"] is None


def test_a_failed_build_and_a_wrong_number_of_wheels_are_reported():
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_build_result={"rc": 1, "finished": True},
                           _sgl_kernel_build_tail={"stdout_lines": ["ninja: build stopped"]}))
    assert p["build_failed"]
    assert p["build_failure"] == ["sgl_kernel: the build failed (rc 1); last lines of "
                                  "/var/cache/llmops-sglang/sgl-kernel/build.log:", "ninja: build stopped"]
    assert p["error"] == p["build_failure"]
    # before the log's tail is read, the failure waits for it
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_build_result={"finished": False}))
    assert p["build_failed"] and p["build_failure"] is None and p["error"] is None
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_build_result={"finished": False}, _sgl_kernel_build_tail={"skipped": True}))
    assert p["build_failure"][0].startswith("sgl_kernel: the build did not finish in 14400 s")
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_staged={"files": []}))
    assert p["staged_error"] == "sgl_kernel: expected one wheel in /var/cache/llmops-sglang/sgl-kernel/staging, found []"
    assert p["error"] == p["staged_error"]
    assert "new_stamp" not in p
    p = plan_of(values_for("a_defaults_130", _sgl_kernel_old_wheels={"files": [
        {"path": "/var/cache/llmops-sglang/sgl-kernel/dist/old.whl"}, {"path": "/var/cache/llmops-sglang/sgl-kernel/dist/" + WHEEL}]}))
    assert p["old_wheels"] == ["/var/cache/llmops-sglang/sgl-kernel/dist/old.whl"]


def test_the_null_arch_settings_are_the_one_sm120_target():
    """The role's and the preflight's defaults name no arch and no toolkit release: both resolve _fp4_kernels'
    SM120_TARGET, so 120a / sm_120a / 12.8 are written once."""
    s = sk.resolve_target(dict((k[len("sgl_kernel_"):], v) for k, v in defaults().items()))
    assert (s["cuda_archs"], s["require_archs"], s["cuda_min_release"]) == (["120a"], ["sm_120a"], "12.8")
    hopper = sk.resolve_target(dict(s, cuda_archs=["90a"], require_archs=["sm_90a"], cuda_min_release=None))
    assert (hopper["cuda_archs"], hopper["cuda_min_release"]) == (["90a"], None)
    assert sk.toolkit_error({"installed": True, "release": "12.4", "archs_ok": True}, hopper) is None
    for role in ("sgl_kernel", "gpu_preflight"):
        text = (ROLE.parent / role / "defaults" / "main.yml").read_text()
        assert not re.search(r"^\w+: .*(120a|12\.8)", text, re.M), role


def test_toolkit_verdicts():
    s = sk.resolve_target(dict((k[len("sgl_kernel_"):], v) for k, v in defaults().items()))
    ok = {"installed": True, "release": "12.8", "archs_ok": True, "arch_tests": {"sm_120a": {"compiles": True}}}
    assert sk.toolkit_error(ok, s) is None
    old = dict(ok, release="12.6", archs_ok=False, arch_tests={"sm_120a": {"compiles": False}})
    assert sk.toolkit_error(old, s) == (
        "sgl_kernel: /usr/local/cuda/bin/nvcc release 12.6; the build needs CUDA >= 12.8 that compiles sm_120a "
        "(sm_120a failed). Install CUDA 12.8 or newer (13.0 for torch cu130) and set sgl_kernel_cuda_home.")
    assert "nvcc is missing" in sk.toolkit_error({"installed": False, "release": None}, s)
    assert "(no compile result failed)" in sk.toolkit_error({"installed": False}, s)
    assert sk.toolkit_error(dict(ok, release="12.10"), dict(s, cuda_min_release="12.9")) is None


# ---------------------------------------------------------------------------------------------
# Installing hosts

def install_plan(case="a_defaults_130", host="node2", probe=None, **registered):
    v = values_for(case, host=host, **registered)
    if probe is not None:
        v["_sgl_kernel_runtime_probe"] = {"stdout": json.dumps(probe)}
    return plan_of(v)


def runtime_probe(exists=True, torch="2.14.1+cu130", kernel="0.4.0", stamp_sha=None, local_sha="a" * 64, gpu=False):
    return {"venv": {"exists": exists, "packages": {"sglang-kernel": kernel, "torch": torch}},
            "stamp": None if stamp_sha is None else {"sha256": stamp_sha}, "gpu_present": gpu,
            "sha256": {"/var/cache/llmops-sglang/sgl-kernel-wheels/" + WHEEL: local_sha}}


def test_an_installing_host_copies_and_installs_only_what_differs():
    p = install_plan(probe=runtime_probe(stamp_sha="a" * 64))
    assert p["local_wheel"] == "/var/cache/llmops-sglang/sgl-kernel-wheels/" + WHEEL
    assert not p["copy_wheel"] and not p["install"] and p["install_error"] is None
    p = install_plan(probe=runtime_probe(stamp_sha="b" * 64, local_sha=None))
    assert p["copy_wheel"] and p["install"] and p["record_install"]
    assert p["wheel_install_argv"][-4:] == ["--no-index", "--no-deps", "--force-reinstall", p["local_wheel"]]
    assert json.loads(p["installed_stamp_json"]) == {"sha256": "a" * 64, "wheel": WHEEL, "key": None, "built_on": "build1"}
    assert not install_plan(probe=runtime_probe(stamp_sha="b" * 64), check_mode=True)["record_install"]
    assert install_plan(probe=runtime_probe(stamp_sha="a" * 64, kernel=None))["install"]


def test_the_build_host_installs_its_own_dist_wheel():
    p = install_plan(host="build1", probe=runtime_probe())
    assert p["local_wheel"] == "/var/cache/llmops-sglang/sgl-kernel/dist/" + WHEEL and not p["copy_wheel"]


NO_VENV = "no runtime venv at /opt/sglang/venv (install SGLang first or set sgl_kernel_venv_create: true)"
ALTERED = ("the wheel /var/cache/llmops-sglang/sgl-kernel-wheels/%s has sha256 %s, the build host verified %s; "
           "delete it and run again" % (WHEEL, "d" * 64, "a" * 64))
OTHER_TORCH = ("the wheel was built against torch 2.14.1+cu130 but /opt/sglang/venv has torch 2.13.0: it would fail to "
               "import (undefined symbols); pin the same torch in sgl_kernel_build_requirements, or set "
               "sgl_kernel_check_torch: false")


@pytest.mark.parametrize("probe,registered,expected", [
    (runtime_probe(exists=False), {}, NO_VENV),
    (runtime_probe(local_sha="d" * 64), {}, ALTERED),
    (runtime_probe(torch="2.13.0"), {}, OTHER_TORCH),
    (runtime_probe(exists=False), {"_sgl_kernel_venv_made": {"changed": True}}, None),
    (runtime_probe(local_sha="d" * 64), {"_sgl_kernel_wheel_copied": {"changed": True}}, None),
    (runtime_probe(torch="2.13.0"), {"sgl_kernel_check_torch": "false"}, None),
    (runtime_probe(torch=None), {}, None),
])
def test_what_stops_an_install_is_named(probe, registered, expected):
    p = install_plan(probe=probe, **registered)
    assert p["install_error"] == (None if expected is None else "sgl_kernel on node2: " + expected)


def test_a_check_run_before_the_first_build_has_nothing_to_check():
    p = install_plan("d_molecule_like_noreq", probe=runtime_probe(exists=False))
    assert p["install_error"] is None and not p["install"] and not p["copy_wheel"] and p["local_wheel"] is None


def test_create_venv_and_smoke_test():
    p = install_plan(probe=runtime_probe(exists=False, gpu=True), sgl_kernel_venv_create=True, sgl_kernel_smoke_test="yes")
    assert p["create_venv"] and p["smoke_test"]
    assert p["smoke_test_argv"][:2] == ["/opt/sglang/venv/bin/python", "-c"] and "rmsnorm" in p["smoke_test_argv"][2]
    assert not install_plan(probe=runtime_probe(gpu=False), sgl_kernel_smoke_test=True)["smoke_test"]


def test_a_missing_build_result_is_named():
    p = install_plan(sgl_kernel_build=False)
    assert p["build_result_error"].startswith("sgl_kernel: no build result from build1: its build failed or it was left out")
    # not taken from the build host yet (the result is null until then): nothing to say
    assert install_plan(sgl_kernel_build=None)["build_result_error"] is None


# ---------------------------------------------------------------------------------------------
# Bad input

def test_bad_settings_are_named_in_one_message():
    v = values_for("a_defaults_130", sgl_kernel_cuda_archs=["120a", "blackwell"], sgl_kernel_require_archs=["sm_120x"],
                   sgl_kernel_build_jobs=0, sgl_kernel_build_job_mem_gib="lots", sgl_kernel_git_ref="")
    v["_sgl_kernel_run"]["play_hosts"] = ["node2"]
    error = plan_of(v)["input_error"]
    for part in ("the build host (build1) must be one of the play's hosts (node2)",
                 "sgl_kernel_cuda_archs has blackwell: write archs as 120a or sm_120a",
                 "sgl_kernel_require_archs has sm_120x", "sgl_kernel_git_ref is empty",
                 "sgl_kernel_build_job_mem_gib must be positive (got 'lots')", "sgl_kernel_build_jobs must be >= 1 (got 0)"):
        assert part in error
    assert plan_of(v) == {"input_error": error, "error": error}
    assert "sgl_kernel_cuda_archs is empty" in plan_of(values_for("a_defaults_130", sgl_kernel_cuda_archs=[]))["input_error"]


def test_a_probe_that_printed_no_json_is_an_error_naming_the_probe():
    v = values_for("a_defaults_130", _sgl_kernel_build_probe={"stdout": "", "stderr": "python3: not found"})
    with pytest.raises(AnsibleFilterError, match="the build host probe printed no JSON.*python3: not found"):
        plan_of(v)


def test_a_missing_setting_or_a_bad_call_is_named():
    v = values_for("a_defaults_130")
    del v["sgl_kernel_build_dir"]
    with pytest.raises(AnsibleFilterError, match="sgl_kernel_build_dir is not set"):
        plan_of(v)
    with pytest.raises(AnsibleFilterError, match="sgl_kernel_plan: the role hands over its settings, results and run as mappings"):
        sgl_kernel_plan({}, "plan", {}, None)
    with pytest.raises(AnsibleFilterError, match="requirement 'torch===' is not one pip reads"):
        plan_of(values_for("a_defaults_130", sgl_kernel_build_requirements=["torch==="]))


# ---------------------------------------------------------------------------------------------
# The role only wires what the plan returns

def _role_text():
    return "\n".join(p.read_text() for p in sorted((ROLE / "tasks").glob("*.yml")) + sorted((ROLE / "templates").glob("*.j2")))


def test_every_plan_value_the_role_uses_exists():
    used = set(re.findall(r"\b_sgl_kernel(?:_new)?\.(\w+)", _role_text())) | set(re.findall(r"\bplan\.(?!yml\b)(\w+)", _role_text()))
    keys = set(plan_of(values_for("a_defaults_130", _sgl_kernel_build_result={"rc": 1}, _sgl_kernel_build_tail={},
                                  _sgl_kernel_old_wheels={"files": []})))
    keys |= set(plan_of(values_for("a_defaults_130", host="node2")))
    assert used and used <= keys, used - keys


def test_the_plan_is_a_fact_worked_out_again_after_each_result_it_follows():
    """tasks/plan.yml keeps the plan as the fact _sgl_kernel (nothing templates it at each use), and no task reads it
    between a result the plan follows and the next plan.yml: it would read a plan without that result."""
    assert "_sgl_kernel" not in yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    [refresh, stop] = yaml.safe_load((ROLE / "tasks" / "plan.yml").read_text())
    assert refresh["ansible.builtin.set_fact"]["_sgl_kernel"] == "{{ _sgl_kernel_new }}"
    assert stop["when"] == "_sgl_kernel.error is not none"
    assert role_plan.stale_reads(ROLE, "_sgl_kernel", sk.RESULTS, "sgl_kernel_build") == []
    # a changed_when that judges its own result reads the plan fresh
    assert "_sgl_kernel_new.requirements_changed" in (ROLE / "tasks" / "build_venv.yml").read_text()


def test_every_result_the_role_registers_is_documented_for_the_plan():
    registered = set(re.findall(r"^\s+register: (\w+)", _role_text(), re.M))
    documented = set(re.findall(r"^  (_sgl_kernel_\w+) ", sk.__doc__, re.M))
    # results the plan does not read: the job id, the poll loop and the smoke test
    assert registered - documented == {"_sgl_kernel_build_job", "_sgl_kernel_build_poll", "_sgl_kernel_smoke"}
    assert documented <= registered


# ---------------------------------------------------------------------------------------------
# Dry run and arch restriction (the real-tool run: tests/unit/plugins/modules/test_cmake_cuda_plan.py)

def _without_build(values):
    return {k: v for k, v in values.items() if k not in ("_sgl_kernel_build_result", "_sgl_kernel_staged", "_sgl_kernel_verify")}


@pytest.mark.parametrize("how", ["setting", "tag"])
def test_a_dry_run_configures_first_and_builds_nothing(how):
    values = _without_build(values_for("a_defaults_130"))
    if how == "setting":
        values["sgl_kernel_dry_run"] = True
    else:
        values["_sgl_kernel_run"] = dict(values["_sgl_kernel_run"], tags=["sgl_kernel_dry_run"])
    p = plan_of(values)
    assert p["dry_run"] and p["configure_first"] and p["build_needed"] and not p["build"]
    assert p["cache_message"].endswith("(dry run: not built)")
    normal = plan_of(_without_build(values_for("a_defaults_130")))
    assert not normal["dry_run"] and normal["configure_first"] and normal["build"]
    checking = plan_of(_without_build(values_for("a_defaults_130", check_mode=True, sgl_kernel_dry_run=True)))
    assert not checking["configure_first"]


def test_the_restriction_is_in_the_key_only_when_on():
    values = _without_build(values_for("a_defaults_130"))
    off, on = plan_of(values), plan_of(dict(values, sgl_kernel_restrict_archs=True))
    assert off["key"] == jinja("a_defaults_130")["key"] and on["key"] != off["key"]
    assert on["key_inputs"]["restrict_archs"]["keep"] == ["120f"]
    assert on["cmake_defines"]["CMAKE_PROJECT_INCLUDE"] == on["restrict_override_path"]
    assert "CMAKE_PROJECT_INCLUDE" not in off["cmake_defines"] and off["restrict_override"] is None
    assert '"120f"' in on["restrict_override"]


def _planned(cubins, nvfp4):
    target = {"cuda_units": 2, "other_units": 0, "cubins": cubins, "ptx": [], "nvfp4_units": 2 if nvfp4 else 0,
              "unit_archs": 2 * len(cubins), "unresolved": [], "library": "common_ops.so"}
    return {"targets": {"common_ops": target}, "cuda_units": 2, "unit_archs": 2 * len(cubins), "cubins": cubins,
            "ptx": [], "nvfp4": nvfp4, "unused_defines": ["SGL_KERNEL_BUILD_SM100_VARIANT"], "unit_seconds": 4.0,
            "probe_error": None}


def test_the_dry_run_verdict_names_the_fix():
    base = _without_build(values_for("a_defaults_130", _sgl_kernel_configure={"rc": 0, "stdout": ""}))
    good = plan_of(dict(base, _sgl_kernel_cmake_plan=_planned(["sm_90a", "sm_120f"], True)))
    assert good["dry_run_error"] is None and good["configure_error"] is None
    assert "Defines CMake did not use: SGL_KERNEL_BUILD_SM100_VARIANT" in good["dry_run_report"]
    assert good["build_plan"]["unit_archs"] == 4
    bad = plan_of(dict(base, _sgl_kernel_cmake_plan=_planned(["sm_90a"], False)))
    assert "no CUDA unit will be compiled for sm_120a" in bad["dry_run_error"]
    assert "sgl_kernel_arch_cmake_variable: CMAKE_CUDA_ARCHITECTURES" in bad["dry_run_error"]
    assert "-DENABLE_NVFP4" in bad["dry_run_error"] and "sgl_kernel_enable_fp4: true" in bad["dry_run_error"]
    failed = plan_of(dict(base, _sgl_kernel_configure={"rc": 1, "stdout": "CMake Error at CMakeLists.txt:3"}))
    assert "CMake's configure" in failed["configure_error"] and "CMake Error at CMakeLists.txt:3" in failed["configure_error"]


def test_the_stamp_records_the_dry_runs_plan_for_the_next_estimate():
    values = values_for("a_defaults_130", _sgl_kernel_configure={"rc": 0, "stdout": ""},
                        _sgl_kernel_cmake_plan=_planned(["sm_120f"], True))
    p = plan_of(values)
    assert p["new_stamp"]["build"]["unit_archs"] == 2 and p["new_stamp"]["plan"]["cubins"] == ["sm_120f"]
    assert sk.duration_seconds("0:12:01.5") == 721.5 and sk.duration_seconds(30) == 30.0 and sk.duration_seconds("x") is None


# ---------------------------------------------------------------------------------------------
# Build or install: the FP4 table decides what the wheel must carry, the pinned wheel's kernels whether it does

# cuda_binary_info on the real PyPI wheel sglang-kernel 0.4.10 (docs/evidence/sgl-kernel-fp4-kernels.md): sm_120a met,
# no kernel matching fp4|e2m1
PINNED = "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl"
PINNED_SHA = "043cbe4a10e7887ea1b25599b729ff1ce115a0d5217b2c177aff9f9ae5327724"
PINNED_VERIFY = {"sha256": PINNED_SHA, "required_archs": ["sm_120a"], "missing_archs": [], "missing_kernels": [],
                 "elf_archs": ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100f", "sm_103a", "sm_120a"], "ptx_archs": []}
NO_FP4 = dict(PINNED_VERIFY, missing_kernels=["fp4|e2m1"], failed=False,
              msg="%s: no kernel matching 'fp4|e2m1' has a cubin for sm_120a (searched 2188 kernels in 75 cubins that meet sm_120a)." % PINNED)
FETCHED = {"stdout": "Collecting sglang-kernel==0.4.10\n  Downloading %s (373.0 MB)\nSaved /var/cache/llmops-sglang/sgl-kernel/pinned/%s\n"
                     "Successfully downloaded sglang-kernel\n" % (PINNED, PINNED), "rc": 0}
REFERENCE_FP4 = ["--fp4-gemm-backend", "flashinfer_cudnn", "--moe-runner-backend", "flashinfer_cutlass"]


def _pinned(**more):
    values = dict(values_for("a_defaults_130", sgl_kernel_fp4_launch_args=REFERENCE_FP4), **more)
    return plan_of(values)


def test_sglang_0_5_23_s_fp4_backends_call_no_sgl_kernel_op_so_the_pinned_wheel_is_checked():
    s = sk.resolve_target(dict((k[len("sgl_kernel_"):], v) for k, v in defaults().items()))
    s["fp4_launch_args"] = REFERENCE_FP4
    first = sk.source_decision(s)
    assert (first["check_pinned"], first["use_pinned"], first["pinned"], first["kernels"]) == (True, False, "sglang-kernel==0.4.10", [])
    assert "--moe-runner-backend flashinfer_cutlass from flashinfer-jit" in first["why"] and "calls no sgl-kernel FP4 op" in first["why"]
    # SGLang 0.5.16 pins 0.4.5
    assert sk.source_decision(dict(s, git_ref="v0.5.16"))["pinned"] == "sglang-kernel==0.4.5"
    # a ref the table does not know, or sgl_kernel_source: build, builds
    for other in (dict(s, git_ref="fixture-v1"), dict(s, git_ref="3f2a9c1"), dict(s, source="build")):
        assert not sk.source_decision(other)["check_pinned"]
    assert "not in the FP4 kernel table" in sk.source_decision(dict(s, git_ref="fixture-v1"))["why"]
    assert "is not in the FP4 kernel table" in sk.source_decision(dict(s, git_ref="fixture-v1", source="wheel"))["error"]


def test_an_sgl_kernel_fp4_op_makes_the_wheel_prove_its_fp4_kernels(monkeypatch):
    """No tabled release calls one (the wheels carry none); a release that did would need fp4|e2m1 kernels for sm_120a
    in the pinned wheel, which the real 0.4.10 wheel does not have: the source is built."""
    from ansible_collections.llmops.sglang.plugins.module_utils import _fp4_kernels as fk
    assert not [row for row in fk.ROWS if row["provider"] == "sgl-kernel"]
    rows = tuple(dict(row, provider="sgl-kernel") if row["release"] == "0.5.23" and row["choice"] == "flashinfer_cudnn" else row
                 for row in fk.ROWS)
    monkeypatch.setattr(fk, "ROWS", rows)
    s = sk.resolve_target(dict((k[len("sgl_kernel_"):], v) for k, v in defaults().items()))
    s["fp4_launch_args"] = REFERENCE_FP4
    assert sk.source_decision(s)["kernels"] == ["fp4|e2m1"]
    lacking = sk.source_decision(s, NO_FP4)
    assert not lacking["use_pinned"] and "no kernel matching 'fp4|e2m1' has a cubin for sm_120a" in lacking["why"]
    assert lacking["why"].endswith("building from source") and lacking["error"] is None
    assert "sgl_kernel_source is wheel" in sk.source_decision(dict(s, source="wheel"), NO_FP4)["error"]


def test_the_pinned_wheel_that_serves_is_installed_instead_of_built_and_says_why():
    before = _pinned()
    assert before["check_pinned"] and not before["use_pinned"] and before["pinned_wheel"] is None
    assert before["pinned_argv"][:4] == ["/opt/sglang/venv/bin/python", "-m", "pip", "download"]
    assert before["pinned_argv"][-1] == "sglang-kernel==0.4.10" and "--no-deps" in before["pinned_argv"]
    fetched = _pinned(_sgl_kernel_pinned_fetch=FETCHED)
    assert fetched["pinned_wheel"] == "/var/cache/llmops-sglang/sgl-kernel/pinned/" + PINNED and fetched["pinned_kernels"] == []
    p = _pinned(_sgl_kernel_pinned_fetch=FETCHED, _sgl_kernel_pinned_verify=PINNED_VERIFY)
    assert p["use_pinned"] and p["error"] is None and "build_needed" not in p
    record = p["record"]
    assert (record["source"], record["built"], record["sha256"], record["wheel_path"]) == ("pinned", False, PINNED_SHA, fetched["pinned_wheel"])
    assert record["why"] == p["why"] and "installing it instead of building" in p["why"] and "carries sm_120a cubins" in p["why"]
    assert record["stamp"]["source"] == {"pinned": "sglang-kernel==0.4.10", "why": p["why"]}
    assert record["controller_path"].endswith("/%s/%s" % (record["key"][:16], PINNED))
    # every host installs it as it would a built wheel
    node = install_plan(probe=runtime_probe(local_sha=None), sgl_kernel_build=record)
    assert node["install"] and node["wheel_install_argv"][-1].endswith(PINNED)
    # a wheel without what is needed: the source is built, and the record says why
    built = _pinned(_sgl_kernel_pinned_fetch=FETCHED, _sgl_kernel_pinned_verify=dict(PINNED_VERIFY, missing_archs=["sm_120a"]))
    assert not built["use_pinned"] and built["record"]["source"] == "built" and "building from source" in built["record"]["why"]
    # pip that named no wheel (an offline wheelhouse without it): the source is built, unless only the wheel will do
    offline = {"rc": 1, "stdout": "", "stderr": "ERROR: No matching distribution found for sglang-kernel==0.4.10"}
    built = _pinned(_sgl_kernel_pinned_fetch=offline, _sgl_kernel_pinned_verify=dict(PINNED_VERIFY, sha256=None, msg="no path"))
    assert not built["use_pinned"] and built["error"] is None and built["record"]["source"] == "built"
    assert built["why"] == ("pip download of sglang-kernel==0.4.10 named no wheel (rc 1; ERROR: No matching distribution found "
                            "for sglang-kernel==0.4.10): building from source")
    assert "sgl_kernel_source is wheel" in _pinned(_sgl_kernel_pinned_fetch=offline, sgl_kernel_source="wheel")["error"]
    # a dry run is about the source build: no pinned wheel
    assert not plan_of(values_for("a_defaults_130", sgl_kernel_dry_run=True))["check_pinned"]
