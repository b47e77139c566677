# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check SGLang launch arguments with the installed SGLang's own argument parser.

The flags an SGLang release accepts drift between releases (renamed options, new choice lists), so the
only reliable check is the parser of the release that will run them. ``run_check`` sends the source of
``_sglang_args_checker`` to the SGLang install's interpreter (``-c``; the arguments travel on stdin, never on
a command line that ``ps`` shows). It builds ``ServerArgs.add_cli_args(argparse.ArgumentParser())`` and parses
the arguments one flag at a time, so every bad flag is reported rather than only argparse's first complaint;
nothing is launched.

Values of secret flags (a word of the flag name ends in key, token, secret, password or passwd, e.g.
``--api-key``, ``--admin-api-key``, ``--hf-token``, ``--ssl-keyfile-password``) never leave this code in
clear: they are masked in ``parsed`` and ``errors`` and reported by position so the caller can mark them
no_log.

Standard library only; no Ansible imports.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil

from ansible_collections.llmops.sglang.plugins.module_utils import _redact, _sglang_args_checker
from ansible_collections.llmops.sglang.plugins.module_utils._files import write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils._process import NoAnswer, ask_python, module_source, run_bounded
from ansible_collections.llmops.sglang.plugins.module_utils._sglang_args_checker import looks_like_flag, split_flag

MASK = _redact.MASK
# The checker (run by SGLang's interpreter, without this collection) masks any flag with a word ending in these.
SECRET_WORDS = _redact.SECRET_WORDS
RESULT_MARKER = _sglang_args_checker.MARKER

# Flags SGLang renamed: old spelling -> new spelling and when. Only renames seen in SGLang's releases.
RENAMED_FLAGS = {
    "--mamba-scheduler-strategy": {
        "new": "--mamba-radix-cache-strategy",
        "when": "in the server-args refactor after 0.5.10; 0.5.23 knows only the new name",
    },
}

# Choice values SGLang renamed: (option, old value) -> new value.
RENAMED_VALUES = {
    ("--kv-cache-dtype", "fp4_e2m1"): "fp4_mx_block16",
}


class SglangArgsError(Exception):
    """The check could not run (interpreter missing, sglang not importable, timeout...)."""


def is_secret_flag(name):
    """True for a secret flag (api-key, hf-token, abbreviations like --api-k; not max-total-tokens): _redact's rule."""
    return _redact.is_secret_flag("--" + name.lstrip("-"))


_CHOOSE_FROM = re.compile(r"\s*\(choose from .*\)\s*$", re.S)


def secret_positions(args):
    """[(index, inline)] of the tokens that carry a secret-flag value, found from the flag names alone."""
    found = []
    for i, token in enumerate(args):
        if not looks_like_flag(token):
            continue
        name, inline = split_flag(token)
        if not is_secret_flag(name):
            continue
        if inline is not None:
            found.append((i, True))
        elif i + 1 < len(args) and not looks_like_flag(args[i + 1]):
            found.append((i + 1, False))
    return found


def secret_values(args, positions):
    """The secret strings at ``positions`` (as returned by ``secret_positions`` or the checker)."""
    values = []
    for index, inline in positions:
        if 0 <= index < len(args):
            value = split_flag(args[index])[1] if inline else args[index]
            if value:
                values.append(value)
    return values


def mask(obj, secrets):
    """Copy of obj with every secret string (and whatever _redact finds) replaced by MASK, also inside longer strings."""
    return _redact.redact(obj, secrets)


def find_python(python):
    """Absolute path of the interpreter, or SglangArgsError naming the problem."""
    path = python
    if os.sep not in python:
        path = shutil.which(python) or python
    if not os.path.exists(path):
        raise SglangArgsError("python interpreter %s does not exist; set python to the interpreter of the SGLang install "
                              "(for example /opt/sglang/venv/bin/python)" % python)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise SglangArgsError("python interpreter %s is not an executable file" % python)
    return path


