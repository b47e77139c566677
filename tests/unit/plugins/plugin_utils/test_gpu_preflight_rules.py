"""The preflight rule engine (and the gpu_preflight role's use of it) on real facts: gpu_info/cuda_toolkit_info results captured on an H200 host, and
gpu_info results gathered from the lab's simulated nvidia-smi profiles (built from real outputs)."""

import copy
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.gpu_preflight_plan import FilterModule
from ansible_collections.llmops.sglang.plugins.plugin_utils import _gpu_preflight_plan as gpf
from ansible_collections.llmops.sglang.plugins.plugin_utils import _gpu_preflight_rules as rules_module
from ansible_collections.llmops.sglang.plugins.module_utils import _gpu_probe as probe
from ansible_collections.llmops.sglang.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.llmops.sglang.plugins.plugin_utils._gpu_preflight_rules import RULES, PreflightError, evaluate

ROOT = pathlib.Path(__file__).resolve().parents[4]
LAB_GPU = ROOT / "tests" / "lab" / "gpu"


@pytest.fixture(scope="module")
def gpu_out(fixtures_dir):
    base = fixtures_dir / "gpu-outputs"
    return lambda prefix: next(base.glob(prefix + "-*.txt")).read_text()


@pytest.fixture(scope="module")
def h200(fixtures_dir):
    base = fixtures_dir / "gpu" / "h200x1"
    return {name: json.loads((base / (name + ".json")).read_text()) for name in ("gpu_info", "cuda_toolkit_info", "cuda_toolkit_info_archs")}


_FACTS = {}


def target(**more):
    """The gpu_preflight role's arch and toolkit (its defaults: the rules themselves expect neither), and more."""
    defaults = yaml.safe_load((ROOT / "roles" / "gpu_preflight" / "defaults" / "main.yml").read_text())
    return dict(dict(cuda_toolkit_min=defaults["gpu_preflight_cuda_toolkit_min"], toolkit_archs=defaults["gpu_preflight_toolkit_archs"]),
                **more)


def lab_facts(profile):
    """gpu_info's result for a lab profile: installed by install-profile into a scratch root file system and
    gathered through the simulated nvidia-smi, the way a lab host does it."""
    if profile not in _FACTS:
        rootfs = pathlib.Path(tempfile.mkdtemp(prefix="llmops-gpu-%s-" % profile))
        try:
            subprocess.run([str(LAB_GPU / "install-profile"), str(rootfs), profile], check=True, stdout=subprocess.PIPE)
            dest = rootfs / "etc" / "llmops-gpu-profile"
            env = dict(os.environ, PATH="%s:%s:%s" % (rootfs / "usr/local/sbin", rootfs / "usr/bin", os.environ.get("PATH", "")),
                       LLMOPS_GPU_PROFILE_DIR=str(dest))
            _FACTS[profile] = probe.collect(timeout=5, sysfs_root=str(dest / "root"), procfs_root=str(dest / "root"),
                                            driver_version_file=str(dest / "proc-driver-nvidia-version"), env=env)
        finally:
            shutil.rmtree(str(rootfs), ignore_errors=True)
    return copy.deepcopy(_FACTS[profile])


def rules(result, key="failed"):
    return [item["rule"] for item in result[key]]


def messages(result):
    return [item["message"] for item in result["failed"]]


def test_target_host_passes_with_topology_warnings(h200):
    result = evaluate(lab_facts("rtxpro6000x8"), h200["cuda_toolkit_info"])
    assert result["passed"] is True, result["table"]
    assert result["failed"] == []
    assert rules(result, "warnings") == ["pcie_acs", "numa_split"]
    numa = result["warnings"][1]
    assert "NUMA 0: GPUs 0-3; NUMA 1: GPUs 4-7" in numa["found"]
    statuses = dict((c["rule"], c["status"]) for c in result["checks"])
    assert set(statuses) == set(RULES)
    assert statuses["compute_capability"] == "pass" and statuses["kernel_module"] == "pass" and statuses["iommu"] == "pass"
    assert statuses["gpu_memory_free"] == "skipped" and statuses["ecc"] == "skipped" and statuses["gpu_smoke"] == "skipped"


def test_real_h200_fails_count_and_capability(h200):
    result = evaluate(h200["gpu_info"], h200["cuda_toolkit_info"])
    assert result["passed"] is False
    assert rules(result) == ["gpu_count", "compute_capability"]
    assert "1 GPU found, 8 required" in messages(result)
    assert "compute capability 9.0 found, 12.0 required (GPU 0)" in messages(result)
    assert result["failed"][1]["found"] == "9.0 (GPU 0)" and result["failed"][1]["required"] == "12.0"
    for line in ("1 GPU found, 8 required", "compute capability 9.0 found, 12.0 required"):
        assert line in result["table"]


