# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The FP4 kernel table (_fp4_kernels) against the sources it describes, and the launch check built on it.

Every row is rebuilt (fp4_derive.py beside this file) from SGLang 0.5.23's installed source and 0.5.16's unpacked
source with ``ast``, and from the pinned flashinfer-python wheels' own files (tests/fixtures/flashinfer/, verbatim,
checked against the sha256 in its MANIFEST), and must equal the table: a release that moves a kernel, a choice, a
minimum toolkit or a line fails here, as the format-drift test does for log lines.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pathlib
import re
import types

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _fp4_kernels as fk

import sglang_source  # tests/unit/sglang_source.py

from . import fp4_derive  # tests/unit/plugins/module_utils/fp4_derive.py

MANIFEST = fp4_derive.FLASHINFER_FIXTURES / "MANIFEST.md"


def _manifest():
    text = MANIFEST.read_text(encoding="utf-8")
    wheels = {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(r"^\| ([\d.]+) \| SGLang [\d.]+ \| `([^`]+)` \| `([0-9a-f]{64})` \|$", text, re.M)}
    files = [(m.group(1), m.group(2), m.group(3)) for m in re.finditer(r"^\| ([\d.]+) \| `([^`]+)` \| `([0-9a-f]{64})` \|$", text, re.M)]
    return wheels, files


def _srt(release):
    return sglang_source.srt_dir() if release == sglang_source.CHECKED_RELEASE else sglang_source.srt_dir_0_5_16()


def _flashinfer(version):
    wheel, sha256 = _manifest()[0][version]
    return fp4_derive.flashinfer_facts(version, wheel, sha256, fk.NVCC_FIRST)


# ----------------------------------------------------------------------------------------------
# The table against the sources


def test_fixtures_are_the_wheels_files():
    wheels, files = _manifest()
    assert sorted(wheels) == sorted(fk.FLASHINFER), "MANIFEST.md lists wheels %s, the table %s" % (sorted(wheels), sorted(fk.FLASHINFER))
    on_disk = sorted((p.parent.relative_to(fp4_derive.FLASHINFER_FIXTURES).parts[0], p) for p in fp4_derive.FLASHINFER_FIXTURES.rglob("*.gz"))
    assert len(files) == len(on_disk) == 20
    for version, rel, sha256 in files:
        data = gzip.decompress((fp4_derive.FLASHINFER_FIXTURES / version / (rel + ".gz")).read_bytes())
        assert hashlib.sha256(data).hexdigest() == sha256, "%s %s is not the wheel's file" % (version, rel)


@pytest.mark.parametrize("version", sorted(fk.FLASHINFER))
def test_flashinfer_facts_are_flashinfers(version):
    derived = _flashinfer(version)
    derived.pop("layout")
    assert derived == fk.FLASHINFER[version]


@pytest.mark.parametrize("release", sorted(fk.RELEASES))
def test_release_pins_are_sglangs(release):
    pins = fp4_derive.requires(_srt(release), release)
    assert {name: pins.get(name) for name in fk.RELEASES[release]} == fk.RELEASES[release]
    assert fk.RELEASES[release]["flashinfer-python"] in fk.FLASHINFER, "no FlashInfer facts for the wheel SGLang %s pins" % release


@pytest.mark.parametrize("release", sorted(fk.RELEASES))
def test_rows_are_rebuilt_from_the_sources(release):
    version = fk.RELEASES[release]["flashinfer-python"]
    derived = fp4_derive.release_rows(release, _srt(release), version, _flashinfer(version))
    tabled = [row for row in fk.ROWS if row["release"] == release]
    assert [(r["flag"], r["choice"]) for r in derived] == [(r["flag"], r["choice"]) for r in tabled]
    for want, got in zip(derived, tabled):
        assert got == want, "%s %s %s drifted" % (release, want["flag"], want["choice"])


def test_every_tabled_choice_is_one_sglang_offers():
    for release in fk.RELEASES:
        srt = _srt(release)
        gemm = fp4_derive.choices(srt, "FP4_GEMM_RUNNER_BACKEND_CHOICES")[0]
        moe = fp4_derive.choices(srt, "MOE_RUNNER_BACKEND_CHOICES")[0]
        assert sorted(fk.rows_for(release, fk.GEMM_FLAG)) == sorted(gemm)
        assert set(fk.rows_for(release, fk.MOE_FLAG)) <= set(moe)


def test_nvcc_first_targets_agree_with_flashinfer():
    """NVCC_FIRST (when nvcc first builds each SM 12.0 target) is what FlashInfer 0.7.2's own rule does with each
    CUDA, and 0.6.14 refuses SM 12.0 below 12.9: the two releases need different toolkits."""
    targets = dict(fk.FLASHINFER["0.7.2"]["sm120_targets"])
    for target, cuda in fk.NVCC_FIRST.items():
        assert min(c for c, t in targets.items() if t == target) == cuda
    assert dict(fk.FLASHINFER["0.6.14"]["sm120_targets"])["12.8"] is None