def build_payload(args):
    renames = dict((old, {"new": info["new"]}) for old, info in RENAMED_FLAGS.items())
    return json.dumps({"args": list(args), "secret_words": list(SECRET_WORDS), "renames": renames, "mask": MASK})


def _tail(text, secrets, lines=15):
    return mask("\n".join((text or "").strip().splitlines()[-lines:]), secrets)


def _checker_shaped(result):
    """Whether a marker line holds what the checker prints: an object whose errors are a list of objects."""
    if not isinstance(result, dict):
        return False
    errors = result.get("errors")
    return errors is None or (isinstance(errors, list) and all(isinstance(e, dict) for e in errors))


# Where the installed SGLang lies, found without importing it (the check itself imports torch: seconds to minutes).
_LOCATE = ("import importlib.util, sys; spec = importlib.util.find_spec('sglang'); "
           "print(spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else '')")
# The files whose change can change the check's answer (the version file where the release has one); their size,
# mtime and inode stand for their content.
_PARSER_FILES = ("srt/server_args.py", "__init__.py")
_VERSION_FILES = ("version.py", "_version.py")


def check_fingerprint(python, args, timeout=30):
    """A digest of everything a passed check depends on: the arguments with their secrets masked, the interpreter,
    the parser files of the SGLang install it finds, and this checker. None when the install cannot be located
    without importing it (the check then simply runs)."""
    path = os.path.abspath(find_python(python))   # not realpath: a venv's python is a link to the base interpreter
    rc, out, _err, _timed_out, _missing = run_bounded([path, "-I", "-c", _LOCATE], timeout)
    package = out.strip().splitlines()[-1] if rc == 0 and out.strip() else ""
    if not os.path.isdir(package):
        return None
    stats = []
    for name in _PARSER_FILES + _VERSION_FILES:
        try:
            st = os.stat(os.path.join(package, name))
        except OSError:
            if name in _PARSER_FILES:
                return None
            continue
        stats.append([name, st.st_size, st.st_mtime_ns, st.st_ino])
    masked = [str(a) for a in args]
    for index, inline in secret_positions(masked):   # by position: a short secret must not mask other words
        masked[index] = split_flag(masked[index])[0] + "=" + MASK if inline else MASK
    material = json.dumps({"args": masked, "python": path, "package": package, "files": stats,
                           "checker": module_source(_sglang_args_checker), "payload": build_payload([])}, sort_keys=True)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def cached_check(cache_dir, fingerprint):
    """The result of an earlier passed check with this fingerprint, or None."""
    if not cache_dir or not fingerprint:
        return None
    try:
        with open(os.path.join(cache_dir, fingerprint + ".json"), "rb") as handle:
            result = json.loads(handle.read(1 << 20).decode("utf-8"))
    except (IOError, OSError, ValueError):
        return None
    return result if _checker_shaped(result) and not result.get("errors") and "sglang_version" in result else None


def remember_check(cache_dir, fingerprint, result):
    """Keep a passed check's result (already masked by the checker) for the next run; failures are never kept, so
    they are always reported in full. Private to the user; a cache that cannot be written is only slower."""
    if not cache_dir or not fingerprint or not _checker_shaped(result) or result.get("errors"):
        return
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        write_atomic(os.path.join(cache_dir, fingerprint + ".json"), json.dumps(result, sort_keys=True).encode("utf-8"), 0o600)
    except (IOError, OSError):
        pass