def test_real_h200_passes_hopper_expectations(h200):
    exp = {"gpu_count": 1, "compute_capability": "9.0", "toolkit_archs": ["sm_90a"]}
    result = evaluate(h200["gpu_info"], h200["cuda_toolkit_info_archs"], exp)
    assert result["passed"] is True, result["table"]
    # one GPU: topology rules do not apply
    assert [c["status"] for c in result["checks"] if c["rule"] in ("pcie_acs", "iommu", "numa_split")] == ["skipped"] * 3


def test_waivers(h200):
    waivers = [{"rule": "gpu_count", "reason": "bring-up on a single test GPU"},
               {"rule": "compute_capability", "reason": "H200 stands in for the RTX PRO 6000 in CI"},
               {"rule": "mig", "reason": "not needed"}]
    result = evaluate(h200["gpu_info"], h200["cuda_toolkit_info"], waivers=waivers)
    assert result["passed"] is True
    assert [(w["rule"], w["reason"]) for w in result["waived"]] == [(w["rule"], w["reason"]) for w in waivers[:2]]
    assert result["waived"][0]["found"] == 1 and result["waived"][0]["required"] == 8
    assert result["unused_waivers"] == ["mig"]
    assert "waived: H200 stands in for the RTX PRO 6000 in CI" in result["table"]
    assert [c["status"] for c in result["checks"] if c["rule"] == "gpu_count"] == ["waived"]


@pytest.mark.parametrize("waivers", [3, "gpu_count", {"rule": "gpu_count", "reason": "x"}])
def test_waivers_that_are_not_a_list_are_refused(h200, waivers):
    # an int here once reached "for waiver in waivers" (TypeError through the filter)
    with pytest.raises(PreflightError, match="waivers must be a list of {rule, reason}, got"):
        evaluate(h200["gpu_info"], h200["cuda_toolkit_info"], waivers=waivers)


def test_waiving_a_warning(h200):
    result = evaluate(lab_facts("rtxpro6000x8"), h200["cuda_toolkit_info"], waivers=[{"rule": "numa_split", "reason": "2-socket board"}])
    assert rules(result, "warnings") == ["pcie_acs"] and rules(result, "waived") == ["numa_split"]


@pytest.mark.parametrize("waiver, pattern", [
    ({"rule": "gpu_cnt", "reason": "typo"}, r"unknown waiver rule 'gpu_cnt'; valid rules: gpu_query, gpu_count, .*numa_split"),
    ({"rule": "gpu_count"}, "needs a non-empty reason"),
    ({"rule": "gpu_count", "reason": "  "}, "needs a non-empty reason"),
    ({"rule": "gpu_count", "reason": "x", "until": "2027"}, "unknown key"),
    ("gpu_count", "must be a dict"),
])
def test_bad_waivers(h200, waiver, pattern):
    with pytest.raises(PreflightError, match=pattern):
        evaluate(h200["gpu_info"], h200["cuda_toolkit_info"], waivers=[waiver])


@pytest.mark.parametrize("profile, cls, fix", [
    ("nvml-mismatch", "nvml_mismatch", "reboot: driver/library mismatch"),
    ("no-driver", "driver_not_loaded", "modprobe nvidia"),
    ("no-devices", "no_devices", "install the -open driver packages"),
    ("gpu-lost", "gpu_lost", "Xid"),
    ("hang", "timeout", "reboot"),
])
def test_gpu_query_failure_classes(h200, profile, cls, fix):
    if profile == "hang":
        directory = LAB_GPU / "profiles" / "hang"
        env = dict(os.environ, PATH="%s:%s" % (LAB_GPU, os.environ.get("PATH", "")), LLMOPS_GPU_PROFILE_DIR=str(directory))
        facts = probe.collect(timeout=1, env=env, driver_version_file=str(directory / "proc-driver-nvidia-version"))
    else:
        facts = lab_facts(profile)
    result = evaluate(facts, h200["cuda_toolkit_info"], target())
    assert rules(result) == ["gpu_query"]
    assert result["failed"][0]["found"].startswith(cls + ": ")
    assert fix in result["failed"][0]["fix"]
    skipped = [c["rule"] for c in result["checks"] if c["status"] == "skipped"]
    assert "gpu_count" in skipped and "compute_capability" in skipped and "numa_split" in skipped
    # the toolkit rules do not depend on the GPUs
    assert [c["status"] for c in result["checks"] if c["rule"] in ("cuda_toolkit", "toolkit_arch")] == ["pass", "pass"]


def test_not_installed(h200, tmp_path):
    facts = probe.collect(env={"PATH": str(tmp_path)}, driver_version_file=str(tmp_path / "none"))
    assert facts["failure"]["class"] == "not_installed"
    result = evaluate(facts, {"installed": False})
    assert rules(result) == ["gpu_query", "cuda_toolkit"]
    assert result["failed"][0]["fix"] == rules_module.driver_install_fix(rules_module.normalize_expectations(None))


