"""gpu_info against the lab's simulated nvidia-smi, for every GPU profile; the simulator and install-profile
themselves; and the module's entry point run the way Ansible runs it (arguments in, JSON out)."""

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils import _gpu_probe as probe
from ansible_collections.llmops.sglang.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.llmops.sglang.plugins.modules import gpu_info

ROOT = pathlib.Path(__file__).resolve().parents[4]
LAB_GPU = ROOT / "tests" / "lab" / "gpu"
PROFILES = LAB_GPU / "profiles"
ALL_PROFILES = sorted(p.name for p in PROFILES.iterdir() if (p / "profile.json").is_file())


def profile_env(name):
    return dict(os.environ, PATH="%s:%s" % (LAB_GPU, os.environ.get("PATH", "")), LLMOPS_GPU_PROFILE_DIR=str(PROFILES / name))


@pytest.fixture(scope="module")
def gather(tmp_path_factory):
    """gpu_info's logic on a lab root file system with the profile installed by install-profile, the way the lab does it."""
    rootfs = {}

    def run(name, timeout=5, **kwargs):
        if name not in rootfs:
            rootfs[name] = tmp_path_factory.mktemp("rootfs-" + name)
            proc = subprocess.run([str(LAB_GPU / "install-profile"), str(rootfs[name]), name], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, check=False)
            assert proc.returncode == 0, proc.stderr
        root = rootfs[name]
        dest = root / "etc" / "llmops-gpu-profile"
        env = dict(os.environ, PATH="%s:%s:%s" % (root / "usr/local/sbin", root / "usr/bin", os.environ.get("PATH", "")),
                   LLMOPS_GPU_PROFILE_DIR=str(dest))
        args = dict(timeout=timeout, sysfs_root=str(dest / "root"), procfs_root=str(dest / "root"),
                    driver_version_file=str(dest / "proc-driver-nvidia-version"), env=env)
        args.update(kwargs)
        result = probe.collect(**args)
        result["rootfs"] = str(root)
        return result
    return run


def test_every_profile_is_covered():
    # a new profile needs an expectation below
    assert ALL_PROFILES == sorted(["gpu-lost", "h200x1", "hang", "no-devices", "no-driver", "not-installed", "nvml-mismatch",
                                   "rtx4090x8", "rtxpro6000x8"])