def run_check(python, args, timeout=120):
    """Run the checker with ``python``; returns its raw result dict (masked by the checker).

    Raises SglangArgsError when the interpreter is missing, sglang cannot be imported, the run times out
    or gives no result.
    """
    args = [str(a) for a in args]
    known_secrets = secret_values(args, secret_positions(args))
    path = find_python(python)
    # a read-only check: leave no .pyc files in the SGLang install
    try:
        result, rc, printed = ask_python(path, _sglang_args_checker, build_payload(args), timeout)
    except NoAnswer as exc:
        raise SglangArgsError(mask(str(exc), known_secrets))
    if not _checker_shaped(result):
        raise SglangArgsError("%s gave no check result (exit code %s); is it a Python 3.9+ interpreter? Last output: %s"
                              % (python, rc, _tail(printed, known_secrets)))
    if "import_error" in result:
        raise SglangArgsError("sglang is not importable by %s: %s; install the runtime first"
                              % (python, mask(result["import_error"], known_secrets)))
    if "parser_error" in result:
        raise SglangArgsError("sglang %s is importable by %s but building its argument parser failed: %s"
                              % (result.get("sglang_version"), python, mask(result["parser_error"], known_secrets)))
    return result


def _hint(error):
    """One sentence telling how to fix this error, or None."""
    kind = error.get("kind")
    flag = error.get("flag")
    value = error.get("value")
    rename = error.get("rename")
    if kind == "unrecognized":
        if flag in RENAMED_FLAGS:
            info = RENAMED_FLAGS[flag]
            new = info["new"]
            text = "renamed %s %s" % (new, info["when"])
            if rename and rename.get("choices"):
                text += "; valid values: %s" % ", ".join(rename["choices"])
            if value is not None and (rename is None or rename.get("value_valid", True)):
                text += "; use: %s %s" % (new, value)
            else:
                text += "; use %s" % new
            return text
        if error.get("close_matches"):
            return "did you mean %s?" % " or ".join(error["close_matches"])
        return "this SGLang release has no such option; check the flag against its --help"
    if kind == "invalid_choice":
        option = error.get("option") or flag
        renamed = RENAMED_VALUES.get((option, value))
        choices = error.get("choices") or []
        if renamed and renamed in choices:
            return "%s %s was renamed %s; use: %s %s" % (option, value, renamed, option, renamed)
        if choices:
            close = _close_value(value, choices)
            text = "valid values: %s" % ", ".join(choices)
            return text + ("; did you mean %s?" % close if close else "")
    if kind == "missing_required":
        return "add %s" % flag
    if kind == "ambiguous":
        return "spell the option out in full"
    if kind == "unexpected_value":
        return "%s takes fewer values; quote a value that contains spaces" % flag
    return None


def _close_value(value, choices):
    if value is None:
        return None
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return close[0] if close else None


def interpret(raw, args):
    """Result for the caller from the checker's raw dict: valid, errors with hints, parsed, secrets."""
    args = [str(a) for a in args]
    positions = [tuple(p) for p in raw.get("secret_positions") or []]
    secrets = secret_values(args, sorted(set(positions) | set(secret_positions(args))))
    errors = []
    for error in raw.get("errors") or []:
        problem = error.get("problem") or ""
        if error.get("kind") == "invalid_choice":
            # the choices go to their own field and the hint, once
            problem = _CHOOSE_FROM.sub("", problem)
        errors.append({
            "flag": error.get("flag"),
            "value": error.get("value"),
            "problem": problem,
            "choices": error.get("choices"),
            "hint": _hint(error),
            "kind": error.get("kind"),
        })
    result = {
        "valid": not errors,
        "errors": errors,
        "parsed": raw.get("parsed") or {},
        "deprecated": raw.get("deprecated") or [],
        "sglang_version": raw.get("sglang_version"),
        "python_version": raw.get("python_version"),
    }
    return mask(result, secrets), secrets


def format_errors(result, python=None):
    """A message naming every bad flag, its problem and the fix, one line per flag."""
    lines = []
    for error in result["errors"]:
        head = error["flag"] or "arguments"
        if error.get("value") is not None:
            head += " %s" % error["value"]
        text = "- %s: %s" % (head, error["problem"])
        if error.get("hint"):
            text += "; %s" % error["hint"]
        lines.append(text)
    where = " (%s)" % python if python else ""
    version = result.get("sglang_version") or "(unknown version)"
    return "SGLang %s%s rejects %d launch argument(s):\n%s" % (version, where, len(lines), "\n".join(lines))