# NVIDIA's driver role's variables (nvidia.nvidia_driver defaults/main.yml) and Canonical's package names for a branch
# with the open kernel module; docs/gpu_preflight.md says where each was read.
DRIVER_ROLE_580_OPEN = ('install NVIDIA driver branch 580 with the open kernel module and reboot, e.g. with NVIDIA\'s role '
                        'nvidia.nvidia_driver: nvidia_driver_branch: "580", on Ubuntu nvidia_driver_ubuntu_packages: '
                        '[nvidia-headless-580-server-open, nvidia-utils-580-server] (docs/gpu_preflight.md)')


def test_a_bare_host_is_told_how_to_install_the_open_580_driver_with_nvidias_role(tmp_path):
    facts = probe.collect(env={"PATH": str(tmp_path)}, driver_version_file=str(tmp_path / "none"))
    assert evaluate(facts, {"installed": False})["failed"][0]["fix"] == DRIVER_ROLE_580_OPEN
    # the branch and the module flavour are the rules' own
    fix = evaluate(facts, {"installed": False}, {"driver_min_branch": 590, "kernel_module": "proprietary"})["failed"][0]["fix"]
    assert fix.startswith("install NVIDIA driver branch 590 and reboot") and 'nvidia_driver_branch: "590"' in fix
    assert "open" not in fix
    # other nvidia-smi failures keep their own fix: installing a driver does not help a lost GPU
    lost = evaluate({"ok": False, "failure": smi.failure("gpu_lost", "GPU is lost")}, {"installed": False})
    assert "nvidia.nvidia_driver" not in lost["failed"][0]["fix"]


def test_wrong_architecture_host(h200):
    result = evaluate(lab_facts("rtx4090x8"), h200["cuda_toolkit_info"])
    assert rules(result) == ["compute_capability"]
    assert messages(result) == ["compute capability 8.9 found, 12.0 required (GPUs 0-7)"]
    assert rules(result, "warnings") == ["pcie_acs", "iommu", "numa_split"]
    assert "5 with P2P redirect" in result["warnings"][0]["message"]
    assert "amd_iommu=on, 4 groups" in result["warnings"][1]["message"]


def test_old_proprietary_driver_without_persistence(h200, gpu_out):
    # an RTX 5090 host's 570 driver (its nvidia-smi header) with the proprietary module (a /proc capture)
    facts = lab_facts("rtxpro6000x8")
    header = smi.parse_smi_header(gpu_out("10"))
    proc = smi.parse_proc_version(gpu_out("18"))
    facts.update(driver_version=header["driver_version"], driver_branch=None, cuda_driver_version=header["cuda_version"],
                 kernel_module=proc["kernel_module"])
    for gpu in facts["gpus"]:
        gpu["persistence_mode"] = False
    result = evaluate(facts, h200["cuda_toolkit_info"])
    assert rules(result) == ["driver_branch", "cuda_driver_version", "kernel_module", "persistence_mode"]
    assert messages(result)[:3] == ["driver branch 570 found, 580 or newer required", "driver supports CUDA 12.8, the toolkit needs 13.0",
                                    "proprietary kernel module loaded, open required"]
    assert result["failed"][0]["found"] == "570.133.07 (branch 570)"
    assert [f["fix"] for f in result["failed"][:3:2]] == ["CUDA 13 builds need branch 580 or newer: " + DRIVER_ROLE_580_OPEN,
                                                          DRIVER_ROLE_580_OPEN]
    assert "nvidia-smi -pm 1" in result["failed"][3]["fix"] and "nvidia-persistenced" in result["failed"][3]["fix"]
    assert result["failed"][3]["found"] == "off on GPUs 0-7"
    assert "kernel_module" not in rules(evaluate(facts, h200["cuda_toolkit_info"], {"kernel_module": "any"}))
    assert "kernel_module" not in rules(evaluate(facts, h200["cuda_toolkit_info"], {"kernel_module": "proprietary"}))


def test_one_line_per_distinct_wrong_capability(h200):
    facts = lab_facts("rtxpro6000x8")
    for gpu in facts["gpus"]:
        if gpu["index"] in (4, 5):
            gpu["compute_capability"], gpu["compute_capability_int"] = "9.0", 90
        if gpu["index"] == 7:
            gpu["compute_capability"], gpu["compute_capability_int"] = "8.9", 89
    result = evaluate(facts, h200["cuda_toolkit_info"])
    assert messages(result) == ["compute capability 8.9 found, 12.0 required (GPU 7)",
                                "compute capability 9.0 found, 12.0 required (GPUs 4-5)"]


def test_capability_decides_not_the_name(h200):
    facts = lab_facts("rtxpro6000x8")
    for gpu in facts["gpus"]:
        gpu["name"] = "NVIDIA H200"
    assert evaluate(facts, h200["cuda_toolkit_info"])["passed"] is True
    real = copy.deepcopy(h200["gpu_info"])
    real["gpus"][0]["name"] = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert "compute_capability" in rules(evaluate(real, h200["cuda_toolkit_info"]))


