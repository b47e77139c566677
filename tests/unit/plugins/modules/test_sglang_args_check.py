# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang_args_check against the REAL SGLang 0.5.23 parser.

The interpreter comes from $LLMOPS_SGLANG_PYTHON, default .cache/sglang-venv/bin/python under the repo root,
made by ``tests/lab/bin/make-sglang-venv .cache/sglang-venv``. Without it these tests skip locally and fail
in CI (env CI set).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import sglang_args_check

ROOT = pathlib.Path(__file__).resolve().parents[4]

REFERENCE = [
    "--model-path", "/models/Qwen3.5-397B-A17B-NVFP4", "--served-model-name", "qwen3.5-397b", "--tp-size", "8",
    "--kv-cache-dtype", "bf16", "--quantization", "modelopt_fp4", "--moe-runner-backend", "flashinfer_cutlass",
    "--fp4-gemm-backend", "flashinfer_cudnn", "--attention-backend", "triton", "--reasoning-parser", "qwen3",
    "--tool-call-parser", "qwen3_coder", "--mem-fraction-static", "0.85", "--context-length", "262144",
    "--host", "127.0.0.1", "--port", "30000", "--enable-metrics",
]
# SGLang 0.5.23's --kv-cache-dtype choices, as its --help lists them
KV_CHOICES_0_5_23 = ["auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"]


def with_flag(args, flag, value):
    out = list(args)
    out[out.index(flag) + 1] = value
    return out


def run(params, capsys, check_mode=False):
    """The module's main() as Ansible runs it; returns the JSON it printed (exit_json or fail_json)."""
    if check_mode:
        params = dict(params, _ansible_check_mode=True)
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            sglang_args_check.main()
    out = capsys.readouterr().out
    return json.loads(out), out


def test_reference_flags_with_bf16_are_valid(sglang_python, capsys):
    result, _out = run({"python": sglang_python, "args": REFERENCE}, capsys)
    assert not result.get("failed"), result.get("msg")
    assert result["valid"] is True and result["errors"] == [] and result["changed"] is False
    assert result["sglang_version"] == "0.5.23"
    parsed = result["parsed"]
    # values as SGLang's parser typed them, under SGLang's own names
    assert parsed["tp_size"] == 8 and parsed["kv_cache_dtype"] == "bf16" and parsed["mem_fraction_static"] == 0.85
    assert parsed["context_length"] == 262144 and parsed["enable_metrics"] is True
    assert parsed["moe_runner_backend"] == "flashinfer_cutlass" and parsed["tool_call_parser"] == "qwen3_coder"
    assert len(parsed) == len([a for a in REFERENCE if a.startswith("--")])


def test_bad_kv_cache_dtype_lists_the_choices(sglang_python, capsys):
    result, _out = run({"python": sglang_python, "args": with_flag(REFERENCE, "--kv-cache-dtype", "bf61")}, capsys)
    assert result["failed"] is True and result["valid"] is False
    (error,) = result["errors"]
    assert (error["flag"], error["value"], error["kind"]) == ("--kv-cache-dtype", "bf61", "invalid_choice")
    assert error["choices"] == KV_CHOICES_0_5_23
    assert "did you mean bf16?" in error["hint"]
    assert "--kv-cache-dtype bf61: invalid choice: 'bf61'; valid values: %s" % ", ".join(KV_CHOICES_0_5_23) in result["msg"]


def test_renamed_mamba_strategy_gets_the_rename_hint(sglang_python, capsys):
    args = REFERENCE + ["--mamba-scheduler-strategy", "extra_buffer"]
    result, _out = run({"python": sglang_python, "args": args}, capsys)
    assert result["failed"] is True
    (error,) = result["errors"]
    assert (error["flag"], error["value"], error["kind"]) == ("--mamba-scheduler-strategy", "extra_buffer", "unrecognized")
    assert "renamed --mamba-radix-cache-strategy" in error["hint"]
    assert "valid values: auto, no_buffer, extra_buffer, extra_buffer_lazy" in error["hint"]
    assert "use: --mamba-radix-cache-strategy extra_buffer" in result["msg"]
    # the new spelling is accepted by the same parser
    fixed, _out = run({"python": sglang_python, "args": REFERENCE + ["--mamba-radix-cache-strategy", "extra_buffer"]}, capsys)
    assert fixed["valid"] is True and fixed["parsed"]["mamba_radix_cache_strategy"] == "extra_buffer"


