"""Checkpoint reader: quant-config layouts, architecture, KV scales, shard verification."""

import copy
import json
import os
import shutil
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint as ck

LAB = "qwen3.5-397b-a17b-nvfp4"
SHARD2 = "model-00002-of-00004.safetensors"


@pytest.fixture
def ckpt_dir(fixtures_dir):
    return fixtures_dir / "checkpoints"


@pytest.fixture
def quant_dir(fixtures_dir):
    return fixtures_dir / "quant-configs"


@pytest.fixture
def lab_copy(ckpt_dir, tmp_path):
    dst = tmp_path / LAB
    shutil.copytree(ckpt_dir / LAB, dst)
    return dst


def _load(path):
    with open(path) as fh:
        return json.load(fh)


# --- quant-config layouts (real samples) ------------------------------------------------------


def test_qc01_nested_fp8_kv(quant_dir):
    parsed = ck.parse_quant_config(_load(quant_dir / "qc01-nvidia-Llama-3.3-70B-Instruct-FP4.hf_quant_config.json"),
                                   ck.HF_QUANT_JSON)
    assert parsed["layout"] == "nested"
    assert parsed["quant_algo"] == "NVFP4"
    assert parsed["kv_cache_quant_algo"] == "FP8"
    assert parsed["kv_cache_quant_key"] == "quantization.kv_cache_quant_algo"
    assert parsed["group_size"] == 16
    assert parsed["exclude_modules"] == ["lm_head"]
    assert parsed["producer"] == {"name": "modelopt", "version": "0.23.0"}
    assert parsed["sglang_method"] == "modelopt_fp4"


def test_qc02_nested_kv_null_keeps_excludes(quant_dir):
    parsed = ck.parse_quant_config(_load(quant_dir / "qc02-deepseek-r1-style-nvfp4-kvnull.hf_quant_config.TRIMMED.json"),
                                   ck.HF_QUANT_JSON)
    assert parsed["kv_cache_quant_algo"] is None
    assert parsed["exclude_modules"][0] == "lm_head"
    assert parsed["exclude_modules"][-1] == "model.norm"
    assert "model.layers.9.mlp.gate" in parsed["exclude_modules"]
    quant = ck.resolve_quantization({"torch_dtype": "bfloat16"},
                                    _load(quant_dir / "qc02-deepseek-r1-style-nvfp4-kvnull.hf_quant_config.TRIMMED.json"))
    assert quant["kv_cache_dtype_auto"] == "bfloat16"
    assert quant["source"] == ck.HF_QUANT_JSON


def test_qc06_quantization_config_with_nested_block(quant_dir):
    # quant_method beside a nested "quantization" block, KV null at the outer level.
    block = _load(quant_dir / "qc06-gemma-4-26B-A4B-it-NVFP4-modelopt-converted.config-quantization_config.json")
    parsed = ck.parse_quant_config(block["quantization_config"], "config.json:quantization_config")
    assert parsed["layout"] == "nested"
    assert parsed["quant_method"] == "modelopt"
    assert parsed["quant_algo"] == "NVFP4"
    assert parsed["kv_cache_quant_algo"] is None
    assert parsed["exclude_modules"] == ["lm_head", "model.language_model.layers.*.self_attn*"]
    assert parsed["sglang_method"] == "modelopt_fp4"


def test_qc06_qc07_pair_resolves_to_model_dtype(quant_dir):
    config = _load(quant_dir / "qc06-gemma-4-26B-A4B-it-NVFP4-modelopt-converted.config-quantization_config.json")
    config["torch_dtype"] = "bfloat16"
    hf = _load(quant_dir / "qc07-gemma-4-26B-A4B-it-NVFP4-modelopt-converted.hf_quant_config.json")
    quant = ck.resolve_quantization(config, hf, "bfloat16")
    assert quant["source"] == "config.json:quantization_config"
    assert quant["hf_quant_config_json"]["producer"]["version"] == "0.37.0"
    assert quant["kv_cache_quant_algo"] is None
    assert quant["kv_cache_dtype_auto"] == "bfloat16"


