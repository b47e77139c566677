# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ExecStart= written and read by _systemd_exec, against what real systemd 252 did with the same unit files
(tests/fixtures/tool-outputs/systemd-exec, MANIFEST there): the argv its process got, systemctl show's argv[]."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import _systemd_exec as se

HOSTILE = ["a b", '"dq"', "it's", "back\\slash", "trail\\", "$HOME", "${HOME}", "$$", "50%", "%n", ";", "\\;", "tab\there",
           "\x01ctl", "é ü", "", "--model-path=/models/a b", "-x", "@y", '{"k": [1, 2]}', "a'b\"c"]


@pytest.fixture
def real(fixtures_dir):
    folder = fixtures_dir / "tool-outputs" / "systemd-exec"

    def read(name):
        cmdline = (folder / (name + ".cmdline.bin")).read_bytes()
        return ((folder / (name + ".cat.txt")).read_text(encoding="utf-8"),
                (folder / (name + ".show.txt")).read_text(encoding="utf-8"),
                [w.decode("utf-8") for w in cmdline[:-1].split(b"\x00")])
    read.folder = folder
    return read


def test_hostile_words_round_trip_through_real_systemd(real):
    cat, show, cmdline = real("rt-hostile")
    words = json.loads((real.folder / "rt-hostile.words.json").read_text(encoding="utf-8"))
    assert words[3:] == HOSTILE
    # the process systemd started got exactly the words written, and this parser reads the unit file the same way
    assert cmdline == words
    [command] = se.unit_commands(cat, "rt-hostile.service")
    assert command["argv"] == words and command["variables"] == []
    assert se.shown_commands(show) == [" ".join(command["shown"])]
    assert se.process_differs(command, cmdline) is None


def test_systemds_syntax_read_as_systemd_read_it(real):
    """A hand-written line: prefixes -@, single quotes, quotes mid-word, C escapes, a comment inside a continued line,
    $VAR / ${VAR} / $$, %% and %n, \\; and ";"; an empty ExecStart= dropping the line before it."""
    cat, show, cmdline = real("rt-syntax")
    [command] = se.unit_commands(cat, "rt-syntax.service")
    assert command["prefixes"] == "-@" and command["path"] == "/usr/bin/python3"
    assert se.shown_commands(show) == [" ".join(command["shown"])]
    # systemd filled in $VAR (two words), ${VAR} and pre${OTHER}post: every other word is the process's
    assert command["variables"] == [6, 7, 8]
    assert cmdline[:6] == command["argv"][:6] and cmdline[10:] == command["argv"][9:]
    # the drop-in's Environment=OTHER=p won over the fragment's OTHER=o, as systemctl cat lists them
    assert cmdline[6:10] == ["v1", "v2", "v1  v2", "preppost"] and "$VAR" in cmdline and "rt-syntax.service" in cmdline
    assert command["argv"][-3:] == ["--model-path", "/models/with space", "--kv-cache-dtype=bf16"]
    assert se.process_differs(command, cmdline) is None


def test_a_unit_edited_without_reload_or_restart_is_caught(real):
    cat, show, cmdline = real("rt-syntax-edited")
    commands = se.unit_commands(cat, "rt-syntax.service")
    assert "daemon-reload" in se.loaded_differs(commands, se.shown_commands(show))
    why = se.process_differs(commands[0], cmdline)
    assert "restart it" in why and "fp8_e4m3" not in why and "bf16" not in why


def test_escapes_systemd_cannot_read_as_real_systemd_kept_them(real, fixtures_dir):
    """\\q, a\\ b, \\x4, \\000, \\u00, a\\;b stay verbatim (systemd warned "Ignoring unknown escape sequences"), \\xe9 and \\351
    are the byte 0xe9, a trailing backslash continues onto nothing. systemctl show cannot send that byte over D-Bus."""
    folder = fixtures_dir / "tool-outputs" / "systemd-exec"
    cmdline = (folder / "rt-relaxed.cmdline.bin").read_bytes()
    words = [w.decode("utf-8", "surrogateescape") for w in cmdline[:-1].split(b"\x00")]
    [command] = se.unit_commands((folder / "rt-relaxed.cat.txt").read_text(encoding="utf-8"), "rt-relaxed.service")
    assert command["argv"] == words and se.process_differs(command, words) is None
    assert words[2:] == ["\\q", "x\\qy", "a\\ b", "\\x4", "\\000", "\\u00", "\udce9", "\udce9", "\u00e9", ";", "a\\;b", "trail"]
    assert "Ignoring unknown escape sequences" in (folder / "rt-relaxed.verify.txt").read_text(encoding="utf-8")
    assert "Failed to get properties: Invalid argument" in (folder / "rt-relaxed.show.err").read_text(encoding="utf-8")