@pytest.mark.parametrize("version", sorted(fk.FLASHINFER))
def test_jit_cache_path_is_where_flashinfer_looks(version):
    """jit_cache_path builds the path FlashInfer's own expressions (jit/env.py, jit/core.py) evaluate to."""
    layout = fp4_derive.cache_layout(version)
    assert layout["jit_cache_package"] and layout["aot_default"]
    fake_os = types.SimpleNamespace(getenv=lambda name, default=None: "/srv/sglang" if name == "FLASHINFER_WORKSPACE_BASE" else default)
    ns = {"pathlib": pathlib, "os": fake_os, "flashinfer_version": version, "arch": "120f"}
    ns["FLASHINFER_BASE_DIR"] = eval(layout["base"], ns)
    ns["FLASHINFER_CACHE_DIR"] = eval(layout["cache"], ns)
    ns["FLASHINFER_WORKSPACE_DIR"] = eval(layout["workspace"], ns)
    jit = eval(layout["jit"], ns)
    library = eval(layout["library"], {"jit_env": types.SimpleNamespace(FLASHINFER_JIT_DIR=jit), "self": types.SimpleNamespace(name="fused_moe_120")})
    assert str(library) == fk.jit_cache_path(version, "120f", "fused_moe_120", base="/srv/sglang")
    assert fk.jit_cache_path(version, "120f", "m") == os.path.join("~", ".cache", "flashinfer", version, "120f", "cached_ops", "m", "m.so")


@pytest.mark.parametrize("release", sorted(fk.RELEASES))
def test_no_sgl_kernel_fp4_op_is_called(release):
    """Why no row names the sglang-kernel wheel: neither release imports or calls an sgl_kernel op with fp4 in its
    name. The one mention left is a fake registration for torch.compile (``register_fake_if_exists(
    "sgl_kernel::scaled_fp4_quant")``), made only off SM120 and only if such an op exists."""
    srt = _srt(release)
    uses, fakes = [], []
    for path in sorted(srt.rglob("*.py")):
        text = path.read_text(encoding="utf-8-sig")
        if "sgl_kernel" not in text or "fp4" not in text:
            continue
        for node in fp4_derive.ast.walk(fp4_derive.sglang_tree(srt, path.relative_to(srt).as_posix())):
            if isinstance(node, fp4_derive.ast.ImportFrom) and (node.module or "").startswith("sgl_kernel"):
                uses += [(path.name, node.lineno, a.name) for a in node.names if "fp4" in a.name]
            elif isinstance(node, fp4_derive.ast.Attribute) and "fp4" in node.attr and "sgl_kernel" in fp4_derive.ast.unparse(node.value):
                uses.append((path.name, node.lineno, node.attr))
            elif isinstance(node, fp4_derive.ast.Constant) and isinstance(node.value, str) and node.value.startswith("sgl_kernel::") and "fp4" in node.value:
                fakes.append((path.name, node.value))
    assert uses == []
    assert fakes == [("modelopt_quant.py", "sgl_kernel::scaled_fp4_quant")]
    assert {row["provider"] for row in fk.ROWS} - {None} <= set(fk.PROVIDERS) - {"sgl-kernel"}


# ----------------------------------------------------------------------------------------------
# The launch check


NVFP4 = "NVFP4"


def _flags_of(problems):
    return [(p["flag"], p["value"]) for p in problems]


@pytest.mark.parametrize("release", sorted(fk.RELEASES))
def test_defaults_run_on_flashinfer_jit_modules(release):
    plan = fk.kernel_plan(release, "12.0", ["--model-path", "/models/x"], NVFP4)
    assert plan["problems"] == []
    assert [(r["flag"], r["choice"]) for r in plan["rows"]] == [
        (fk.QUANT_FLAG, "modelopt_fp4"), (fk.GEMM_FLAG, "flashinfer_cutlass"), (fk.MOE_FLAG, "flashinfer_cutlass")]
    assert plan["modules"] == ["fp4_quantization_120f", "fp4_gemm_cutlass_sm120", "fused_moe_120"]
    assert "nvcc>=12.9" in plan["needs"]


@pytest.mark.parametrize("release", sorted(fk.RELEASES))
@pytest.mark.parametrize("choice", ["flashinfer_trtllm", "flashinfer_trtllm_routed", "flashinfer_cutedsl"])
def test_moe_choices_without_sm120_kernels_are_refused_with_a_fix(release, choice):
    problems = fk.launch_problems(release, "12.0", ["--moe-runner-backend", choice], NVFP4)
    assert _flags_of(problems) == [(fk.MOE_FLAG, choice)]
    assert "no SM 12.0 kernels" in problems[0]["problem"]
    assert problems[0]["fix"].startswith("use --moe-runner-backend flashinfer_cutlass")


