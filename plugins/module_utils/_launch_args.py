# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What an SGLang launch command says, read from its words: ``--kv-cache-dtype`` as typed, the tp size, the model
path, the config file and the attention backends, read the way SGLang's argparse reads them (``--f v`` and ``--f=v``,
the last one wins, an abbreviation named).

The words come from a unit (``_systemd_exec.unit_commands``), a module's ``argv`` option, or ``/server_info``
``launch_command``. A whole command line given as one string (the only element, or the script of a shell's ``-c``)
is split by the one command-line reader, ``_systemd_exec.split_words``.

Pure Python, standard library only; runs on hosts (kv_cache_guard, server_info).
"""

from __future__ import annotations

import os

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import whole_number
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import ExecSyntaxError, split_words

KV_FLAG = "--kv-cache-dtype"
TP_FLAGS = ("--tp-size", "--tensor-parallel-size", "--tp")
MODEL_FLAGS = ("--model-path", "--model")
# what SGLang's argparse (allow_abbrev) also reads as --model-path: "--model-" is ambiguous, "--model" is an alias
MODEL_ABBREVIATIONS = ("--model-p", "--model-pa", "--model-pat")
# the flags SGLang's attention-backend rules read (_kv_guard's FP8 backend rule)
ATTENTION_BACKEND_FLAGS = ("--attention-backend", "--decode-attention-backend")
SHELLS = ("sh", "bash", "dash", "zsh")


def flag_value(words, i, flags):
    """(value, consumed) when words[i] is one of flags (``--f v`` or ``--f=v``), else (None, 0)."""
    word = words[i]
    for flag in flags:
        if word == flag:
            return (words[i + 1] if i + 1 < len(words) else ""), 2
        if word.startswith(flag + "="):
            return word[len(flag) + 1:], 1
    return None, 0


def launch_kv_flag(words):
    """(--kv-cache-dtype value, as written, problem) of a launch command's words; argparse: the last one wins.

    The value is None when the flag is absent (SGLang's default is auto) or cannot be read (problem says why).
    """
    value = form = problem = None
    i = 0
    while i < len(words):
        got, used = flag_value(words, i, (KV_FLAG,))
        if used:
            value = got
            form = (KV_FLAG + " " + got) if used == 2 else words[i]
            i += used
            continue
        head = words[i].split("=", 1)[0]
        if len(head) > len("--kv-c") and KV_FLAG.startswith(head) and head != KV_FLAG:
            problem = ("%s abbreviates %s: argparse accepts it, but write the flag in full so it can be audited"
                       % (head, KV_FLAG))
        i += 1
    return value, form, problem


def launch_words(argv):
    """argv elements as words: each element is one word (a path with spaces stays whole), except a whole command line
    given as the only element or as the script of a shell's -c, which is split by ExecStart='s word rules (a quote
    left open: at whitespace)."""
    words = [item if isinstance(item, str) else str(item) for item in argv]
    out = []
    for i, item in enumerate(words):
        script = len(words) == 1 or (i >= 2 and words[i - 1] == "-c" and os.path.basename(words[i - 2]) in SHELLS)
        if script and any(c.isspace() for c in item.strip()):
            try:
                out.extend(split_words(item))
            except ExecSyntaxError:
                out.extend(item.split())
        elif item:
            out.append(item)
    return out


def looks_like_sglang(words):
    """Whether the words launch SGLang (sglang.launch_server, a launch_server script, 'sglang serve', --model-path)."""
    for i, word in enumerate(words):
        base = os.path.basename(word)
        if "sglang.launch_server" in word or base.startswith("launch_server"):
            return True
        if base == "sglang" and i + 1 < len(words) and words[i + 1] == "serve":
            return True
        if word.split("=", 1)[0] in MODEL_FLAGS:
            return True
    return False


def parse_launch_argv(argv):
    """What a launch command says about the KV cache: the flag value, tp size, model path, backends, problems."""
    info = {"kv_cache_dtype": None, "flag_form": None, "tp_size": None, "model_path": None, "config_file": None,
            "backends": {}, "sglang": False, "problem": None, "words": 0}
    if isinstance(argv, str):
        argv = [argv]
    if not isinstance(argv, (list, tuple)):
        info["problem"] = "argv must be a list of strings, got %s" % type(argv).__name__
        return info
    words = launch_words(argv)
    info["words"] = len(words)
    info["sglang"] = looks_like_sglang(words)
    info["kv_cache_dtype"], info["flag_form"], info["problem"] = launch_kv_flag(words)
    i = 0
    while i < len(words):
        for flags, key in ((TP_FLAGS, "tp_size"), (MODEL_FLAGS + MODEL_ABBREVIATIONS, "model_path"), (("--config",), "config_file")):
            value, used = flag_value(words, i, flags)
            if used:
                info[key] = whole_number(value, digits=True, minimum=1) if key == "tp_size" else (value or None)
                break
        else:
            value, used = flag_value(words, i, ATTENTION_BACKEND_FLAGS)
            if used:
                info["backends"][words[i].split("=", 1)[0]] = value
        i += used or 1
    return info


def select_launch_command(commands):
    """The SGLang command among a unit's ExecStart commands (first that looks like one), else None."""
    commands = [c for c in commands if isinstance(c, list) and c]
    for cmd in commands:
        if looks_like_sglang(launch_words(cmd)):
            return cmd
    return commands[0] if len(commands) == 1 else None