def test_several_bad_flags_are_all_reported(sglang_python, capsys):
    args = with_flag(with_flag(REFERENCE, "--kv-cache-dtype", "bf61"), "--tp-size", "eight")
    args += ["--mamba-scheduler-strategy", "extra_buffer", "--fp4-gemm-backend", "cudnn", "--enable-metricz"]
    result, _out = run({"python": sglang_python, "args": args}, capsys)
    assert result["failed"] is True
    found = {(e["flag"], e["kind"]) for e in result["errors"]}
    assert found == {("--kv-cache-dtype", "invalid_choice"), ("--tp-size", "invalid_value"),
                     ("--mamba-scheduler-strategy", "unrecognized"), ("--fp4-gemm-backend", "invalid_choice"),
                     ("--enable-metricz", "unrecognized")}
    for flag, _kind in found:
        assert "- %s " % flag in result["msg"] or "- %s:" % flag in result["msg"]
    assert "--enable-metricz: unrecognized argument; did you mean --enable-metrics" in result["msg"]
    # the good flags still parse
    assert result["parsed"]["quantization"] == "modelopt_fp4" and "kv_cache_dtype" not in result["parsed"]


def test_api_key_never_in_output(sglang_python, capsys):
    secret, secret2 = "sk-live-4f9a7c1e", "adm-77b1e0d2"
    args = REFERENCE + ["--api-key", secret, "--admin-api-k=" + secret2, "--kv-cache-dtype", "bf61"]
    result, out = run({"python": sglang_python, "args": args}, capsys)
    assert result["failed"] is True
    assert secret not in out and secret2 not in out
    assert result["parsed"]["api_key"] == "********" and result["parsed"]["admin_api_key"] == "********"
    # the invocation echo is scrubbed as well (Ansible's own placeholder for a whole value)
    echoed = result["invocation"]["module_args"]["args"]
    assert "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in echoed and "--admin-api-k=********" in echoed
    valid, out = run({"python": sglang_python, "args": REFERENCE + ["--api-key", secret]}, capsys)
    assert valid["valid"] is True and secret not in out


def test_report_only_and_check_mode(sglang_python, capsys):
    args = REFERENCE[2:]   # no --model-path
    result, _out = run({"python": sglang_python, "args": args, "fail_on_invalid": False}, capsys, check_mode=True)
    assert not result.get("failed") and result["valid"] is False
    assert [(e["flag"], e["kind"]) for e in result["errors"]] == [("--model-path", "missing_required")]
    assert result["errors"][0]["hint"] == "add --model-path"


def test_interpreter_without_sglang_fails_clearly(capsys):
    result, _out = run({"python": sys.executable, "args": REFERENCE}, capsys)
    assert result["failed"] is True
    assert result["msg"] == ("sglang is not importable by %s: ModuleNotFoundError: No module named 'sglang'; install the runtime first"
                             % sys.executable)


def test_missing_interpreter_fails_clearly(tmp_path, capsys):
    result, _out = run({"python": str(tmp_path / "venv" / "bin" / "python"), "args": REFERENCE}, capsys)
    assert result["failed"] is True and "does not exist" in result["msg"] and "interpreter of the SGLang install" in result["msg"]


def test_deprecated_flag_is_accepted_with_a_warning(sglang_python, tmp_path):
    # In its own process, as Ansible runs a module: warnings are process-wide state.
    argsfile = tmp_path / "args.json"
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"python": sglang_python, "args": REFERENCE + ["--disable-cuda-graph"]}}))
    proc = subprocess.run([sys.executable, sglang_args_check.__file__, str(argsfile)], capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "collections")), timeout=300)
    result = json.loads(proc.stdout)
    assert result["valid"] is True and not result.get("failed")
    (item,) = result["deprecated"]
    assert item["flag"] == "--disable-cuda-graph" and item["replacement"].startswith("--cuda-graph-backend")
    # ansible-core 2.19 returns warnings as structured summaries
    assert "--disable-cuda-graph is deprecated in SGLang 0.5.23; use --cuda-graph-backend" in json.dumps(result["warnings"])


