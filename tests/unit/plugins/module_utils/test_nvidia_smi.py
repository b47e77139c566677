"""Parsers of _nvidia_smi on real captured outputs: tests/fixtures/gpu-outputs (RTX PRO 6000, RTX 5090, B200, B300,
failure texts) and the H200 captures under tests/fixtures/gpu."""

import os
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _gpu_probe as probe
from ansible_collections.llmops.sglang.plugins.module_utils import _nvidia_smi as smi
from ansible_collections.llmops.sglang.plugins.module_utils._process import run_bounded


@pytest.fixture(scope="module")
def gpu_out(fixtures_dir):
    base = fixtures_dir / "gpu-outputs"

    def read(prefix):
        matches = sorted(base.glob(prefix + "-*.txt"))
        assert len(matches) == 1, "fixture %s-*.txt not found once in %s" % (prefix, base)
        return matches[0].read_text(errors="replace")
    return read


@pytest.fixture(scope="module")
def h200(fixtures_dir):
    def read(host, name):
        return (fixtures_dir / "gpu" / host / name).read_text()
    return read


# ---- the csv query ----

def test_query_h200_single_gpu(h200):
    parsed = smi.parse_query_csv(h200("h200x1", "query.txt"))
    assert parsed["messages"] == [] and parsed["error_fields"] == []
    (gpu,) = parsed["gpus"]
    assert gpu["index"] == 0
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["compute_capability"] == "9.0"
    assert gpu["compute_capability_int"] == 90
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"], gpu["memory_free_mib"]) == (143771, 0, 143156)
    assert gpu["persistence_mode"] is True
    assert gpu["mig_mode"] == "Disabled" and gpu["mig_enabled"] is False
    assert gpu["ecc_enabled"] is True
    assert gpu["driver_version"] == "580.159.04"
    assert gpu["pci_bus_id"] == "00000000:00:06.0"
    assert gpu["sysfs_bus_id"] == "0000:00:06.0"
    assert gpu["uuid"].startswith("GPU-")


def test_query_with_header_and_units_equals_noheader_nounits(h200):
    plain = smi.parse_query_csv(h200("h200x2", "query.txt"))["gpus"]
    with_units = smi.parse_query_csv(h200("h200x2", "query_hdr.txt"))["gpus"]
    assert len(plain) == 2
    assert plain == with_units
    assert [g["index"] for g in plain] == [0, 1]


def test_query_rtx_pro_6000_server_fixture(gpu_out):
    # index, name, compute_cap, memory.total [MiB], driver_version: 9 Server Edition GPUs
    text = gpu_out("12").split("\n", 1)[1]
    fields = ("index", "name", "compute_cap", "memory.total", "driver_version")
    parsed = smi.parse_query_csv(text, fields)
    gpus = parsed["gpus"]
    assert len(gpus) == 9
    assert set(g["compute_capability_int"] for g in gpus) == {120}
    assert set(g["memory_total_mib"] for g in gpus) == {97887}
    assert set(g["name"] for g in gpus) == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    # the trailing "CUDA: 12.9" line is not a row
    assert parsed["messages"] == ["CUDA: 12.9"]


def test_query_b200_and_b300_compute_capabilities(gpu_out):
    b200 = gpu_out("15").split("$ nvidia-smi topo -m")[0]
    rows = smi.parse_query_csv(b200.split("name, compute_cap\n", 1)[1], ("name", "compute_cap"))["gpus"]
    assert [g["compute_capability_int"] for g in rows] == [100] * 8
    b300 = gpu_out("11").split("driver_version, name, compute_cap\n", 1)[1].split("\n\n")[0]
    rows = smi.parse_query_csv(b300, ("driver_version", "name", "compute_cap"))["gpus"]
    assert len(rows) == 7
    assert set((g["compute_capability"], g["compute_capability_int"]) for g in rows) == {("10.3", 103)}


def test_query_memory_columns_of_max_q_fixture(gpu_out):
    block = gpu_out("14").split("index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n", 1)[1].split("\n\n")[0]
    rows = smi.parse_query_csv(block, ("index", "name", "memory.total", "memory.used", "memory.free"))["gpus"]
    assert [(g["index"], g["memory_used_mib"], g["memory_free_mib"]) for g in rows] == [
        (0, 2, 97288), (1, 2, 97288), (2, 2, 97279), (3, 10, 97280)]