@pytest.mark.parametrize("word", HOSTILE + ["--kv-cache-dtype", "/models/Qwen3.5 397B", "x\x7fy", "ünï ©ode", "-@:+!"])
def test_every_word_round_trips(word):
    assert [c["argv"] for c in se.parse_value(se.command_line(["/usr/bin/python3", word, word]))] == [["/usr/bin/python3", word, word]]
    line = se.command_line(["/usr/bin/python3", word, word], breaks={2})
    assert se.unit_commands("[Service]\nExecStart=%s\n" % line)[0]["argv"][1:] == [word, word]


@pytest.mark.parametrize("word", ["a\nb", "a\rb", "a\x00b"])
def test_words_systemd_cannot_carry_are_refused(word):
    with pytest.raises(se.ExecSyntaxError, match="cannot carry: remove it"):
        se.quote(word)


@pytest.mark.parametrize("value", HOSTILE + ["/models/Qwen3.5 397B", "x\x7fy", "ünï ©ode", "$HOME ${X} $$", "100%", "", "a=b"])
def test_every_environment_value_round_trips(value):
    """Environment= as systemd reads it: specifiers over the line, then one word unquoted and C-unescaped, no variables."""
    line = "Environment=" + se.environment_value("NAME", value)
    [(_section, key, read)] = se.unit_lines("[Service]\n%s\n" % line)
    assert key == "Environment" and se.split_words(read.replace("%%", "%")) == ["NAME=" + value]


def test_an_environment_value_is_written_as_it_always_was():
    assert se.environment_value("HF_HOME", "/var/lib/sglang/hf") == '"HF_HOME=/var/lib/sglang/hf"'
    assert se.environment_value("X", 'a "b" \\ 50% $Y') == '"X=a \\"b\\" \\\\ 50%% $Y"'
    with pytest.raises(se.ExecSyntaxError, match="an Environment= line cannot carry: remove it"):
        se.environment_value("X", "a\nb")


def test_a_first_word_that_looks_like_a_prefix_is_quoted():
    assert se.quote("-x") == "-x" and se.quote("-x", first=True) == '"-x"'
    assert se.parse_value(se.command_line(["-x", "y"]))[0]["prefixes"] == ""


@pytest.mark.parametrize("value,why", [
    ('/bin/a "open', "unbalanced"),
    ("/bin/a %H", "specifier %H"),
    ("-", "without a command"),
    ("@/bin/a", "needs argv.0. after"),
])
def test_lines_systemd_refuses_are_refused(value, why):
    with pytest.raises(se.ExecSyntaxError, match=why):
        se.parse_value(value)


@pytest.mark.parametrize("value,argv", [
    # escapes systemd 252 cannot read stay verbatim ("Ignoring unknown escape sequences", systemd-analyze verify)
    ("/bin/a \\q 'x\\qy'", ["/bin/a", "\\q", "x\\qy"]),
    ("/bin/a a\\ b", ["/bin/a", "a\\ b"]),
    ("/bin/a \\x4 \\000 \\u00", ["/bin/a", "\\x4", "\\000", "\\u00"]),
    ("/bin/a x\\", ["/bin/a", "x\\"]),
    # a lone byte above 0x7f is the byte, as /proc/PID/cmdline read with surrogateescape shows it
    ("/bin/a \\xe9 \\351 \\u00e9", ["/bin/a", "\udce9", "\udce9", "\u00e9"]),
    ("/bin/a \\; a\\;b", ["/bin/a", ";", "a\\;b"]),
])
def test_escapes_read_as_systemd_reads_them(value, argv):
    assert se.parse_value(value)[0]["argv"] == argv


def test_commands_semicolons_and_resets():
    text = "[Service]\nExecStart=/bin/a\n[Unit]\nExecStart=/bin/ignored\n[Service]\nExecStart=\nExecStart=/bin/b 1 ; /bin/c \\; \";\"\n"
    assert [c["argv"] for c in se.unit_commands(text)] == [["/bin/b", "1"], ["/bin/c", ";", ";"]]


def test_read_cmdline(tmp_path):
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "cmdline").write_bytes(b"/usr/bin/python3\x00a b\x00\x00")
    assert se.read_cmdline(42, proc=str(tmp_path)) == ["/usr/bin/python3", "a b", ""]
    assert se.read_cmdline(43, proc=str(tmp_path)) is None and se.read_cmdline("x", proc=str(tmp_path)) is None


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_accepts_what_quote_writes(tmp_path):
    """systemd's own unit loader finds nothing wrong with the hostile words as written (no PID 1 needed)."""
    unit = tmp_path / "rt-verify.service"
    unit.write_text("[Service]\nExecStart=%s\n" % se.command_line(["/bin/true"] + HOSTILE, breaks={3, 9}))
    bad = tmp_path / "rt-bad.service"
    bad.write_text('[Service]\nExecStart=/bin/true "open\n')
    ok = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False, timeout=60)
    assert ok.returncode == 0 and ok.stderr.strip() == "", ok.stderr
    refused = subprocess.run(["systemd-analyze", "verify", "--man=no", str(bad)], capture_output=True, text=True, check=False, timeout=60)
    assert "rt-bad.service" in refused.stderr
    with pytest.raises(se.ExecSyntaxError):
        se.unit_commands(bad.read_text())