def test_cute_dsl_gemm_runs_on_sm120_from_0_5_23_only():
    """FlashInfer 0.7.2 added 120 to the CuTe DSL mm_fp4 capabilities; 0.6.14 (SGLang 0.5.16) has none."""
    args = ["--fp4-gemm-backend=flashinfer_cutedsl"]
    assert _flags_of(fk.launch_problems("0.5.16", "12.0", args, NVFP4)) == [(fk.GEMM_FLAG, "flashinfer_cutedsl")]
    assert fk.launch_problems("0.5.23", "12.0", args, NVFP4) == []
    assert "nvidia-cutlass-dsl==4.8.0" in fk.kernel_plan("0.5.23", "12.0", args, NVFP4)["needs"]


def test_refused_unknown_and_mismatched_choices():
    args = ["--moe-runner-backend", "cutlass", "--fp4-gemm-backend", "flashinfer_trtllm", "--quantization", "fp8"]
    problems = fk.launch_problems("0.5.23", (12, 0), args, NVFP4)
    assert _flags_of(problems) == [(fk.QUANT_FLAG, "fp8"), (fk.GEMM_FLAG, "flashinfer_trtllm"), (fk.MOE_FLAG, "cutlass")]
    assert "refuses" in problems[2]["problem"] and "modelopt_quant.py:3145" in problems[2]["problem"]
    triton = fk.launch_problems("0.5.16", "12.0", ["--moe-runner-backend", "triton"], NVFP4)
    assert _flags_of(triton) == [(fk.MOE_FLAG, "triton")] and "not an NVFP4 choice" in triton[0]["problem"]


def test_last_flag_wins_and_quantization_alone_means_nvfp4():
    args = ["--moe-runner-backend", "flashinfer_trtllm", "--quantization", "modelopt_fp4", "--moe-runner-backend=flashinfer_cutlass"]
    assert fk.launch_flags(args)[fk.MOE_FLAG] == "flashinfer_cutlass"
    assert fk.kernel_plan("0.5.23", "12.0", args)["nvfp4"] is True
    assert fk.launch_problems("0.5.23", "12.0", args) == []


def test_other_gpus_and_checkpoints_are_not_checked():
    bad = ["--moe-runner-backend", "flashinfer_trtllm"]
    assert fk.launch_problems("0.5.23", "10.0", bad, NVFP4) == []
    assert fk.launch_problems("0.5.23", "12.0", bad, "FP8") == []
    assert fk.launch_problems("0.5.23", "12.0", bad) == []


def test_an_untabled_release_is_a_problem():
    problems = fk.launch_problems("0.5.30", "12.0", [], NVFP4)
    assert _flags_of(problems) == [(None, "0.5.30")] and "0.5.16, 0.5.23" in problems[0]["problem"]


@pytest.mark.parametrize("release, nvcc, flagged", [
    ("0.5.16", "", True), ("0.5.16", "12.8", True), ("0.5.16", "12.9", False), ("0.5.16", None, False),
    ("0.5.23", "12.8", True), ("0.5.23", "13.0", False), ("0.5.23", "garbage", True),
])
def test_the_hosts_nvcc_against_the_jit_builds(release, nvcc, flagged):
    problems = fk.launch_problems(release, "12.0", [], NVFP4, nvcc=nvcc)
    assert bool(problems) is flagged
    if flagged:
        assert "fp4_quantization_120f" in problems[0]["problem"] and "12.9" in problems[0]["fix"]


def test_marlin_needs_12_9_for_an_arch_specific_target_on_0_5_16():
    """SGLang 0.5.16's JIT builds plain sm_120 below CUDA 12.9 (0.5.23 says plain sm_120 turns CUTLASS's SM120 atoms
    into trap stubs), 0.5.23 falls back to sm_120a: the marlin rows' needs differ."""
    args = ["--fp4-gemm-backend", "marlin", "--moe-runner-backend", "marlin"]
    assert fk.rows_for("0.5.16", fk.GEMM_FLAG)["marlin"]["needs"] == ("nvcc>=12.9",)
    assert fk.rows_for("0.5.23", fk.GEMM_FLAG)["marlin"]["needs"] == ("nvcc>=12.8",)
    assert fk.launch_problems("0.5.23", "12.0", args, NVFP4) == []


def test_marlin_linear_layers_skip_the_activation_quantization_module():
    plan = fk.kernel_plan("0.5.23", "12.0", ["--fp4-gemm-backend", "marlin"], NVFP4)
    assert [(r["flag"], r["choice"]) for r in plan["rows"]] == [(fk.GEMM_FLAG, "marlin"), (fk.MOE_FLAG, "flashinfer_cutlass")]
    assert plan["modules"] == ["fused_moe_120"]