def test_query_na_and_error_values():
    text = ("0, NVIDIA GeForce RTX 5090, GPU-x, 00000000:17:00.0, 12.0, 32607, 0, 32111, Disabled, [N/A], [N/A], 595.58.03\n"
            "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n"
            "2, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-y, 00000001:1A:00.0, 12.0, 97887, [Unknown Error], ERR!, Enabled, "
            "Disabled, Enabled, 595.58.03\n")
    parsed = smi.parse_query_csv(text)
    first, second = parsed["gpus"]
    assert first["mig_mode"] is None and first["mig_enabled"] is None and first["ecc_enabled"] is None
    assert first["persistence_mode"] is False
    assert parsed["messages"] == ["Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error"]
    assert parsed["error_fields"] == [(2, "memory.used"), (2, "memory.free")]
    assert second["memory_used_mib"] is None
    assert second["sysfs_bus_id"] == "0001:1a:00.0"


@pytest.mark.parametrize("bus, sysfs", [
    ("00000000:06:00.0", "0000:06:00.0"),
    ("00000000:F4:00.0", "0000:f4:00.0"),
    ("00000001:1A:00.0", "0001:1a:00.0"),
    ("0000:c1:00.0", "0000:c1:00.0"),
    ("06:00.0", "0000:06:00.0"),
    ("00010000:01:00.0", "10000:01:00.0"),
    ("bogus", None),
])
def test_sysfs_bus_id(bus, sysfs):
    assert smi.sysfs_bus_id(bus) == sysfs


@pytest.mark.parametrize("text, value", [("12.0", 120), ("9.0", 90), ("10.3", 103), ("8.9", 89), ("12.1", 121), ("[N/A]", None), ("12", None)])
def test_compute_cap_int(text, value):
    assert smi.compute_cap_int(text) == value


@pytest.mark.parametrize("value, text", [("12.0", "12.0"), (12.0, "12.0"), (120, "12.0"), (90, "9.0"), ("90", "9.0"), (9, "9.0"), ("x", None), (True, None)])
def test_normalize_compute_cap(value, text):
    assert smi.normalize_compute_cap(value) == text


# ---- the plain table header and rows ----

@pytest.mark.parametrize("prefix, driver, cuda, style", [
    ("01", "590.48.01", "13.1", "driver"),
    ("02", "580.126.20", "13.0", "driver"),
    ("03", "610.57.04", "13.3", "kmd"),
    ("04", "595.71.05", "13.2", "driver"),
    ("05", "580.95.05", "13.0", "driver"),
    ("08", "610.43.02", "13.3", "kmd"),
    ("10", "570.133.07", "12.8", "driver"),
    ("11", "610.57.04", "13.3", "kmd"),
    ("21", "610.57.04", "13.3", "kmd"),
    ("07", "595.58.03", "13.2", "driver"),  # nvidia-smi -q
])
def test_header_versions(gpu_out, prefix, driver, cuda, style):
    header = smi.parse_smi_header(gpu_out(prefix))
    assert header["driver_version"] == driver
    assert header["cuda_version"] == cuda
    assert header["header_style"] == style


def test_header_h200(h200):
    header = smi.parse_smi_header(h200("h200x1", "smi.txt"))
    assert header == {"nvidia_smi_version": "580.159.04", "driver_version": "580.159.04", "cuda_version": "13.0", "header_style": "driver"}
    assert smi.parse_smi_header(h200("h200x1", "smi_q.txt"))["cuda_version"] == "13.0"


def test_header_absent_on_failure_text(gpu_out):
    assert smi.parse_smi_header(gpu_out("18"))["cuda_version"] is None


# ---- topo -m ----

def test_topo_pcie_two_numa_nodes(gpu_out):
    topo = smi.parse_topo(gpu_out("16"))  # tabs and ANSI underline codes in the header
    assert topo["available"]
    assert topo["devices"] == ["GPU%d" % i for i in range(8)]
    assert len(topo["pairs"]) == 28
    links = dict(((p["a"], p["b"]), p["link"]) for p in topo["pairs"])
    assert links[(0, 1)] == "PIX" and links[(0, 2)] == "NODE" and links[(0, 4)] == "SYS" and links[(6, 7)] == "PIX"
    assert topo["link_types"] == ["NODE", "PIX", "SYS"]
    assert topo["pcie_only"] and not topo["nvlink"]
    assert topo["numa_nodes"] == [0, 1]
    assert topo["gpus"][0] == {"index": 0, "cpu_affinity": "0-63,128-191", "numa_affinity": "0", "gpu_numa_id": None}
    assert topo["gpus"][7]["cpu_affinity"] == "64-127,192-238"