def test_rtxpro6000x8(gather):
    r = gather("rtxpro6000x8")
    assert r["ok"] is True and r["failure"] is None, r["failure"]
    assert r["nvidia_smi"] == os.path.join(r["rootfs"], "usr/bin/nvidia-smi")
    assert r["gpu_count"] == 8
    assert set((g["name"], g["compute_capability"], g["compute_capability_int"], g["memory_total_mib"]) for g in r["gpus"]) == {
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 120, 97887)}
    assert [g["index"] for g in r["gpus"]] == list(range(8))
    assert [g["numa_node"] for g in r["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert r["gpus"][4]["sysfs_bus_id"] == "0000:84:00.0"
    assert r["gpus"][4]["cpu_affinity"] == "64-127,192-238"
    assert all(g["persistence_mode"] and g["ecc_enabled"] and g["mig_enabled"] is False for g in r["gpus"])
    assert (r["driver_version"], r["driver_branch"], r["cuda_driver_version"], r["header_style"]) == ("580.126.20", 580, "13.0", "driver")
    assert (r["kernel_module"], r["kernel_module_version"]) == ("open", "580.126.20")
    assert r["topology"]["pcie_only"] and len(r["topology"]["pairs"]) == 28
    assert r["numa_nodes"] == [0, 1]
    assert r["iommu"] == {"cmdline_flags": ["amd_iommu=off", "iommu=off"], "cmdline_mode": "off", "groups": 0, "enabled": False,
                          "passthrough": False}
    assert r["acs"]["available"] and r["acs"]["enabled_count"] == 38
    assert r["errors"] == []


def test_h200x1(gather):
    r = gather("h200x1", lspci="/nonexistent/lspci")
    assert r["ok"] is True
    (gpu,) = r["gpus"]
    assert (gpu["name"], gpu["compute_capability"], gpu["compute_capability_int"]) == ("NVIDIA H200", "9.0", 90)
    assert (r["driver_version"], r["cuda_driver_version"], r["kernel_module"]) == ("580.159.04", "13.0", "open")
    # sysfs says -1 (no NUMA information): the topology's affinity column fills in
    assert gpu["numa_node"] is None and r["numa_nodes"] == [0]
    assert r["iommu"]["enabled"] is False and r["iommu"]["groups"] == 0
    assert r["acs"] == {"available": False, "reason": "lspci not installed"}


def test_h200x1_profile_matches_the_real_module_run(gather, fixtures_dir):
    real = json.loads((fixtures_dir / "gpu" / "h200x1" / "gpu_info.json").read_text())
    sim = gather("h200x1", lspci="/nonexistent/lspci")

    for key in ("ok", "gpu_count", "driver_version", "driver_branch", "cuda_driver_version", "header_style", "kernel_module",
                "kernel_module_version", "numa_nodes", "iommu", "acs"):
        assert sim[key] == real[key], key

    def keep(gpu):
        # the CPU list comes from topo -m of another machine of the same kind
        return dict((k, v) for k, v in gpu.items() if k != "cpu_affinity")
    assert [keep(g) for g in sim["gpus"]] == [keep(g) for g in real["gpus"]]


def test_rtx4090x8(gather):
    r = gather("rtx4090x8")
    assert r["ok"] is True
    assert set((g["compute_capability"], g["compute_capability_int"]) for g in r["gpus"]) == {("8.9", 89)}
    # GeForce: MIG and ECC are not supported, nvidia-smi prints [N/A]
    assert set((g["persistence_mode"], g["mig_mode"], g["mig_enabled"], g["ecc_enabled"]) for g in r["gpus"]) == {(True, None, None, None)}
    assert (r["driver_branch"], r["cuda_driver_version"], r["kernel_module"]) == (580, "13.0", "open")
    assert r["iommu"]["enabled"] is True and r["iommu"]["groups"] == 4 and r["iommu"]["cmdline_mode"] == "on"
    assert r["topology"]["link_types"] == ["NODE", "SYS"]


@pytest.mark.parametrize("name, cls, module", [
    ("nvml-mismatch", "nvml_mismatch", "proprietary"),
    ("no-driver", "driver_not_loaded", None),
    ("no-devices", "no_devices", "proprietary"),
])
def test_failure_profiles(gather, name, cls, module):
    r = gather(name)
    assert r["ok"] is False
    assert r["failure"]["class"] == cls and r["failure"]["fix"]
    assert r["gpus"] == [] and r["gpu_count"] == 0
    assert r["kernel_module"] == module


def test_nvml_mismatch_reports_both_versions(gather):
    r = gather("nvml-mismatch")
    assert r["failure"]["message"] == "Failed to initialize NVML: Driver/library version mismatch"
    assert r["failure"]["fix"].startswith("reboot: driver/library mismatch")
    assert r["kernel_module_version"] == "580.173.02"


def test_gpu_lost_keeps_the_gpus_that_answer(gather):
    r = gather("gpu-lost")
    assert r["failure"]["class"] == "gpu_lost"
    assert "0000:34:00.0" in r["failure"]["message"]
    assert [g["index"] for g in r["gpus"]] == [0, 2, 3]
    assert r["driver_version"] == "610.57.04"


def test_hang_is_killed_within_the_bound(gather):
    start = time.monotonic()
    r = gather("hang", timeout=1)
    elapsed = time.monotonic() - start
    assert r["failure"]["class"] == "timeout"
    assert r["failure"]["message"] == "nvidia-smi did not answer within 1 s and was killed"
    assert elapsed < 4, elapsed


def test_not_installed(tmp_path):
    root = tmp_path / "rootfs"
    root.mkdir()
    proc = subprocess.run([str(LAB_GPU / "install-profile"), str(root), "not-installed"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert not (root / "usr/bin/nvidia-smi").exists()
    r = probe.collect(env={"PATH": str(root / "usr/bin")}, driver_version_file=str(root / "proc/driver/nvidia/version"))
    assert r["failure"]["class"] == "not_installed" and r["nvidia_smi"] is None
    assert "install the NVIDIA driver packages" in r["failure"]["fix"]


# ---- the simulator ----

def sim(name, *args):
    return subprocess.run([str(LAB_GPU / "nvidia-smi")] + list(args), env=profile_env(name), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=30, check=False)


@pytest.mark.parametrize("name", ["rtxpro6000x8", "h200x1", "rtx4090x8", "gpu-lost"])
def test_profile_files_agree_with_the_gpu_list(name):
    profile = json.loads((PROFILES / name / "profile.json").read_text())
    plain = (PROFILES / name / "nvidia-smi.txt").read_text()
    header = smi.parse_smi_header(plain)
    assert (header["driver_version"], header["cuda_version"]) == (profile["driver_version"], profile["cuda_version"])
    rows = smi.parse_smi_table(plain)
    assert [(r["index"], r["pci_bus_id"], r["memory_total_mib"]) for r in rows] == [
        (int(g["index"]), g["pci.bus_id"], int(g["memory.total"])) for g in profile["gpus"]]
    assert set(g["driver_version"] for g in profile["gpus"]) == {profile["driver_version"]}
    topo = PROFILES / name / "topo-m.txt"
    if topo.exists():
        assert len(smi.parse_topo(topo.read_text())["gpus"]) == len(profile["gpus"])


def test_simulator_any_field_list_and_units():
    out = sim("rtxpro6000x8", "--query-gpu=gpu_name,memory.used,power.draw,count,pci.bus_id", "--format=csv", "-i", "5")
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["gpu_name, memory.used [MiB], power.draw, count, pci.bus_id",
                                       "NVIDIA RTX PRO 6000 Blackwell Server Edition, 0 MiB, [N/A], 8, 00000000:85:00.0"]
    bad = sim("rtxpro6000x8", "--query-gpu=index,bogus.field", "--format=csv,noheader,nounits")
    assert bad.returncode == 2 and bad.stdout == 'Field "bogus.field" is not a valid field to query.\n\n'


def test_simulator_answers_like_the_real_tool(fixtures_dir):
    # the h200x1 profile holds real captures: the simulator must give them back unchanged
    real = fixtures_dir / "gpu" / "h200x1"
    query = sim("h200x1", *smi.QUERY_ARGS)
    assert query.returncode == 0 and query.stdout == (real / "query.txt").read_text()
    assert sim("h200x1").stdout == (real / "smi.txt").read_text()
    assert sim("h200x1", "topo", "-m").stdout == (real / "topo.txt").read_text()
    assert sim("h200x1", "-L").stdout == (real / "smi_L.txt").read_text()
    generated = sim("rtxpro6000x8", "-L").stdout.splitlines()
    assert smi.parse_smi_list("\n".join(generated))[7]["uuid"] == "GPU-f4c61521-240a-da09-2787-e576034e197e"
    long = sim("rtxpro6000x8", "-q").stdout
    assert smi.parse_smi_header(long)["cuda_version"] == "13.0" and long.count("Product Name") == 8


@pytest.mark.parametrize("name, rc, text", [
    ("nvml-mismatch", 18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.178\n"),
    ("no-driver", 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
    ("no-devices", 6, "No devices were found\n"),
])
def test_simulator_failure_exit_codes(name, rc, text):
    for args in ((), ("-L",), smi.QUERY_ARGS):
        out = sim(name, *args)
        assert out.returncode == rc and out.stdout.startswith(text)


def test_install_profile(tmp_path):
    root = tmp_path / "rootfs"
    root.mkdir()

    def run(*args):
        return subprocess.run([str(LAB_GPU / "install-profile")] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False)
    assert run(str(root), "rtxpro6000x8").returncode == 0
    dest = root / "etc/llmops-gpu-profile"
    assert os.access(str(root / "usr/bin/nvidia-smi"), os.X_OK)
    assert os.access(str(root / "usr/local/sbin/lspci"), os.X_OK)
    assert (dest / "help-query-gpu.txt").is_file() and (dest / "proc-driver-nvidia-version").is_file()
    assert (dest / "root/sys/kernel/iommu_groups").is_dir() and list((dest / "root/sys/kernel/iommu_groups").iterdir()) == []
    # the installed copy answers from the installed profile
    env = dict(os.environ, LLMOPS_GPU_PROFILE_DIR=str(dest))
    out = subprocess.run([str(root / "usr/bin/nvidia-smi"), "--query-gpu=count", "--format=csv,noheader"], env=env,
                         stdout=subprocess.PIPE, universal_newlines=True, check=False)
    assert out.stdout.splitlines()[0] == "8"
    # switching profiles replaces everything; h200x1 has no lspci
    assert run(str(root), "h200x1").returncode == 0
    assert not (root / "usr/local/sbin/lspci").exists()
    assert json.loads((dest / "profile.json").read_text())["gpus"][0]["name"] == "NVIDIA H200"
    bad = run(str(root), "a100x8")
    assert bad.returncode == 2 and "unknown profile 'a100x8'" in bad.stderr and "rtxpro6000x8" in bad.stderr


# ---- the module entry point ----

def run_module(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_info.main()
    return json.loads(capsys.readouterr().out)


def test_module_main(gather, capsys, monkeypatch):
    root = pathlib.Path(gather("rtxpro6000x8")["rootfs"])
    directory = root / "etc" / "llmops-gpu-profile"
    monkeypatch.setenv("PATH", "%s:%s:%s" % (root / "usr/local/sbin", root / "usr/bin", os.environ["PATH"]))
    monkeypatch.setenv("LLMOPS_GPU_PROFILE_DIR", str(directory))
    result = run_module(capsys, {"driver_version_file": str(directory / "proc-driver-nvidia-version"),
                                 "sysfs_root": str(directory / "root"), "procfs_root": str(directory / "root"), "_ansible_check_mode": True})
    assert result["changed"] is False and result.get("failed") is not True
    assert result["ok"] is True and result["gpu_count"] == 8 and result["gpus"][0]["compute_capability_int"] == 120
    assert [g["numa_node"] for g in result["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert result["kernel_module"] == "open" and result["iommu"]["cmdline_mode"] == "off" and result["acs"]["acs_enabled"] is True


def test_module_fail_on_error(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "%s:%s" % (LAB_GPU, os.environ["PATH"]))
    monkeypatch.setenv("LLMOPS_GPU_PROFILE_DIR", str(PROFILES / "nvml-mismatch"))
    quiet = run_module(capsys, {})
    assert quiet.get("failed") is not True and quiet["ok"] is False and quiet["failure"]["class"] == "nvml_mismatch"
    loud = run_module(capsys, {"fail_on_error": True})
    assert loud["failed"] is True
    assert loud["msg"].startswith("nvidia-smi failed (nvml_mismatch): Failed to initialize NVML: Driver/library version mismatch. Fix: reboot")
    bad = run_module(capsys, {"timeout": 0})
    assert bad["failed"] is True and "timeout must be at least 1 second" in bad["msg"]


def test_module_driver_version_file_dev_zero_fails_fast_with_memory_bounded(tmp_path):
    """/dev/zero never ends: the module stops at the bound and names the option (in a process limited to 1 GiB of memory,
    where a whole-file read would die with MemoryError)."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"driver_version_file": "/dev/zero", "nvidia_smi": "/nonexistent"}}))
    limit = "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); " \
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "collections"))
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", limit, str(ROOT / "plugins" / "modules" / "gpu_info.py"), str(args)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env, timeout=60, check=False)
    assert time.time() - start < 30
    result = json.loads(proc.stdout)
    assert proc.returncode == 1 and result["failed"] is True, proc.stderr
    assert result["msg"].startswith("driver_version_file: /dev/zero holds more than 65536 bytes")
    assert "Traceback" not in proc.stderr
