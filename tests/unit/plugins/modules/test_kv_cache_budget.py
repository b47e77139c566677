# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kv_cache_budget's entry point as Ansible runs it, on the lab checkpoint: numbers out of range are a clear failure."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import kv_cache_budget


def run(args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            kv_cache_budget.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def checkpoint(fixtures_dir):
    return str(fixtures_dir / "checkpoints" / "qwen3.5-397b-a17b-nvfp4")


def test_budget_of_the_lab_checkpoint(checkpoint, capsys):
    res = run({"checkpoint": checkpoint, "tp_size": 8, "kv_cache_dtype": "bf16", "free_memory_gib": 64.4,
               "total_memory_gib": 95.6, "mem_fraction_static": 0.85}, capsys)
    assert not res.get("failed"), res.get("msg")
    assert res["pool"]["max_total_num_tokens"] > 0 and res["kv_bytes_per_token_per_gpu"] > 0


@pytest.mark.parametrize("free,total,match", [
    ("1e308", "1e308", "free_memory_gib must be a number between 0 and 65536, found 1e+308"),
    (64.4, "inf", "total_memory_gib must be a number between 0 and 65536, found inf"),
    ("nan", 95.6, "free_memory_gib must be a number between 0 and 65536, found nan"),
])
def test_memory_out_of_range_is_a_clear_failure(checkpoint, capsys, free, total, match):
    res = run({"checkpoint": checkpoint, "tp_size": 8, "kv_cache_dtype": "bf16", "free_memory_gib": free,
               "total_memory_gib": total, "mem_fraction_static": 0.85}, capsys)
    assert res["failed"] is True and res["msg"] == match