def test_topo_nvlink_and_space_separated(gpu_out):
    b300 = smi.parse_topo(gpu_out("11"))
    assert b300["nvlink"] and not b300["pcie_only"]
    assert b300["link_types"] == ["NV18"]
    assert [g["numa_affinity"] for g in b300["gpus"]] == ["0"] * 3 + ["1"] * 4
    assert b300["gpus"][3]["cpu_affinity"] == "1,3,5,7,9,11"
    b200 = smi.parse_topo(gpu_out("15"))  # no affinity columns, and a p2p matrix after it
    assert len(b200["pairs"]) == 28 and b200["link_types"] == ["NV18"]
    assert b200["gpus"][0]["cpu_affinity"] is None
    rtx5090 = smi.parse_topo(gpu_out("10"))
    assert rtx5090["pairs"] == [{"a": 0, "b": 1, "link": "NODE"}]
    maxq = smi.parse_topo(gpu_out("17"))
    assert maxq["link_types"] == ["NODE"] and maxq["numa_nodes"] == [0]


def test_topo_h200(h200):
    two = smi.parse_topo(h200("h200x2", "topo.txt"))
    assert two["pairs"] == [{"a": 0, "b": 1, "link": "NV18"}] and two["nvlink"]
    one = smi.parse_topo(h200("h200x1", "topo.txt"))
    assert one["available"] and one["pairs"] == [] and not one["pcie_only"]
    assert one["gpus"] == [{"index": 0, "cpu_affinity": "0-15", "numa_affinity": "0", "gpu_numa_id": None}]


def test_topo_absent():
    assert smi.parse_topo("No devices were found\n")["available"] is False


# ---- kernel module, IOMMU, ACS ----

@pytest.mark.parametrize("prefix, module, version", [
    ("18", "proprietary", "580.173.02"),
    ("29", "open", "565.57.01"),
    ("30", "proprietary", "384.98"),
    ("31", "open", "515.43.04"),
])
def test_proc_version(gpu_out, prefix, module, version):
    assert smi.parse_proc_version(gpu_out(prefix)) == {"kernel_module": module, "version": version}


def test_proc_version_h200_and_empty(h200):
    assert smi.parse_proc_version(h200("h200x1", "procver.txt")) == {"kernel_module": "open", "version": "580.159.04"}
    assert smi.parse_proc_version("") == {"kernel_module": None, "version": None}


def test_cmdline_iommu(gpu_out, h200):
    off = smi.parse_cmdline_iommu(gpu_out("38"))
    assert off == {"cmdline_flags": ["amd_iommu=off", "iommu=off"], "cmdline_mode": "off"}
    assert smi.parse_cmdline_iommu(gpu_out("17").split("=== grub cmdline ===\n")[1])["cmdline_mode"] is None
    # the H200 host passes init arguments after "--"; they are not kernel parameters
    assert smi.parse_cmdline_iommu(h200("h200x1", "cmdline.txt")) == {"cmdline_flags": [], "cmdline_mode": None}
    assert smi.parse_cmdline_iommu("ro intel_iommu=on iommu=pt")["cmdline_mode"] == "passthrough"
    assert smi.parse_cmdline_iommu("ro intel_iommu=on")["cmdline_mode"] == "on"
    assert smi.parse_cmdline_iommu("ro -- iommu=pt")["cmdline_mode"] is None


def test_lspci_acs_server_switches(gpu_out):
    acs = smi.parse_lspci_acs(gpu_out("40"))
    assert acs["ports_checked"] == 38  # bridges only: the two X710 NIC functions are not counted
    assert acs["acs_enabled"] and acs["enabled_count"] == 38 and acs["redirect_count"] == 0
    assert "02:00.0" in acs["enabled_ports"] and "e1:00.0" not in acs["enabled_ports"]
    nic = [p for p in acs["ports"] if p["device"] == "e1:00.0"][0]
    assert nic["bridge"] is False and nic["enabled"] is False


def test_lspci_acs_mixed_and_disabled(gpu_out):
    mixed = smi.parse_lspci_acs(gpu_out("41"))
    assert mixed["ports_checked"] == 12
    assert mixed["enabled_count"] == 7 and mixed["redirect_count"] == 5
    disabled = smi.parse_lspci_acs(gpu_out("42"))
    assert disabled["ports_checked"] == 14 and not disabled["acs_enabled"]


# ---- failure classification ----

