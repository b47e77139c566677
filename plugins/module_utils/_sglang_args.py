# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check SGLang launch arguments with the installed SGLang's own argument parser.

The flags an SGLang release accepts drift between releases (renamed options, new choice lists), so the
only reliable check is the parser of the release that will run them. ``run_check`` starts the SGLang
install's interpreter with a small script (``CHECKER_SOURCE``, given with ``-c``; the arguments travel on
stdin, never on a command line that ``ps`` shows). The script builds
``ServerArgs.add_cli_args(argparse.ArgumentParser())`` and parses the arguments one flag at a time, so every
bad flag is reported rather than only argparse's first complaint; nothing is launched.

Values of secret flags (a word of the flag name ends in key, token, secret, password or passwd, e.g.
``--api-key``, ``--admin-api-key``, ``--hf-token``, ``--ssl-keyfile-password``) never leave this code in
clear: they are masked in ``parsed`` and ``errors`` and reported by position so the caller can mark them
no_log.

Standard library only; no Ansible imports.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil

from ansible_collections.llmops.sglang.plugins.module_utils import _redact
from ansible_collections.llmops.sglang.plugins.module_utils._nvidia_smi import run_bounded

MASK = _redact.MASK
# The checker (run by SGLang's interpreter, without this collection) masks any flag with a word ending in these.
SECRET_WORDS = _redact.SECRET_WORDS
RESULT_MARKER = "LLMOPS_SGLANG_ARGS_CHECK_RESULT="

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


def split_flag(token):
    """``--name=value`` -> (``--name``, ``value``); other tokens -> (token, None)."""
    if token.startswith("--") and "=" in token:
        name, value = token.split("=", 1)
        return name, value
    return token, None


def is_secret_flag(name):
    """True for a secret flag (api-key, hf-token, abbreviations like --api-k; not max-total-tokens): _redact's rule."""
    return _redact.is_secret_flag("--" + name.lstrip("-"))


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_CHOOSE_FROM = re.compile(r"\s*\(choose from .*\)\s*$", re.S)


def looks_like_flag(token):
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token)


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


