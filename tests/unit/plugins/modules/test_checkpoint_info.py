"""checkpoint_info and kv_cache_budget modules, run through AnsibleModule with real inputs."""

import json
import os
import shutil
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
                           "-a", json.dumps({"path": lab, "verify_shards": True})],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert result["shards"]["ok"] is True
