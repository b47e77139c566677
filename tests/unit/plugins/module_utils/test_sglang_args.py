# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_sglang_args: secret handling, hints, and the checker run against real interpreters.

The checks against SGLang's real parser are in tests/unit/plugins/modules/test_sglang_args_check.py (they
need the venv made by tests/lab/bin/make-sglang-venv). Here the checker script runs with this test
interpreter and a tiny stand-in ``sglang`` package written to a temp dir, to exercise the parts that do
not depend on SGLang's option list.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _sglang_args as sa


@pytest.mark.parametrize("flag", ["--api-key", "--admin-api-key", "--hf-token", "--ssl-keyfile-password", "--client_secret",
                                  "--db-passwd", "--apikey"])
def test_secret_flags(flag):
    assert sa.is_secret_flag(flag)


@pytest.mark.parametrize("flag", ["--max-total-tokens", "--tokenizer-path", "--ssl-keyfile", "--kv-cache-dtype",
                                  "--skip-tokenizer-init", "--keyring-dir"])
def test_not_secret_flags(flag):
    assert not sa.is_secret_flag(flag)


def test_secret_positions_and_values():
    args = ["--api-key", "k1", "--port", "30000", "--admin-api-key=k2", "--hf-token", "--enable-metrics", "--tp", "8"]
    positions = sa.secret_positions(args)
    # --hf-token is followed by another flag, so it has no value to hide
    assert positions == [(1, False), (4, True)]
    assert sa.secret_values(args, positions) == ["k1", "k2"]


def test_mask_replaces_secrets_everywhere_longest_first():
    data = {"a": ["x abcdef y", {"abc": "abc"}], "n": 3, "b": None}
    masked = sa.mask(data, ["abc", "abcdef"])
    assert masked == {"a": ["x %s y" % sa.MASK, {sa.MASK: sa.MASK}], "n": 3, "b": None}
    assert sa.mask(data, []) is data


def test_interpret_builds_hints_and_masks(monkeypatch):
    args = ["--kv-cache-dtype", "bf61", "--mamba-scheduler-strategy", "extra_buffer", "--api-k", "hunter2", "--kv-cache-dtype=fp4_e2m1"]
    choices = ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_mx_block16"]
    raw = {
        "sglang_version": "0.5.23", "python_version": "3.11.7",
        "errors": [
            {"flag": "--kv-cache-dtype", "option": "--kv-cache-dtype", "value": "bf61", "kind": "invalid_choice", "choices": choices,
             "problem": "invalid choice: 'bf61' (choose from 'auto', 'fp8_e5m2')", "close_matches": []},
            {"flag": "--mamba-scheduler-strategy", "option": None, "value": "extra_buffer", "kind": "unrecognized", "choices": None,
             "problem": "unrecognized argument", "close_matches": [],
             "rename": {"new": "--mamba-radix-cache-strategy", "choices": ["auto", "extra_buffer"], "value_valid": True}},
            {"flag": "--kv-cache-dtype", "option": "--kv-cache-dtype", "value": "fp4_e2m1", "kind": "invalid_choice", "choices": choices,
             "problem": "invalid choice: 'fp4_e2m1' (choose from 'auto')", "close_matches": []},
        ],
        # the checker reports where the value of the abbreviated --api-key is; the name alone does not say
        "parsed": {"note": "hunter2 leaked"}, "secret_positions": [[5, False]], "deprecated": [],
    }
    result, secrets = sa.interpret(raw, args)
    assert secrets == ["hunter2"]
    assert result["valid"] is False and result["parsed"] == {"note": "%s leaked" % sa.MASK}
    bad, renamed, value_renamed = result["errors"]
    assert bad["problem"] == "invalid choice: 'bf61'" and bad["choices"] == choices
    assert bad["hint"].startswith("valid values: auto, fp8_e5m2") and bad["hint"].endswith("did you mean bf16?")
    assert "use: --mamba-radix-cache-strategy extra_buffer" in renamed["hint"]
    assert value_renamed["hint"] == "--kv-cache-dtype fp4_e2m1 was renamed fp4_mx_block16; use: --kv-cache-dtype fp4_mx_block16"
    message = sa.format_errors(result, "/opt/sglang/bin/python")
    assert message.splitlines()[0] == "SGLang 0.5.23 (/opt/sglang/bin/python) rejects 3 launch argument(s):"
    assert message.splitlines()[2].startswith("- --mamba-scheduler-strategy extra_buffer: unrecognized argument; renamed")


# ---------------------------------------------------------------------------------------------------------
# run_check with real processes
# ---------------------------------------------------------------------------------------------------------

def script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_missing_interpreter(tmp_path):
    with pytest.raises(sa.SglangArgsError, match="python interpreter %s does not exist" % (tmp_path / "nope")):
        sa.run_check(str(tmp_path / "nope"), ["--model-path", "m"])


def test_directory_is_not_an_interpreter(tmp_path):
    with pytest.raises(sa.SglangArgsError, match="is not an executable file"):
        sa.run_check(str(tmp_path), ["--model-path", "m"])


def test_interpreter_without_sglang():
    # this test interpreter has no sglang installed
    with pytest.raises(sa.SglangArgsError) as err:
        sa.run_check(sys.executable, ["--model-path", "m"])
    assert str(err.value) == ("sglang is not importable by %s: ModuleNotFoundError: No module named 'sglang'; install the runtime first"
                              % sys.executable)


def test_bare_interpreter_name_is_looked_up_on_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    with pytest.raises(sa.SglangArgsError, match="sglang is not importable by %s:" % os.path.basename(sys.executable)):
        sa.run_check(os.path.basename(sys.executable), ["--model-path", "m"])