# ---- cache_dir: an unchanged configuration is not checked again ---------------------------------------------------

def test_a_passed_check_is_kept_and_reused_without_its_secrets(sglang_python, capsys, tmp_path):
    cache = tmp_path / "cache"
    args = REFERENCE + ["--api-key", "sk-cache-secret-81f2"]
    first, _out = run({"python": sglang_python, "args": args, "cache_dir": str(cache)}, capsys)
    assert first["valid"] is True and first["cached"] is False
    (kept,) = cache.iterdir()
    assert oct(cache.stat().st_mode & 0o777) == "0o700" and oct(kept.stat().st_mode & 0o777) == "0o600"
    assert "sk-cache-secret-81f2" not in kept.read_text()
    second, out = run({"python": sglang_python, "args": args, "cache_dir": str(cache)}, capsys)
    assert second["cached"] is True and second["valid"] is True and "sk-cache-secret-81f2" not in out
    assert {k: v for k, v in second.items() if k != "cached"} == {k: v for k, v in first.items() if k != "cached"}
    # another key value checks nothing new (the value is masked in the digest); another setting does
    third, _out = run({"python": sglang_python, "args": REFERENCE + ["--api-key", "other"], "cache_dir": str(cache)}, capsys)
    assert third["cached"] is True
    fourth, _out = run({"python": sglang_python, "args": with_flag(REFERENCE, "--tp-size", "4"), "cache_dir": str(cache)}, capsys)
    assert fourth["cached"] is False and fourth["parsed"]["tp_size"] == 4 and len(list(cache.iterdir())) == 2


def test_a_failed_check_is_never_kept(sglang_python, capsys, tmp_path):
    cache = tmp_path / "cache"
    bad = with_flag(REFERENCE, "--kv-cache-dtype", "bf61")
    for _attempt in range(2):
        result, _out = run({"python": sglang_python, "args": bad, "cache_dir": str(cache)}, capsys)
        assert result["failed"] is True and result["valid"] is False and "invalid choice" in result["msg"]
    assert not cache.exists() or not list(cache.iterdir())