def test_gpu_count_is_a_minimum(h200):
    result = evaluate(lab_facts("rtxpro6000x8"), h200["cuda_toolkit_info"], {"gpu_count": 4})
    assert "gpu_count" not in rules(result)
    result = evaluate(lab_facts("gpu-lost"), h200["cuda_toolkit_info"])
    assert rules(result) == ["gpu_query"]


def test_toolkit_rules(h200):
    facts = lab_facts("rtxpro6000x8")
    missing = evaluate(facts, {"installed": False, "nvcc": None}, target())
    assert rules(missing) == ["cuda_toolkit"]
    assert missing["failed"][0]["found"] == "nvcc not found"
    arch = [c for c in missing["checks"] if c["rule"] == "toolkit_arch"][0]
    assert arch["status"] == "skipped"
    # without nvcc the driver is held to cuda_toolkit_min
    assert [c["required"] for c in missing["checks"] if c["rule"] == "cuda_driver_version"] == [">= 12.8 (cuda_toolkit_min)"]
    assert evaluate(facts, None, {"require_toolkit": False})["passed"] is True

    old = dict(h200["cuda_toolkit_info"], release="12.6", version="12.6.85")
    old["arch_tests"] = {"sm_120a": {"compiles": False, "error_class": "unsupported_arch", "error": "nvcc fatal : Unsupported gpu architecture 'compute_120a'"}}
    result = evaluate(facts, old, target())
    assert rules(result) == ["cuda_toolkit", "toolkit_arch"]
    assert "CUDA toolkit 12.6 found, >= 12.8 required (sm_120a needs nvcc 12.8)" in messages(result)
    assert result["failed"][1]["fix"] == "install a CUDA toolkit that supports sm_120a (12.8 or newer)"
    # the rules expect no arch and no toolkit release of their own: the role's settings name them
    assert rules(evaluate(facts, old)) == []

    no_gcc = copy.deepcopy(h200["cuda_toolkit_info"])
    no_gcc["arch_tests"]["sm_120a"] = {"compiles": False, "error_class": "host_compiler", "error": "gcc: No such file or directory"}
    result = evaluate(facts, no_gcc, target())
    assert rules(result) == ["toolkit_arch"] and "host compiler" in result["failed"][0]["fix"]

    untested = evaluate(facts, h200["cuda_toolkit_info"], {"toolkit_archs": ["sm_120a", "sm_100a"]})
    assert untested["failed"][0]["found"] == "sm_100a not tested"


def test_kernel_module_unknown(h200):
    facts = lab_facts("rtx4090x8")
    facts["kernel_module"] = None
    result = evaluate(facts, h200["cuda_toolkit_info"])
    assert [f["found"] for f in result["failed"] if f["rule"] == "kernel_module"] == ["unknown"]


def test_mig_memory_ecc_rules(h200):
    facts = lab_facts("rtxpro6000x8")
    facts["gpus"][2]["mig_enabled"] = True
    facts["gpus"][3]["mig_enabled"] = True
    facts["gpus"][6]["memory_free_mib"] = 4000
    facts["gpus"][1]["ecc_enabled"] = False
    result = evaluate(facts, h200["cuda_toolkit_info"], {"min_free_mib": 83000, "require_ecc": True})
    assert rules(result) == ["mig", "gpu_memory_free", "ecc"]
    mig, mem, ecc = result["failed"]
    assert mig["found"] == "MIG enabled on GPUs 2-3" and "nvidia-smi -i 2,3 -mig 0" in mig["fix"]
    assert mem["found"].startswith("4000 MiB free on GPU 6") and mem["required"] == ">= 83000 MiB"
    assert ecc["found"] == "ECC off or unsupported on GPU 1" and "-e 1" in ecc["fix"]
    assert "mig" not in rules(evaluate(facts, h200["cuda_toolkit_info"], {"mig_allowed": True}))
    # ECC off wanted: every Server Edition GPU with ECC on fails
    off = evaluate(lab_facts("rtxpro6000x8"), h200["cuda_toolkit_info"], {"require_ecc": False})
    assert off["failed"][0]["found"] == "ECC on on GPUs 0-7"


def test_iommu_passthrough_is_no_warning(h200):
    facts = lab_facts("rtx4090x8")
    facts["iommu"]["cmdline_mode"] = "passthrough"
    facts["iommu"]["passthrough"] = True
    assert "iommu" not in rules(evaluate(facts, h200["cuda_toolkit_info"]), "warnings")


def test_nvlink_hosts_get_no_acs_warning(h200):
    facts = lab_facts("rtxpro6000x8")
    facts["topology"]["nvlink"] = True
    facts["topology"]["pcie_only"] = False
    assert "pcie_acs" not in rules(evaluate(facts, h200["cuda_toolkit_info"]), "warnings")


