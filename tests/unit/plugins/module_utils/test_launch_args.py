# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_launch_args: the flags of an SGLang launch command, and a command line given as one string split by the one
ExecStart= reader (_systemd_exec), so the guard reads a unit and a string alike."""

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _launch_args as la
from ansible_collections.llmops.sglang.plugins.module_utils import _systemd_exec as se


def test_launch_command_flag_forms():
    words = "--model-path /m --kv-cache-dtype fp8_e4m3 --tp-size 8 --kv-cache-dtype=bf16".split()
    assert la.launch_kv_flag(words)[:2] == ("bf16", "--kv-cache-dtype=bf16")  # argparse: the last one wins
    assert la.launch_kv_flag(["--model-path", "/m"]) == (None, None, None)
    value, _form, problem = la.launch_kv_flag(["--kv-cache-dt", "bf16"])
    assert value is None and "abbreviates --kv-cache-dtype" in problem


@pytest.mark.parametrize("words", [
    ["python3", "-m", "sglang.launch_server", "--model-path", "/models/with space", "--kv-cache-dtype", "bf16"],
    ["/opt/sglang/bin/python", "-m", "sglang.launch_server", "--model-path", 'it\'s "here"', "--tp", "2"],
    ["python", "-m", "sglang.launch_server", "--model-path", "/m\\n", "--served-model-name", "a;b"],
])
def test_a_command_line_as_one_string_reads_as_its_unit_would(words):
    line = se.command_line(words)
    assert la.launch_words([line]) == se.unit_commands("[Service]\nExecStart=" + line)[0]["argv"] == words
    assert la.launch_words(["/bin/sh", "-c", line]) == ["/bin/sh", "-c"] + words


def test_a_quote_left_open_splits_at_whitespace():
    assert la.launch_words(["python -m sglang.launch_server --model-path '/m"]) == [
        "python", "-m", "sglang.launch_server", "--model-path", "'/m"]


def test_each_element_of_a_list_is_one_word():
    assert la.launch_words(["python", "a b", "", 8]) == ["python", "a b", "8"]


def test_parse_launch_argv_reads_backends_and_positive_tp_only():
    got = la.parse_launch_argv(["python", "-m", "sglang.launch_server", "--tp", "0", "--attention-backend=fa3",
                                "--decode-attention-backend", "tokenspeed_mla"])
    assert got["tp_size"] is None and got["sglang"] is True
    assert got["backends"] == {"--attention-backend": "fa3", "--decode-attention-backend": "tokenspeed_mla"}
    assert la.parse_launch_argv(7)["problem"] == "argv must be a list of strings, got int"