@pytest.mark.parametrize("prefix, rc, cls", [
    ("18", 18, "nvml_mismatch"),
    ("19", 18, "nvml_mismatch"),
    ("20", 6, "no_devices"),
    ("21", 0, "gpu_lost"),
    ("23", 9, "driver_not_loaded"),
    ("25", 15, "gpu_lost"),
    ("26", 15, "gpu_lost"),
])
def test_classify_fixture_texts(gpu_out, prefix, rc, cls):
    failure = smi.classify_failure(rc, gpu_out(prefix))
    assert failure["class"] == cls
    assert failure["fix"]
    assert failure["message"] in gpu_out(prefix)


def test_classify_fix_texts_and_codes():
    mismatch = smi.classify_failure(18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.178\n")
    assert mismatch["fix"].startswith("reboot: driver/library mismatch")
    # exit code alone decides when the text says nothing
    assert smi.classify_failure(9, "")["class"] == "driver_not_loaded"
    assert smi.classify_failure(0, "0, NVIDIA H200, ...") is None
    assert smi.classify_failure(None, timed_out=True, timeout=7)["message"] == "nvidia-smi did not answer within 7 s and was killed"
    assert smi.classify_failure(127, not_found=True)["class"] == "not_installed"


def test_classify_invalid_field(h200):
    failure = smi.classify_failure(2, h200("h200x2", "query_bad.txt"))
    assert failure["class"] == "query_failed"
    assert 'Field "bogus.field" is not a valid field to query.' in failure["message"]


# ---- running programs and reading sysfs ----

def test_numa_node_and_iommu_groups(tmp_path):
    dev = tmp_path / "sys/bus/pci/devices/0000:06:00.0"
    dev.mkdir(parents=True)
    (dev / "numa_node").write_text("1\n")
    other = tmp_path / "sys/bus/pci/devices/0000:00:06.0"
    other.mkdir(parents=True)
    (other / "numa_node").write_text("-1\n")
    assert probe.read_numa_node(str(tmp_path), "0000:06:00.0") == 1
    assert probe.read_numa_node(str(tmp_path), "0000:00:06.0") is None
    assert probe.read_numa_node(str(tmp_path), "0000:07:00.0") is None
    assert probe.count_iommu_groups(str(tmp_path)) is None
    groups = tmp_path / "sys/kernel/iommu_groups"
    for name in ("0", "1", "17"):
        (groups / name).mkdir(parents=True)
    assert probe.count_iommu_groups(str(tmp_path)) == 3


def test_find_program_explicit_path(tmp_path):
    assert probe.find_program("nvidia-smi", str(tmp_path / "missing")) is None
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert probe.find_program("whatever", str(tool)) == str(tool)
    assert probe.find_program("tool", path=str(tmp_path)) == os.path.join(str(tmp_path), "tool")


def _runner_from(outputs):
    """A runner answering each argv from captured text: {args tuple: (rc, stdout)}."""
    def run(argv, timeout, env=None):
        rc, out = outputs[tuple(argv[1:])]
        return rc, out, "", False, False
    return run


def test_collect_from_real_h200_outputs(h200, tmp_path):
    runner = _runner_from({smi.QUERY_ARGS: (0, h200("h200x2", "query.txt")), (): (0, h200("h200x2", "smi.txt")),
                           ("topo", "-m"): (0, h200("h200x2", "topo.txt"))})
    tool = tmp_path / "nvidia-smi"
    tool.write_text("")
    tool.chmod(0o755)
    result = probe.collect(nvidia_smi=str(tool), runner=runner, sysfs_root=str(tmp_path), procfs_root=str(tmp_path),
                           driver_version_file=str(tmp_path / "none"), lspci=str(tmp_path / "no-lspci"))
    assert result["ok"] is True and result["gpu_count"] == 2
    assert result["topology"]["pairs"] == [{"a": 0, "b": 1, "link": "NV18"}]
    assert [g["cpu_affinity"] for g in result["gpus"]] == ["0-31", "0-31"]
    assert result["numa_nodes"] == [0] and result["kernel_module"] is None
    assert result["iommu"]["groups"] is None and result["iommu"]["enabled"] is None


def test_collect_err_in_the_table_is_a_lost_gpu(h200, tmp_path):
    # the csv looks healthy, the table shows ERR! for GPU 1 (temperature and power unreadable)
    table = h200("h200x2", "smi.txt").replace("| N/A   37C    P0            127W /  700W |", "| N/A  ERR!    P0           ERR! /  700W |")
    assert "ERR!" in table
    runner = _runner_from({smi.QUERY_ARGS: (0, h200("h200x2", "query.txt")), (): (0, table), ("topo", "-m"): (0, h200("h200x2", "topo.txt"))})
    tool = tmp_path / "nvidia-smi"
    tool.write_text("")
    tool.chmod(0o755)
    result = probe.collect(nvidia_smi=str(tool), runner=runner, sysfs_root=str(tmp_path), procfs_root=str(tmp_path),
                           driver_version_file=str(tmp_path / "none"), lspci=str(tmp_path / "no-lspci"))
    assert result["ok"] is False and result["failure"]["class"] == "gpu_lost"
    assert "ERR!" in result["failure"]["message"]


# ---- bounded reads ----

def test_query_line_over_the_csv_field_limit_is_a_message(h200):
    # csv refuses a field over 131072 characters with _csv.Error: such a line is not a GPU row
    real = h200("h200x2", "query.txt")
    flood = "x" * 131073
    for line in (flood, '"' + flood, "0, " + flood + ", GPU-1"):
        parsed = smi.parse_query_csv(line + "\n" + real)
        assert [g["index"] for g in parsed["gpus"]] == [0, 1]
        assert len(parsed["messages"]) == 1 and parsed["messages"][0].startswith("a line of %d characters" % len(line))
    # an unterminated quote on a short line: csv's error becomes a message too
    assert smi.parse_query_csv('0, "H200\n')["messages"] == ['0, "H200']


def test_run_bounded_stops_a_program_that_floods(tmp_path):
    script = tmp_path / "flood.sh"
    script.write_text("#!/bin/sh\nexec yes 'ERR! 0, NVIDIA H200'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    rc, out, err, timed_out, not_found = run_bounded([str(script)], 30, max_bytes=1 << 20)
    assert rc is None and not timed_out and not not_found
    assert len(out) <= 1 << 20 and err.startswith("flood.sh printed more than 1048576 bytes and was stopped")
    failure = smi.classify_failure(rc, out, err)
    assert failure["class"] == "query_failed" and failure["message"].startswith("flood.sh printed more than")


def test_kernel_files_are_read_bounded(tmp_path):
    with pytest.raises(probe.GpuInfoError, match="driver_version_file: /dev/zero holds more than 65536 bytes"):
        probe.read_text("/dev/zero", "driver_version_file")
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))
    assert probe.read_text(str(fifo), "driver_version_file") == ""  # no writer: nothing, and no hang
    assert probe.read_text(str(tmp_path), "sysfs_root") is None  # a directory cannot be read
    assert probe.read_text(str(tmp_path / "missing"), "sysfs_root") is None
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cmdline").write_text("iommu=pt " * 10000)
    with pytest.raises(probe.GpuInfoError, match="procfs_root: .*/proc/cmdline holds .* point procfs_root at the right place"):
        probe.collect(nvidia_smi=str(tmp_path / "none"), sysfs_root=str(tmp_path), procfs_root=str(tmp_path),
                      driver_version_file=str(tmp_path / "none"), lspci=str(tmp_path / "none"))