def test_smoke_rule(h200):
    facts = lab_facts("rtxpro6000x8")
    ok = evaluate(facts, h200["cuda_toolkit_info"], smoke={"rc": 0, "stdout": "GPU 0: ok (812 launches)\nGPU 1: ok (799 launches)\n"})
    assert [c["status"] for c in ok["checks"] if c["rule"] == "gpu_smoke"] == ["pass"]
    bad = evaluate(facts, h200["cuda_toolkit_info"], smoke={"rc": 1, "stdout": "GPU 0: ok (812 launches)\nGPU 1: FAILED (unspecified launch failure, got 0)\n"})
    assert rules(bad) == ["gpu_smoke"] and bad["failed"][0]["found"] == "GPU 1: FAILED (unspecified launch failure, got 0)"
    skipped = evaluate(facts, h200["cuda_toolkit_info"], smoke={"skipped": True, "changed": False})
    assert [c["status"] for c in skipped["checks"] if c["rule"] == "gpu_smoke"] == ["skipped"]


def test_expectations_validation_and_coercion(h200):
    with pytest.raises(PreflightError, match="unknown expectation key.*gpu_cout.*valid keys: compute_capability"):
        evaluate(h200["gpu_info"], None, {"gpu_cout": 1})
    with pytest.raises(PreflightError, match="compute_capability must look like"):
        evaluate(h200["gpu_info"], None, {"compute_capability": "sm_120"})
    with pytest.raises(PreflightError, match="gpu_count must be a non-negative integer"):
        evaluate(h200["gpu_info"], None, {"gpu_count": "eight"})
    # templated values arrive as strings
    exp = {"gpu_count": "1", "compute_capability": 9.0, "mig_allowed": "False", "min_free_mib": "140000", "require_ecc": "None",
           "toolkit_archs": "sm_90a", "cuda_toolkit_min": 12.8}
    result = evaluate(h200["gpu_info"], h200["cuda_toolkit_info_archs"], exp)
    assert result["expectations"]["gpu_count"] == 1 and result["expectations"]["min_free_mib"] == 140000
    assert result["expectations"]["compute_capability"] == "9.0" and result["expectations"]["toolkit_archs"] == ["sm_90a"]
    assert result["passed"] is True, result["table"]
    with pytest.raises(PreflightError, match="must be the result of llmops.sglang.gpu_info"):
        evaluate("not a dict", None)


def test_table_is_fixed_width(h200):
    result = evaluate(lab_facts("rtx4090x8"), h200["cuda_toolkit_info"])
    lines = result["table"].splitlines()
    assert lines[0].split(" | ")[:3] == ["RULE".ljust(19), "STATUS ", "RESULT".ljust(64)]
    assert max(len(line) for line in lines) <= 19 + 7 + 64 + 60 + 3 * 3
    # every column separator sits at the same offset on every line
    offsets = set(tuple(i for i, ch in enumerate(line[:98]) if ch == "|") for line in lines[2:])
    assert offsets == {(20, 30, 97)}
    for rule in RULES:
        assert any(line.startswith(rule.ljust(19)) for line in lines), rule


def test_filter_plugin(h200):
    """The role's one filter: its phases by name, the plan's errors as the filter's, a wrong phase or input named."""
    plan = FilterModule().filters()["gpu_preflight_plan"]
    settings = dict(role_defaults(), gpu_preflight_gpu_count=1, gpu_preflight_compute_capability="9.0")
    assert plan(settings, "report", h200["gpu_info"], h200["cuda_toolkit_info"], None, "h")["result"]["expectations"]["gpu_count"] == 1
    with pytest.raises(AnsibleFilterError, match="llmops.sglang.gpu_preflight_plan: unknown waiver rule 'persistence'"):
        plan(dict(settings, gpu_preflight_waivers=[{"rule": "persistence", "reason": "x"}]), "report", h200["gpu_info"], None)
    with pytest.raises(AnsibleFilterError, match="unknown phase 'rules': use one of archs, smoke, report"):
        plan(settings, "rules", h200["gpu_info"])
    with pytest.raises(AnsibleFilterError, match=r"gpu_preflight_plan\('smoke'\): .*pass \(settings, gpu_info, toolkit, source\)"):
        plan(settings, "smoke", h200["gpu_info"])


def test_free_memory_as_a_fraction_of_each_gpu(h200):
    """--mem-fraction-static 0.85 of a 97887 MiB GPU is 83203 MiB that must be free on every GPU."""
    facts = lab_facts("rtxpro6000x8")
    for g in facts["gpus"]:
        g["memory_free_mib"] = 90000
    assert "gpu_memory_free" not in rules(evaluate(facts, h200["cuda_toolkit_info"], {"min_free_fraction": 0.85}))
    facts["gpus"][5]["memory_free_mib"] = 83000
    result = evaluate(facts, h200["cuda_toolkit_info"], {"min_free_fraction": 0.85})
    (mem,) = [f for f in result["failed"] if f["rule"] == "gpu_memory_free"]
    assert mem["found"].startswith("83000 MiB free on GPU 5, 83203 MiB needed")
    assert mem["required"] == ">= 0.85 of total"
    # the absolute floor and the fraction combine: the larger one decides
    both = evaluate(facts, h200["cuda_toolkit_info"], {"min_free_fraction": 0.5, "min_free_mib": 85000})
    assert [f["found"] for f in both["failed"] if f["rule"] == "gpu_memory_free"] == ["83000 MiB free on GPU 5, 85000 MiB needed (GPU 5 short)"]
    with pytest.raises(PreflightError, match="min_free_fraction"):
        evaluate(facts, h200["cuda_toolkit_info"], {"min_free_fraction": 1.5})