def _fake_install(root, version):
    """A venv whose site-packages holds a stand-in 'sglang' package: only its files' identity matters here."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    (site / "sglang" / "srt").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "version.py").write_text("__version__ = %r\n" % version)
    (site / "sglang" / "srt" / "server_args.py").write_text("# parser\n")
    return root / "bin" / "python", site / "sglang"


def test_the_digest_follows_the_installed_parser_not_the_secrets(tmp_path):
    from ansible_collections.llmops.sglang.plugins.module_utils import _sglang_args as sa
    python, package = _fake_install(tmp_path / "venv", "0.5.23")
    base = sa.check_fingerprint(str(python), REFERENCE + ["--api-key", "a"])
    assert base and len(base) == 64
    assert sa.check_fingerprint(str(python), REFERENCE + ["--api-key", "b"]) == base
    assert sa.check_fingerprint(str(python), with_flag(REFERENCE, "--tp-size", "4")) != base
    (package / "srt" / "server_args.py").write_text("# parser of another release\n")
    assert sa.check_fingerprint(str(python), REFERENCE + ["--api-key", "a"]) != base
    (package / "version.py").write_text("__version__ = '0.5.24'\n")
    newer = sa.check_fingerprint(str(python), REFERENCE + ["--api-key", "a"])
    assert newer not in (None, base)
    (package / "srt" / "server_args.py").unlink()
    assert sa.check_fingerprint(str(python), REFERENCE) is None     # not a recognisable install: the check runs


def test_a_corrupt_or_foreign_cache_entry_is_ignored(tmp_path):
    from ansible_collections.llmops.sglang.plugins.module_utils import _sglang_args as sa
    digest = "a" * 64
    for content in (b"not json", b'{"errors": [{"flag": "--x"}], "sglang_version": "0.5.23"}', b"[1, 2]",
                    b'{"errors": "x", "sglang_version": "0.5.23"}', b'{"errors": []}'):
        (tmp_path / (digest + ".json")).write_bytes(content)
        assert sa.cached_check(str(tmp_path), digest) is None
    sa.remember_check(str(tmp_path / "new"), digest, {"errors": [{"flag": "--x"}], "sglang_version": "0.5.23"})
    assert not (tmp_path / "new").exists()


def test_fp4_backends_are_checked_against_the_kernel_table_on_sm120(sglang_python, capsys, tmp_path):
    """The reference unit's backends (cuDNN GEMM, FlashInfer CUTLASS MoE) have SM 12.0 kernels in SGLang 0.5.23;
    the trtllm-gen MoE has none, which SGLang's parser accepts but the FP4 check refuses, naming the fix. The FP4 check
    runs on a parse kept in cache_dir as on a fresh one."""
    gpu = {"gpu_capability": "12.0", "quant_algo": "NVFP4", "cache_dir": str(tmp_path)}
    result, _out = run(dict({"python": sglang_python, "args": REFERENCE}, **gpu), capsys)
    assert not result.get("failed"), result.get("msg")
    assert result["fp4"]["nvfp4"] is True and result["fp4"]["problems"] == []
    assert result["fp4"]["modules"] == ["fp4_quantization_120f", "fused_moe_120"]
    assert "cuDNN backend_version>=91002" in result["fp4"]["needs"]

    trtllm = with_flag(REFERENCE, "--moe-runner-backend", "flashinfer_trtllm")
    result, _out = run(dict({"python": sglang_python, "args": trtllm}, **gpu), capsys)
    assert result["failed"] is True and result["valid"] is True and result["cached"] is False
    assert [(p["flag"], p["value"]) for p in result["fp4"]["problems"]] == [("--moe-runner-backend", "flashinfer_trtllm")]
    assert "no SM 12.0 kernels" in result["msg"] and "fix: use --moe-runner-backend flashinfer_cutlass" in result["msg"]

    result, _out = run({"python": sglang_python, "args": trtllm, "cache_dir": str(tmp_path)}, capsys)
    assert not result.get("failed") and "fp4" not in result and result["cached"] is True


def test_the_hosts_nvcc_is_held_to_what_the_fp4_backends_need(sglang_python, capsys, tmp_path):
    """The preflight's nvcc (12.8 here) against the reference unit's JIT modules: fp4_quantization_120f is built for
    sm_120f, which nvcc 12.9 is the first to compile; prebuilt modules need no nvcc on the server. One parse, kept in
    cache_dir: the host's nvcc is checked on every run, cached or not."""
    gpu = {"gpu_capability": "12.0", "quant_algo": "NVFP4", "cache_dir": str(tmp_path)}
    result, _out = run(dict({"python": sglang_python, "args": REFERENCE, "nvcc": "12.8"}, **gpu), capsys)
    assert result["failed"] is True and result["valid"] is True and result["cached"] is False
    assert "nvcc 12.8 is older than 12.9" in result["msg"] and "fix: install a CUDA toolkit 12.9 or newer" in result["msg"]
    assert "sglang_fp4_modules_prebuilt" in result["msg"]
    result, _out = run(dict({"python": sglang_python, "args": REFERENCE, "nvcc": "none"}, **gpu), capsys)
    assert result["failed"] is True and "the host has no nvcc" in result["msg"] and result["cached"] is True
    for passing in ({"nvcc": "12.9"}, {"nvcc": "none", "fp4_modules_prebuilt": True}):
        result, _out = run(dict({"python": sglang_python, "args": REFERENCE}, **dict(gpu, **passing)), capsys)
        assert not result.get("failed"), result.get("msg")
        assert result["fp4"]["problems"] == [] and result["cached"] is True
