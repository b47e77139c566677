# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check SGLang launch arguments with the installed SGLang's own parser, inside SGLang's interpreter.

``_sglang_args.run_check`` sends this file's source to the SGLang install's interpreter (``python -c SOURCE``,
the request on stdin: the arguments never show on a command line). It builds
``ServerArgs.add_cli_args(argparse.ArgumentParser())`` and parses the arguments one flag group at a time, so
every bad flag is reported; nothing is launched. It prints one line, ``MARKER<json>``, on stdout; whatever
SGLang prints goes to stderr (``_script_answer``).

``_sglang_args`` imports it only for what both sides must agree on (MARKER, how a flag token is split and
told from a value). Python 3.9+, standard library and SGLang only: no import of this collection.
"""

import argparse
import difflib
import re

try:
    from ansible_collections.llmops.sglang.plugins.module_utils._script_answer import answer
except ImportError:
    pass  # in SGLang's interpreter, where ask_python sent _script_answer's source ahead of this one

MARKER = "LLMOPS_SGLANG_ARGS_CHECK_RESULT="
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class ParseFailure(Exception):
    pass


def split_flag(token):
    """``--name=value`` -> (``--name``, ``value``); other tokens -> (token, None)."""
    if token.startswith("--") and "=" in token:
        name, value = token.split("=", 1)
        return name, value
    return token, None


def looks_like_flag(token):
    """An option token, not a value (a negative number or a lone dash is a value)."""
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token)


def plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    return repr(value)


def main(payload, result):
    """The check of payload's args, added to result (which answer() prints)."""
    args = [str(a) for a in payload["args"]]
    secret_words = payload["secret_words"]
    renames = payload["renames"]
    mask = payload["mask"]

    try:
        import sglang
        from sglang.srt.server_args import ServerArgs
    except (Exception, SystemExit) as exc:
        result["import_error"] = "%s: %s" % (type(exc).__name__, exc)
        return result
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
        return result

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
            name = split_flag(token)[0]
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
        if not looks_like_flag(token):
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
        name, inline = split_flag(token)
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
        missing = [canonical(a) for a in required
                   if not any(o in ok_tokens or any(t.startswith(o + "=") for t in ok_tokens) for o in a.option_strings)]
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
    return result


if __name__ == "__main__":
    answer(main, MARKER)