# ---------------------------------------------------------------------------------------------
# The gpu_preflight role: its settings, stamp, report and smoke binary

ROLE = ROOT / "roles" / "gpu_preflight"


def role_defaults():
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def test_every_expectation_comes_from_a_role_setting():
    defaults = role_defaults()
    for setting, key in gpf.EXPECTATIONS:
        assert gpf.PREFIX + setting in defaults and key in rules_module.DEFAULT_EXPECTATIONS
    # the role's defaults are the expectations it evaluates: mem_fraction_static is the free fraction required
    exp = rules_module.normalize_expectations(gpf.expectations(defaults))
    assert exp["min_free_fraction"] == defaults["gpu_preflight_mem_fraction_static"] == 0.85
    assert (exp["gpu_count"], exp["compute_capability"], exp["toolkit_archs"]) == (8, "12.0", ["sm_120a"])
    # values templated into strings, and settings of other roles or tests, change nothing
    assert gpf.expectations(dict(defaults, gpu_preflight_gpu_count="1", gpu_preflight_expected_failures=[]))["gpu_count"] == "1"
    with pytest.raises(PreflightError, match="settings must map"):
        gpf.expectations(["gpu_preflight_gpu_count"])
    with pytest.raises(PreflightError, match="settings missing: gpu_preflight_waivers .*_gpu_preflight_setting_names"):
        gpf.expectations(dict((k, v) for k, v in defaults.items() if k != "gpu_preflight_waivers"))


def test_role_report_on_the_h200(h200):
    settings = dict(role_defaults(), gpu_preflight_waivers=[{"rule": "persistence_mode", "reason": "set at boot later"}])
    out = FilterModule().filters()["gpu_preflight_plan"](settings, "report", h200["gpu_info"], h200["cuda_toolkit_info"], None, "gpu-07")
    result = out["result"]
    assert result == evaluate(h200["gpu_info"], h200["cuda_toolkit_info"], gpf.expectations(settings), settings["gpu_preflight_waivers"])
    failed = rules(result)
    assert "compute_capability" in failed and "gpu_count" in failed  # one H200 (9.0) against 8 x SM120
    assert out["stamp"]["passed"] is False and out["stamp"]["failed_rules"] == failed
    assert out["stamp"]["gpus"] == [g["uuid"] for g in h200["gpu_info"]["gpus"]] and out["stamp"]["gpus"][0].startswith("GPU-")
    assert out["stamp"]["driver_version"] == h200["gpu_info"]["driver_version"]
    assert out["stamp"]["cuda_toolkit"] == h200["cuda_toolkit_info"]["release"]
    assert out["stats"] == {"gpu-07": "failed: " + ",".join(failed)}
    assert out["failed_message"].startswith("GPU preflight failed on gpu-07:\nRULE ") and "compute_capability" in out["failed_message"]
    assert out["report"]["host"] == "gpu-07" and out["report"]["result"] is result and out["report"]["nvcc"] == h200["cuda_toolkit_info"]["nvcc"]
    assert out["stamp_dir"] == "/run/llmops-sglang" and out["report_dir"].endswith("/reports/gpu-07")
    # what the H200 offers passes when that is what is expected
    fits = dict(settings, gpu_preflight_gpu_count=1, gpu_preflight_compute_capability="9.0", gpu_preflight_toolkit_archs=[],
                gpu_preflight_kernel_module="any", gpu_preflight_persistence_mode=False, gpu_preflight_mem_fraction_static=None,
                gpu_preflight_driver_min_branch=0, gpu_preflight_cuda_toolkit_min=None, gpu_preflight_require_toolkit=False)
    ok = gpf.report(fits, h200["gpu_info"], h200["cuda_toolkit_info"], None, "gpu-07")
    assert ok["result"]["passed"], ok["result"]["failed"]
    assert ok["stats"] == {"gpu-07": "passed"} and ok["stamp"]["failed_rules"] == []
    assert ok["passed_message"] == "GPU preflight passed (%d checks, %d warnings, %d waived)" % (
        len(ok["result"]["checks"]), len(ok["result"]["warnings"]), len(ok["result"]["waived"]))


def test_role_report_when_nvidia_smi_failed():
    failed = {"ok": False, "failure": {"class": "not_installed", "message": "nvidia-smi not found"}, "gpus": None}
    out = gpf.report(role_defaults(), failed, None, None, "h")
    assert out["stamp"]["gpus"] == [] and out["stamp"]["failed_rules"] == ["gpu_query", "cuda_toolkit"]
    assert out["report"]["failure"]["class"] == "not_installed" and out["stamp"]["cuda_toolkit"] is None


