"""checkpoint_info and kv_cache_budget modules, run through AnsibleModule with real inputs."""

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import checkpoint_info, kv_cache_budget


LAB = "qwen3.5-397b-a17b-nvfp4"
SHARD3 = "model-00003-of-00004.safetensors"


def run(module, args, capsys):
    """Run a module's main() and return its JSON result (exit_json and fail_json both exit)."""
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def lab(fixtures_dir):
    return str(fixtures_dir / "checkpoints" / LAB)


@pytest.fixture
def lab_copy(lab, tmp_path):
    dst = tmp_path / LAB
    shutil.copytree(lab, dst)
    return dst


# --- checkpoint_info ---------------------------------------------------------------------------


def test_info_reports_silent_fp8(lab, capsys):
    result = run(checkpoint_info, {"path": lab}, capsys)
    assert result["changed"] is False and not result.get("failed")
    assert result["kv_cache_quant_algo"] == "FP8"
    assert result["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert result["kv_scales_present"] is False
    assert result["architecture"]["num_full_attention_layers"] == 15
    assert result["quantization"]["method"] == "modelopt_fp4"
    assert result["shards"]["ok"] is True and result["shards"]["count"] == 4
    assert any("--kv-cache-dtype bf16" in n for n in result["notes"])


def test_verify_complete_checkpoint(lab, capsys):
    result = run(checkpoint_info, {"path": lab, "verify_shards": True}, capsys)
    assert not result.get("failed") and result["shards"]["problems"] == []


def test_verify_fails_on_missing_shard(lab_copy, capsys):
    os.remove(lab_copy / SHARD3)
    result = run(checkpoint_info, {"path": str(lab_copy), "verify_shards": True}, capsys)
    assert result["failed"] is True
    assert SHARD3 + " is missing" in result["msg"] and "Re-stage" in result["msg"]


def test_verify_fails_on_truncated_shard(lab_copy, capsys):
    with open(lab_copy / SHARD3, "r+b") as fh:
        fh.truncate(os.path.getsize(lab_copy / SHARD3) - 1)
    result = run(checkpoint_info, {"path": str(lab_copy), "verify_shards": True}, capsys)
    assert result["failed"] is True
    assert SHARD3 + " is truncated" in result["msg"]


def test_missing_shard_only_reported_without_verify(lab_copy, capsys):
    os.remove(lab_copy / SHARD3)
    result = run(checkpoint_info, {"path": str(lab_copy)}, capsys)
    assert not result.get("failed")
    assert result["shards"]["missing"] == [SHARD3]


def test_verify_with_expected_sizes(lab_copy, capsys):
    size = os.path.getsize(lab_copy / SHARD3)
    result = run(checkpoint_info, {"path": str(lab_copy), "verify_shards": True,
                                   "expected_sizes": {SHARD3: size * 2}}, capsys)
    assert result["failed"] is True and "%s has %d bytes, expected %d" % (SHARD3, size, size * 2) in result["msg"]


def test_verify_fails_without_any_shard(fixtures_dir, capsys):
    result = run(checkpoint_info, {"path": str(fixtures_dir / "checkpoints" / (LAB + "-kvnull")),
                                   "verify_shards": True}, capsys)
    assert result["failed"] is True and "no shards found" in result["msg"]


def test_missing_directory_fails_cleanly(tmp_path, capsys):
    result = run(checkpoint_info, {"path": str(tmp_path / "absent")}, capsys)
    assert result["failed"] is True and "does not exist" in result["msg"]


def test_bad_json_fails_cleanly(lab_copy, capsys):
    (lab_copy / "hf_quant_config.json").write_text("{not json")
    result = run(checkpoint_info, {"path": str(lab_copy)}, capsys)
    assert result["failed"] is True
    assert "hf_quant_config.json" in result["msg"] and "not valid JSON" in result["msg"]


# --- kv_cache_budget -------------------------------------------------------------------------


def test_budget_from_checkpoint(lab, capsys):
    result = run(kv_cache_budget, {"checkpoint": lab, "tp_size": 8, "kv_cache_dtype": "bf16"}, capsys)
    assert result["kv_bytes_per_token_per_gpu"] == 15360
    assert result["mamba_bytes_per_slot_per_gpu"] == 24007680
    assert result["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert result["pool"] is None
    assert [r["context_length"] for r in result["concurrency"]] == [32768, 131072]


def test_budget_auto_resolves_fp8(lab, capsys):
    result = run(kv_cache_budget, {"checkpoint": lab, "tp_size": 8, "mamba_ssm_dtype": "bfloat16",
                                   "free_memory_gib": 64.4, "total_memory_gib": 95.6, "mem_fraction_static": 0.85},
                 capsys)
    assert result["kv_cache_dtype_resolved"] == "fp8_e4m3"
    assert result["kv_bytes_per_token_per_gpu"] == 7680
    assert result["mamba_bytes_per_slot_per_gpu"] == 12211200
    assert result["pool"]["max_total_num_tokens"] > 3.6e6


def test_budget_from_model_config_with_observed_line(fixtures_dir, capsys):
    with open(fixtures_dir / "checkpoints" / "qwq-32b" / "config.json") as fh:
        config = json.load(fh)
    with open(fixtures_dir / "sglang-logs" / "001-qwq32b-tp4-l4-ready-2025-03.log") as fh:
        line = next(x for x in fh if "KV Cache is allocated" in x)
    result = run(kv_cache_budget, {"model_config": config, "tp_size": 4, "observed_pool": line}, capsys)
    assert result["kv_cache_dtype_resolved"] == "bfloat16"
    assert result["observed"]["inferred_kv_dtype"] == "bfloat16"
    assert result["observed"]["matches_expected"] is True


def test_budget_model_config_with_hf_quant_config(fixtures_dir, capsys):
    with open(fixtures_dir / "checkpoints" / "qwq-32b" / "config.json") as fh:
        config = json.load(fh)
    with open(fixtures_dir / "quant-configs" / "qc01-nvidia-Llama-3.3-70B-Instruct-FP4.hf_quant_config.json") as fh:
        hf = json.load(fh)
    result = run(kv_cache_budget, {"model_config": config, "hf_quant_config": hf, "tp_size": 4}, capsys)
    assert result["kv_cache_dtype_resolved"] == "fp8_e4m3"
    assert result["kv_bytes_per_token_per_gpu"] == 2 * 128 * 64 * 2 * 1


def test_budget_rejects_both_sources(lab, capsys):
    result = run(kv_cache_budget, {"checkpoint": lab, "model_config": {"num_hidden_layers": 1}}, capsys)
    assert result["failed"] is True and "mutually exclusive" in result["msg"]


def test_budget_unmodelled_dtype_fails_cleanly(lab, capsys):
    result = run(kv_cache_budget, {"checkpoint": lab, "tp_size": 8, "kv_cache_dtype": "nvfp4"}, capsys)
    assert result["failed"] is True and "block scales" in result["msg"]


def test_budget_bad_observed_pool_fails_cleanly(lab, capsys):
    result = run(kv_cache_budget, {"checkpoint": lab, "tp_size": 8, "observed_pool": "Load weight end."}, capsys)
    assert result["failed"] is True and "KV Cache is allocated" in result["msg"]


# --- the way Ansible runs it: AnsiballZ packs the module_utils ---------------------------------


def test_adhoc_run_through_ansible(lab, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(root, "collections"), ANSIBLE_LOCAL_TEMP=str(tmp_path),
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_CONFIG=str(cfg),
               ANSIBLE_HOME=str(tmp_path))
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    proc = subprocess.run([ansible, "localhost", "-i", "localhost,", "-c", "local", "-e",
                           "ansible_python_interpreter=" + sys.executable, "-m", "llmops.sglang.checkpoint_info",
                           "-a", json.dumps({"path": lab, "verify_shards": True, "sglang_python": sys.executable})],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert result["shards"]["ok"] is True
    # the probe's source travelled inside AnsiballZ and ran: it reports that this interpreter has no SGLang
    assert "SGLang is not importable by %s: ModuleNotFoundError" % sys.executable in result["sglang_auto"]["error"]


# --- the GPU (SGLang's architecture and GPU rules) ------------------------------------------------


def test_reference_deployment_is_decided_for_its_gpu(lab, capsys):
    """The RTX PRO 6000 (12.0) of the reference deployment: the same answer as for any GPU, now said to be for 12.0."""
    anywhere = run(checkpoint_info, {"path": lab}, capsys)
    result = run(checkpoint_info, {"path": lab, "gpu": {"compute_capability": "12.0", "count": 8}}, capsys)
    assert result["kv_cache_dtype_auto"] == anywhere["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert (result["kv_cache_dtype_auto_decided_for"], anywhere["kv_cache_dtype_auto_decided_for"]) == ("capability 12.0", "any GPU")
    assert result["quantization"]["kv_auto"]["gpu"] == {"compute_capability": "12.0", "count": 8}


def test_gpu_info_result_decides_deepseek_sparse_attention(fixtures_dir, capsys):
    shape = str(fixtures_dir / "checkpoint-shapes" / "s40-deepseek-v32-dsa-fp8-kv-by-gpu")
    h200 = {"gpu_count": 2, "gpus": [{"index": 0, "compute_capability": "9.0"}, {"index": 1, "compute_capability": "9.0"}]}
    result = run(checkpoint_info, {"path": shape, "gpu": h200}, capsys)
    assert result["kv_cache_dtype_auto"] == "bfloat16" and result["kv_cache_dtype_auto_decided_for"] == "capability 9.0"
    rules = result["quantization"]["kv_auto"]["rules"]
    assert {"rule": "deepseek-dsa-kv", "kind": "kv", "source": "sglang/srt/arg_groups/overrides.py:534"}.items() <= rules[0].items()
    blackwell = run(checkpoint_info, {"path": shape, "gpu": {"compute_capability": "12.0"}}, capsys)
    assert blackwell["kv_cache_dtype_auto"] == "fp8_e4m3"
    anywhere = run(checkpoint_info, {"path": shape}, capsys)
    assert anywhere["kv_cache_dtype_auto"] is None and anywhere["kv_cache_dtype_auto_decided_for"] == "any GPU"
    assert any("depends on the GPU" in n and "overrides.py:534" in n for n in anywhere["notes"])
    gptq = run(checkpoint_info, {"path": shape.replace("s40-deepseek-v32-dsa-fp8-kv-by-gpu", "s43-gptq-int4-marlin")}, capsys)
    assert gptq["kv_cache_dtype_auto"] == "float16"
    assert any("for any GPU" in n and "gptq/gptq.py:429" in n for n in gptq["notes"])
    # a host whose gpu_info found no GPU: the answer for any GPU, no failure
    none = run(checkpoint_info, {"path": shape, "gpu": {"gpu_count": 0, "gpus": []}}, capsys)
    assert none["kv_cache_dtype_auto_decided_for"] == "any GPU" and not none.get("failed")


def test_bad_gpu_is_a_clear_failure(lab, capsys):
    result = run(checkpoint_info, {"path": lab, "gpu": {"compute_capability": "twelve"}}, capsys)
    assert result["failed"] and "compute capability must look like '9.0'" in result["msg"]


def test_capability_refusal_is_named(fixtures_dir, capsys):
    shape = str(fixtures_dir / "checkpoint-shapes" / "s31-flat-mxfp8-scheme-fp8")
    result = run(checkpoint_info, {"path": shape, "gpu": {"compute_capability": "9.0"}}, capsys)
    assert result["kv_cache_dtype_auto"] is None
    assert any("would not start" in n and "Minimum capability: 100" in n for n in result["notes"])


def test_budget_takes_the_gpu(lab, capsys):
    result = run(kv_cache_budget, {"checkpoint": lab, "gpu": {"compute_capability": "12.0"}}, capsys)
    assert result["kv_cache_dtype_resolved"] == "fp8_e4m3" and result["kv_cache_dtype_auto_decided_for"] == "capability 12.0"
    gpt_oss = str(lab).replace("checkpoints/" + LAB, "checkpoint-shapes/s55-gpt-oss-mxfp4-float16-bf16-forced")
    forced = run(kv_cache_budget, {"checkpoint": gpt_oss, "gpu": {"compute_capability": "9.0"}}, capsys)
    assert forced["kv_cache_dtype_resolved"] == "bfloat16", forced.get("msg")


# --- the installed SGLang's own answer (sglang_python) ------------------------------------------


def test_sglang_answers_next_to_the_model(fixtures_dir, capsys, monkeypatch, sglang_python):
    python = sglang_python   # the project's venv as it is: the probe finds its torchvision itself
    shape = str(fixtures_dir / "checkpoint-shapes" / "r07-lab-nvfp4-flat-nokv")
    result = run(checkpoint_info, {"path": shape, "sglang_python": python}, capsys)
    assert not result.get("failed"), result.get("msg")
    side = result["sglang_auto"]
    assert side["error"] is None and side["sglang_version"] == "0.5.23" and side["agree"] is True
    assert side["sglang"]["kv_cache_dtype_auto"] == side["model"]["kv_cache_dtype_auto"] == "bfloat16"
    assert side["sglang"]["config_class"] == "ModelOptFp4Config"
    assert result["kv_cache_dtype_auto"] == result["kv_cache_dtype_auto_model"] == "bfloat16"


def test_missing_sglang_interpreter_is_a_note(lab, tmp_path, capsys):
    result = run(checkpoint_info, {"path": lab, "sglang_python": str(tmp_path / "venv" / "bin" / "python")}, capsys)
    assert not result.get("failed")
    assert "does not exist" in result["sglang_auto"]["error"]
    assert any(n.startswith("SGLang was not asked") for n in result["notes"])
    assert result["kv_cache_dtype_auto"] == "fp8_e4m3"


def test_sglang_required_fails_clearly(lab, capsys):
    result = run(checkpoint_info, {"path": lab, "sglang_python": sys.executable, "sglang_required": True}, capsys)
    assert result["failed"] is True
    assert "SGLang is not importable by %s" % sys.executable in result["msg"]


def test_disagreement_trusts_sglang(lab, capsys, monkeypatch):
    from ansible_collections.llmops.sglang.plugins.module_utils import _kv_auto

    def bf16_sglang(python, paths, timeout):
        answer = {"quantization": "modelopt_fp4", "config_class": "X", "kv_cache_dtype_auto": "bfloat16", "error": None}
        return {"sglang_version": "0.5.99", "answers": [answer]}
    monkeypatch.setattr(_kv_auto, "run_probe", bf16_sglang)
    result = run(checkpoint_info, {"path": lab, "sglang_python": sys.executable}, capsys)
    assert result["sglang_auto"]["agree"] is False
    assert (result["kv_cache_dtype_auto"], result["kv_cache_dtype_auto_model"]) == ("bfloat16", "fp8_e4m3")
    assert result["fp8_kv_with_unit_scales"] is False
    assert any("SGLang 0.5.99 answers --kv-cache-dtype auto -> bfloat16" in n for n in result["notes"])


# --- hostile files: clear errors, no tracebacks ------------------------------------------------


@pytest.mark.parametrize("name", ["config.json", "hf_quant_config.json", "model.safetensors.index.json"])
def test_deeply_nested_json_fails_cleanly(lab_copy, name, capsys):
    (lab_copy / name).write_text("[" * 100000 + "]" * 100000)
    result = run(checkpoint_info, {"path": str(lab_copy)}, capsys)
    assert result["failed"] is True
    assert name in result["msg"] and "nested deeper" in result["msg"] and "re-download" in result["msg"]


def test_nested_just_past_the_bound_fails_cleanly(lab_copy, capsys):
    (lab_copy / "hf_quant_config.json").write_text('{"a": ' * 65 + "1" + "}" * 65)
    result = run(checkpoint_info, {"path": str(lab_copy)}, capsys)
    assert result["failed"] is True and "nested more than 64 levels" in result["msg"]


def test_deeply_nested_safetensors_header_is_a_bad_shard(lab_copy, capsys):
    header = b"[" * 100000 + b"]" * 100000
    (lab_copy / SHARD3).write_bytes(struct.pack("<Q", len(header)) + header)
    result = run(checkpoint_info, {"path": str(lab_copy), "verify_shards": True}, capsys)
    assert result["failed"] is True
    assert SHARD3 in result["msg"] and "nested deeper" in result["msg"]


def test_oversized_json_refused_without_reading_it_whole(lab_copy, capsys, monkeypatch):
    from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint
    monkeypatch.setattr(_checkpoint, "MAX_JSON_BYTES", 1000)
    (lab_copy / "hf_quant_config.json").write_text(" " * 5000 + "{}")
    result = run(checkpoint_info, {"path": str(lab_copy)}, capsys)
    assert result["failed"] is True and "larger than" in result["msg"]


@pytest.mark.parametrize("value,shown", [(8, "is 8 (a int, not a string)"), (["FP8"], 'is ["FP8"] (a list'),
                                         ({"algo": "FP8"}, 'is {"algo": "FP8"}')])
def test_wrong_typed_kv_field_is_a_note_naming_it(lab_copy, capsys, value, shown):
    path = lab_copy / "hf_quant_config.json"
    hf = json.loads(path.read_text())
    hf["quantization"]["kv_cache_quant_algo"] = value
    path.write_text(json.dumps(hf))
    result = run(checkpoint_info, {"path": str(lab_copy)}, capsys)
    assert not result.get("failed")
    assert result["kv_cache_dtype_auto"] == "bfloat16"
    assert any("hf_quant_config.json quantization.kv_cache_quant_algo " + shown in n for n in result["notes"])


@pytest.mark.parametrize("name", ["config.json", "hf_quant_config.json", "model.safetensors.index.json"])
def test_a_fifo_in_a_checkpoint_files_place_fails_by_name_without_blocking(lab_copy, name, capsys):
    from odd_files import make_odd, within  # tests/unit/odd_files.py

    make_odd(lab_copy / name, "fifo")
    result, error = within(20, run, checkpoint_info, {"path": str(lab_copy)}, capsys)
    assert error is None and result["failed"] is True, (result, error)
    assert "%s at %s is a FIFO (named pipe), not a regular file" % (name, lab_copy / name) in result["msg"]