@pytest.mark.parametrize("parse,line", [
    (smi.parse_lspci_acs, "\t\tACSCtl:\t" + "1" * 100000),  # "(\w+)([+-])" was quadratic in the word's length
    (smi.parse_lspci_acs, "\t\tACSCtl:\t" + "x" * 1000 + "+ " + "SrcValid+ " * 400),
])
def test_hostile_long_lines_parse_in_linear_time(h200, parse, line):
    import time
    start = time.monotonic()
    result = parse(h200("h200x2", "smi.txt") + line + "\n")
    assert time.monotonic() - start < 2
    assert result["enabled_count"] == 0


def test_a_nul_byte_in_a_path_is_unreadable_not_a_crash(tmp_path):
    # os.open and Popen raise ValueError("embedded null byte"), not OSError
    assert probe.read_text(str(tmp_path) + "/a\0b", "procfs_root") is None
    rc, out, err, timed_out, not_found = run_bounded([str(tmp_path) + "/nvidia-smi\0"], 5)
    assert (rc, not_found) == (127, True) and "null" in err
    result = probe.collect(nvidia_smi=str(tmp_path / "n\0"), sysfs_root="\0", procfs_root="\0", driver_version_file="\0",
                           lspci=str(tmp_path / "l\0"))
    assert result["failure"]["class"] == "not_installed"