def test_smoke_binary_names_the_source_and_the_gpus(h200):
    source = (ROLE / "files" / "gpu_smoke.cu").read_text()
    on = dict(role_defaults(), gpu_preflight_smoke_test=True)
    path = FilterModule().filters()["gpu_preflight_plan"](on, "smoke", h200["gpu_info"], h200["cuda_toolkit_info"], source)
    caps = ",".join(str(g["compute_capability"]) for g in h200["gpu_info"]["gpus"])
    # the name the role gave it before: (source ~ capabilities) | hash('sha1')
    assert path == "/var/cache/llmops-sglang/gpu-smoke/gpu_smoke-" + hashlib.sha1((source + caps).encode()).hexdigest()
    assert gpf.smoke_binary(on, h200["gpu_info"], h200["cuda_toolkit_info"], source + "// changed") != path
    assert gpf.smoke_binary(role_defaults(), h200["gpu_info"], h200["cuda_toolkit_info"], source) is None  # off by default
    assert gpf.smoke_binary(dict(on, gpu_preflight_smoke_test="false"), h200["gpu_info"], h200["cuda_toolkit_info"], source) is None
    assert gpf.smoke_binary(on, dict(h200["gpu_info"], ok=False), h200["cuda_toolkit_info"], source) is None
    assert gpf.smoke_binary(on, h200["gpu_info"], dict(h200["cuda_toolkit_info"], installed=False), source) is None
    with pytest.raises(AnsibleFilterError, match="gpu_preflight_plan: settings must map"):
        FilterModule().filters()["gpu_preflight_plan"](None, "smoke", h200["gpu_info"], None, source)


def _hold(result, facts, on=True):
    settings = dict(role_defaults(), gpu_preflight_hold_driver=on)
    return gpf.hold(settings, result, facts)


# Package names as Debian/Ubuntu and EL hosts with a 580 driver install them, and what must not be held with them.
APT_PACKAGES = ["nvidia-headless-580-server-open", "nvidia-utils-580-server", "libnvidia-compute-580-server",
                "nvidia-kernel-common-580-server", "nvidia-dkms-580-server-open", "linux-modules-nvidia-580-server-open-generic",
                "nvidia-fabricmanager-580", "cuda-drivers-580", "nvidia-container-toolkit", "openssh-server", "nvidia-cuda-toolkit"]
EL_PACKAGES = ["nvidia-driver", "nvidia-driver-cuda", "nvidia-driver-libs", "kmod-nvidia-open-dkms", "nvidia-kmod-common",
               "nvidia-persistenced", "nvidia-modprobe", "libnvidia-ml", "nvidia-container-toolkit", "bash"]


def test_the_driver_packages_are_held_once_the_driver_passes(h200):
    passed = evaluate(lab_facts("rtxpro6000x8"), h200["cuda_toolkit_info"])
    apt = _hold(passed, {"pkg_mgr": "apt", "packages": dict.fromkeys(APT_PACKAGES, [{}])})
    not_driver = {"nvidia-container-toolkit", "openssh-server", "nvidia-cuda-toolkit"}
    assert apt == {"tool": "dpkg", "packages": sorted(set(APT_PACKAGES) - not_driver)}
    el = _hold(passed, {"pkg_mgr": "dnf", "packages": dict.fromkeys(EL_PACKAGES, [{}])})
    assert el == {"tool": "versionlock", "packages": sorted(set(EL_PACKAGES) - {"nvidia-container-toolkit", "bash"})}
    assert _hold(passed, {"pkg_mgr": "apt", "packages": {"nvidia-utils-580": []}}, on=False) == {"tool": None, "packages": []}


def test_a_driver_the_preflight_refuses_is_not_held(h200):
    facts = lab_facts("rtxpro6000x8")
    facts.update(driver_branch=570, driver_version="570.133.07")
    old = evaluate(facts, h200["cuda_toolkit_info"])
    assert _hold(old, {"pkg_mgr": "apt", "packages": {"nvidia-utils-570": []}}) == {"tool": None, "packages": []}


def test_a_hold_that_cannot_be_made_says_why(h200):
    passed = evaluate(lab_facts("rtxpro6000x8"), h200["cuda_toolkit_info"])
    with pytest.raises(PreflightError, match="package manager 'zypper' has no hold here.*gpu_preflight_hold_driver: false"):
        _hold(passed, {"pkg_mgr": "zypper", "packages": {"nvidia-driver-G06": []}})
    with pytest.raises(PreflightError, match="no NVIDIA driver package is installed.*a .run install"):
        _hold(passed, {"pkg_mgr": "apt", "packages": {"bash": []}})


# The reference unit (roles/sglang_server/defaults/main.yml): NVFP4, cuDNN GEMM, FlashInfer CUTLASS MoE
REFERENCE_FP4 = ["--quantization", "modelopt_fp4", "--fp4-gemm-backend", "flashinfer_cudnn", "--moe-runner-backend", "flashinfer_cutlass"]


def fp4_target(**more):
    return target(sglang_release="0.5.23", launch_args=REFERENCE_FP4, **more)