def test_qc01_alone_makes_auto_fp8(quant_dir):
    hf = _load(quant_dir / "qc01-nvidia-Llama-3.3-70B-Instruct-FP4.hf_quant_config.json")
    quant = ck.resolve_quantization({"torch_dtype": "bfloat16"}, hf, "bfloat16")
    assert quant["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert quant["kv_cache_quant_source"] == "hf_quant_config.json (quantization.kv_cache_quant_algo)"


def test_flat_kv_cache_scheme_is_fp8():
    parsed = ck.parse_quant_config({"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"],
                                    "config_groups": {"g": {"weights": {"group_size": 16}}},
                                    "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}, "x")
    assert (parsed["layout"], parsed["kv_cache_quant_algo"], parsed["kv_cache_quant_key"]) == ("flat", "FP8", "kv_cache_scheme")
    assert parsed["group_size"] == 16 and parsed["exclude_modules"] == ["lm_head"]
    int8 = ck.parse_quant_config({"quant_algo": "NVFP4", "kv_cache_scheme": {"num_bits": 8, "type": "int"}}, "x")
    assert int8["kv_cache_quant_algo"] is None


@pytest.mark.parametrize("algo,expected", [("FP8", "fp8_e4m3"), ("fp8", "fp8_e4m3"), ("NVFP4", "bfloat16"),
                                           (None, "bfloat16"), ("", "bfloat16")])
def test_auto_resolution_rule(algo, expected):
    assert ck.resolve_kv_cache_dtype_auto(algo, "bfloat16") == expected


def test_mixed_precision_method():
    parsed = ck.parse_quant_config({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}, "x")
    assert parsed["sglang_method"] == "modelopt_mixed"


# --- lab checkpoint and its variants ----------------------------------------------------------


def test_lab_architecture(ckpt_dir):
    info = ck.inspect_checkpoint(str(ckpt_dir / LAB))
    arch = info["architecture"]
    assert arch["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    assert arch["text_model_type"] == "qwen3_5_moe_text"
    assert arch["num_hidden_layers"] == 60
    assert arch["full_attention_layer_ids"] == list(range(3, 60, 4))
    assert arch["num_linear_attention_layers"] == 45
    assert (arch["num_key_value_heads"], arch["head_dim"]) == (2, 256)
    assert [arch[k] for k in ck.LINEAR_DIM_KEYS] == [16, 64, 128, 128, 4]
    assert (arch["torch_dtype"], arch["max_position_embeddings"], arch["num_experts"]) == ("bfloat16", 262144, 512)
    assert arch["mamba_ssm_dtype"] == "float32"


def test_lab_quantization_and_auto_kv(ckpt_dir):
    info = ck.inspect_checkpoint(str(ckpt_dir / LAB))
    quant = info["quantization"]
    assert (quant["method"], quant["quant_algo"], quant["group_size"]) == ("modelopt_fp4", "NVFP4", 16)
    assert quant["producer"]["version"] == "0.42.0"
    assert "model.visual*" in quant["exclude_modules"]
    assert info["kv_cache_quant_algo"] == "FP8"
    assert info["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert info["kv_scales_present"] is False
    assert info["fp8_kv_with_unit_scales"] is True
    assert any("scale 1.0" in w for w in info["warnings"])


def test_interval_gives_same_layers_as_layer_types(ckpt_dir):
    config = _load(ckpt_dir / LAB / "config.json")
    from_list = ck.parse_architecture(config)
    del config["text_config"]["layer_types"]
    from_interval = ck.parse_architecture(config)
    assert from_interval["layer_types_from"] == "full_attention_interval"
    assert from_interval["full_attention_layer_ids"] == from_list["full_attention_layer_ids"]
    assert from_interval["linear_attention_layer_ids"] == from_list["linear_attention_layer_ids"]


def test_kv_null_variant(ckpt_dir):
    info = ck.inspect_checkpoint(str(ckpt_dir / (LAB + "-kvnull")))
    assert info["kv_cache_quant_algo"] is None
    assert info["kv_cache_dtype_auto"] == "bfloat16"
    assert info["fp8_kv_with_unit_scales"] is False


def test_flat_variant_reads_config_json_first(ckpt_dir):
    info = ck.inspect_checkpoint(str(ckpt_dir / (LAB + "-flat")))
    assert info["quantization"]["source"] == "config.json:quantization_config"
    assert info["kv_cache_quant_source"] == "config.json:quantization_config (kv_cache_scheme)"
    assert info["kv_cache_dtype_auto"] == "fp8_e4m3"
    assert info["quantization"]["exclude_modules"][0] == "lm_head"


def test_flat_without_kv_ignores_hf_quant_config(ckpt_dir):
    # SGLang 0.5.23 builds the quant config from config.json's block alone: hf_quant_config.json's FP8 is not read.
    info = ck.inspect_checkpoint(str(ckpt_dir / (LAB + "-flat-nokv")))
    quant = info["quantization"]
    assert quant["source"] == "config.json:quantization_config"
    assert quant["kv_auto"]["config_class"] == "ModelOptFp4Config"
    assert info["kv_cache_quant_source"] is None
    assert quant["kv_cache_dtype_auto"] == quant["kv_cache_dtype_auto_without_hf_fallback"] == "bfloat16"
    assert any("hf_quant_config.json says KV FP8 but SGLang 0.5.23 reads config.json" in w for w in info["warnings"])


def test_plain_model_head_dim_from_hidden_size(ckpt_dir):
    arch = ck.parse_architecture(_load(ckpt_dir / "qwq-32b" / "config.json"))
    assert arch["head_dim"] == 128  # 5120 / 40, no head_dim key
    assert arch["num_full_attention_layers"] == 64 and arch["linear_attention_layer_ids"] == []


# --- KV scale tensors -------------------------------------------------------------------------


def test_kv_scale_names():
    names = ["a.self_attn.k_proj.k_scale", "a.self_attn.v_proj.v_scale", "b.attn.kv_scale", "c.attn_k_scale",
             "x.weight_scale", "x.weight_scale_2", "x.input_scale", "mask_scale", 7]
    scales = ck.kv_scale_tensors(names)
    assert (scales["k_scale"], scales["v_scale"], scales["kv_scale"]) == (2, 1, 1)
    assert scales["present"] is True


def test_kv_scales_found_in_index(lab_copy):
    index_path = lab_copy / ck.INDEX_JSON
    index = _load(index_path)
    base = "model.language_model.layers.3.self_attn."
    index["weight_map"][base + "k_proj.k_scale"] = "model-00003-of-00004.safetensors"
    index["weight_map"][base + "v_proj.v_scale"] = "model-00003-of-00004.safetensors"
    index_path.write_text(json.dumps(index))
    info = ck.inspect_checkpoint(str(lab_copy))
    assert info["kv_scales_present"] is True
    assert info["kv_scale_tensors"]["k_scale"] == 1 and info["kv_scale_tensors"]["v_scale"] == 1
    assert info["fp8_kv_with_unit_scales"] is False
    # The shard header does not hold the added tensors: flagged as a stale shard.
    assert info["shards"]["ok"] is False
    assert "model-00003-of-00004.safetensors lacks 2 tensor(s)" in " ".join(info["shards"]["problems"])


# --- shards ----------------------------------------------------------------------------------


def test_complete_checkpoint_is_ok(ckpt_dir):
    shards = ck.inspect_checkpoint(str(ckpt_dir / LAB))["shards"]
    assert shards["ok"] is True and shards["count"] == 4
    assert shards["index_total_size"] == sum(f["data_bytes"] for f in shards["files"])
    for rec in shards["files"]:
        assert rec["size_bytes"] == os.path.getsize(rec["path"]) == rec["expected_bytes"]


def test_missing_shard_named(lab_copy):
    os.remove(lab_copy / SHARD2)
    shards = ck.inspect_checkpoint(str(lab_copy))["shards"]
    assert shards["ok"] is False
    assert shards["missing"] == [SHARD2]
    assert SHARD2 in shards["problems"][0]


def test_truncated_shard_named(lab_copy):
    path = lab_copy / SHARD2
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) - 3)
    shards = ck.inspect_checkpoint(str(lab_copy))["shards"]
    assert shards["truncated"] == [SHARD2]
    assert "truncated" in shards["problems"][0] and SHARD2 in shards["problems"][0]


def test_shard_cut_inside_header_named(lab_copy):
    path = lab_copy / SHARD2
    with open(path, "r+b") as fh:
        fh.truncate(40)
    shards = ck.inspect_checkpoint(str(lab_copy))["shards"]
    assert shards["truncated"] == [SHARD2]


def test_empty_shard_named(lab_copy):
    (lab_copy / SHARD2).write_bytes(b"")
    shards = ck.inspect_checkpoint(str(lab_copy))["shards"]
    assert shards["truncated"] == [SHARD2]
    assert [f["status"] for f in shards["files"] if f["name"] == SHARD2] == ["empty"]


def test_expected_sizes(lab_copy):
    size = os.path.getsize(lab_copy / SHARD2)
    shards = ck.inspect_checkpoint(str(lab_copy), expected_sizes={SHARD2: size + 100})["shards"]
    assert shards["truncated"] == [SHARD2]
    shards = ck.inspect_checkpoint(str(lab_copy), expected_sizes={SHARD2: size - 1})["shards"]
    assert [f["status"] for f in shards["files"] if f["name"] == SHARD2] == ["size_mismatch"]
    assert ck.inspect_checkpoint(str(lab_copy), expected_sizes={SHARD2: size})["shards"]["ok"] is True
    with pytest.raises(ck.CheckpointError, match="byte count"):
        ck.inspect_checkpoint(str(lab_copy), expected_sizes={SHARD2: "big"})


def test_total_size_blames_shards_without_header(tmp_path):
    # Non-safetensors shards: only metadata.total_size can tell they are short.
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8}))
    (tmp_path / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "b.bin").write_bytes(b"x" * 10)
    (tmp_path / ck.INDEX_JSON).write_text(json.dumps({"metadata": {"total_size": 100},
                                                      "weight_map": {"w1": "a.bin", "w2": "b.bin"}}))
    shards = ck.inspect_checkpoint(str(tmp_path))["shards"]
    assert shards["truncated"] == ["a.bin", "b.bin"]
    (tmp_path / ck.INDEX_JSON).write_text(json.dumps({"metadata": {"total_size": 20},
                                                      "weight_map": {"w1": "a.bin", "w2": "b.bin"}}))
    assert ck.inspect_checkpoint(str(tmp_path))["shards"]["ok"] is True