def test_the_docs_show_every_row():
    """docs/fp4_sm120.md lists the rows per release: each row's choice, provider and SGLang site must be there."""
    doc = (fp4_derive.ROOT / "docs" / "fp4_sm120.md").read_text(encoding="utf-8")
    for release in fk.RELEASES:
        section = doc.split("### SGLang %s " % release, 1)[1].split("\n\n", 2)[1]
        for row in (r for r in fk.ROWS if r["release"] == release):
            line = next((ln for ln in section.splitlines() if ln.startswith("| `%s` | `%s` |" % (row["flag"], row["choice"]))), "")
            assert "`%s`" % row["site"] in line and (row["becomes"] or row["provider"]) in line, (release, row["flag"], row["choice"])


def test_the_sm120_target_is_the_table_s_first_arch_specific_toolkit():
    assert (fk.sm120_arch(), fk.sm120_arch("cmake")) == ("sm_120a", "120a")
    assert fk.SM120_TARGET["toolkit_min"] == fk.NVCC_FIRST["sm_120a"] == "12.8"


@pytest.mark.parametrize("release, args, prebuilt, minimum, why", [
    # the reference unit: fp4_quantize's module is built for sm_120f, which nvcc 12.9 is the first to compile
    ("0.5.23", ["--fp4-gemm-backend", "flashinfer_cudnn", "--moe-runner-backend", "flashinfer_cutlass"], False, "12.9", "fp4_quantization_120f"),
    ("0.5.23", ["--fp4-gemm-backend", "flashinfer_cudnn", "--moe-runner-backend", "flashinfer_cutlass"], True, "12.8", "sm_120a"),
    ("0.5.23", ["--fp4-gemm-backend", "marlin", "--moe-runner-backend", "marlin"], True, "12.8", "SGLang's JIT kernels"),
    ("0.5.16", ["--fp4-gemm-backend", "marlin", "--moe-runner-backend", "marlin"], True, "12.9", "SGLang's JIT kernels"),
])
def test_the_toolkit_minimum_comes_from_the_table_for_the_chosen_backends(release, args, prebuilt, minimum, why):
    plan = fk.kernel_plan(release, "12.0", args, NVFP4)
    found, reasons = fk.nvcc_minimum(plan, ["sm_120a"], prebuilt)
    assert found == minimum and any(why in r for r in reasons), reasons
    # what the host needs is what the nvcc check holds it to
    assert fk.nvcc_problems(plan, minimum, prebuilt) == []
    older = "%s.%d" % (minimum.split(".")[0], int(minimum.split(".")[1]) - 1)
    assert bool(fk.nvcc_problems(plan, older, prebuilt)) is (why != "sm_120a")


def test_prebuilt_modules_need_no_nvcc_on_the_server_but_marlin_does():
    args = ["--fp4-gemm-backend", "flashinfer_cutlass", "--moe-runner-backend", "flashinfer_cutlass"]
    plan = fk.kernel_plan("0.5.23", "12.0", args, NVFP4)
    problems = fk.nvcc_problems(plan, "")
    assert [p["fix"].split(" (")[0] for p in problems] == ["install a CUDA toolkit 12.9 or newer", "install a CUDA toolkit 12.8 or newer"]
    assert all("sglang_fp4_modules_prebuilt" in p["fix"] for p in problems)
    assert fk.nvcc_problems(plan, "", prebuilt=True) == []
    marlin = fk.kernel_plan("0.5.23", "12.0", ["--fp4-gemm-backend", "marlin", "--moe-runner-backend", "marlin"], NVFP4)
    [problem] = fk.nvcc_problems(marlin, "", prebuilt=True)
    assert "SGLang's JIT kernels" in problem["problem"] and "prebuilt" not in problem["fix"]


def test_a_null_flag_value_sets_nothing():
    """The wiring templates a null setting into the words as a null: that flag is left out of the unit, so SGLang's own
    default applies (auto: flashinfer_cutlass on SM 12.0), never a choice named "None"; a later word still wins."""
    words = ["--quantization", "modelopt_fp4", "--fp4-gemm-backend", None, "--moe-runner-backend", None]
    assert fk.launch_flags(words) == {"--quantization": "modelopt_fp4"}
    assert fk.launch_flags(words + ["--moe-runner-backend", "marlin"])["--moe-runner-backend"] == "marlin"
    assert fk.launch_flags(["--fp4-gemm-backend", "marlin", "--fp4-gemm-backend", None]) == {"--fp4-gemm-backend": "marlin"}
    plan = fk.kernel_plan("0.5.23", "12.0", words)
    assert plan["problems"] == [] and plan["modules"] == ["fp4_quantization_120f", "fp4_gemm_cutlass_sm120", "fused_moe_120"]