def test_the_toolkit_minimum_follows_the_fp4_table_for_the_planned_unit(h200):
    facts = lab_facts("rtxpro6000x8")
    nvcc_12_8 = dict(h200["cuda_toolkit_info"], release="12.8", version="12.8.93")
    nvcc_12_8["arch_tests"] = {"sm_120a": {"compiles": True}}
    # without a planned unit the SM 12.0 target alone asks for 12.8
    assert rules_module.normalize_expectations(target())["cuda_toolkit_min"] == "12.8"
    assert "cuda_toolkit" not in rules(evaluate(facts, nvcc_12_8, target()))
    # the reference unit quantizes activations with FlashInfer's fp4_quantization_120f, built for sm_120f: 12.9
    exp = rules_module.normalize_expectations(fp4_target())
    assert exp["cuda_toolkit_min"] == "12.9" and "fp4_quantization_120f" in exp["cuda_toolkit_basis"][0]
    result = evaluate(facts, nvcc_12_8, fp4_target())
    [failed] = [item for item in result["failed"] if item["rule"] == "cuda_toolkit"]
    assert failed["required"] == ">= 12.9" and "fp4_quantization_120f" in failed["message"]
    assert failed["fix"] == ("install CUDA toolkit >= 12.9 and put its nvcc first, or build the FP4 modules ahead of time and set "
                             "sglang_fp4_modules_prebuilt: true")
    # modules built ahead of time: the server compiles nothing of FlashInfer's, the arch's 12.8 is enough again
    assert "cuda_toolkit" not in rules(evaluate(facts, nvcc_12_8, fp4_target(fp4_modules_prebuilt=True)))
    # a configured minimum is a floor: the table raises 12.8 to 12.9, never lowers 13.0
    assert rules_module.normalize_expectations(fp4_target(cuda_toolkit_min="12.8"))["cuda_toolkit_min"] == "12.9"
    assert rules_module.normalize_expectations(fp4_target(cuda_toolkit_min="13.0"))["cuda_toolkit_min"] == "13.0"
    # JIT kernels need nvcc on the server even where the toolkit is not otherwise required
    missing = evaluate(facts, {"installed": False}, fp4_target(require_toolkit=False))
    assert "cuda_toolkit" in rules(missing)
    prebuilt = evaluate(facts, {"installed": False}, fp4_target(require_toolkit=False, fp4_modules_prebuilt=True))
    assert [c["status"] for c in prebuilt["checks"] if c["rule"] == "cuda_toolkit"] == ["skipped"]


def test_the_fp4_rule_checks_the_planned_backends(h200):
    facts = lab_facts("rtxpro6000x8")
    checks = evaluate(facts, h200["cuda_toolkit_info"], fp4_target())["checks"]
    [fp4] = [c for c in checks if c["rule"] == "fp4_kernels"]
    assert fp4["status"] == "pass" and "--moe-runner-backend flashinfer_cutlass" in fp4["found"]
    trtllm = REFERENCE_FP4[:-1] + ["flashinfer_trtllm"]
    result = evaluate(facts, h200["cuda_toolkit_info"], target(sglang_release="0.5.23", launch_args=trtllm))
    [failed] = [item for item in result["failed"] if item["rule"] == "fp4_kernels"]
    assert "no SM 12.0 kernels" in failed["message"] and failed["fix"].startswith("use --moe-runner-backend flashinfer_cutlass")
    # no release, no check; a null setting templated into the words drops its flag (auto: flashinfer_cutlass)
    assert [c["status"] for c in evaluate(facts, None, target())["checks"] if c["rule"] == "fp4_kernels"] == ["skipped"]
    exp = rules_module.normalize_expectations(target(sglang_release="0.5.23", launch_args=REFERENCE_FP4[:4] + ["--moe-runner-backend", None]))
    assert exp["launch_args"] == REFERENCE_FP4[:4] + ["--moe-runner-backend", None]
    assert [r["choice"] for r in rules_module.fp4_plan(exp)["rows"]] == ["modelopt_fp4", "flashinfer_cudnn", "flashinfer_cutlass"]


def test_the_toolkit_is_tested_for_the_resolved_archs():
    """gpu_preflight_toolkit_archs defaults to null: the role asks its filter for the archs cuda_toolkit_info compiles,
    the SM 12.0 target for an expected 12.0 GPU, none for another unless set."""
    archs = FilterModule().filters()["gpu_preflight_plan"]
    assert archs(role_defaults(), "archs") == ["sm_120a"]
    assert archs(dict(role_defaults(), gpu_preflight_compute_capability="9.0"), "archs") == []
    assert archs(dict(role_defaults(), gpu_preflight_toolkit_archs=["sm_90a"]), "archs") == ["sm_90a"]
    task = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())[1]["llmops.sglang.cuda_toolkit_info"]
    assert task["archs"] == "{{ _gpu_preflight_settings | llmops.sglang.gpu_preflight_plan('archs') }}"