def test_single_safetensors_without_index(tmp_path):
    header = json.dumps({"lm_head.weight": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                         "model.layers.0.self_attn.k_proj.k_scale": {"dtype": "F32", "shape": [], "data_offsets": [4, 8]}}).encode()
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8}))
    (tmp_path / ck.SINGLE_SHARD).write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    info = ck.inspect_checkpoint(str(tmp_path))
    assert info["shards"]["source"] == ck.SINGLE_SHARD and info["shards"]["ok"] is True
    assert info["kv_scale_tensors"]["k_scale"] == 1


def test_index_rejects_escaping_shard_names(lab_copy):
    index = _load(lab_copy / ck.INDEX_JSON)
    index["weight_map"]["lm_head.weight"] = "../../etc/passwd"
    (lab_copy / ck.INDEX_JSON).write_text(json.dumps(index))
    with pytest.raises(ck.CheckpointError, match="not a shard file name"):
        ck.inspect_checkpoint(str(lab_copy))


# --- errors name the file and the fix ---------------------------------------------------------


def test_missing_directory(tmp_path):
    with pytest.raises(ck.CheckpointError, match="does not exist: stage the checkpoint"):
        ck.inspect_checkpoint(str(tmp_path / "nope"))


def test_path_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ck.CheckpointError, match="is not a directory"):
        ck.inspect_checkpoint(str(tmp_path / "f"))


