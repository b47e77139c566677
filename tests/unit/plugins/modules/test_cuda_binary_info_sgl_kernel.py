"""cuda_binary_info on the real sglang-kernel 0.4.5 and 0.4.10 wheels of PyPI (what SGLang 0.5.16 and 0.5.23 pin):
sm_120a cubins present, no FP4 kernel among them. Skipped unless LLMOPS_SGL_KERNEL_WHEELS names a folder holding the
two wheels (373 and 383 MB; `pip download --no-deps sglang-kernel==0.4.5 sglang-kernel==0.4.10`, or
tests/bench/bench_cuda_binary.py --sgl-kernel, which downloads them into .cache). The figures are in
docs/evidence/sgl-kernel-fp4-kernels.md."""

import os
import pathlib

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._cuda_binary import default_runner
from ansible_collections.llmops.sglang.plugins.modules import cuda_binary_info

FOLDER = os.environ.get("LLMOPS_SGL_KERNEL_WHEELS")
# The wheels the evidence was recorded on (sha256 of the files PyPI serves).
WHEELS = {
    "0.4.5": ("sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl",
              "5927a14dfff92ced8b1f7c7d5844144bc574ec58e604d4fd53e6f53c709003a8"),
    "0.4.10": ("sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl",
               "043cbe4a10e7887ea1b25599b729ff1ce115a0d5217b2c177aff9f9ae5327724"),
}
COMMON_OPS = ["sgl_kernel/sm100/common_ops.abi3.so", "sgl_kernel/sm90/common_ops.abi3.so"]

pytestmark = pytest.mark.skipif(not FOLDER, reason="LLMOPS_SGL_KERNEL_WHEELS (a folder with the sglang-kernel 0.4.5 and 0.4.10 wheels) is not set")


def _run(wheel, tmp_path, **params):
    params = dict(dict(path=str(wheel), require_archs=["sm_120a"], accept_family=False, cuobjdump=None, reader="fatbin",
                       list_cubins=False), **params)
    return cuda_binary_info.run_module(params, default_runner, str(tmp_path))


@pytest.mark.parametrize("version", sorted(WHEELS))
def test_sm120a_present_and_no_fp4_kernel(version, tmp_path):
    name, digest = WHEELS[version]
    wheel = pathlib.Path(FOLDER) / name
    if not wheel.is_file():
        pytest.fail("%s is not in LLMOPS_SGL_KERNEL_WHEELS=%s: pip download --no-deps sglang-kernel==%s" % (name, FOLDER, version))
    result, failure = _run(wheel, tmp_path, require_kernels=["fp4|e2m1"])
    assert result["sha256"] == digest
    assert "sm_120a" in result["elf_archs"] and result["missing_archs"] == []
    libs = dict((lib["path"], lib) for lib in result["libraries"])
    assert all("sm_120a" in libs[path]["elf_archs"] for path in COMMON_OPS)
    [row] = result["kernel_matches"]
    assert row["count"] == 0 and row["kernels_searched"] > 2000 and row["cubins_searched"] >= 70
    assert all(libs[path]["kernels"]["kernels"] > 1000 for path in COMMON_OPS)
    assert result["missing_kernels"] == [{"pattern": "fp4|e2m1", "arch": "sm_120a"}]
    assert "no kernel matching 'fp4|e2m1' has a cubin for sm_120a" in failure and "FP4" in failure
    # what is there is found: sgl-kernel's FP8 quantization kernels have sm_120a cubins
    result, failure = _run(wheel, tmp_path, require_kernels=["per_token_quant_fp8"])
    assert failure is None and result["kernel_matches"][0]["count"] >= 2