def test_timeout(tmp_path):
    slow = script(tmp_path / "slow-python", "sleep 10\n")
    with pytest.raises(sa.SglangArgsError, match="did not answer within 1 s.*raise the timeout"):
        sa.run_check(slow, ["--model-path", "m"], timeout=1)


@pytest.mark.parametrize("line", ["[1]", '{"errors": ["x"]}', '{"errors": 5}', '"text"'])
def test_a_marker_line_that_is_not_the_checkers_is_no_result(tmp_path, line):
    """Once a marker line holding other JSON raised AttributeError in interpret()."""
    other = script(tmp_path / "other-python", "cat >/dev/null\necho '%s%s'\n" % (sa.RESULT_MARKER, line))
    with pytest.raises(sa.SglangArgsError, match="gave no check result"):
        sa.run_check(other, ["--model-path", "m"])


def test_an_interpreter_that_floods_is_stopped(tmp_path):
    """The checker's output is read bounded (16 MiB), not whole."""
    flood = script(tmp_path / "flood-python", "cat >/dev/null\nexec yes LLMOPS\n")
    with pytest.raises(sa.SglangArgsError, match="printed more than 16777216 bytes and was stopped"):
        sa.run_check(flood, ["--model-path", "m"], timeout=60)


def test_not_python_and_secret_kept_out_of_its_output(tmp_path):
    # an "interpreter" that echoes what it was given (the payload with the key) and fails
    echo = script(tmp_path / "echo-python", "cat >&2\nexit 3\n")
    with pytest.raises(sa.SglangArgsError) as err:
        sa.run_check(echo, ["--model-path", "m", "--api-key", "topsecret-123"])
    assert "gave no check result (exit code 3)" in str(err.value)
    assert "topsecret-123" not in str(err.value) and sa.MASK in str(err.value)


FAKE_SGLANG = {
    "sglang/__init__.py": "__version__ = '9.9.9'\n",
    "sglang/srt/__init__.py": "",
    "sglang/srt/server_args.py": textwrap.dedent('''
        import argparse

        class DeprecatedStoreTrueAction(argparse.Action):
            def __init__(self, option_strings, dest, new_flag=None, nargs=0, **kw):
                self.new_flag = new_flag
                super().__init__(option_strings, dest, nargs=nargs, **kw)

            def __call__(self, parser, namespace, values, option_string=None):
                print("deprecated!")    # must not disturb the result channel
                setattr(namespace, self.dest, True)

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--model-path", "--model", dest="model_path", required=True)
                parser.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
                parser.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "bf16", "fp8_e4m3"])
                parser.add_argument("--api-key")
                parser.add_argument("--admin-api-key")
                parser.add_argument("--enable-metrics", action="store_true")
                parser.add_argument("--gc-threshold", type=int, nargs="+")
                parser.add_argument("--old-switch", action=DeprecatedStoreTrueAction, new_flag="--new-switch")
        '''),
}


@pytest.fixture
def fake_sglang(tmp_path, monkeypatch):
    for rel, text in FAKE_SGLANG.items():
        path = tmp_path / "site" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))


def test_checker_collects_every_error_and_the_explicit_values(fake_sglang):
    args = ["--model", "/m", "--tp", "8", "--kv-cache-dtype", "bf61", "--enable-metrics", "--gc-threshold", "1", "2",
            "--admin-api-k=s3cret", "--api-kee", "s4", "--old-switch", "--bogus", "x", "--tp-size", "eight"]
    raw = sa.run_check(sys.executable, args)
    assert raw["sglang_version"] == "9.9.9"
    by_flag = {(e["flag"], e["kind"]): e for e in raw["errors"]}
    assert set(by_flag) == {("--kv-cache-dtype", "invalid_choice"), ("--api-kee", "unrecognized"), ("--bogus", "unrecognized"),
                            ("--tp-size", "invalid_value")}
    assert by_flag[("--kv-cache-dtype", "invalid_choice")]["choices"] == ["auto", "bf16", "fp8_e4m3"]
    # a misspelt secret flag: its value is masked and reported as secret
    assert by_flag[("--api-kee", "unrecognized")]["value"] == sa.MASK
    assert by_flag[("--api-kee", "unrecognized")]["close_matches"] == ["--api-key"]
    assert raw["parsed"] == {"model_path": "/m", "tp_size": 8, "enable_metrics": True, "gc_threshold": [1, 2],
                             "admin_api_key": sa.MASK, "old_switch": True}
    assert raw["deprecated"] == [{"flag": "--old-switch", "option": "--old-switch", "replacement": "--new-switch"}]
    result, secrets = sa.interpret(raw, args)
    assert sorted(secrets) == ["s3cret", "s4"]
    assert "s3cret" not in json.dumps(result) and "s4" not in json.dumps(result)


def test_checker_reports_missing_required_option(fake_sglang):
    raw = sa.run_check(sys.executable, ["--tp-size", "2"])
    assert [(e["flag"], e["kind"]) for e in raw["errors"]] == [("--model-path", "missing_required")]
    assert "--model-path" in raw["errors"][0]["problem"]


def test_checker_reports_a_broken_parser(tmp_path, monkeypatch, fake_sglang):
    site = os.environ["PYTHONPATH"]
    with open(os.path.join(site, "sglang", "srt", "server_args.py"), "a") as handle:
        handle.write("\nServerArgs.add_cli_args = staticmethod(lambda parser: 1 / 0)\n")
    with pytest.raises(sa.SglangArgsError, match="sglang 9.9.9 is importable by .* but building its argument parser failed: "
                                                 "ZeroDivisionError"):
        sa.run_check(sys.executable, ["--model-path", "m"])