def test_missing_config(tmp_path):
    with pytest.raises(ck.CheckpointError, match="config.json not found"):
        ck.inspect_checkpoint(str(tmp_path))


@pytest.mark.parametrize("name", ["config.json", "hf_quant_config.json", "model.safetensors.index.json"])
def test_invalid_json_names_file(lab_copy, name):
    (lab_copy / name).write_text('{"quantization": {"quant_algo": "NVFP4",')
    with pytest.raises(ck.CheckpointError) as err:
        ck.inspect_checkpoint(str(lab_copy))
    assert name in str(err.value) and "re-download" in str(err.value)


def test_json_array_rejected(lab_copy):
    (lab_copy / "hf_quant_config.json").write_text("[1, 2]")
    with pytest.raises(ck.CheckpointError, match="must hold a JSON object"):
        ck.inspect_checkpoint(str(lab_copy))


def test_unreadable_config(lab_copy):
    os.remove(lab_copy / "config.json")
    os.mkdir(lab_copy / "config.json")
    with pytest.raises(ck.CheckpointError, match="config.json .* is a directory"):
        ck.inspect_checkpoint(str(lab_copy))


def test_inconsistent_layer_types(ckpt_dir):
    config = _load(ckpt_dir / LAB / "config.json")
    config["text_config"]["num_hidden_layers"] = 61
    with pytest.raises(ck.CheckpointError, match="layer_types has 60 entries but num_hidden_layers is 61"):
        ck.parse_architecture(config)