# The script run by the SGLang interpreter. Python 3.9+; prints one RESULT_MARKER line on stdout.
CHECKER_SOURCE = r'''
import argparse
import difflib
import json
import re
import sys

MARKER = "LLMOPS_SGLANG_ARGS_CHECK_RESULT="
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class ParseFailure(Exception):
    pass


def plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    return repr(value)


def main():
    payload = json.loads(sys.stdin.read())
    args = [str(a) for a in payload["args"]]
    secret_words = payload["secret_words"]
    renames = payload["renames"]
    mask = payload["mask"]
    out = sys.stdout
    sys.stdout = sys.stderr          # whatever sglang prints stays off the result channel
    result = {"python_version": "%d.%d.%d" % tuple(sys.version_info[:3])}

    def emit():
        out.write(MARKER + json.dumps(result) + "\n")
        out.flush()

    try:
        import sglang
        from sglang.srt.server_args import ServerArgs
    except (Exception, SystemExit) as exc:
        result["import_error"] = "%s: %s" % (type(exc).__name__, exc)
        emit()
        return
    version = getattr(sglang, "__version__", None)
    if not version:
        try:
            from importlib.metadata import version as dist_version
            version = dist_version("sglang")
        except Exception:
            version = None
    result["sglang_version"] = version

    def fail(message):
        raise ParseFailure(message)

    try:
        parser = argparse.ArgumentParser(prog="sglang.launch_server", exit_on_error=False)
        parser.error = fail
        ServerArgs.add_cli_args(parser)
    except (Exception, SystemExit) as exc:
        result["parser_error"] = "%s: %s" % (type(exc).__name__, exc)
        emit()
        return

    by_option = dict(parser._option_string_actions)
    long_options = sorted(o for o in by_option if o.startswith("--"))

    def is_secret(name):
        words = [w for w in re.split(r"[-_]+", name.lstrip("-").lower()) if w]
        return any(w.endswith(s) for w in words for s in secret_words)

    def resolve(token):
        """The action argparse would use for this option token (exact, --x=v, or unique prefix)."""
        try:
            found = parser._parse_optional(token)
        except (ParseFailure, argparse.ArgumentError):
            return None
        except Exception:
            found = None
            name = token.split("=", 1)[0]
            if name in by_option:
                return by_option[name]
        if isinstance(found, list):
            found = found[0] if len(found) == 1 else None
        if not found:
            return None
        return found[0]

    def choices_of(action):
        if action is None or action.choices is None:
            return None
        values = [str(c) for c in action.choices]
        return sorted(values) if isinstance(action.choices, (set, frozenset)) else values

    def canonical(action):
        longs = [o for o in action.option_strings if o.startswith("--")]
        return (longs or action.option_strings)[0]

    # split into one group per option: the option token and the values that follow it
    groups = []
    for index, token in enumerate(args):
        if token == "--":
            groups.append([index, args[index:]])
            break
        if NEGATIVE_NUMBER.match(token) or not token.startswith("-") or token == "-":
            if groups:
                groups[-1][1].append(token)
                continue
        groups.append([index, [token]])

    required = [a for a in parser._actions if a.required]
    for action in required:
        action.required = False

    errors, ok_tokens, explicit, deprecated, secret_positions = [], [], [], [], []
    for start, group in groups:
        token = group[0]
        name, inline = token, None
        if token.startswith("--") and "=" in token:
            name, inline = token.split("=", 1)
        value = inline if inline is not None else (" ".join(group[1:]) if len(group) > 1 else None)
        action = resolve(token) if token.startswith("-") and token != "--" else None
        close = difflib.get_close_matches(name, long_options, n=3, cutoff=0.75) if action is None else []
        secret = is_secret(name) or (action is not None and is_secret(canonical(action))) or any(is_secret(c) for c in close)
        if secret:
            if inline is not None:
                secret_positions.append([start, True])
            secret_positions.extend([start + i, False] for i in range(1, len(group)))
        entry = {"flag": name, "option": canonical(action) if action is not None else None,
                 "value": mask if (secret and value is not None) else value, "choices": choices_of(action),
                 "close_matches": close}
        try:
            namespace, extras = parser.parse_known_args(group)
        except SystemExit:
            errors.append(dict(entry, kind="exits", problem="%s makes SGLang print a message and exit instead of launching" % name))
            continue
        except (ParseFailure, argparse.ArgumentError) as exc:
            message = getattr(exc, "message", None) or str(exc)
            kind = "invalid_choice" if "invalid choice" in message else (
                "ambiguous" if "ambiguous option" in message else "invalid_value")
            errors.append(dict(entry, kind=kind, problem=message))
            continue
        if extras:
            if action is None and extras[0] == token:
                info = renames.get(name)
                if info and info["new"] in by_option:
                    new_action = by_option[info["new"]]
                    entry["rename"] = {"new": info["new"], "choices": choices_of(new_action),
                                       "value_valid": value is None or new_action.choices is None or value in new_action.choices}
                errors.append(dict(entry, kind="unrecognized", problem="unrecognized argument"))
            else:
                errors.append(dict(entry, kind="unexpected_value",
                                   problem="unexpected value(s) after %s: %s" % (name, " ".join(extras))))
            continue
        ok_tokens.extend(group)
        if action is not None:
            explicit.append(action.dest)
            if type(action).__name__.startswith("Deprecated"):
                deprecated.append({"flag": name, "option": canonical(action), "replacement": getattr(action, "new_flag", None)})

    for action in required:
        action.required = True
    parsed = {}
    try:
        namespace, extras = parser.parse_known_args(ok_tokens)
    except (ParseFailure, argparse.ArgumentError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        missing = [canonical(a) for a in required if not any(o in ok_tokens or any(t.startswith(o + "=") for t in ok_tokens)
                                                               for o in a.option_strings)]
        errors.append({"flag": missing[0] if missing else None, "option": missing[0] if missing else None, "value": None,
                       "choices": None, "close_matches": [], "kind": "missing_required" if missing else "invalid_value",
                       "problem": message})
    except SystemExit:
        errors.append({"flag": None, "option": None, "value": None, "choices": None, "close_matches": [],
                       "kind": "exits", "problem": "the arguments make SGLang exit instead of launching"})
    else:
        secret_dests = set(a.dest for a in parser._actions if any(is_secret(o) for o in a.option_strings))
        for dest in explicit:
            parsed[dest] = mask if dest in secret_dests else plain(getattr(namespace, dest, None))
    result.update({"errors": errors, "parsed": parsed, "deprecated": deprecated, "secret_positions": secret_positions})
    emit()


main()
'''


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


def run_check(python, args, timeout=120):
    """Run the checker with ``python``; returns its raw result dict (masked by the checker).

    Raises SglangArgsError when the interpreter is missing, sglang cannot be imported, the run times out
    or gives no result.
    """
    args = [str(a) for a in args]
    known_secrets = secret_values(args, secret_positions(args))
    path = find_python(python)
    # a read-only check: leave no .pyc files in the SGLang install
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    rc, stdout, stderr, timed_out, not_found = run_bounded([path, "-c", CHECKER_SOURCE], timeout, env=env,
                                                           input=build_payload(args))
    if timed_out:
        raise SglangArgsError("%s did not finish the argument check within %s s (importing sglang can be slow on a cold "
                              "cache); raise timeout" % (python, timeout))
    if not_found:
        raise SglangArgsError("cannot run %s: %s" % (python, stderr))
    result = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            try:
                result = json.loads(line[len(RESULT_MARKER):])
            except ValueError:
                result = None
    if not _checker_shaped(result):
        raise SglangArgsError("%s gave no check result (exit code %s); is it a Python 3.9+ interpreter? Last output: %s"
                              % (python, rc, _tail(stderr or stdout, known_secrets)))
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
