"""KV-cache / Mamba budget math against published numbers and real SGLang pool lines."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.llmops.sglang.plugins.module_utils import _checkpoint as ck
from ansible_collections.llmops.sglang.plugins.module_utils import _kv_budget as kb

LAB = "qwen3.5-397b-a17b-nvfp4"


def _arch(fixtures_dir, name):
    with open(fixtures_dir / "checkpoints" / name / "config.json") as fh:
        return ck.parse_architecture(json.load(fh))


@pytest.fixture(scope="module")
def arch397(fixtures_dir):
    return _arch(fixtures_dir, LAB)


def _pool_lines(fixtures_dir, name):
    """Parsed 'KV Cache is allocated' lines of one real log, in order."""
    with open(fixtures_dir / "sglang-logs" / name, encoding="utf-8") as fh:
        parsed = [kb.parse_kv_pool_line(line) for line in fh]
    return [p for p in parsed if p]


def _mamba_line(fixtures_dir, name):
    with open(fixtures_dir / "sglang-logs" / name, encoding="utf-8") as fh:
        for line in fh:
            if "Mamba Cache is allocated." in line:
                fields = line.split("Mamba Cache is allocated.")[1]
                slots = int(fields.split("max_mamba_cache_size:")[1].split(",")[0])
                conv = float(fields.split("conv_state size:")[1].split("GB")[0])
                ssm = float(fields.split("ssm_state size:")[1].split("GB")[0])
                return slots, conv, ssm
    raise AssertionError("no Mamba line in %s" % name)


# --- dtype names -----------------------------------------------------------------------------


@pytest.mark.parametrize("name,size", [("bf16", 2), ("bfloat16", 2), ("torch.bfloat16", 2), ("float16", 2),
                                       ("fp8_e4m3", 1), ("fp8_e5m2", 1), ("torch.float8_e4m3fn", 1), ("FP8_E4M3", 1)])
def test_dtype_bytes(name, size):
    assert kb.dtype_bytes(name) == size


@pytest.mark.parametrize("name,match", [("auto", "must be resolved"), ("nvfp4", "block scales"),
                                        ("fp4_e2m1", "block scales"), ("int3", "not a known dtype"), (None, "not a known")])
def test_dtype_bytes_refuses(name, match):
    with pytest.raises(kb.BudgetError, match=match):
        kb.dtype_bytes(name)


# --- per-token KV bytes ----------------------------------------------------------------------


@pytest.mark.parametrize("tp,dtype,expected", [(8, "bf16", 15360), (8, "fp8_e4m3", 7680), (4, "bfloat16", 15360),
                                               (2, "bf16", 15360), (1, "bf16", 30720)])
def test_qwen35_397b_kv_bytes(arch397, tp, dtype, expected):
    cell = kb.kv_cell(arch397, tp, dtype)
    assert cell["bytes_per_token_per_gpu"] == expected
    assert cell["full_attention_layers"] == 15


def test_replication_beyond_kv_heads(arch397):
    # 2 KV heads over 8 GPUs: one (replicated) head per GPU, not a quarter of one.
    assert kb.kv_heads_per_rank(2, 8) == 1
    assert kb.kv_cell(arch397, 8, "bf16")["kv_heads_per_rank"] == 1
    assert kb.kv_cell(arch397, 1, "bf16")["kv_heads_per_rank"] == 2


def test_auto_follows_checkpoint(fixtures_dir):
    info = ck.inspect_checkpoint(str(fixtures_dir / "checkpoints" / LAB))
    auto = kb.plan(info["architecture"], 8, "auto", auto_dtype=info["kv_cache_dtype_auto"])
    assert auto["kv_cache_dtype_resolved"] == "fp8_e4m3"
    assert auto["kv_bytes_per_token_per_gpu"] == 7680
    with pytest.raises(kb.BudgetError, match="must be resolved"):
        kb.plan(info["architecture"], 8, "auto")


def test_ci_cross_check_qwen35_35b_tp4(fixtures_dir):
    # SGLang CI memory floor: 2,476,576 tokens x 10,240 B = 23.62 GiB of KV cache at TP4.
    cell = kb.kv_cell(_arch(fixtures_dir, "qwen3.5-35b-a3b"), 4, "bf16")
    assert cell["full_attention_layers"] == 10
    assert cell["bytes_per_token_per_gpu"] == 10240
    assert round(2476576 * cell["bytes_per_token_per_gpu"] / kb.GIB, 2) == 23.62


# --- Mamba state -----------------------------------------------------------------------------


def test_mamba_slot_397b_tp8(arch397):
    fp32 = kb.mamba_slot(arch397, 8, "float32")
    assert fp32["conv_dim"] == 12288
    assert (fp32["conv_bytes_per_layer"], fp32["ssm_bytes_per_layer"]) == (9216, 524288)
    assert fp32["bytes_per_slot_per_gpu"] == 24007680
    assert kb.mamba_slot(arch397, 8, "bfloat16")["bytes_per_slot_per_gpu"] == 12211200


def test_mamba_dtype_comes_from_config_unless_overridden(arch397):
    assert kb.plan(arch397, 8, "bf16")["mamba_bytes_per_slot_per_gpu"] == 24007680
    assert kb.plan(arch397, 8, "bf16", mamba_ssm_dtype="bfloat16")["mamba_bytes_per_slot_per_gpu"] == 12211200


def test_mamba_matches_real_log_005(fixtures_dir):
    # Qwen3.5-9B at TP2; the pool holds max_mamba_cache_size + 1 slots (one padding slot).
    slots, conv_gb, ssm_gb = _mamba_line(fixtures_dir, "005-qwen3.5-9b-hybrid-mamba-tp2-rtx4090-2026-04.log")
    slot = kb.mamba_slot(_arch(fixtures_dir, "qwen3.5-9b"), 2, "float32")
    assert round((slots + 1) * slot["ssm_bytes_per_slot_per_gpu"] / kb.GIB, 2) == ssm_gb
    assert round((slots + 1) * slot["conv_bytes_per_slot_per_gpu"] / kb.GIB, 2) == conv_gb


def test_mamba_absent_for_plain_models(fixtures_dir):
    result = kb.plan(_arch(fixtures_dir, "qwq-32b"), 4, "bf16")
    assert result["mamba"] is None and result["mamba_bytes_per_slot_per_gpu"] == 0


def test_tp_must_divide_linear_heads(arch397):
    with pytest.raises(kb.BudgetError, match="does not divide"):
        kb.mamba_slot(arch397, 3)


# --- pool capacity and concurrency -----------------------------------------------------------


def test_illustrative_rtx_pro_6000_budget(arch397):
    # 95.6 GiB visible, ~31.2 GiB weights + runtime, --mem-fraction-static 0.85, default ratio 0.9:
    # ~1,060 Mamba slots (fp32 SSM), ~1.85M bf16 KV tokens.
    result = kb.plan(arch397, 8, "bf16", free_memory_gib=95.6 - 31.2, total_memory_gib=95.6, mem_fraction_static=0.85)
    pool = result["pool"]
    assert round(pool["rest_gib"]) == 50
    assert abs(pool["mamba_slots"] - 1060) <= 5
    assert 1.80e6 < pool["max_total_num_tokens"] < 1.90e6
    assert round(pool["mamba_pool_gib"] / pool["rest_gib"], 3) == round(0.9 / 1.9, 3)
    bf16_ssm = kb.plan(arch397, 8, "bf16", mamba_ssm_dtype="bfloat16", free_memory_gib=64.4, total_memory_gib=95.6,
                       mem_fraction_static=0.85)["pool"]
    assert abs(bf16_ssm["mamba_slots"] - 2080) <= 10
    fp8 = kb.plan(arch397, 8, "fp8_e4m3", free_memory_gib=64.4, total_memory_gib=95.6, mem_fraction_static=0.85)["pool"]
    assert abs(fp8["max_total_num_tokens"] - 2 * pool["max_total_num_tokens"]) <= 1


def test_concurrency_from_deployment_numbers():
    # The reference deployment: ~1.28M bf16 tokens -> 9 full 128K contexts, 39 full 32K contexts.
    rows = kb.concurrency(15360, [32768, 131072], max_total_num_tokens=2565571 // 2)
    assert [r["kv_limited_requests"] for r in rows] == [39, 9]
    assert rows[1]["kv_gib_per_request"] == 131072 * 15360 / kb.GIB


def test_concurrency_limited_by_mamba(arch397):
    result = kb.plan(arch397, 8, "bf16", free_memory_gib=64.4, total_memory_gib=95.6, mem_fraction_static=0.85,
                     context_lengths=[4096], max_mamba_cache_size=48, mamba_slots_per_request=3)
    row = result["concurrency"][0]
    assert row["mamba_limited_requests"] == 16
    assert row["max_concurrent_requests"] == 16 < row["kv_limited_requests"]


def test_not_enough_memory(arch397):
    result = kb.plan(arch397, 8, "bf16", free_memory_gib=10, total_memory_gib=95.6, mem_fraction_static=0.85)
    assert result["pool"]["not_enough_memory"] is True
    assert result["pool"]["max_total_num_tokens"] == 0
    assert any("mem-fraction-static" in w for w in result["warnings"])


def test_memory_options_go_together(arch397):
    with pytest.raises(kb.BudgetError, match="needed together"):
        kb.plan(arch397, 8, "bf16", free_memory_gib=60)
    with pytest.raises(kb.BudgetError, match="mem_fraction_static"):
        kb.plan(arch397, 8, "bf16", free_memory_gib=60, total_memory_gib=95, mem_fraction_static=1.5)


def test_page_size_alignment(arch397):
    result = kb.plan(arch397, 8, "bf16", free_memory_gib=64.4, total_memory_gib=95.6, mem_fraction_static=0.85,
                     page_size=64)
    assert result["pool"]["max_total_num_tokens"] % 64 == 0


# --- reverse inference from real 'KV Cache is allocated' lines --------------------------------


def test_qwq32b_tp4_log_001_is_bf16(fixtures_dir):
    pools = _pool_lines(fixtures_dir, "001-qwq32b-tp4-l4-ready-2025-03.log")
    assert len(pools) == 4 and pools[0] == {"tokens": 46611, "dtype": None, "k_gb": 1.42, "v_gb": 1.42}
    arch = _arch(fixtures_dir, "qwq-32b")
    observed = kb.plan(arch, 4, "auto", auto_dtype="bfloat16", observed_pool=pools[0])["observed"]
    assert observed["inferred_kv_dtype"] == "bfloat16"
    assert abs(observed["bytes_per_element"] - 2.0) < 0.01
    assert observed["matches_expected"] is True
    # Asked for FP8: the same pool proves the server did not run it.
    wrong = kb.plan(arch, 4, "fp8_e4m3", observed_pool=pools[0])
    assert wrong["observed"]["matches_expected"] is False
    assert any("not running the KV dtype" in w for w in wrong["warnings"])


def test_qwen35_9b_tp2_log_005_is_bf16(fixtures_dir):
    pools = _pool_lines(fixtures_dir, "005-qwen3.5-9b-hybrid-mamba-tp2-rtx4090-2026-04.log")
    assert {p["tokens"] for p in pools} == {327310}
    observed = kb.infer_kv_dtype(pools[0], kb.kv_cell(_arch(fixtures_dir, "qwen3.5-9b"), 2, "bf16"))
    assert observed["inferred_kv_dtype"] == "bfloat16"
    assert observed["layers"] == 8


def test_raw_log_line_is_accepted(fixtures_dir):
    with open(fixtures_dir / "sglang-logs" / "001-qwq32b-tp4-l4-ready-2025-03.log") as fh:
        line = next(x for x in fh if "KV Cache is allocated" in x)
    observed = kb.plan(_arch(fixtures_dir, "qwq-32b"), 4, "bf16", observed_pool=line)["observed"]
    assert observed["tokens"] == 46611 and observed["inferred_kv_dtype"] == "bfloat16"


def test_zero_gb_pool_is_indeterminate(fixtures_dir):
    # 033: one-layer benchmark, 4096 tokens print as 0.00 GB.
    pools = _pool_lines(fixtures_dir, "033-h100-gpt-oss-20b-bench-one-batch-fp8-e5m2-kv-2025-09.log")
    observed = kb.infer_kv_dtype(pools[0], kb.kv_cell(_arch(fixtures_dir, "qwq-32b"), 1, "fp8_e5m2"))
    assert observed["inferred_kv_dtype"] is None and "0.00 GB" in observed["note"]


def test_pool_without_token_count_is_a_clean_error(fixtures_dir):
    pools = _pool_lines(fixtures_dir, "015-jetson-qwen2-old-kv-line-format-2025-03.log")
    assert pools[0]["tokens"] is None and pools[0]["k_gb"] == 24.48
    with pytest.raises(kb.BudgetError, match="no #tokens"):
        kb.infer_kv_dtype(pools[0], kb.kv_cell(_arch(fixtures_dir, "qwq-32b"), 1, "bf16"))


def test_mla_pool_line_parses_combined_size(fixtures_dir):
    pools = _pool_lines(fixtures_dir, "004-rocm-glm5-fp8-tp8-fp8kv-graph-crash-2026-02.log")
    assert len(pools) == 8 and pools[0] == {"tokens": 3262823, "dtype": None, "kv_gb": 186.77}


def test_newest_line_with_dtype():
    line = ("[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 454112, "
            "K size: 3.46 GB, V size: 3.46 GB")
    assert kb.parse_kv_pool_line(line) == {"tokens": 454112, "dtype": "float8_e4m3fn", "k_gb": 3.46, "v_gb": 3.46}


def test_pool_that_fits_no_dtype(arch397):
    observed = kb.infer_kv_dtype({"tokens": 1000000, "k_gb": 10.0}, kb.kv_cell(arch397, 8, "bf16"))
    assert observed["inferred_kv_dtype"] is None and "matches no dtype" in observed["note"]


def test_draft_pool_layers_override(arch397):
    # A NEXTN draft pool has one layer: 1 head x 256 x 1 layer x 2 B per token for K.
    tokens = 2000000
    k_gb = round((tokens + 1) * 256 * 2 / kb.GIB, 2)
    observed = kb.infer_kv_dtype({"tokens": tokens, "k_gb": k_gb, "layers": 1}, kb.kv_cell(arch397, 8, "bf16"))
    assert observed["inferred_kv_dtype"] == "bfloat16"


@settings(max_examples=300, deadline=None)
@given(tokens=st.integers(200000, 4000000), tp=st.sampled_from([1, 2, 4, 8]),
       dtype=st.sampled_from(["bf16", "fp8_e4m3"]), page=st.sampled_from([1, 16, 64]))
def test_printed_pools_round_trip(arch397, tokens, tp, dtype, page):
    # What SGLang would print (two decimals, one padding page) is inferred back to the dtype.
    cell = kb.kv_cell(arch397, tp, dtype)
    k_gb = round((tokens + page) * cell["k_bytes_per_token_per_gpu"] / kb.GIB, 2)
    observed = kb.infer_kv_dtype("KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB"
                                 % (tokens, k_gb, k_gb), cell)
    assert observed["inferred_kv_dtype"] == ("bfloat16" if dtype == "bf16" else "fp8")
    assert observed["matches_expected"] is True


ARCH_KEYS = st.sampled_from(["num_key_value_heads", "head_dim", "full_attention_layer_ids", "linear_attention_layer_ids",
                             "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                             "linear_value_head_dim", "linear_conv_kernel_dim", "mamba_ssm_dtype", "attention"])
ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 300), st.floats(), st.text(max_size=6),
                st.lists(st.integers(0, 80), max_size=5))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(ARCH_KEYS, ANY), st.one_of(st.integers(-2, 16), st.floats(), st.text(max_size=3)),
       st.sampled_from(["bf16", "fp8_e4m3", "auto", "nvfp4", "x"]),
       st.one_of(st.none(), st.text(max_size=40), st.dictionaries(st.sampled_from(["tokens", "k_gb", "kv_gb", "layers"]), ANY)))
def test_random_arch_only_clean_errors(arch397, mutation, tp, dtype, observed):
    arch = dict(arch397)
    arch.update(mutation)
    try:
        result = kb.plan(arch, tp, dtype, auto_dtype="bfloat16", observed_pool=observed,
                         free_memory_gib=64.4, total_memory_gib=95.6, mem_fraction_static=0.85)
    except kb.BudgetError as exc:
        assert str(exc)
        return
    assert result["kv_bytes_per_token_per_gpu"] > 0


@pytest.mark.parametrize("option,value,match", [
    ("free_memory_gib", 1e308, "free_memory_gib must be a number between 0 and 65536, found 1e+308"),
    ("total_memory_gib", float("inf"), "total_memory_gib must be a number between 0 and 65536, found inf"),
    ("free_memory_gib", float("nan"), "free_memory_gib must be a number between 0 and 65536, found nan"),
    ("mem_fraction_static", 1e308, "mem_fraction_static must be a number between 0 and 1, found 1e+308"),
    ("mamba_full_memory_ratio", 1e308, "mamba_full_memory_ratio must be a number between 0 and 1000"),
    ("max_mamba_cache_size", 10 ** 400, "max_mamba_cache_size must be an integer between 1 and 1099511627776"),
    ("page_size", 10 ** 20, "page_size must be an integer between 1 and"),
])
def test_out_of_range_memory_inputs_name_the_option_and_range(arch397, option, value, match):
    # 1e308 GiB once overflowed to inf, then NaN tokens: "cannot convert float NaN to integer"
    args = dict(free_memory_gib=64.4, total_memory_gib=95.6, mem_fraction_static=0.85)
    args[option] = value
    if option == "free_memory_gib" and value == 1e308:
        args["total_memory_gib"] = 1e308
    with pytest.raises(kb.BudgetError, match=match.replace("(", "\\(").replace("+", "\\+")):
        kb.plan(arch397, 8, "bf16", **args)


def test_huge_model_config_numbers_are_refused(arch397):
    arch = dict(arch397, head_dim=10 ** 400)
    with pytest.raises(kb.BudgetError, match="head_dim must be an integer between 1 and"):
        kb.plan(arch, 8, "bf16", context_lengths=[131072])
    arch = dict(arch397, linear_attention_layer_ids=None, num_linear_attention_layers=10 ** 400)
    with pytest.raises(kb.BudgetError, match="num_linear_attention_layers must be an integer between 1 and"):
        kb.plan(arch, 8, "bf16")


@pytest.mark.parametrize("value", ["262144", None, True, [1], 1.5])
def test_a_max_position_embeddings_that_is_not_an_int_is_not_compared(arch397, value):
    # a string here raised "'>' not supported between instances of 'int' and 'str'"
    result = kb.plan(dict(arch397, max_position_embeddings=value), 8, "bf16", context_lengths=[1048576])
    assert result["concurrency"][0]["exceeds_max_position_embeddings"] is False and result["warnings"] == []