# --- property tests: any config dict gives a result or a CheckpointError ----------------------

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
JSON = st.recursive(JSON_LEAF, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                    max_leaves=12)
KEYS = st.sampled_from(["num_hidden_layers", "layer_types", "full_attention_interval", "num_key_value_heads",
                        "head_dim", "hidden_size", "num_attention_heads", "linear_num_value_heads",
                        "linear_conv_kernel_dim", "dtype", "torch_dtype", "mamba_ssm_dtype", "text_config",
                        "quantization_config", "kv_lora_rank", "max_position_embeddings", "architectures"])
SMALL_INT = st.integers(-3, 70)
VALUE = st.one_of(JSON, SMALL_INT, st.lists(st.sampled_from(["full_attention", "linear_attention", "x"]), max_size=70))


def _describe(config, hf=None):
    try:
        arch, quant = ck.describe_config(config, hf)
    except ck.CheckpointError as exc:
        assert str(exc)
        return None
    assert isinstance(arch["full_attention_layer_ids"], list)
    if quant["kv_auto"]["refused"]:
        assert quant["kv_cache_dtype_auto"] is None
        assert any("would not start" in w for w in quant["warnings"])
    else:
        assert quant["kv_cache_dtype_auto"] in ("fp8_e4m3", "bfloat16", "float16", "float32")
    return arch


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, VALUE, max_size=8), st.one_of(st.none(), st.dictionaries(st.text(max_size=6), JSON, max_size=4)))
def test_random_configs_never_crash(config, hf):
    _describe(config, hf)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_lab_config_never_crashes(data):
    here = os.path.dirname(__file__)
    base = os.path.join(here, "..", "..", "..", "fixtures", "checkpoints", LAB)
    config = _load(os.path.join(base, "config.json"))
    hf = _load(os.path.join(base, "hf_quant_config.json"))
    config = copy.deepcopy(config)
    for _step in range(data.draw(st.integers(1, 4))):
        # Mutations may replace a nested block, so pick among the dicts still present.
        targets = [d for d in (config, config.get("text_config"), hf, hf.get("quantization")) if isinstance(d, dict)]
        target = data.draw(st.sampled_from(targets))
        key = data.draw(st.one_of(KEYS, st.sampled_from(sorted(target) or ["x"]), st.sampled_from(
            ["quant_algo", "kv_cache_quant_algo", "kv_cache_scheme", "exclude_modules", "ignore", "group_size",
             "quantization", "producer", "config_groups"])))
        if data.draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = data.draw(VALUE)
    _describe(config, hf)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["quant_algo", "quant_method", "kv_cache_quant_algo", "kv_cache_scheme",
                                        "quantization", "ignore", "producer", "config_groups", "group_size"]), JSON))
def test_random_quant_blocks_never_crash(block):
    parsed = ck.parse_quant_config(block, "x")
    assert parsed["kv_cache_quant_algo"] is None or isinstance(parsed["kv_cache_quant_algo"], str)
    assert all(isinstance(m, str) for m in parsed["exclude_modules"])


# ---------------------------------------------------------------------------------------------
# A FIFO, socket or device in a checkpoint file's place is refused by name, and nothing blocks on it


@pytest.mark.parametrize("kind", ["fifo", "socket", "dev_zero"])
@pytest.mark.parametrize("name", ["config.json", "hf_quant_config.json", "model.safetensors.index.json"])
def test_a_checkpoint_file_that_is_not_a_regular_file_is_refused_without_blocking(lab_copy, name, kind):
    from odd_files import make_odd, within  # tests/unit/odd_files.py

    make_odd(lab_copy / name, kind)
    _info, error = within(10, ck.inspect_checkpoint, str(lab_copy))
    assert isinstance(error, ck.CheckpointError), error
    assert "%s at %s is a" % (name, lab_copy / name) in str(error)
    assert "not a regular file, and was not opened: remove it and stage the real %s there" % name in str(error)


@pytest.mark.parametrize("kind", ["fifo", "socket", "dev_zero"])
def test_a_shard_that_is_not_a_regular_file_is_unreadable_by_name(lab_copy, kind):
    from odd_files import make_odd, within  # tests/unit/odd_files.py

    make_odd(lab_copy / SHARD2, kind)
    info, error = within(10, ck.inspect_checkpoint, str(lab_copy))
    assert error is None and not info["shards"]["ok"]
    rec = [r for r in info["shards"]["files"] if r["name"] == SHARD2][0]
    assert rec["status"] == "unreadable" and "not a regular file, and was not opened" in rec["problem"]
    with pytest.raises(ck.CheckpointError, match="shard %s at .* is a .*not a regular file" % SHARD2):
        ck.read_safetensors_header(str(lab_copy / SHARD2))
